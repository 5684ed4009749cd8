#!/usr/bin/env bash
# Build kind once from the Go module proxy (`go install sigs.k8s.io/kind@KIND_VERSION`) into a cache
# directory; print that directory (the tools bin/, shared with helm) on stdout.
#
# A stamp (hash of this script, which pins the version, and of lib.sh) makes a second run a no-op; GOCACHE and
# GOMODCACHE are the ones scripts/install-k8s-tools.sh uses.
#
#   ODRADEK_CACHE   cache root (default $HOME/.cache/odradek)
set -euo pipefail

# shellcheck source=scripts/lib.sh
source "$(dirname "${BASH_SOURCE[0]}")/lib.sh"
KIND_VERSION="v0.29.0"

cached_tool kind
go_tool_install "$bin" kind "sigs.k8s.io/kind@$KIND_VERSION" "$stamp"
echo "$bin"
