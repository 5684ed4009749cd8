"""Fetch (key 1): read log bytes for consumers, with sessions, long polls and byte limits.

The log bytes go out as file regions (sendfile on plaintext) unless an old client needs them
down-converted to message sets (Fetch v0-3).
"""

from __future__ import annotations

import logging
import time
from dataclasses import dataclass
from typing import Any

from ...protocol.api_keys import ApiKey
from ...protocol.errors import ErrorCode, KafkaError
from ...records.batch import RecordsError
from ...records.legacy import downconvert
from ...security.acl import AclOperation as Op
from ...security.acl import AclResourceType as RT
from .. import authz
from ..fetch_session import FINAL_EPOCH, INITIAL_EPOCH, FetchSession, SessionPartition
from ..services import led_partition
from ..throttling import records_size
from .registry import RequestContext, handles

logger = logging.getLogger(__name__)

INT32_MAX = 0x7FFFFFFF
READ_COMMITTED = 1


@dataclass
class _Wanted:
    topic: str
    topic_id: Any
    index: int
    fetch_offset: int
    max_bytes: int
    error: ErrorCode = ErrorCode.NONE
    current_leader_epoch: int = -1
    last_fetched_epoch: int = -1
    log_start_offset: int = -1


def _error_body(code: ErrorCode) -> dict[str, Any]:
    return {"throttle_time_ms": 0, "error_code": code, "session_id": 0, "responses": []}


@handles(ApiKey.FETCH, "0-17")
async def handle_fetch(ctx: RequestContext, req: dict[str, Any]) -> dict[str, Any]:
    v = ctx.version
    broker = ctx.broker
    cache = broker.metadata_cache

    def wanted_from(topic: dict[str, Any], part: dict[str, Any]) -> _Wanted:
        w = _wanted_from(topic, part)
        w.current_leader_epoch = part.get("current_leader_epoch", -1)
        w.last_fetched_epoch = part.get("last_fetched_epoch", -1)
        w.log_start_offset = part.get("log_start_offset", -1)
        return w

    def _wanted_from(topic: dict[str, Any], part: dict[str, Any]) -> _Wanted:
        if v >= 13:
            name = cache.topic_name(topic["topic_id"])
            w = _Wanted(
                name or "",
                topic["topic_id"],
                part["partition"],
                part["fetch_offset"],
                part["partition_max_bytes"],
            )
            if name is None:
                w.error = ErrorCode.UNKNOWN_TOPIC_ID
            return w
        name = topic["topic"]
        return _Wanted(
            name,
            cache.topic_id(name),
            part["partition"],
            part["fetch_offset"],
            part["partition_max_bytes"],
        )

    requested = [wanted_from(t, p) for t in req["topics"] for p in t["partitions"]]
    # A follower's fetch (a broker id as replica id) reads up to the log end (reference §3.1).
    if v >= 15:
        replica_id = (req.get("replica_state") or {}).get("replica_id", -1)
    else:
        replica_id = req.get("replica_id", -1)

    session: FetchSession | None = None
    incremental = False
    session_id = req.get("session_id", 0)
    epoch = req.get("session_epoch", FINAL_EPOCH)
    sessions = broker.fetch_sessions
    if v >= 7:
        if epoch == FINAL_EPOCH:
            if session_id:
                sessions.remove(session_id)
        elif session_id == 0:
            if epoch != INITIAL_EPOCH:
                return _error_body(ErrorCode.INVALID_FETCH_SESSION_EPOCH)
            session = sessions.new_session()
        else:
            try:
                session = sessions.lookup(session_id, epoch)
            except KafkaError as e:
                return _error_body(e.code)
            incremental = True

    if session is not None:
        if incremental:
            for t in req.get("forgotten_topics_data", []):
                name = cache.topic_name(t["topic_id"]) if v >= 13 else t["topic"]
                for index in t["partitions"]:
                    session.partitions.pop((name, index), None)
        else:
            session.partitions.clear()
        for w in requested:
            if not w.error:
                session.partitions[(w.topic, w.index)] = SessionPartition(
                    w.fetch_offset, w.max_bytes
                )
        if incremental:
            errored = [w for w in requested if w.error]
            requested = errored + [
                _Wanted(t, cache.topic_id(t), i, sp.fetch_offset, sp.max_bytes)
                for (t, i), sp in session.partitions.items()
            ]
        session.epoch += 1

    _authorize(ctx, requested, replica_id)
    max_bytes = req.get("max_bytes", INT32_MAX) if v >= 3 else INT32_MAX
    read_committed = req.get("isolation_level", 0) == READ_COMMITTED
    min_bytes = req["min_bytes"]
    deadline = time.monotonic() + max(req["max_wait_ms"], 0) / 1000

    # Long poll: re-read after each wake-up until min_bytes are there or max_wait_ms is over.
    while True:
        results, total, any_error, partitions = _read_all(
            ctx, requested, max_bytes, read_committed, replica_id
        )
        remaining = deadline - time.monotonic()
        if total >= min_bytes or any_error or remaining <= 0 or not requested:
            break
        await broker.replica_manager.wait_for_data(partitions, remaining, replica_id >= 0)

    if session is not None and incremental:
        results = [r for r in results if _session_changed(session, r)]
    elif session is not None:
        for r in results:
            _session_changed(session, r)

    by_topic: dict[str, dict[str, Any]] = {}
    fetched: dict[str, int] = {}
    metered = replica_id < 0 and broker.metrics.enabled  # replication is not counted
    for w, part in results:
        if metered and part["records"] is not None:
            fetched[w.topic] = fetched.get(w.topic, 0) + records_size(part["records"])
        topic = by_topic.get(w.topic + str(w.topic_id))
        if topic is None:
            topic = {"topic": w.topic, "topic_id": w.topic_id, "partitions": []}
            by_topic[w.topic + str(w.topic_id)] = topic
        topic["partitions"].append(part)
    if fetched:
        broker.metrics.record_fetch(fetched)
    return {
        "throttle_time_ms": 0,
        "error_code": ErrorCode.NONE,
        "session_id": session.id if session is not None else 0,
        "responses": list(by_topic.values()),
    }


def _authorize(ctx: RequestContext, requested: list[_Wanted], replica_id: int) -> None:
    """Followers need CLUSTER_ACTION, consumers READ on each topic; as in Kafka, session
    partitions stay in the session and are answered TOPIC_AUTHORIZATION_FAILED each time."""
    if replica_id >= 0:
        allowed = authz.cluster(ctx, Op.CLUSTER_ACTION)
        readable: set[str] | None = None
    else:
        allowed = True
        readable = authz.authorized_names(
            ctx, Op.READ, RT.TOPIC, (w.topic for w in requested if not w.error)
        )
    for w in requested:
        if not w.error and (not allowed or readable is not None and w.topic not in readable):
            w.error = ErrorCode.TOPIC_AUTHORIZATION_FAILED


def _session_changed(session: FetchSession, result: tuple[_Wanted, dict[str, Any]]) -> bool:
    w, part = result
    sp = session.partitions.get((w.topic, w.index))
    if sp is None:
        return True
    changed = (
        part["error_code"] != ErrorCode.NONE
        or part["records"] is not None
        and records_size(part["records"]) > 0
        or sp.high_watermark != part["high_watermark"]
        or sp.log_start_offset != part["log_start_offset"]
        or sp.last_stable_offset != part["last_stable_offset"]
    )
    sp.high_watermark = part["high_watermark"]
    sp.log_start_offset = part["log_start_offset"]
    sp.last_stable_offset = part["last_stable_offset"]
    return changed


def _follower_partition(ctx: RequestContext, w: _Wanted, replica_id: int) -> Any:
    """The led partition a follower fetches from, after the leader epoch fencing checks."""
    partition = led_partition(ctx.broker, w.topic, w.index, w.current_leader_epoch)
    if replica_id not in partition.state.replicas:
        raise KafkaError(ErrorCode.NOT_LEADER_OR_FOLLOWER)
    return partition


def _diverging(partition: Any, w: _Wanted) -> tuple[int, int] | None:
    """(epoch, end offset) when the follower's last fetched epoch ends before its fetch offset
    on the leader (fetch-based truncation, reference §3.5)."""
    if w.last_fetched_epoch < 0:
        return None
    log = partition.log
    epoch, end = log.epoch_cache.end_offset_for(w.last_fetched_epoch, log.log_end_offset)
    if epoch < 0 or end < 0:
        raise KafkaError(ErrorCode.OFFSET_OUT_OF_RANGE)
    if epoch < w.last_fetched_epoch or end < w.fetch_offset:
        return epoch, end
    return None


def _read_all(
    ctx: RequestContext,
    requested: list[_Wanted],
    max_bytes: int,
    read_committed: bool,
    replica_id: int = -1,
) -> tuple[list[tuple[_Wanted, dict[str, Any]]], int, bool, list[Any]]:
    v = ctx.version
    rm = ctx.broker.replica_manager
    # Fetch v0-2 has a hard byte limit; later versions always return the first batch whole.
    min_one = v >= 3
    remaining = max_bytes
    total = 0
    any_error = False
    results = []
    partitions = []
    for w in requested:
        part: dict[str, Any] = {
            "partition_index": w.index,
            "error_code": w.error,
            "high_watermark": -1,
            "last_stable_offset": -1,
            "log_start_offset": -1,
            "aborted_transactions": [] if read_committed else None,
            "records": b"",
        }
        results.append((w, part))
        if w.error:
            any_error = True
            continue
        try:
            if replica_id >= 0:
                partition = _follower_partition(ctx, w, replica_id)
            elif ctx.broker.zk_fenced:
                # A leader cut off from ZooKeeper may already be replaced: consumers go to the
                # new one (a zombie serving too made librdkafka deliver a record twice).
                raise KafkaError(ErrorCode.NOT_LEADER_OR_FOLLOWER)
            else:
                partition = led_partition(ctx.broker, w.topic, w.index, w.current_leader_epoch)
        except KafkaError as e:
            part["error_code"] = e.code
            any_error = True
            continue
        partitions.append(partition)
        log = partition.log
        hw = partition.high_watermark
        part["high_watermark"] = hw
        part["last_stable_offset"] = partition.last_stable_offset
        part["log_start_offset"] = log.log_start_offset
        if replica_id >= 0:
            try:
                diverging = _diverging(partition, w)
            except KafkaError as e:
                part["error_code"] = e.code
                any_error = True
                continue
            if diverging is not None:
                part["diverging_epoch"] = {"epoch": diverging[0], "end_offset": diverging[1]}
                any_error = True  # answer at once: the follower must truncate first
                continue
            if w.fetch_offset > log.log_end_offset or w.fetch_offset < log.log_start_offset:
                part["error_code"] = ErrorCode.OFFSET_OUT_OF_RANGE
                any_error = True
                continue
            rm.record_follower_fetch(partition, replica_id, w.fetch_offset, w.log_start_offset)
            part["high_watermark"] = partition.high_watermark
            part["last_stable_offset"] = partition.last_stable_offset
        limit = min(w.max_bytes, remaining)
        if limit <= 0 and not min_one:
            continue
        try:
            if read_committed and replica_id < 0:
                # Up to the LSO, with the aborted transactions the consumer must skip.
                region, aborted = log.read_committed(
                    w.fetch_offset,
                    max(limit, 0),
                    max_offset=part["last_stable_offset"],
                    min_one_batch=min_one,
                )
                part["aborted_transactions"] = [
                    {"producer_id": a.producer_id, "first_offset": a.first_offset} for a in aborted
                ]
            else:
                region = log.read(
                    w.fetch_offset,
                    max(limit, 0),
                    max_offset=None if replica_id >= 0 else hw,
                    min_one_batch=min_one,
                )
        except KafkaError as e:
            part["error_code"] = e.code
            any_error = True
            continue
        if region is None or region.size == 0:
            continue
        if v <= 3:
            if replica_id < 0 and not log.config.message_downconversion_enable:
                # Kafka's answer to a consumer too old for the stored format when the topic
                # forbids converting it.
                ctx.warn_once(
                    logger,
                    f"Fetch v{v} of {w.topic} from client {ctx.header.client_id!r} needs records "
                    "in an older format; message.downconversion.enable=false: answered "
                    "UNSUPPORTED_VERSION",
                )
                part["error_code"] = ErrorCode.UNSUPPORTED_VERSION
                any_error = True
                continue
            try:
                data = downconvert(region.read(), 0 if v <= 1 else 1, first_offset=w.fetch_offset)
            except RecordsError as e:
                part["error_code"] = e.error_code
                any_error = True
                continue
            if not min_one and len(data) > limit:
                continue
            part["records"] = data
            size = len(data)
        else:
            part["records"] = region
            size = region.size
        total += size
        remaining -= size
        min_one = False
    return results, total, any_error, partitions
