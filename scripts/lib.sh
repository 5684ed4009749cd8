# shellcheck shell=bash
# Sourced (never run) by the scripts beside it: the paths they all use and the steps several of
# them share, so that each recipe (a Go tool built once, a logged docker build, a Maven resolve)
# exists once.
#
#   root    the repository root
#   cache   the cache root: $ODRADEK_CACHE, default $HOME/.cache/odradek

root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
cache="${ODRADEK_CACHE:-${HOME}/.cache/odradek}"

# A progress line on stderr, prefixed with the running script's name.
log() { echo "$(basename "$0" .sh): $*" >&2; }

# Put /usr/local/go/bin on PATH when go is only there; fail when there is no go at all.
require_go() {
    if ! command -v go >/dev/null && [[ -x /usr/local/go/bin/go ]]; then
        PATH="$PATH:/usr/local/go/bin"
    fi
    command -v go >/dev/null || { log "go is not installed (Go >= 1.24 is needed)"; exit 1; }
}

# The environment of every Go build here: the shared module and build caches (so a module that
# several tools need downloads once and a rebuild is incremental), no toolchain download, no cgo.
# $1: extra GOFLAGS.
go_build_env() {
    export GOMODCACHE="$cache/go/mod" GOCACHE="$cache/go/build"
    export GOTOOLCHAIN=local GOFLAGS="${1:+$1 }-modcacherw -buildvcs=false" CGO_ENABLED=0
}

# go_tool_fresh BIN NAME STAMP: whether BIN/NAME is there and was built with STAMP.
go_tool_fresh() {
    [[ -x "$1/$2" && "$(cat "$1/.$2.stamp" 2>/dev/null)" == "$3" ]]
}

# go_tool_install BIN NAME PACKAGE@VERSION STAMP [LDFLAGS]: `go install` into a scratch directory,
# then move the binary into BIN and record STAMP beside it.
go_tool_install() {
    local bin=$1 name=$2 package=$3 stamp=$4 ldflags=${5:-} start=$SECONDS
    local tmp="$bin/.$name-partial"
    go_build_env
    log "building $name ($package)"
    rm -rf "$tmp"
    mkdir -p "$tmp"
    GOBIN="$tmp" nice -n 10 go install -trimpath -ldflags "-s -w${ldflags:+ $ldflags}" "$package"
    mv -f "$tmp/$name" "$bin/$name"
    rmdir "$tmp"
    echo "$stamp" >"$bin/.$name.stamp"
    log "$name built in $((SECONDS - start))s"
}

# cached_tool NAME: for a script that builds one tool into the shared tools bin/: take NAME's build
# lock (parallel sessions share the cache), set `bin` and `stamp` (a hash of the calling script,
# which pins the version, and of this file), and when the tool is fresh print bin and exit.
cached_tool() {
    bin="$cache/tools/bin"
    require_go
    mkdir -p "$bin"
    exec 9>"$cache/tools/.$1.lock"
    flock 9
    stamp="$(cat "$0" "${BASH_SOURCE[0]}" | sha256sum | cut -d' ' -f1)"
    if go_tool_fresh "$bin" "$1" "$stamp"; then
        echo "$bin"
        exit 0
    fi
}

# docker_build LOG ARGS...: a legacy-builder `docker build ARGS` (Debian's dockerd has no buildx,
# and nothing here needs BuildKit) labelled as a local build, its output appended to LOG; on failure
# the log's tail goes to stderr and the script exits.
docker_build() {
    local logfile=$1
    shift
    if ! DOCKER_BUILDKIT=0 docker build --label io.odradek.local-build=1 "$@" >>"$logfile" 2>&1; then
        tail -n 40 "$logfile" >&2
        log "docker build failed; full log in $logfile"
        exit 1
    fi
}

# Remove the dangling leftovers of earlier local builds (tagged images and their cache stay).
prune_local_builds() {
    docker image prune -f --filter label=io.odradek.local-build=1 >/dev/null
}

# maven_runtime_jars POM DEST: resolve the runtime dependencies of the pom text POM from Maven
# Central (${MVN:-mvn}) into a scratch directory beside DEST, then replace DEST with them, so a
# failed run leaves the previous jars in place.
maven_runtime_jars() {
    local pom=$1 dest=$2 work
    work="$(mktemp -d "$(dirname "$dest")/.build.XXXXXX")"
    # shellcheck disable=SC2064  # the path is fixed now
    trap "rm -rf '$work'" EXIT
    printf '%s\n' "$pom" >"$work/pom.xml"
    (cd "$work" && "${MVN:-mvn}" -q -B -Dstyle.color=never dependency:copy-dependencies \
        -DincludeScope=runtime -DoutputDirectory="$work/jars" >&2)
    rm -rf "$dest"
    mv "$work/jars" "$dest"
}
