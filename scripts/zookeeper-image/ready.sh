#!/usr/bin/env bash
# Readiness of a ZooKeeper server: exit 0 when `srvr` on the client port reports a mode (leader,
# follower or standalone), i.e. the server is serving. bash's /dev/tcp: no netcat in the image.
#   zk-ready [PORT]   (default 2181)
set -euo pipefail
port="${1:-2181}"
exec 3<>"/dev/tcp/127.0.0.1/$port"
printf 'srvr' >&3
reply="$(timeout 5 cat <&3 || true)"
grep -q '^Mode: ' <<<"$reply"
