"""DescribeProducers (key 61): the producer state of partitions, with the first offset of each
producer's open transaction (what `kafka-transactions.sh find-hanging` looks for).

Answered by any broker hosting the partition (Kafka reads its local log's producer state);
NOT_LEADER_OR_FOLLOWER from one that does not. READ on the topic is needed.
"""

from __future__ import annotations

from typing import Any

from ...protocol.api_keys import ApiKey
from ...protocol.errors import ErrorCode
from ...security.acl import AclOperation as Op
from ...security.acl import AclResourceType as RT
from .. import authz
from .registry import RequestContext, handles


@handles(ApiKey.DESCRIBE_PRODUCERS, "0")
async def handle_describe_producers(ctx: RequestContext, req: dict[str, Any]) -> dict[str, Any]:
    broker = ctx.broker
    readable = authz.authorized_names(ctx, Op.READ, RT.TOPIC, (t["name"] for t in req["topics"]))
    topics = []
    for t in req["topics"]:
        name = t["name"]
        if name not in readable:
            error = ErrorCode.TOPIC_AUTHORIZATION_FAILED
        elif not broker.metadata_cache.contains(name):
            error = ErrorCode.UNKNOWN_TOPIC_OR_PARTITION
        else:
            error = ErrorCode.NONE
        partitions = []
        for index in t["partition_indexes"]:
            entry: dict[str, Any] = {"partition_index": index, "active_producers": []}
            partition = broker.replica_manager.get(name, index) if not error else None
            if error:
                entry["error_code"] = error
            elif partition is None:
                entry["error_code"] = (
                    ErrorCode.NOT_LEADER_OR_FOLLOWER
                    if broker.metadata_cache.get_partition(name, index) is not None
                    else ErrorCode.UNKNOWN_TOPIC_OR_PARTITION
                )
            else:
                entry["error_code"] = ErrorCode.NONE
                entry["active_producers"] = [
                    {
                        "producer_id": pid,
                        "producer_epoch": e.epoch,
                        "last_sequence": e.last_seq,
                        "last_timestamp": e.last_timestamp,
                        "coordinator_epoch": e.coordinator_epoch,
                        "current_txn_start_offset": e.current_txn_first_offset,
                    }
                    for pid, e in sorted(partition.producer_state.producers.items())
                ]
            partitions.append(entry)
        topics.append({"name": name, "partitions": partitions})
    return {"throttle_time_ms": 0, "topics": topics}
