#!/usr/bin/env bash
# Build kind once from the Go module proxy (`go install sigs.k8s.io/kind@KIND_VERSION`) into a cache
# directory; print that directory (the tools bin/, shared with helm) on stdout.
#
# A stamp (hash of this script, which pins the version) makes a second run a no-op; GOCACHE and
# GOMODCACHE are the ones scripts/install-k8s-tools.sh uses.
#
#   ODRADEK_CACHE   cache root (default $HOME/.cache/odradek)
set -euo pipefail

KIND_VERSION="v0.29.0"
CACHE="${ODRADEK_CACHE:-$HOME/.cache/odradek}"
BIN="$CACHE/tools/bin"

log() { echo "install-kind: $*" >&2; }

if ! command -v go >/dev/null && [[ -x /usr/local/go/bin/go ]]; then
  PATH="$PATH:/usr/local/go/bin"
fi
command -v go >/dev/null || { log "go is not installed (Go >= 1.24 is needed)"; exit 1; }
mkdir -p "$BIN"

# One builder at a time (parallel test sessions share the cache).
exec 9>"$CACHE/tools/.kind.lock"
flock 9

stamp="$(sha256sum <"${BASH_SOURCE[0]}" | cut -d' ' -f1)"
if [[ -x "$BIN/kind" && "$(cat "$BIN/.kind.stamp" 2>/dev/null)" == "$stamp" ]]; then
  echo "$BIN"
  exit 0
fi

export GOMODCACHE="$CACHE/go/mod" GOCACHE="$CACHE/go/build"
export GOTOOLCHAIN=local GOFLAGS="-modcacherw -buildvcs=false" CGO_ENABLED=0
start=$SECONDS
tmp="$BIN/.kind-partial"
rm -rf "$tmp"
mkdir -p "$tmp"
log "building kind $KIND_VERSION"
GOBIN="$tmp" nice -n 10 go install -trimpath -ldflags "-s -w" "sigs.k8s.io/kind@$KIND_VERSION"
mv -f "$tmp/kind" "$BIN/kind"
rmdir "$tmp"
echo "$stamp" >"$BIN/.kind.stamp"
log "done in $((SECONDS - start))s"
echo "$BIN"
