"""ListOffsets (key 2): offsets by timestamp, and the special earliest/latest/max lookups."""

from __future__ import annotations

from typing import Any

from ...protocol.api_keys import ApiKey
from ...protocol.errors import ErrorCode, KafkaError
from ...security.acl import AclOperation as Op
from ...security.acl import AclResourceType as RT
from .. import authz
from .registry import RequestContext, handles

LATEST = -1
EARLIEST = -2
MAX_TIMESTAMP = -3
EARLIEST_LOCAL = -4
LATEST_TIERED = -5


@handles(ApiKey.LIST_OFFSETS, "0-9")
async def handle_list_offsets(ctx: RequestContext, req: dict[str, Any]) -> dict[str, Any]:
    broker = ctx.broker
    topics = []
    described = authz.authorized_names(
        ctx, Op.DESCRIBE, RT.TOPIC, (t["name"] for t in req["topics"])
    )
    for topic in req["topics"]:
        name = topic["name"]
        parts = []
        for p in topic["partitions"]:
            result: dict[str, Any] = {"partition_index": p["partition_index"]}
            try:
                if name not in described:
                    raise KafkaError(ErrorCode.TOPIC_AUTHORIZATION_FAILED)
                partition = broker.replica_manager.leader_partition(
                    name,
                    p["partition_index"],
                    broker.metadata_cache.get_partition(name, p["partition_index"]) is not None,
                )
                offset, timestamp, epoch = _lookup(partition, p["timestamp"])
            except KafkaError as e:
                result["error_code"] = e.code
                result["old_style_offsets"] = []
                parts.append(result)
                continue
            result["error_code"] = ErrorCode.NONE
            result["timestamp"] = timestamp
            result["offset"] = offset
            result["leader_epoch"] = epoch
            result["old_style_offsets"] = [offset] if offset >= 0 else []
            parts.append(result)
        topics.append({"name": name, "partitions": parts})
    return {"throttle_time_ms": 0, "topics": topics}


def _lookup(partition: Any, timestamp: int) -> tuple[int, int, int]:
    """(offset, timestamp, leader epoch) for one request; offset -1 when no record qualifies."""
    if timestamp == LATEST:
        return partition.high_watermark, -1, partition.state.leader_epoch
    if timestamp == LATEST_TIERED:
        return -1, -1, -1
    if timestamp < 0 and timestamp not in (EARLIEST, EARLIEST_LOCAL, MAX_TIMESTAMP):
        raise KafkaError(ErrorCode.INVALID_REQUEST, f"unknown special timestamp {timestamp}")
    found = partition.log.offset_for_timestamp(timestamp)
    if (
        found is None
        or (timestamp >= 0 or timestamp == MAX_TIMESTAMP)
        and (found.offset >= partition.high_watermark)
    ):
        return -1, -1, -1
    return found.offset, found.timestamp, found.leader_epoch
