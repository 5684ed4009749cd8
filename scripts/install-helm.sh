#!/usr/bin/env bash
# Build helm once from the Go module proxy (`go install helm.sh/helm/v3/cmd/helm@HELM_VERSION`) into
# a cache directory; print that directory (the tools bin/) on stdout.
#
# A stamp (hash of this script, which pins the version) makes a second run a no-op; GOCACHE and
# GOMODCACHE are the ones scripts/install-k8s-tools.sh uses, so shared modules download once.
#
#   ODRADEK_CACHE   cache root (default $HOME/.cache/odradek)
set -euo pipefail

HELM_VERSION="v3.21.4"
CACHE="${ODRADEK_CACHE:-$HOME/.cache/odradek}"
BIN="$CACHE/tools/bin"

log() { echo "install-helm: $*" >&2; }

if ! command -v go >/dev/null && [[ -x /usr/local/go/bin/go ]]; then
  PATH="$PATH:/usr/local/go/bin"
fi
command -v go >/dev/null || { log "go is not installed (Go >= 1.24 is needed)"; exit 1; }
mkdir -p "$BIN"

# One builder at a time (parallel test sessions share the cache).
exec 9>"$CACHE/tools/.helm.lock"
flock 9

stamp="$(cat "${BASH_SOURCE[0]}" | sha256sum | cut -d' ' -f1)"
if [[ -x "$BIN/helm" && "$(cat "$BIN/.helm.stamp" 2>/dev/null)" == "$stamp" ]]; then
  echo "$BIN"
  exit 0
fi

export GOMODCACHE="$CACHE/go/mod" GOCACHE="$CACHE/go/build"
export GOTOOLCHAIN=local GOFLAGS="-modcacherw -buildvcs=false" CGO_ENABLED=0
start=$SECONDS

# Link-time variables helm's own Makefile sets: the version `helm version` prints, and the
# Kubernetes version `helm template` and `helm lint` assume (from helm's client-go: v0.X -> 1.X;
# without it helm assumes 1.20 and refuses charts that need a newer one).
gomod="$(cd / && go mod download -json "helm.sh/helm/v3@$HELM_VERSION" |
  sed -nE 's/^[[:space:]]*"GoMod": "(.*)",?$/\1/p')"
k8s_minor="$(sed -nE 's#^[[:space:]]*k8s\.io/client-go v0\.([0-9]+)\..*#\1#p' "$gomod")"
[[ -n "$k8s_minor" ]] || { log "no k8s.io/client-go version in $gomod"; exit 1; }
vflags="-X helm.sh/helm/v3/internal/version.version=$HELM_VERSION"
vflags+=" -X helm.sh/helm/v3/internal/version.gitTreeState=clean"
for pkg in helm.sh/helm/v3/pkg/lint/rules helm.sh/helm/v3/pkg/chartutil; do
  vflags+=" -X $pkg.k8sVersionMajor=1 -X $pkg.k8sVersionMinor=$k8s_minor"
done

tmp="$BIN/.helm-partial"
rm -rf "$tmp"
mkdir -p "$tmp"
log "building helm $HELM_VERSION (first run: a few minutes on 2 cores)"
GOBIN="$tmp" go install -trimpath -ldflags "-s -w $vflags" "helm.sh/helm/v3/cmd/helm@$HELM_VERSION"
mv -f "$tmp/helm" "$BIN/helm"
rmdir "$tmp"
echo "$stamp" >"$BIN/.helm.stamp"
log "done in $((SECONDS - start))s"
echo "$BIN"
