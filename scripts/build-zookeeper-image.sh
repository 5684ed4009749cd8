#!/usr/bin/env bash
# Build the local ZooKeeper image odradek-zookeeper:3.8.4 for the Helm chart and e2e tests, offline:
#
#   1. the JRE base odradek-jre:bookworm (scripts/build-base-image.sh jre: mmdebstrap with Debian's
#      openjdk-17-jre-headless + docker import), since no image can be pulled here;
#   2. ZooKeeper's jars from Maven Central (scripts/install-zookeeper.sh, cached);
#   3. `docker build` of scripts/zookeeper-image/ with those jars as libs/.
#
# Both steps before docker are cached, and docker's layer cache makes an unchanged rebuild quick.
#
#   ODRADEK_ZOOKEEPER_IMAGE   tag to build (default odradek-zookeeper:3.8.4)
#   ODRADEK_CACHE             cache directory (default: $HOME/.cache/odradek)
#
# Prints the image tag on stdout; the docker build log is $ODRADEK_CACHE/images/build-zookeeper.log.
set -euo pipefail

# shellcheck source=scripts/lib.sh
source "$(dirname "${BASH_SOURCE[0]}")/lib.sh"
tag="${ODRADEK_ZOOKEEPER_IMAGE:-odradek-zookeeper:3.8.4}"
ctx="$cache/images/context-zookeeper"
log="$cache/images/build-zookeeper.log"

bash "$root/scripts/install-docker.sh"
base="$(bash "$root/scripts/build-base-image.sh" jre)"
libs="$(bash "$root/scripts/install-zookeeper.sh")"

# The context: the image's own files and the jars. cp -p keeps modification times, which the
# legacy builder ignores anyway (it checksums contents), so an unchanged context hits the cache.
rm -rf "$ctx"
mkdir -p "$ctx"
cp -p "$root"/scripts/zookeeper-image/* "$ctx/"
cp -rp "$libs" "$ctx/libs"

echo "build-zookeeper-image: docker build -t $tag (log: $log)" >&2
: >"$log"
docker_build "$log" --build-arg BASE_IMAGE="$base" -t "$tag" "$ctx"
prune_local_builds
echo "$tag"
