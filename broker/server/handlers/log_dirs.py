"""DescribeLogDirs (35) and AlterReplicaLogDirs (34): the broker's log dirs and moves between them."""

from __future__ import annotations

import os
from typing import Any

from ...protocol.api_keys import ApiKey
from ...protocol.errors import ErrorCode
from ...security.acl import AclOperation as Op
from .. import authz
from .registry import RequestContext, handles


@handles(ApiKey.DESCRIBE_LOG_DIRS, "0-4")
async def handle_describe_log_dirs(ctx: RequestContext, req: dict[str, Any]) -> dict[str, Any]:
    """Every configured dir: offline ones with KAFKA_STORAGE_ERROR, online ones with their
    volume's sizes and each replica's size and lag (a future replica's lag: how far it is
    behind the current one; a current replica's: how far its end is behind the HW)."""
    if not authz.cluster(ctx, Op.DESCRIBE):
        return {
            "throttle_time_ms": 0,
            "error_code": ErrorCode.CLUSTER_AUTHORIZATION_FAILED,
            "results": [],
        }
    lm = ctx.broker.log_manager
    wanted: set[tuple[str, int]] | None = None
    if req["topics"] is not None:
        wanted = {(t["topic"], p) for t in req["topics"] for p in t["partitions"]}
    by_dir: dict[str, dict[str, list[dict[str, Any]]]] = {str(d): {} for d in lm.online_dirs()}
    current = lm.all_logs()
    replicas = [(tp, log, False) for tp, log in current.items()]
    replicas += [(tp, log, True) for tp, log in lm.all_future_logs().items()]
    for (topic, index), log, future in sorted(replicas, key=lambda r: (r[0], r[2])):
        if wanted is not None and (topic, index) not in wanted:
            continue
        log_dir = lm.future_dir_of(topic, index) if future else lm.log_dir_of(topic, index)
        if log_dir is None or str(log_dir) not in by_dir:
            continue
        if future:
            source = current.get((topic, index))
            lag = source.log_end_offset - log.log_end_offset if source is not None else -1
        else:
            lag = max(log.high_watermark - log.log_end_offset, 0)
        by_dir[str(log_dir)].setdefault(topic, []).append(
            {"partition_index": index, "partition_size": log.size, "offset_lag": lag,
             "is_future_key": future}
        )  # fmt: skip
    results = []
    for log_dir in lm.log_dirs:
        if str(log_dir) not in by_dir:
            results.append(
                {"error_code": ErrorCode.KAFKA_STORAGE_ERROR, "log_dir": str(log_dir),
                 "topics": []}
            )  # fmt: skip
            continue
        try:
            st = os.statvfs(log_dir)
            total, usable = st.f_blocks * st.f_frsize, st.f_bavail * st.f_frsize
        except OSError:
            total = usable = -1
        topics = by_dir[str(log_dir)]
        results.append(
            {
                "error_code": ErrorCode.NONE,
                "log_dir": str(log_dir),
                "topics": [{"name": t, "partitions": ps} for t, ps in topics.items()],
                "total_bytes": total,
                "usable_bytes": usable,
            }
        )
    return {"throttle_time_ms": 0, "error_code": ErrorCode.NONE, "results": results}


@handles(ApiKey.ALTER_REPLICA_LOG_DIRS, "0-2")
async def handle_alter_replica_log_dirs(ctx: RequestContext, req: dict[str, Any]) -> dict[str, Any]:
    wanted: dict[tuple[str, int], str] = {}
    for d in req["dirs"]:
        for t in d["topics"]:
            for p in t["partitions"]:
                wanted[(t["name"], p)] = d["path"]
    if authz.cluster(ctx, Op.ALTER):
        codes = ctx.broker.replica_manager.alter_replica_log_dirs(wanted)
    else:
        codes = {tp: ErrorCode.CLUSTER_AUTHORIZATION_FAILED for tp in wanted}
    by_topic: dict[str, list[dict[str, Any]]] = {}
    for (topic, index), code in codes.items():
        by_topic.setdefault(topic, []).append({"partition_index": index, "error_code": code})
    return {
        "throttle_time_ms": 0,
        "results": [{"topic_name": t, "partitions": ps} for t, ps in by_topic.items()],
    }
