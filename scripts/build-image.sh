#!/usr/bin/env bash
# Build the Odradek image (broker and operator) from the Dockerfile, offline and cached:
#
#   1. the base image odradek-base:bookworm (scripts/build-base-image.sh: mmdebstrap + docker import),
#      since no image can be pulled on these machines;
#   2. the odradek wheel, built on the host from a copy of the working tree, with a fixed
#      SOURCE_DATE_EPOCH so that unchanged sources give an identical wheel (and docker's layer cache
#      holds);
#   3. every dependency's wheel, collected by the host's pip (its cache, its index configuration)
#      for the same Python major.minor as the base image's; redone only when the dependency list
#      or the base image changes;
#   4. `docker build` with a context of pyproject.toml, wheels/ (dependencies) and dist/ (odradek),
#      which the Dockerfile installs with --no-index, and --build-arg BASE_IMAGE=<the local base>.
#
# Then, unless ODRADEK_BUILD_ZOOKEEPER=0, the local ZooKeeper image the Helm chart and e2e tests use
# (scripts/build-zookeeper-image.sh: odradek-zookeeper:3.8.4).
#
#   ODRADEK_IMAGE           tag to build (default odradek:dev)
#   ODRADEK_BUILD_ZOOKEEPER 0 skips the ZooKeeper image (default 1)
#   ODRADEK_CACHE           cache directory (default: $HOME/.cache/odradek)
#
# Prints the image tag on stdout, then the ZooKeeper image's tag on a second line; progress on
# stderr, the docker build log in $ODRADEK_CACHE/images/build-odradek.log.
set -euo pipefail

# shellcheck source=scripts/lib.sh
source "$(dirname "${BASH_SOURCE[0]}")/lib.sh"
tag="${ODRADEK_IMAGE:-odradek:dev}"
ctx="$cache/images/context-odradek"
wheels="$ctx/wheels"
dist="$ctx/dist"
log="$cache/images/build-odradek.log"
zookeeper="${ODRADEK_BUILD_ZOOKEEPER:-1}"

bash "$root/scripts/install-docker.sh"
base="$(bash "$root/scripts/build-base-image.sh" python)"
mkdir -p "$wheels" "$dist"
cp -p "$root/pyproject.toml" "$ctx/pyproject.toml"

# The host's Python builds the odradek wheel, its one C extension with the host's compiler
# (bookworm, like the base image, so the libc it links to is there; on a newer host the image
# falls back to the Python reading): the project's venv has setuptools and wheel, so no build
# isolation (and no network) is needed; without a venv, pip fetches them.
if [[ -x "$root/.venv/bin/python" ]]; then
    py="$root/.venv/bin/python"
    isolation=(--no-build-isolation)
else
    py="$(command -v python3)"
    isolation=()
fi

# A copy of the working tree, not the tree itself: an in-tree build writes build/ and *.egg-info
# next to the sources. Tests, e2e and bench are not part of the distribution.
src="$(mktemp -d "$cache/images/.src.XXXXXX")"
trap 'rm -rf "$src"' EXIT
tar -C "$root" -cf - \
    --exclude=./.git --exclude=./.venv --exclude=./data --exclude=./build --exclude=./dist \
    --exclude='*.egg-info' --exclude=__pycache__ --exclude='*.pyc' --exclude=.pytest_cache \
    --exclude=.ruff_cache --exclude=.hypothesis --exclude=./tests --exclude=./e2e --exclude=./bench \
    . | tar -C "$src" -xf -

echo "build-image: building the odradek wheel" >&2
rm -f "$dist"/odradek-*.whl
# The backend's warnings go to a log shown only when the build fails.
# The copy's random path would go into the extension's debug information: mapped to ".".
if ! SOURCE_DATE_EPOCH=946684800 CFLAGS="-ffile-prefix-map=$src=." "$py" -m pip wheel -q --no-deps "${isolation[@]}" -w "$dist" \
    "$src" >"$cache/images/wheel-odradek.log" 2>&1; then
    cat "$cache/images/wheel-odradek.log" >&2
    exit 1
fi
wheel="$(ls "$dist"/odradek-*.whl)"

# The dependency wheels depend on the wheel's Requires-Dist and on the base image's Python.
base_id="$(docker image inspect -f '{{.Id}}' "$base")"
want="$(
    {
        "$py" - "$wheel" <<'PY'
import sys, zipfile
with zipfile.ZipFile(sys.argv[1]) as z:
    meta = next(n for n in z.namelist() if n.endswith(".dist-info/METADATA"))
    print("\n".join(l for l in z.read(meta).decode().splitlines() if l.startswith("Requires-Dist:")))
PY
        echo "$base_id"
    } | sha256sum | cut -d' ' -f1
)"
stamp="$ctx/.deps-stamp"
if [[ ! -f "$stamp" || "$(cat "$stamp")" != "$want" ]]; then
    # Compiled wheels must match the image's Python: the host's and the base image's major.minor
    # have to agree (both are 3.11 on bookworm machines). glibc is no issue: manylinux wheels, and
    # sdists compiled here on the same Debian release.
    host_py="$("$py" -c 'import sys; print("%d.%d" % sys.version_info[:2])')"
    image_py="$(docker run --rm "$base" python3 -c 'import sys; print("%d.%d" % sys.version_info[:2])')"
    if [[ "$host_py" != "$image_py" ]]; then
        echo "build-image: host Python $host_py ($py) differs from $base's Python $image_py;" \
            "build the venv with python$image_py" >&2
        exit 1
    fi
    echo "build-image: collecting dependency wheels (pip, host cache)" >&2
    rm -f "$wheels"/*.whl
    # On the host, not in a container: the host's pip configuration (index, certificates, cache)
    # is what reaches PyPI on these machines.
    "$py" -m pip wheel -q --find-links "$wheels" -w "$wheels" "$wheel" >&2
    rm -f "$wheels"/odradek-*.whl
    echo "$want" >"$stamp"
fi

# The legacy builder: Debian's dockerd 20.10 has no buildx next to it, and the Dockerfile needs no
# BuildKit feature. -f points outside the context (pyproject.toml, wheels/, dist/).
#
# The build stage is tagged too ($tag-build): the legacy builder keeps an untagged stage only as a
# dangling image, and tagging it is what lets the prune below remove older builds' leftovers
# without throwing away the cache of the current one.
echo "build-image: docker build -t $tag (log: $log)" >&2
: >"$log"
for target in build final; do
    if [[ $target == build ]]; then
        args=(--target build -t "$tag-build")
    else
        args=(-t "$tag")
    fi
    docker_build "$log" --build-arg BASE_IMAGE="$base" "${args[@]}" -f "$root/Dockerfile" "$ctx"
done
prune_local_builds
echo "$tag"

if [[ "$zookeeper" != 0 ]]; then
    bash "$root/scripts/build-zookeeper-image.sh"
fi
