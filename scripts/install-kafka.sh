#!/usr/bin/env bash
# Apache Kafka 3.9.0's jars (Scala 2.13) from Maven Central into the cache that `odradek kafka-tool`
# uses too: broker/kafka_tools.py does the work from the pinned list in broker/kafka_jars.py
# (regenerated from scripts/kafka-pom.xml by scripts/lock-kafka-jars.py). No Maven needed.
# Idempotent: a second run only checks that every jar is there.
#
#   ODRADEK_KAFKA_HOME        cache directory (default: $HOME/.cache/odradek/kafka-3.9.0)
#   ODRADEK_MAVEN_REPOSITORY  a Maven Central mirror
#   PY                        the Python with odradek installed (default: the repository's .venv)
#
# Prints the absolute path of the libs directory (use it as `java -cp '<libs>/*'`).
set -euo pipefail

root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
py="${PY:-$root/.venv/bin/python}"
[[ -x "$py" ]] || { echo "install-kafka: $py not found: run make install first" >&2; exit 1; }
exec "$py" -m odradek.broker.kafka_tools --fetch
