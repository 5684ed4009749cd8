"""OffsetForLeaderEpoch (key 23): where a leader epoch ends in the leader's log.

Followers ask it before fetching to find where their log diverges (KIP-101/279); consumers
ask it to validate their position after a leader change (KIP-320). Only the leader answers,
from its leader-epoch cache.
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


@handles(ApiKey.OFFSET_FOR_LEADER_EPOCH, "0-4")
async def handle_offset_for_leader_epoch(
    ctx: RequestContext, req: dict[str, Any]
) -> dict[str, Any]:
    broker = ctx.broker
    topics = []
    # Followers have CLUSTER_ACTION; consumers (KIP-320) need DESCRIBE on the topic.
    names = [t["topic"] for t in req["topics"]]
    if authz.cluster(ctx, Op.CLUSTER_ACTION):
        described = set(names)
    else:
        described = authz.authorized_names(ctx, Op.DESCRIBE, RT.TOPIC, names)
    for topic in req["topics"]:
        name = topic["topic"]
        parts = []
        for p in topic["partitions"]:
            index = p["partition"]
            out: dict[str, Any] = {
                "error_code": ErrorCode.NONE,
                "partition": index,
                "leader_epoch": -1,
                "end_offset": -1,
            }
            parts.append(out)
            try:
                if name not in described:
                    raise KafkaError(ErrorCode.TOPIC_AUTHORIZATION_FAILED)
                partition = led_partition(broker, name, index, p.get("current_leader_epoch", -1))
            except KafkaError as e:
                out["error_code"] = e.code
                continue
            log = partition.log
            found_epoch, end = log.epoch_cache.end_offset_for(p["leader_epoch"], log.log_end_offset)
            out["leader_epoch"] = found_epoch
            out["end_offset"] = end
        topics.append({"topic": name, "partitions": parts})
    return {"throttle_time_ms": 0, "topics": topics}
