"""DeleteRecords (21): move partitions' log start offsets forward."""

from __future__ import annotations

from typing import Any

from ...protocol.api_keys import ApiKey
from ...protocol.errors import ErrorCode, KafkaError
from ...security.acl import AclOperation as Op
from ...security.acl import AclResourceType as RT
from .. import authz
from ..services import led_partition
from .registry import RequestContext, handles

# An offset of -1 means "up to the high watermark".
HIGH_WATERMARK = -1


@handles(ApiKey.DELETE_RECORDS, "0-2")
async def handle_delete_records(ctx: RequestContext, req: dict[str, Any]) -> dict[str, Any]:
    broker = ctx.broker
    topics = []
    deletable = authz.authorized_names(ctx, Op.DELETE, RT.TOPIC, (t["name"] for t in req["topics"]))
    for t in req["topics"]:
        name = t["name"]
        parts = []
        for p in t["partitions"]:
            result = {
                "partition_index": p["partition_index"],
                "low_watermark": -1,
                "error_code": ErrorCode.NONE,
            }
            parts.append(result)
            try:
                if name not in deletable:
                    raise KafkaError(ErrorCode.TOPIC_AUTHORIZATION_FAILED)
                partition = led_partition(broker, name, p["partition_index"])
                offset = p["offset"]
                hw = partition.high_watermark
                if offset == HIGH_WATERMARK:
                    offset = hw
                if offset < 0 or offset > hw:
                    raise KafkaError(ErrorCode.OFFSET_OUT_OF_RANGE)
                result["low_watermark"] = partition.log.delete_records_before(offset)
            except KafkaError as e:
                result["error_code"] = e.code
        topics.append({"name": name, "partitions": parts})
    broker.log_manager.checkpoint_log_start_offsets()
    return {"throttle_time_ms": 0, "topics": topics}
