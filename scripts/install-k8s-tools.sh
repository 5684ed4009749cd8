#!/usr/bin/env bash
# Build etcd, kube-apiserver, kube-controller-manager and kubectl once, from published Go modules
# (the Go module proxy), into a cache directory; print that directory's bin/ on stdout.
#
# The recipes are the wrapper modules under e2e/tools/: e2e/tools/k8s requires k8s.io/kubernetes
# with every k8s.io/* staging module replaced by its published v0.X release, e2e/tools/etcd requires
# go.etcd.io/etcd/server/v3. Each binary has a stamp (hash of the recipes and this script): a second
# run is a no-op, a run asking for more commands (K8S_TOOLS) builds only those, and binaries built
# for other callers stay valid. GOCACHE and GOMODCACHE live beside the binaries so a rebuild after a
# change is incremental.
#
#   ODRADEK_CACHE   cache root (default $HOME/.cache/odradek)
#   K8S_TOOLS       extra k8s.io/kubernetes/cmd/* commands to build too (space separated)
set -euo pipefail

ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
K8S_MOD="$ROOT/e2e/tools/k8s"
ETCD_MOD="$ROOT/e2e/tools/etcd"
CACHE="${ODRADEK_CACHE:-$HOME/.cache/odradek}"

K8S_VERSION="$(sed -nE 's#^(require)?[[:space:]]*k8s\.io/kubernetes (v1\.[0-9.]+).*#\2#p' "$K8S_MOD/go.mod")"
[[ -n "$K8S_VERSION" ]] || { echo "no k8s.io/kubernetes version in $K8S_MOD/go.mod" >&2; exit 1; }
BIN="$CACHE/k8s-$K8S_VERSION/bin"
K8S_CMDS="kube-apiserver kube-controller-manager kubectl ${K8S_TOOLS:-}"

log() { echo "install-k8s-tools: $*" >&2; }

command -v go >/dev/null || { log "go is not installed (Go >= 1.24 is needed)"; exit 1; }
mkdir -p "$BIN"

# One builder at a time (parallel test sessions share the cache).
exec 9>"$CACHE/k8s-$K8S_VERSION/.lock"
flock 9

stamp="$(cat "$K8S_MOD/go.mod" "$K8S_MOD/go.sum" "$ETCD_MOD/go.mod" "$ETCD_MOD/go.sum" \
  "${BASH_SOURCE[0]}" | sha256sum | cut -d' ' -f1)"
stamps="$BIN/.stamps"
fresh() { [[ -x "$BIN/$1" && "$(cat "$stamps/$1" 2>/dev/null)" == "$stamp" ]]; }
stale_k8s=()
for c in $K8S_CMDS; do fresh "$c" || stale_k8s+=("$c"); done
stale_etcd=0
fresh etcd || stale_etcd=1
if ((${#stale_k8s[@]} == 0 && stale_etcd == 0)); then
  echo "$BIN"
  exit 0
fi

export GOMODCACHE="$CACHE/go/mod" GOCACHE="$CACHE/go/build"
export GOTOOLCHAIN=local GOFLAGS="-mod=readonly -modcacherw -buildvcs=false" CGO_ENABLED=0
start=$SECONDS

# Version variables the Kubernetes release build sets (kubectl version, /version, skew checks).
minor="${K8S_VERSION#v1.}"
minor="${minor%%.*}"
vflags=""
for pkg in k8s.io/component-base/version k8s.io/client-go/pkg/version; do
  vflags+=" -X $pkg.gitVersion=$K8S_VERSION -X $pkg.gitMajor=1 -X $pkg.gitMinor=$minor"
  vflags+=" -X $pkg.gitTreeState=clean -X $pkg.buildDate=1970-01-01T00:00:00Z"
done

tmp="$BIN/.partial"
rm -rf "$tmp"
mkdir -p "$tmp" "$stamps"
if ((${#stale_k8s[@]})); then
  pkgs=()
  for c in "${stale_k8s[@]}"; do pkgs+=("k8s.io/kubernetes/cmd/$c"); done
  log "building ${stale_k8s[*]} $K8S_VERSION (first run: 10-30 minutes on 2 cores)"
  (cd "$K8S_MOD" && go build -trimpath -ldflags "-s -w$vflags" -o "$tmp/" "${pkgs[@]}")
fi
if ((stale_etcd)); then
  log "building etcd"
  (cd "$ETCD_MOD" && go build -trimpath -ldflags "-s -w" -o "$tmp/etcd" go.etcd.io/etcd/server/v3)
fi
for f in "$tmp"/*; do
  mv -f "$f" "$BIN/"
  echo "$stamp" >"$stamps/$(basename "$f")"
done
rmdir "$tmp"
log "done in $((SECONDS - start))s"
echo "$BIN"
