#!/usr/bin/env bash
# Assemble Apache ZooKeeper 3.8.4 (the release Kafka 3.9 is built against) from Maven Central jars
# into a local cache, for the integration tests' three-server ensembles.
#
# Idempotent: a second run only checks a stamp file and prints the libs directory. Installs a JRE
# and Maven with apt-get when they are missing (Debian machines; needs root).
#
#   ODRADEK_ZOOKEEPER_HOME   cache directory (default: $HOME/.cache/odradek/zookeeper-3.8.4)
#   MAVEN_OPTS / MVN         passed through to Maven (MVN defaults to `mvn`)
#
# Prints the absolute path of the libs directory; run a server with
#   java -cp '<libs>/*' org.apache.zookeeper.server.quorum.QuorumPeerMain zoo.cfg
set -euo pipefail

# shellcheck source=scripts/lib.sh
source "$(dirname "${BASH_SOURCE[0]}")/lib.sh"

version=3.8.4
home="${ODRADEK_ZOOKEEPER_HOME:-${HOME}/.cache/odradek/zookeeper-${version}}"
libs="$home/libs"
stamp="$home/.installed"
mvn="${MVN:-mvn}"

# The dependency list: ZooKeeper itself, logging through slf4j to reload4j (as Kafka 3.9 does)
# instead of ZooKeeper's default logback. Changing it changes the stamp and forces a rebuild.
read -r -d '' pom <<EOF || true
<?xml version="1.0" encoding="UTF-8"?>
<project xmlns="http://maven.apache.org/POM/4.0.0">
  <modelVersion>4.0.0</modelVersion>
  <groupId>io.odradek.tooling</groupId>
  <artifactId>zookeeper-runtime</artifactId>
  <version>${version}</version>
  <packaging>pom</packaging>
  <dependencies>
    <dependency>
      <groupId>org.apache.zookeeper</groupId>
      <artifactId>zookeeper</artifactId>
      <version>${version}</version>
      <exclusions>
        <exclusion><groupId>ch.qos.logback</groupId><artifactId>*</artifactId></exclusion>
      </exclusions>
    </dependency>
    <!-- "provided" in ZooKeeper's pom, yet the server needs them: the default metrics provider
         and the snapshot code. The admin server (Jetty) stays out: tests disable it. -->
    <dependency>
      <groupId>io.dropwizard.metrics</groupId>
      <artifactId>metrics-core</artifactId>
      <version>4.1.12.1</version>
    </dependency>
    <dependency>
      <groupId>org.xerial.snappy</groupId>
      <artifactId>snappy-java</artifactId>
      <version>1.1.10.5</version>
    </dependency>
    <dependency>
      <groupId>org.slf4j</groupId>
      <artifactId>slf4j-reload4j</artifactId>
      <version>1.7.36</version>
    </dependency>
    <dependency>
      <groupId>ch.qos.reload4j</groupId>
      <artifactId>reload4j</artifactId>
      <version>1.2.25</version>
    </dependency>
  </dependencies>
</project>
EOF

want="$(printf '%s' "$pom" | sha256sum | cut -d' ' -f1)"
if [[ -f "$stamp" && "$(cat "$stamp")" == "$want" && -f "$libs/zookeeper-${version}.jar" ]]; then
    echo "$libs"
    exit 0
fi

if ! command -v java >/dev/null || ! command -v "$mvn" >/dev/null; then
    if command -v apt-get >/dev/null && [[ "$(id -u)" == 0 ]]; then
        echo "install-zookeeper: installing a JRE and Maven (apt)" >&2
        (apt-get update -qq || true) >&2
        DEBIAN_FRONTEND=noninteractive apt-get install -y -qq openjdk-17-jre-headless maven >&2
    fi
fi
command -v java >/dev/null || { echo "install-zookeeper: java not found" >&2; exit 1; }
command -v "$mvn" >/dev/null || { echo "install-zookeeper: maven not found" >&2; exit 1; }

mkdir -p "$home"
echo "install-zookeeper: resolving ZooKeeper ${version} jars from Maven Central into $libs" >&2
maven_runtime_jars "$pom" "$libs"
echo "$want" >"$stamp"
echo "$libs"
