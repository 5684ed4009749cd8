"""Committed offsets: OffsetCommit (8), OffsetFetch (9), OffsetDelete (47) and TxnOffsetCommit
(28), the offsets a transactional producer commits with its transaction.

Version 0 of OffsetCommit and OffsetFetch keeps Kafka's old behaviour: offsets live in the
metadata store, no coordinator involved. Later versions go to the group coordinator.
"""

from __future__ import annotations

import logging
import time
from typing import Any

from ...cluster.metadata_store import run_blocking
from ...coordinator.group import zk_offsets
from ...coordinator.group.metadata import OffsetAndMetadata
from ...protocol.api_keys import ApiKey
from ...protocol.errors import ErrorCode
from ...security.acl import AclOperation as Op
from ...security.acl import AclResourceType as RT
from .. import authz
from ..services import partition_error
from .registry import RequestContext, handles

log = logging.getLogger(__name__)

TopicPartition = tuple[str, int]
PartitionOffset = tuple[int, int, str, ErrorCode]
UNAUTHORIZED: PartitionOffset = (-1, -1, "", ErrorCode.TOPIC_AUTHORIZATION_FAILED)


def _now_ms() -> int:
    return int(time.time() * 1000)


def _topics_response(
    errors: dict[TopicPartition, ErrorCode], key: str = "partitions"
) -> list[dict[str, Any]]:
    topics: dict[str, list[dict[str, Any]]] = {}
    for (topic, partition), error in errors.items():
        topics.setdefault(topic, []).append({"partition_index": partition, "error_code": error})
    return [{"name": name, key: parts} for name, parts in topics.items()]


# --- OffsetCommit --------------------------------------------------------------------------


@handles(ApiKey.OFFSET_COMMIT, "0-9")
async def handle_offset_commit(ctx: RequestContext, req: dict[str, Any]) -> dict[str, Any]:
    broker = ctx.broker
    v = ctx.version
    now = _now_ms()
    retention = req.get("retention_time_ms", -1) if 2 <= v <= 4 else -1
    errors: dict[TopicPartition, ErrorCode] = {}
    offsets: dict[TopicPartition, OffsetAndMetadata] = {}
    # READ on the group, then READ on each topic.
    group_ok = authz.authorized(ctx, Op.READ, RT.GROUP, req["group_id"])
    readable = authz.authorized_names(ctx, Op.READ, RT.TOPIC, (t["name"] for t in req["topics"]))
    for topic in req["topics"]:
        for p in topic["partitions"]:
            tp = (topic["name"], p["partition_index"])
            errors[tp] = ErrorCode.NONE  # keeps the request's order in the response
            if not group_ok:
                errors[tp] = ErrorCode.GROUP_AUTHORIZATION_FAILED
                continue
            error = partition_error(broker, tp, readable)
            if error is not None:
                errors[tp] = error
                continue
            commit_ts = p.get("commit_timestamp", -1) if v == 1 else -1
            offsets[tp] = OffsetAndMetadata(
                offset=p["committed_offset"],
                leader_epoch=p.get("committed_leader_epoch", -1) if v >= 6 else -1,
                metadata=p["committed_metadata"] or "",
                commit_timestamp=now if commit_ts == -1 else commit_ts,
                expire_timestamp=now + retention if retention != -1 else -1,
            )
    if v == 0:
        errors.update(await _commit_v0(ctx, req["group_id"], offsets))
    elif offsets:
        errors.update(
            await broker.group_coordinator.commit_offsets(
                req["group_id"],
                req.get("member_id", ""),
                req.get("group_instance_id") if v >= 7 else None,
                req.get("generation_id_or_member_epoch", -1),
                offsets,
            )
        )
    return {"throttle_time_ms": 0, "topics": _topics_response(errors)}


async def _commit_v0(
    ctx: RequestContext, group: str, offsets: dict[TopicPartition, OffsetAndMetadata]
) -> dict[TopicPartition, ErrorCode]:
    broker = ctx.broker
    limit = broker.group_coordinator.config.metadata_max_bytes
    out: dict[TopicPartition, ErrorCode] = {}
    for tp, o in offsets.items():
        if len(o.metadata) > limit:
            out[tp] = ErrorCode.OFFSET_METADATA_TOO_LARGE
            continue
        try:
            await run_blocking(
                broker.executor, zk_offsets.commit, broker.store, group, tp, o.offset
            )
            out[tp] = ErrorCode.NONE
        except Exception as e:  # as Kafka: the store's failure becomes this partition's error
            log.warning("v0 offset commit of group %r to %s failed: %s", group, tp, e)
            out[tp] = ErrorCode.UNKNOWN_SERVER_ERROR
    return out


# --- OffsetFetch ---------------------------------------------------------------------------


def _partition_entries(
    offsets: dict[TopicPartition, PartitionOffset],
) -> list[dict[str, Any]]:
    topics: dict[str, list[dict[str, Any]]] = {}
    for (topic, partition), (offset, epoch, metadata, error) in offsets.items():
        topics.setdefault(topic, []).append(
            {
                "partition_index": partition,
                "committed_offset": offset,
                "committed_leader_epoch": epoch,
                "metadata": metadata,
                "error_code": error,
            }
        )
    return [{"name": name, "partitions": parts} for name, parts in topics.items()]


def _requested(topics: list[dict[str, Any]] | None) -> list[TopicPartition] | None:
    if topics is None:
        return None
    return [(t["name"], p) for t in topics for p in t["partition_indexes"]]


def _fetch_offsets(
    ctx: RequestContext, group_id: str, wanted: list[TopicPartition] | None, require_stable: bool
) -> tuple[ErrorCode, dict[TopicPartition, PartitionOffset]]:
    """The coordinator's answer within the client's rights: DESCRIBE on the group; topics it
    may not describe are left out of "all offsets" and answered TOPIC_AUTHORIZATION_FAILED
    when named."""
    if not authz.authorized(ctx, Op.DESCRIBE, RT.GROUP, group_id):
        return ErrorCode.GROUP_AUTHORIZATION_FAILED, {}
    coordinator = ctx.broker.group_coordinator
    if wanted is None:
        error, offsets = coordinator.fetch_offsets(group_id, None, require_stable)
        allowed = authz.authorized_names(ctx, Op.DESCRIBE, RT.TOPIC, (t for t, _ in offsets))
        return error, {tp: o for tp, o in offsets.items() if tp[0] in allowed}
    allowed = authz.authorized_names(ctx, Op.DESCRIBE, RT.TOPIC, (t for t, _ in wanted))
    permitted = [tp for tp in wanted if tp[0] in allowed]
    error, offsets = coordinator.fetch_offsets(group_id, permitted, require_stable)
    if error != ErrorCode.NONE:
        return error, {}
    none: PartitionOffset = (-1, -1, "", ErrorCode.NONE)
    return error, {tp: offsets.get(tp, none) if tp[0] in allowed else UNAUTHORIZED for tp in wanted}


@handles(ApiKey.OFFSET_FETCH, "0-9")
async def handle_offset_fetch(ctx: RequestContext, req: dict[str, Any]) -> dict[str, Any]:
    v = ctx.version
    require_stable = bool(req.get("require_stable")) if v >= 7 else False
    if v >= 8:
        groups = []
        for g in req["groups"]:
            error, offsets = _fetch_offsets(
                ctx, g["group_id"], _requested(g["topics"]), require_stable
            )
            groups.append(
                {
                    "group_id": g["group_id"],
                    "topics": _partition_entries(offsets) if error == ErrorCode.NONE else [],
                    "error_code": error,
                }
            )
        return {"throttle_time_ms": 0, "groups": groups}
    wanted = _requested(req["topics"])
    if v == 0:
        offsets = await _fetch_v0(ctx, req["group_id"], wanted or [])
        return {"topics": _partition_entries(offsets)}
    error, offsets = _fetch_offsets(ctx, req["group_id"], wanted, require_stable)
    if error != ErrorCode.NONE:
        if v < 2:
            # No top-level error before v2: every requested partition carries it.
            failed = dict.fromkeys(wanted or [], (-1, -1, "", error))
            return {"throttle_time_ms": 0, "topics": _partition_entries(failed)}
        return {"throttle_time_ms": 0, "topics": [], "error_code": error}
    return {"throttle_time_ms": 0, "topics": _partition_entries(offsets), "error_code": error}


async def _fetch_v0(
    ctx: RequestContext, group: str, wanted: list[TopicPartition]
) -> dict[TopicPartition, PartitionOffset]:
    broker = ctx.broker
    out: dict[TopicPartition, PartitionOffset] = {}
    group_ok = authz.authorized(ctx, Op.DESCRIBE, RT.GROUP, group)
    allowed = authz.authorized_names(ctx, Op.DESCRIBE, RT.TOPIC, (t for t, _ in wanted))
    for tp in wanted:
        if not group_ok:
            out[tp] = (-1, -1, "", ErrorCode.GROUP_AUTHORIZATION_FAILED)
            continue
        if tp[0] not in allowed:
            out[tp] = UNAUTHORIZED
            continue
        if broker.metadata_cache.get_partition(*tp) is None:
            out[tp] = (-1, -1, "", ErrorCode.UNKNOWN_TOPIC_OR_PARTITION)
            continue
        try:
            offset = await run_blocking(broker.executor, zk_offsets.fetch, broker.store, group, tp)
            out[tp] = (offset, -1, "", ErrorCode.NONE)
        except Exception as e:
            log.warning("v0 offset fetch of group %r for %s failed: %s", group, tp, e)
            out[tp] = (-1, -1, "", ErrorCode.UNKNOWN_SERVER_ERROR)
    return out


# --- OffsetDelete --------------------------------------------------------------------------


@handles(ApiKey.OFFSET_DELETE, "0")
async def handle_offset_delete(ctx: RequestContext, req: dict[str, Any]) -> dict[str, Any]:
    broker = ctx.broker
    if not authz.authorized(ctx, Op.DELETE, RT.GROUP, req["group_id"]):
        return {"error_code": ErrorCode.GROUP_AUTHORIZATION_FAILED, "throttle_time_ms": 0,
                "topics": []}  # fmt: skip
    readable = authz.authorized_names(ctx, Op.READ, RT.TOPIC, (t["name"] for t in req["topics"]))
    errors: dict[TopicPartition, ErrorCode] = {}
    known: list[TopicPartition] = []
    for topic in req["topics"]:
        for p in topic["partitions"]:
            tp = (topic["name"], p["partition_index"])
            error = partition_error(broker, tp, readable)
            if error is not None:
                errors[tp] = error
            else:
                known.append(tp)
    error, deleted = await broker.group_coordinator.delete_offsets(req["group_id"], known)
    errors.update(deleted)
    return {"error_code": error, "throttle_time_ms": 0, "topics": _topics_response(errors)}


# --- TxnOffsetCommit -------------------------------------------------------------------------


@handles(ApiKey.TXN_OFFSET_COMMIT, "0-4")
async def handle_txn_offset_commit(ctx: RequestContext, req: dict[str, Any]) -> dict[str, Any]:
    broker = ctx.broker
    v = ctx.version
    wanted = [(t["name"], p) for t in req["topics"] for p in t["partitions"]]
    errors: dict[TopicPartition, ErrorCode] = {}
    if not authz.authorized(ctx, Op.WRITE, RT.TRANSACTIONAL_ID, req["transactional_id"]):
        errors = {(t, p["partition_index"]): ErrorCode.TRANSACTIONAL_ID_AUTHORIZATION_FAILED
                  for t, p in wanted}  # fmt: skip
        return {"throttle_time_ms": 0, "topics": _topics_response(errors)}
    if not authz.authorized(ctx, Op.READ, RT.GROUP, req["group_id"]):
        errors = {(t, p["partition_index"]): ErrorCode.GROUP_AUTHORIZATION_FAILED
                  for t, p in wanted}  # fmt: skip
        return {"throttle_time_ms": 0, "topics": _topics_response(errors)}
    readable = authz.authorized_names(ctx, Op.READ, RT.TOPIC, (t["name"] for t in req["topics"]))
    now = _now_ms()
    offsets: dict[TopicPartition, OffsetAndMetadata] = {}
    for topic, p in wanted:
        tp = (topic, p["partition_index"])
        errors[tp] = ErrorCode.NONE  # keeps the request's order in the response
        error = partition_error(broker, tp, readable)
        if error is not None:
            errors[tp] = error
        else:
            offsets[tp] = OffsetAndMetadata(
                offset=p["committed_offset"],
                leader_epoch=p.get("committed_leader_epoch", -1) if v >= 2 else -1,
                metadata=p["committed_metadata"] or "",
                commit_timestamp=now,
            )
    if offsets:
        errors.update(
            await broker.group_coordinator.commit_transactional_offsets(
                req["group_id"],
                req["producer_id"],
                req["producer_epoch"],
                req.get("member_id", "") if v >= 3 else "",
                req.get("group_instance_id") if v >= 3 else None,
                req.get("generation_id", -1) if v >= 3 else -1,
                offsets,
            )
        )
    if v < 2:
        # Producers before 2.0 did not expect a loading error (KAFKA-7296).
        errors = {
            tp: ErrorCode.COORDINATOR_NOT_AVAILABLE
            if e == ErrorCode.COORDINATOR_LOAD_IN_PROGRESS
            else e
            for tp, e in errors.items()
        }
    return {"throttle_time_ms": 0, "topics": _topics_response(errors)}
