#!/usr/bin/env bash
# Make `docker` usable on this machine: install Debian's docker.io when there is no daemon, start
# dockerd in the background when nothing answers, and wait until it does.
#
# Idempotent and quiet on success (a second run only calls `docker info`). Needs root to install or
# start the daemon; a machine whose docker already works needs neither. Exits non-zero with one
# message on stderr when docker cannot be made to work.
#
#   ODRADEK_CACHE         cache directory (default: $HOME/.cache/odradek); dockerd logs to
#                         $ODRADEK_CACHE/dockerd.log
#   DOCKER_START_TIMEOUT  seconds to wait for a freshly started daemon (default 60)
set -euo pipefail

cache="${ODRADEK_CACHE:-${HOME}/.cache/odradek}"
log="$cache/dockerd.log"
timeout="${DOCKER_START_TIMEOUT:-60}"

die() { echo "install-docker: $*" >&2; exit 1; }

# A client newer than the daemon (e.g. a docker 28 CLI in /usr/local/bin next to Debian's 20.10
# dockerd) negotiates the API version down by itself; a client that refuses to (an explicit
# DOCKER_API_VERSION that the daemon does not support) is pinned to the daemon's version below.
docker_ok() { docker info >/dev/null 2>&1; }

# `docker run --privileged` asks for every capability Docker knows; where this machine's bounding set
# lacks one (CAP_SYS_RESOURCE here), runc refuses with "unable to apply caps", and kind's nodes are
# privileged containers. The fix is scripts/runc-cap-filter.py as the daemon's default runtime: it
# drops what cannot be granted from each container's spec before calling runc. It goes through
# /etc/docker/daemon.json ("runtimes", "default-runtime"), which a running dockerd reloads on
# SIGHUP, so a daemon someone else started gets it too. Nothing changes where every capability is
# available (a laptop), nor where dockerd is not local.
runtime_name=odradek-runc
# A machine-wide place, outside any cache or clone: the daemon runs every container through it.
wrapper=/usr/local/libexec/odradek-runc
full_caps() { [[ "$(awk '/^CapBnd:/ {print $2}' /proc/self/status)" == 000001ffffffffff ]]; }
register_runtime() {
    full_caps && return 0
    [[ "$(id -u)" == 0 && -s /var/run/docker.pid ]] || return 0
    local py=/usr/bin/python3 src
    [[ -x $py ]] || py="$(command -v python3)"
    src="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)/runc-cap-filter.py"
    mkdir -p "$(dirname "$wrapper")" /etc/docker
    # A copy, not the file in this clone (which may go away while containers still use it).
    { echo "#!$py -I"; cat "$src"; } >"$wrapper.new"
    chmod 0755 "$wrapper.new"
    if cmp -s "$wrapper.new" "$wrapper"; then rm -f "$wrapper.new"; else mv -f "$wrapper.new" "$wrapper"; fi
    local changed
    changed="$("$py" -I - /etc/docker/daemon.json "$runtime_name" "$wrapper" <<'PY'
import json, os, sys
path, name, wrapper = sys.argv[1:]
conf = {}
if os.path.exists(path):
    with open(path) as f:
        conf = json.load(f)
want = dict(conf)
want["runtimes"] = {**conf.get("runtimes", {}), name: {"path": wrapper}}
want["default-runtime"] = name
if want != conf:
    with open(path + ".new", "w") as f:
        json.dump(want, f, indent=2)
    os.replace(path + ".new", path)
    print("changed")
PY
)"
    if [[ -n "$changed" ]]; then
        echo "install-docker: default runtime $runtime_name ($wrapper) for --privileged containers" >&2
        kill -HUP "$(cat /var/run/docker.pid)"
        local deadline=$((SECONDS + 30))
        until docker info -f '{{.DefaultRuntime}}' 2>/dev/null | grep -qx "$runtime_name"; do
            ((SECONDS < deadline)) || die "dockerd did not take $runtime_name as its default runtime"
            sleep 1
        done
    fi
}

if command -v docker >/dev/null && docker_ok; then
    register_runtime
    exit 0
fi

[[ "$(id -u)" == 0 ]] || die "docker does not answer and only root can install or start it"

# Debian's docker.io brings dockerd, containerd, runc and a client; iptables and friends come as
# its dependencies. The client is only installed when there is none at all (a newer one may be on
# PATH already and is kept).
if ! command -v dockerd >/dev/null; then
    command -v apt-get >/dev/null || die "dockerd is missing and there is no apt-get to install it"
    echo "install-docker: installing docker.io (apt)" >&2
    (apt-get update -qq || true) >/dev/null 2>&1
    mkdir -p "$cache"
    if ! DEBIAN_FRONTEND=noninteractive apt-get install -y -qq docker.io >"$cache/apt-docker.log" 2>&1; then
        tail -n 20 "$cache/apt-docker.log" >&2
        die "apt-get install docker.io failed; see $cache/apt-docker.log"
    fi
fi
command -v docker >/dev/null || die "no docker client on PATH"

# Start the daemon unless one is already running (then it may just be slow to answer).
started=0
# dockerd's own pid file tells (no procps needed); a stale one is removed by dockerd itself.
if ! { [[ -s /var/run/docker.pid ]] && kill -0 "$(cat /var/run/docker.pid)" 2>/dev/null; }; then
    mkdir -p "$cache"
    # setsid + nohup: the daemon outlives this script and the make/pytest run that called it.
    setsid nohup dockerd >>"$log" 2>&1 </dev/null &
    started=1
fi

deadline=$((SECONDS + timeout))
until docker_ok; do
    if ((SECONDS >= deadline)); then
        # The usual cause of a daemon that answers but a client that does not: the client insists
        # on a newer API version. Pin it to what the daemon offers and try once more.
        server_api="$(DOCKER_API_VERSION=1.24 docker version -f '{{.Server.APIVersion}}' 2>/dev/null || true)"
        if [[ -n "$server_api" ]] && DOCKER_API_VERSION="$server_api" docker info >/dev/null 2>&1; then
            die "docker works only with DOCKER_API_VERSION=$server_api; export it"
        fi
        error="$(docker info 2>&1 >/dev/null | tail -n 1 || true)"
        if ((started)); then
            die "dockerd did not answer within ${timeout}s ($error); see $log"
        fi
        die "a dockerd is running but docker does not answer within ${timeout}s: $error"
    fi
    sleep 1
done
register_runtime
