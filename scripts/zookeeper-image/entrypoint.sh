#!/usr/bin/env bash
# Entry point of the odradek-zookeeper image: write zoo.cfg (unless one is mounted) and myid from
# the environment, then exec the server as PID 1 (a JVM exits on SIGTERM). Arguments, when given,
# are run instead (e.g. `zk-cli`, `bash`). Variables: see the image's Dockerfile.
set -euo pipefail

if (($#)); then
    exec "$@"
fi

conf_dir="${ZOO_CONF_DIR:-/conf}"
data_dir="${ZOO_DATA_DIR:-/data}"
data_log_dir="${ZOO_DATA_LOG_DIR:-/datalog}"
home="${ZOO_HOME:-/opt/zookeeper}"

mkdir -p "$data_dir" "$data_log_dir"

# The server id: ZOO_MY_ID; else a myid already there (written by an init container or a previous
# start); else from a StatefulSet pod's name NAME-<ordinal> (ids start at 1); else 1.
if [[ -n "${ZOO_MY_ID:-}" ]]; then
    echo "$ZOO_MY_ID" >"$data_dir/myid"
elif [[ ! -s "$data_dir/myid" ]]; then
    host="$(hostname)"
    if [[ "$host" =~ -([0-9]+)$ ]]; then
        echo $((BASH_REMATCH[1] + 1)) >"$data_dir/myid"
    else
        echo 1 >"$data_dir/myid"
    fi
fi

cfg="$conf_dir/zoo.cfg"
if [[ ! -f "$cfg" ]]; then
    {
        echo "dataDir=$data_dir"
        echo "dataLogDir=$data_log_dir"
        echo "tickTime=${ZOO_TICK_TIME:-2000}"
        echo "initLimit=${ZOO_INIT_LIMIT:-10}"
        echo "syncLimit=${ZOO_SYNC_LIMIT:-5}"
        echo "maxClientCnxns=${ZOO_MAX_CLIENT_CNXNS:-60}"
        echo "autopurge.snapRetainCount=${ZOO_AUTOPURGE_SNAPRETAINCOUNT:-3}"
        echo "autopurge.purgeInterval=${ZOO_AUTOPURGE_PURGEINTERVAL:-24}"
        echo "4lw.commands.whitelist=${ZOO_4LW_COMMANDS_WHITELIST:-srvr,stat,ruok,mntr,conf,cons}"
        echo "admin.enableServer=false"
        # Pods resolve their own name to the pod IP only once the headless Service publishes it;
        # binding the quorum and election ports to every address avoids that race.
        echo "quorumListenOnAllIPs=true"
        if [[ -n "${ZOO_SERVERS:-}" ]]; then
            echo "standaloneEnabled=false"
            echo "reconfigEnabled=false"
            for server in $ZOO_SERVERS; do
                echo "$server"
            done
        else
            echo "clientPort=2181"
        fi
        for line in ${ZOO_CFG_EXTRA:-}; do
            echo "$line"
        done
    } >"$cfg"
fi

# A log4j.properties next to zoo.cfg (e.g. in the same ConfigMap) wins over the image's own.
log4j="$home/conf/log4j.properties"
[[ -f "$conf_dir/log4j.properties" ]] && log4j="$conf_dir/log4j.properties"

# JVMFLAGS is split on purpose: it holds several options.
# shellcheck disable=SC2086
exec java -Djava.awt.headless=true -XX:+ExitOnOutOfMemoryError \
    -Dzookeeper.admin.enableServer=false \
    -Dlog4j.configuration="file:$log4j" \
    ${JVMFLAGS:-} \
    -cp "$home/libs/*" org.apache.zookeeper.server.quorum.QuorumPeerMain "$cfg"
