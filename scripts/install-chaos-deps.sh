#!/usr/bin/env bash
# Debian packages the chaos suite (tests/chaos) drives: iproute2 (`ip netns`, veth, bridge),
# iptables (partitions and packet loss inside the suite's own namespaces; the host's rules are
# never touched), util-linux (`unshare`, `mount`) and gcc (it builds the LD_PRELOAD fault shim).
#
# Idempotent: installs only what is missing, so a second run does nothing.
set -euo pipefail

declare -A package=([ip]=iproute2 [iptables]=iptables [unshare]=util-linux [gcc]=gcc)
missing=()
for tool in "${!package[@]}"; do
    command -v "$tool" >/dev/null 2>&1 || missing+=("${package[$tool]}")
done
if ((${#missing[@]})); then
    echo "installing ${missing[*]} (apt)"
    (apt-get update -qq || true)
    DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends "${missing[@]}" >/dev/null
fi
