"""DescribeCluster (60) and DescribeLogDirs (35)."""

from __future__ import annotations

import os
from typing import Any

from ...protocol.api_keys import ApiKey
from ...protocol.errors import ErrorCode
from ...security.acl import AclOperation as Op
from .. import authz
from .registry import RequestContext, handles

# DescribeCluster v1 endpoint types.
BROKERS = 1
CONTROLLERS = 2
NOT_REQUESTED = -(2**31)


@handles(ApiKey.DESCRIBE_CLUSTER, "0-1")
async def handle_describe_cluster(ctx: RequestContext, req: dict[str, Any]) -> dict[str, Any]:
    broker = ctx.broker
    cache = broker.metadata_cache
    endpoint_type = req.get("endpoint_type", BROKERS)
    base = {"throttle_time_ms": 0, "endpoint_type": endpoint_type, "cluster_id": broker.cluster_id}
    if endpoint_type != BROKERS:
        return {
            **base,
            "error_code": ErrorCode.UNSUPPORTED_ENDPOINT_TYPE,
            "error_message": "The zookeeper-based metadata has no controller endpoints",
        }
    listener = ctx.conn.listener.name
    brokers = []
    for reg in cache.alive_brokers():
        ep = reg.endpoint(listener)
        if ep is not None:
            brokers.append(
                {"broker_id": reg.id, "host": ep.host, "port": ep.port, "rack": reg.rack}
            )
    return {
        **base,
        "error_code": ErrorCode.NONE,
        "controller_id": cache.controller_id if cache.controller_id is not None else -1,
        "brokers": brokers,
        "cluster_authorized_operations": authz.cluster_authorized_operations(ctx)
        if req.get("include_cluster_authorized_operations")
        else NOT_REQUESTED,
    }


@handles(ApiKey.DESCRIBE_LOG_DIRS, "0-4")
async def handle_describe_log_dirs(ctx: RequestContext, req: dict[str, Any]) -> dict[str, Any]:
    lm = ctx.broker.log_manager
    if not authz.cluster(ctx, Op.DESCRIBE):
        return {
            "throttle_time_ms": 0,
            "error_code": ErrorCode.CLUSTER_AUTHORIZATION_FAILED,
            "results": [],
        }
    wanted: set[tuple[str, int]] | None = None
    if req["topics"] is not None:
        wanted = {(t["topic"], p) for t in req["topics"] for p in t["partitions"]}
    by_dir: dict[str, dict[str, list[dict[str, Any]]]] = {str(d): {} for d in lm.log_dirs}
    for (topic, index), log in sorted(lm.all_logs().items()):
        if wanted is not None and (topic, index) not in wanted:
            continue
        partition = ctx.broker.replica_manager.get(topic, index)
        hw = partition.high_watermark if partition is not None else log.high_watermark
        log_dir = str(log.dir.parent)
        by_dir.setdefault(log_dir, {}).setdefault(topic, []).append(
            {"partition_index": index, "partition_size": log.size,
             "offset_lag": max(log.log_end_offset - hw, 0), "is_future_key": False}
        )  # fmt: skip
    results = []
    for log_dir, topics in by_dir.items():
        try:
            st = os.statvfs(log_dir)
            total, usable = st.f_blocks * st.f_frsize, st.f_bavail * st.f_frsize
        except OSError:
            total = usable = -1
        results.append(
            {
                "error_code": ErrorCode.NONE,
                "log_dir": log_dir,
                "topics": [{"name": t, "partitions": ps} for t, ps in topics.items()],
                "total_bytes": total,
                "usable_bytes": usable,
            }
        )
    return {"throttle_time_ms": 0, "error_code": ErrorCode.NONE, "results": results}
