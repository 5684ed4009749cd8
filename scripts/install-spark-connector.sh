#!/usr/bin/env bash
# Resolve the jars of Spark's Kafka connector (spark-sql-kafka-0-10 4.2.0 for Scala 2.13, with
# the token provider, kafka-clients and commons-pool2 it needs) from Maven Central into a cache.
#
# PySpark from PyPI ships Spark itself but not the connector. Spark's own resolver
# (spark.jars.packages) is of no use here, so Maven resolves the jars and Spark gets them through
# spark.jars (tests/integration/spark_support.py, README "Spark pipelines").
# Idempotent: a second run only checks a stamp file and prints the jars directory.
#
#   ODRADEK_SPARK_CONNECTOR_HOME   cache directory (default: $HOME/.cache/odradek/spark-kafka-4.2.0)
#   MVN                            Maven command (default: `mvn`)
#
# Prints the absolute path of the jars directory; `--list` prints the jars as a comma-separated
# list instead, ready for `spark-submit --jars`.
set -euo pipefail

# shellcheck source=scripts/lib.sh
source "$(dirname "${BASH_SOURCE[0]}")/lib.sh"

pom="$root/scripts/spark-connector-pom.xml"
home="${ODRADEK_SPARK_CONNECTOR_HOME:-${HOME}/.cache/odradek/spark-kafka-4.2.0}"
jars="$home/jars"
stamp="$home/.installed"
mvn="${MVN:-mvn}"

print() {
    if [[ "${1:-}" == "--list" ]]; then
        local list
        list="$(printf '%s,' "$jars"/*.jar)"
        echo "${list%,}"
    else
        echo "$jars"
    fi
}

want="$(sha256sum "$pom" | cut -d' ' -f1)"
if [[ -f "$stamp" && "$(cat "$stamp")" == "$want" ]] && compgen -G "$jars/spark-sql-kafka-*.jar" >/dev/null; then
    print "$@"
    exit 0
fi

command -v java >/dev/null || { echo "install-spark-connector: java not found (need a JDK 17)" >&2; exit 1; }
command -v "$mvn" >/dev/null || { echo "install-spark-connector: maven not found" >&2; exit 1; }

mkdir -p "$home"
echo "install-spark-connector: resolving Spark's Kafka connector jars from Maven Central into $jars" >&2
maven_runtime_jars "$(cat "$pom")" "$jars"
echo "$want" >"$stamp"
print "$@"
