"""DescribeCluster (60)."""

from __future__ import annotations

from typing import Any

from ...protocol.api_keys import ApiKey
from ...protocol.errors import ErrorCode
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
