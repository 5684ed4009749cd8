"""Produce (key 0): validate each partition's batches and append them to the leader's log."""

from __future__ import annotations

import asyncio
from typing import Any

from ...protocol.api_keys import ApiKey
from ...protocol.errors import ErrorCode, KafkaError
from ...records import batch as rb
from ...security.acl import AclOperation as Op
from ...security.acl import AclResourceType as RT
from .. import authz
from ..network import CloseConnection
from ..services import led_partition
from ..throttling import records_size
from .registry import Deferred, RequestContext, handles


@handles(ApiKey.PRODUCE, "0-11")
async def handle_produce(
    ctx: RequestContext, req: dict[str, Any]
) -> dict[str, Any] | Deferred | None:
    broker = ctx.broker
    metered = broker.metrics.enabled  # sizes are worked out only for a served endpoint
    acks = req["acks"]
    responses = []
    # acks=all: appended partitions wait for the high watermark (reference §3.6).
    waiting: list[tuple[dict[str, Any], Any, int]] = []
    transactional_id = req.get("transactional_id")
    if _has_transactional_records(req) and (
        transactional_id is None
        or not authz.authorized(ctx, Op.WRITE, RT.TRANSACTIONAL_ID, transactional_id)
    ):
        # Kafka's first check: transactional batches need WRITE on the request's id.
        return _refused(req, ErrorCode.TRANSACTIONAL_ID_AUTHORIZATION_FAILED)
    writable = authz.authorized_names(
        ctx, Op.WRITE, RT.TOPIC, (t["name"] for t in req["topic_data"])
    )
    for topic in req["topic_data"]:
        name = topic["name"]
        results = []
        for part in topic["partition_data"]:
            index = part["index"]
            if acks not in (-1, 0, 1):
                results.append(
                    {
                        "index": index,
                        "error_code": ErrorCode.INVALID_REQUIRED_ACKS,
                        "base_offset": -1,
                    }
                )
                continue
            if name not in writable:
                results.append(
                    {
                        "index": index,
                        "base_offset": -1,
                        "error_code": ErrorCode.TOPIC_AUTHORIZATION_FAILED,
                    }
                )
                continue
            try:
                partition = led_partition(broker, name, index)
            except KafkaError as e:
                results.append({"index": index, "error_code": e.code, "base_offset": -1})
                continue
            outcome = broker.replica_manager.append(partition, part["records"], ctx.version, acks)
            result = {
                "index": index,
                "error_code": outcome.error,
                "base_offset": outcome.base_offset,
                "log_append_time_ms": outcome.log_append_time,
                "log_start_offset": outcome.log_start_offset,
                "error_message": outcome.message,
                "record_errors": [
                    {"batch_index": i, "batch_index_error_message": m}
                    for i, m in outcome.record_errors
                ],
            }
            results.append(result)
            if metered and outcome.error == ErrorCode.NONE and outcome.last_offset >= 0:
                broker.metrics.record_produce(
                    name,
                    outcome.last_offset - outcome.base_offset + 1,
                    records_size(part["records"]),
                )
            if acks == -1 and outcome.error == ErrorCode.NONE and outcome.last_offset >= 0:
                waiting.append((result, partition, outcome.last_offset + 1))
        responses.append({"name": name, "partition_responses": results})
    # A partition whose ISR is the leader alone has its HW past the records already: only the
    # others wait (a deferred response costs a task per partition, on every request).
    waiting = [w for w in waiting if not _answered(broker.replica_manager, *w)]
    if waiting:
        # Everything is appended: the rest only waits, and the connection may read on.
        timeout_s = max(req.get("timeout_ms", 30000), 0) / 1000
        return Deferred(_replicated(broker.replica_manager, waiting, timeout_s, responses))
    if acks == 0:
        # No response can carry the error: like Kafka, close so the client refreshes metadata.
        for topic in responses:
            for part in topic["partition_responses"]:
                if part["error_code"]:
                    raise CloseConnection(
                        f"acks=0 produce to {topic['name']}-{part['index']} failed: "
                        f"{ErrorCode(part['error_code']).name}"
                    )
        return None
    return {"responses": responses, "throttle_time_ms": 0}


def _answered(replica_manager: Any, result: dict[str, Any], partition: Any, required: int) -> bool:
    """Whether acks=all has its answer for this partition without waiting (then set)."""
    code = replica_manager.replicated(partition, required)
    if code is None:
        return False
    result["error_code"] = code
    return True


async def _replicated(
    replica_manager: Any,
    waiting: list[tuple[dict[str, Any], Any, int]],
    timeout_s: float,
    responses: list[dict[str, Any]],
) -> dict[str, Any]:
    """The acks=all response, once every appended partition's HW has passed its records."""
    if len(waiting) == 1:  # the usual request: no task and no extra round of the loop
        _, partition, required = waiting[0]
        codes = [await replica_manager.wait_for_replication(partition, required, timeout_s)]
    else:
        codes = await asyncio.gather(
            *(
                replica_manager.wait_for_replication(partition, required, timeout_s)
                for _, partition, required in waiting
            )
        )
    for (result, _, _), code in zip(waiting, codes, strict=True):
        if code != ErrorCode.NONE:
            result["error_code"] = code
    return {"responses": responses, "throttle_time_ms": 0}


def _has_transactional_records(req: dict[str, Any]) -> bool:
    """Does any partition carry a transactional batch? (first batch header, as Kafka: a
    produce request holds one batch per partition)."""
    for topic in req["topic_data"]:
        for part in topic["partition_data"]:
            records = part["records"]
            if records is not None and len(records) >= rb.ATTRIBUTES_OFFSET + 2:
                if rb.peek_magic(records) == rb.MAGIC and (
                    records[rb.ATTRIBUTES_OFFSET + 1] & rb.TRANSACTIONAL_FLAG
                ):
                    return True
    return False


def _refused(req: dict[str, Any], code: ErrorCode) -> dict[str, Any] | None:
    if req["acks"] == 0:
        raise CloseConnection(f"acks=0 produce refused: {code.name}")
    return {
        "responses": [
            {
                "name": t["name"],
                "partition_responses": [
                    {"index": p["index"], "error_code": code, "base_offset": -1}
                    for p in t["partition_data"]
                ],
            }
            for t in req["topic_data"]
        ],
        "throttle_time_ms": 0,
    }
