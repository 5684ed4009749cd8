#!/usr/bin/env bash
# Build helm once from the Go module proxy (`go install helm.sh/helm/v3/cmd/helm@HELM_VERSION`) into
# a cache directory; print that directory (the tools bin/) on stdout.
#
# A stamp (hash of this script, which pins the version, and of lib.sh) makes a second run a no-op; GOCACHE and
# GOMODCACHE are the ones scripts/install-k8s-tools.sh uses, so shared modules download once.
#
#   ODRADEK_CACHE   cache root (default $HOME/.cache/odradek)
set -euo pipefail

# shellcheck source=scripts/lib.sh
source "$(dirname "${BASH_SOURCE[0]}")/lib.sh"
HELM_VERSION="v3.21.4"

cached_tool helm
go_build_env

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

go_tool_install "$bin" helm "helm.sh/helm/v3/cmd/helm@$HELM_VERSION" "$stamp" "$vflags"
echo "$bin"
