#!/usr/bin/env bash
# Assemble Apache Kafka 3.9.0 (Scala 2.13) from Maven Central jars into a local cache.
#
# The benchmark (bench/run.py) runs this Kafka next to Odradek; nothing in the broker depends on it.
# Idempotent: a second run only checks a stamp file and prints the libs directory.
#
#   ODRADEK_KAFKA_HOME   cache directory (default: $HOME/.cache/odradek/kafka-3.9.0)
#   MAVEN_OPTS / MVN     passed through to Maven (MVN defaults to `mvn`)
#
# Prints the absolute path of the libs directory (use it as `java -cp '<libs>/*'`).
set -euo pipefail

here="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
pom="$here/kafka-pom.xml"
home="${ODRADEK_KAFKA_HOME:-${HOME}/.cache/odradek/kafka-3.9.0}"
libs="$home/libs"
stamp="$home/.installed"
mvn="${MVN:-mvn}"

want="$(sha256sum "$pom" | cut -d' ' -f1)"
if [[ -f "$stamp" && "$(cat "$stamp")" == "$want" && -f "$libs/kafka_2.13-3.9.0.jar" ]]; then
    echo "$libs"
    exit 0
fi

command -v java >/dev/null || { echo "install-kafka: java not found (need a JDK 17)" >&2; exit 1; }
command -v "$mvn" >/dev/null || { echo "install-kafka: maven not found" >&2; exit 1; }

mkdir -p "$home"
work="$(mktemp -d "$home/.build.XXXXXX")"
trap 'rm -rf "$work"' EXIT
cp "$pom" "$work/pom.xml"

echo "install-kafka: resolving Kafka 3.9.0 jars from Maven Central into $libs" >&2
(cd "$work" && "$mvn" -q -B -Dstyle.color=never dependency:copy-dependencies \
    -DincludeScope=runtime -DoutputDirectory="$work/libs" >&2)

rm -rf "$libs"
mv "$work/libs" "$libs"
echo "$want" >"$stamp"
echo "$libs"
