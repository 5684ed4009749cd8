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
from ..services import BrokerServices, led_partition
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
    # Only v0 answers with old_style_offsets; later versions' encoders never read them.
    v0 = ctx.version == 0
    described = authz.authorized_names(
        ctx, Op.DESCRIBE, RT.TOPIC, (t["name"] for t in req["topics"])
    )
    topics = []
    for topic in req["topics"]:
        name = topic["name"]
        if name in described:
            parts = _answer_topic(broker, name, topic["partitions"], from_client, committed, v0)
        else:
            denied = ErrorCode.TOPIC_AUTHORIZATION_FAILED
            parts = [
                {
                    "partition_index": p["partition_index"],
                    "error_code": denied,
                    "old_style_offsets": [],
                }
                for p in topic["partitions"]
            ]
        topics.append({"name": name, "partitions": parts})
    return {"throttle_time_ms": 0, "topics": topics}


def _answer_topic(
    broker: BrokerServices,
    name: str,
    requested: list[dict[str, Any]],
    from_client: bool,
    committed: bool,
    v0: bool,
) -> list[dict[str, Any]]:
    """The answers for the partitions of one (authorized) topic.

    The common request, the latest offset of a partition this broker leads asked at no newer
    leader epoch than its own, takes a short path per partition (a request names up to every
    partition of a topic); anything else, errors included, goes through `led_partition` and
    `_lookup`, which the short path agrees with."""
    led = broker.replica_manager.partitions
    parts = []
    append = parts.append
    for p in requested:
        index = p["partition_index"]
        wanted_epoch = p["current_leader_epoch"]
        partition = led.get((name, index))
        if p["timestamp"] == LATEST and partition is not None:
            state = partition.state
            epoch = state.leader_epoch
            if state.leader == partition.local_broker_id and (
                wanted_epoch < 0 or wanted_epoch == epoch
            ):
                # _hw_lagging and _fetchable, inlined: this loop runs once per partition.
                log = partition.log
                if not from_client:
                    offset = log.log_end_offset
                elif partition.leader_epoch_start_offset > (hw := log.high_watermark):
                    offset = -1  # the general path below tells the error
                else:
                    offset = partition.last_stable_offset if committed else hw
                if offset >= 0:
                    if v0:
                        append({"partition_index": index, "error_code": 0, "offset": offset,
                                "leader_epoch": epoch, "old_style_offsets": [offset]})  # fmt: skip
                    else:
                        append({"partition_index": index, "offset": offset, "leader_epoch": epoch})
                    continue
        try:
            partition = led_partition(broker, name, index, wanted_epoch)
            offset, timestamp, epoch = _lookup(partition, p["timestamp"], from_client, committed)
        except KafkaError as e:
            append({"partition_index": index, "error_code": e.code, "old_style_offsets": []})
            continue
        append(
            {
                "partition_index": index,
                "timestamp": timestamp,
                "offset": offset,
                "leader_epoch": epoch,
                "old_style_offsets": [offset] if offset >= 0 else [],
            }
        )
    return parts


def _lookup(
    partition: Any, timestamp: int, from_client: bool, committed: bool
) -> tuple[int, int, int]:
    """(offset, timestamp, leader epoch) for one request; offset -1 when no record qualifies."""
    log = partition.log
    fetchable = _fetchable(partition, from_client, committed)
    hw_lagging = _hw_lagging(partition, from_client)
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


def _fetchable(partition: Any, from_client: bool, committed: bool) -> int:
    """The end of what the asker may fetch, the answer for the latest offset: the log end for
    replicas and tools, else the high watermark, or the last stable offset under
    read_committed."""
    if not from_client:
        return partition.log.log_end_offset
    return partition.last_stable_offset if committed else partition.high_watermark


def _hw_lagging(partition: Any, from_client: bool) -> bool:
    """Whether a consumer must wait (OFFSET_NOT_AVAILABLE): the high watermark is still below
    the log end this leader started its epoch with."""
    return from_client and partition.leader_epoch_start_offset > partition.high_watermark


def _lagging(partition: Any) -> str:
    return (
        f"the high watermark ({partition.high_watermark}) of {partition.topic}-{partition.index} "
        f"is still below the start offset of leader epoch {partition.state.leader_epoch} "
        f"({partition.leader_epoch_start_offset})"
    )
