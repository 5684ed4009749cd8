"""ListOffsets (key 2): offsets by timestamp, and the special earliest/latest/max lookups.

As in Kafka, what a consumer (replica id -1) may fetch bounds the answers: the high watermark,
or under read_committed the last stable offset; replicas and tools see the whole log. A leader
elected with a high watermark still below the log end it started its epoch with answers
OFFSET_NOT_AVAILABLE to consumers until the watermark catches up, so a client never sees the
end of a partition go backwards across a leader change (Spark's failOnDataLoss relies on that).
"""

from __future__ import annotations

from typing import Any

from ...protocol.api_keys import ApiKey
from ...protocol.errors import ErrorCode, KafkaError
from ...security.acl import AclOperation as Op
from ...security.acl import AclResourceType as RT
from .. import authz
from ..services import led_partition
from .registry import RequestContext, handles

LATEST = -1
EARLIEST = -2
MAX_TIMESTAMP = -3
EARLIEST_LOCAL = -4
LATEST_TIERED = -5
READ_COMMITTED = 1
CONSUMER_REPLICA_ID = -1


@handles(ApiKey.LIST_OFFSETS, "0-9")
async def handle_list_offsets(ctx: RequestContext, req: dict[str, Any]) -> dict[str, Any]:
    broker = ctx.broker
    from_client = req["replica_id"] == CONSUMER_REPLICA_ID
    # read_committed (v2+) sees up to the last stable offset, read_uncommitted up to the HW.
    committed = req.get("isolation_level", 0) == READ_COMMITTED
    topics = []
    described = authz.authorized_names(
        ctx, Op.DESCRIBE, RT.TOPIC, (t["name"] for t in req["topics"])
    )
    none = ErrorCode.NONE
    for topic in req["topics"]:
        name = topic["name"]
        parts = []
        for p in topic["partitions"]:
            index = p["partition_index"]
            try:
                if name not in described:
                    raise KafkaError(ErrorCode.TOPIC_AUTHORIZATION_FAILED)
                partition = led_partition(broker, name, index, p.get("current_leader_epoch", -1))
                offset, timestamp, epoch = _lookup(
                    partition, p["timestamp"], from_client, committed
                )
            except KafkaError as e:
                parts.append(
                    {"partition_index": index, "error_code": e.code, "old_style_offsets": []}
                )
                continue
            parts.append(
                {
                    "partition_index": index,
                    "error_code": none,
                    "timestamp": timestamp,
                    "offset": offset,
                    "leader_epoch": epoch,
                    "old_style_offsets": [offset] if offset >= 0 else [],
                }
            )
        topics.append({"name": name, "partitions": parts})
    return {"throttle_time_ms": 0, "topics": topics}


def _lookup(
    partition: Any, timestamp: int, from_client: bool, committed: bool
) -> tuple[int, int, int]:
    """(offset, timestamp, leader epoch) for one request; offset -1 when no record qualifies."""
    log = partition.log
    if not from_client:
        fetchable = log.log_end_offset
    else:
        fetchable = partition.last_stable_offset if committed else partition.high_watermark
    hw_lagging = from_client and partition.leader_epoch_start_offset > partition.high_watermark
    if timestamp == LATEST:
        if hw_lagging:
            raise KafkaError(ErrorCode.OFFSET_NOT_AVAILABLE, _lagging(partition))
        return fetchable, -1, partition.state.leader_epoch
    if timestamp == LATEST_TIERED:
        return -1, -1, -1
    if timestamp < 0 and timestamp not in (EARLIEST, EARLIEST_LOCAL, MAX_TIMESTAMP):
        raise KafkaError(ErrorCode.INVALID_REQUEST, f"unknown special timestamp {timestamp}")
    found = log.offset_for_timestamp(timestamp)
    if timestamp in (EARLIEST, EARLIEST_LOCAL):
        if found is None:
            return -1, -1, -1
        return found.offset, found.timestamp, found.leader_epoch
    if found is None or found.offset >= fetchable:
        if found is not None and hw_lagging:
            raise KafkaError(ErrorCode.OFFSET_NOT_AVAILABLE, _lagging(partition))
        return -1, -1, -1
    return found.offset, found.timestamp, found.leader_epoch


def _lagging(partition: Any) -> str:
    return (
        f"the high watermark ({partition.high_watermark}) of {partition.topic}-{partition.index} "
        f"is still below the start offset of leader epoch {partition.state.leader_epoch} "
        f"({partition.leader_epoch_start_offset})"
    )
