"""A simple asyncio consumer of assigned partitions (no consumer groups yet).

Positions are per partition: set by seek(), or resolved through ListOffsets by the reset policy
(earliest / latest) when a partition has none or its offset went out of range. poll() sends one
Fetch per leader in parallel. With `use_fetch_sessions` (Fetch v7+, KIP-227) each broker keeps
a session, and after the first full request only partitions whose fetch offset changed are sent.
"""

from __future__ import annotations

import asyncio
import logging
import time
import uuid
from collections import deque
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Unpack

from ..protocol.api_keys import ApiKey
from ..protocol.errors import ErrorCode, KafkaError
from ..records import batch as rb
from ..records.batch import RecordsError
from ..records.legacy import parse_message_set
from ..records.record import ControlType, control_type, decode_batch
from .cluster import (
    REQUEST_TIMEOUT,
    ZERO_UUID,
    ClusterUser,
    ConnectionOptions,
    TopicPartition,
    error_of,
    group_by_topic,
    partitions_by_topic,
)
from .offsets import ListedOffset, OffsetSpec, list_offsets

log = logging.getLogger(__name__)

__all__ = ["Consumer", "ConsumerRecord"]

INT32_MAX = (1 << 31) - 1
_RESETS = {"earliest": OffsetSpec.EARLIEST, "latest": OffsetSpec.LATEST}


@dataclass(frozen=True, slots=True)
class ConsumerRecord:
    topic: str
    partition: int
    offset: int
    timestamp: int
    timestamp_type: int  # 0 CreateTime, 1 LogAppendTime
    key: bytes | None
    value: bytes | None
    headers: list[tuple[str, bytes | None]] = field(default_factory=list)
    leader_epoch: int = -1


@dataclass(slots=True)
class _Session:
    """The client half of a fetch session with one broker."""

    session_id: int = 0
    epoch: int = 0  # 0: the next request is a full one that opens a session
    sent: dict[TopicPartition, int] = field(default_factory=dict)

    def reset(self) -> None:
        self.session_id = 0
        self.epoch = 0
        self.sent.clear()


class Consumer(ClusterUser):
    """`async with Consumer("host:9092") as c: c.assign([...]); records = await c.poll()`."""

    default_client_id = "odradek-consumer"

    def __init__(
        self,
        bootstrap_servers: str | Sequence[str] | None = None,
        *,
        auto_offset_reset: str = "latest",
        fetch_max_wait_ms: int = 500,
        fetch_min_bytes: int = 1,
        fetch_max_bytes: int = 52428800,
        max_partition_fetch_bytes: int = 1048576,
        isolation_level: str = "read_uncommitted",
        use_fetch_sessions: bool = True,
        retry_timeout: float = 30.0,
        check_crcs: bool = True,
        **connection: Unpack[ConnectionOptions],
    ) -> None:
        if auto_offset_reset not in ("earliest", "latest", "none"):
            raise ValueError("auto_offset_reset must be earliest, latest or none")
        if isolation_level not in ("read_uncommitted", "read_committed"):
            raise ValueError("isolation_level must be read_uncommitted or read_committed")
        # A fetch may wait fetch_max_wait_ms at the broker before its response is due.
        request_timeout = connection.get("request_timeout", REQUEST_TIMEOUT)
        connection["request_timeout"] = request_timeout + fetch_max_wait_ms / 1000.0
        super().__init__(bootstrap_servers, connection, retry_timeout=retry_timeout)
        self.auto_offset_reset = auto_offset_reset
        self.fetch_max_wait_ms = fetch_max_wait_ms
        self.fetch_min_bytes = fetch_min_bytes
        self.fetch_max_bytes = fetch_max_bytes
        self.max_partition_fetch_bytes = max_partition_fetch_bytes
        self.isolation_level = 1 if isolation_level == "read_committed" else 0
        self.use_fetch_sessions = use_fetch_sessions
        self.check_crcs = check_crcs
        self._assignment: list[TopicPartition] = []
        self._positions: dict[TopicPartition, int] = {}
        self._pending_reset: dict[TopicPartition, int] = {}  # tp -> OffsetSpec / timestamp
        self._highwater: dict[TopicPartition, int] = {}
        self._buffer: deque[ConsumerRecord] = deque()
        self._sessions: dict[int, _Session] = {}

    # -- assignment and positions ---------------------------------------------------------

    def assign(self, partitions: Iterable[TopicPartition | tuple[str, int]]) -> None:
        """Consume exactly these partitions (replaces the previous assignment)."""
        tps = [TopicPartition(*tp) for tp in partitions]
        self._assignment = list(dict.fromkeys(tps))
        keep = set(self._assignment)
        for d in (self._positions, self._pending_reset, self._highwater):
            for tp in [tp for tp in d if tp not in keep]:
                del d[tp]
        self._buffer = deque(r for r in self._buffer if (r.topic, r.partition) in keep)

    async def assign_topic(self, topic: str) -> list[TopicPartition]:
        """Assign every partition of `topic` (waits for the topic to exist)."""
        tm = await self.cluster.retry(lambda: self.cluster.topic(topic), what=f"topic {topic}")
        tps = [TopicPartition(topic, p) for p in sorted(tm.partitions)]
        self.assign([*self._assignment, *tps])
        return tps

    def assignment(self) -> list[TopicPartition]:
        return list(self._assignment)

    def _check_assigned(self, tp: TopicPartition) -> None:
        if tp not in self._assignment:
            raise ValueError(f"partition {tp} is not assigned")

    def seek(self, tp: TopicPartition | tuple[str, int], offset: int) -> None:
        """Fetch from `offset` next (-2 / -1 seek to the beginning / end)."""
        tp = TopicPartition(*tp)
        self._check_assigned(tp)
        self._drop_buffered(tp)
        if offset < 0:
            self._pending_reset[tp] = offset
            self._positions.pop(tp, None)
        else:
            self._positions[tp] = offset
            self._pending_reset.pop(tp, None)

    def seek_to_beginning(self, *tps: TopicPartition) -> None:
        for tp in tps or self._assignment:
            self.seek(tp, OffsetSpec.EARLIEST)

    def seek_to_end(self, *tps: TopicPartition) -> None:
        for tp in tps or self._assignment:
            self.seek(tp, OffsetSpec.LATEST)

    async def seek_to_timestamp(self, timestamp_ms: int, *tps: TopicPartition) -> None:
        """Position at the first record with a timestamp >= timestamp_ms (or the end)."""
        targets = list(tps or self._assignment)
        found = await self._list_offsets(dict.fromkeys(targets, timestamp_ms))
        ends = await self._list_offsets(
            {tp: OffsetSpec.LATEST for tp, o in found.items() if o.offset < 0}
        )
        for tp in targets:
            offset = found[tp].offset
            self.seek(tp, offset if offset >= 0 else ends[tp].offset)

    async def position(self, tp: TopicPartition | tuple[str, int]) -> int:
        """The offset of the next record poll() would return for `tp`."""
        tp = TopicPartition(*tp)
        self._check_assigned(tp)
        await self._resolve_positions()
        for r in self._buffer:
            if (r.topic, r.partition) == tp:
                return r.offset
        return self._positions[tp]

    def highwater(self, tp: TopicPartition | tuple[str, int]) -> int | None:
        """The partition's high watermark as of the last fetch."""
        return self._highwater.get(TopicPartition(*tp))

    async def beginning_offsets(self, tps: Iterable[TopicPartition]) -> dict[TopicPartition, int]:
        found = await self._list_offsets(dict.fromkeys(tps, OffsetSpec.EARLIEST))
        return {tp: o.offset for tp, o in found.items()}

    async def end_offsets(self, tps: Iterable[TopicPartition]) -> dict[TopicPartition, int]:
        found = await self._list_offsets(dict.fromkeys(tps, OffsetSpec.LATEST))
        return {tp: o.offset for tp, o in found.items()}

    async def _list_offsets(
        self, specs: dict[TopicPartition, int]
    ) -> dict[TopicPartition, ListedOffset]:
        if not specs:
            return {}
        return await list_offsets(self.cluster, specs, self.isolation_level, wait_for_topics=True)

    def _drop_buffered(self, tp: TopicPartition) -> None:
        if self._buffer:
            self._buffer = deque(r for r in self._buffer if (r.topic, r.partition) != tp)

    async def _resolve_positions(self) -> None:
        """Turn pending resets (and partitions without a position) into offsets."""
        specs: dict[TopicPartition, int] = {}
        for tp in self._assignment:
            if tp in self._pending_reset:
                specs[tp] = self._pending_reset[tp]
            elif tp not in self._positions:
                if self.auto_offset_reset == "none":
                    raise KafkaError(
                        ErrorCode.OFFSET_OUT_OF_RANGE,
                        f"no position for partition {tp} and auto_offset_reset is none",
                    )
                specs[tp] = _RESETS[self.auto_offset_reset]
        if not specs:
            return
        found = await self._list_offsets(specs)
        for tp, listed in found.items():
            # A seek() while ListOffsets was in flight wins over this answer.
            if tp not in self._assignment:
                continue
            if tp in self._pending_reset:
                if self._pending_reset[tp] != specs[tp]:
                    continue
                del self._pending_reset[tp]
            elif tp in self._positions:
                continue
            self._positions[tp] = listed.offset

    # -- fetching -------------------------------------------------------------------------

    async def poll(
        self, timeout: float = 1.0, max_records: int | None = None
    ) -> list[ConsumerRecord]:
        """Records fetched since the last call (up to `max_records`), waiting up to `timeout`
        seconds for some to arrive; [] when none did."""
        deadline = time.monotonic() + timeout
        while True:
            if self._buffer:
                return self._take(max_records)
            if not self._assignment:
                await asyncio.sleep(max(deadline - time.monotonic(), 0))
                return []
            await self._resolve_positions()
            remaining = deadline - time.monotonic()
            await self._fetch_once(max(0, min(self.fetch_max_wait_ms, int(remaining * 1000))))
            if self._buffer:
                return self._take(max_records)
            if time.monotonic() >= deadline:
                return []

    def _take(self, max_records: int | None) -> list[ConsumerRecord]:
        n = len(self._buffer) if max_records is None else min(max_records, len(self._buffer))
        return [self._buffer.popleft() for _ in range(n)]

    async def _fetch_once(self, max_wait_ms: int) -> None:
        by_node: dict[int, list[TopicPartition]] = {}
        for tp in self._assignment:
            if tp not in self._positions:
                continue
            try:
                leader = await self.cluster.leader_for(tp.topic, tp.partition)
            except KafkaError as e:
                if not e.retriable:
                    raise
                self.cluster.mark_stale()
                continue
            by_node.setdefault(leader, []).append(tp)
        if not by_node:
            await asyncio.sleep(min(self.cluster.retry_backoff * 4, max_wait_ms / 1000))
            return
        results = await asyncio.gather(
            *(self._fetch_node(n, tps, max_wait_ms) for n, tps in by_node.items()),
            return_exceptions=True,
        )
        for r in results:
            if isinstance(r, BaseException):
                if isinstance(r, KafkaError) and r.retriable:
                    log.debug("fetch failed: %s", r)
                    self.cluster.mark_stale()
                    continue
                raise r

    async def _fetch_node(self, node_id: int, tps: list[TopicPartition], max_wait_ms: int) -> None:
        session = self._sessions.setdefault(node_id, _Session())
        try:
            conn = await self.cluster.connection(node_id)
        except KafkaError:
            session.reset()
            raise
        max_version = None
        topic_ids = {}
        for tp in tps:
            tm = self.cluster.topics.get(tp.topic)
            topic_ids[tp.topic] = tm.topic_id if tm is not None else ZERO_UUID
        if any(tid == ZERO_UUID for tid in topic_ids.values()):
            max_version = 12  # v13+ name topics only by id
        version = conn.version_for(ApiKey.FETCH, min_version=4, max_version=max_version)
        names_by_id = {tid: name for name, tid in topic_ids.items()}
        requested = {tp: self._positions[tp] for tp in tps}
        use_session = self.use_fetch_sessions and version >= 7
        if use_session and session.session_id != 0 and session.epoch > 0:
            send = {tp: o for tp, o in requested.items() if session.sent.get(tp) != o}
            forgotten = [tp for tp in session.sent if tp not in requested]
            session_id, epoch = session.session_id, session.epoch
        else:
            session.reset()
            send, forgotten = requested, []
            session_id, epoch = 0, 0 if use_session else -1
        fetching = group_by_topic(
            (tp, {"partition": tp.partition, "current_leader_epoch": -1, "fetch_offset": off,
                  "log_start_offset": -1, "partition_max_bytes": self.max_partition_fetch_bytes})
            for tp, off in send.items()
        )  # fmt: skip
        body = {
            "replica_id": -1,
            "max_wait_ms": max_wait_ms,
            "min_bytes": self.fetch_min_bytes,
            "max_bytes": self.fetch_max_bytes,
            "isolation_level": self.isolation_level,
            "session_id": session_id,
            "session_epoch": epoch,
            "topics": _fetch_topics(fetching, topic_ids),
            "forgotten_topics_data": _fetch_topics(partitions_by_topic(forgotten), topic_ids),
            "rack_id": "",
        }
        try:
            resp = await conn.request(ApiKey.FETCH, body, version)
        except KafkaError:
            session.reset()
            raise
        error = error_of(resp.get("error_code", 0), None, "Fetch")
        if error is not None:
            session.reset()
            if error.code in (
                ErrorCode.FETCH_SESSION_ID_NOT_FOUND,
                ErrorCode.INVALID_FETCH_SESSION_EPOCH,
            ):
                return
            raise error
        if use_session:
            if session_id == 0:
                session.session_id = resp.get("session_id", 0)
                session.sent = dict(requested) if session.session_id else {}
                session.epoch = 1
            else:
                session.sent.update(send)
                for tp in forgotten:
                    session.sent.pop(tp, None)
                session.epoch = session.epoch + 1 if session.epoch < INT32_MAX else 1
        for t in resp["responses"]:
            name = t["topic"] if version <= 12 else names_by_id.get(t["topic_id"])
            if name is None:
                continue
            for p in t["partitions"]:
                tp = TopicPartition(name, p["partition_index"])
                fetched_at = requested.get(tp)
                if fetched_at is None or self._positions.get(tp) != fetched_at:
                    continue  # not asked for, or seeked since: stale data
                self._handle_partition(tp, fetched_at, p)

    def _handle_partition(self, tp: TopicPartition, fetched_at: int, p: dict) -> None:
        code = p["error_code"]
        if code == ErrorCode.OFFSET_OUT_OF_RANGE:
            if self.auto_offset_reset == "none":
                raise KafkaError(code, f"offset {fetched_at} out of range for {tp}")
            log.info("offset %d out of range for %s: resetting", fetched_at, tp)
            self._positions.pop(tp, None)
            self._pending_reset[tp] = _RESETS[self.auto_offset_reset]
            return
        error = error_of(code, None, f"partition {tp}")
        if error is not None:
            if error.retriable:
                self.cluster.mark_stale()
                return
            raise error
        self._highwater[tp] = p["high_watermark"]
        records = p["records"]
        if not records:
            return
        aborted = p.get("aborted_transactions") if self.isolation_level else None
        try:
            out, next_offset = decode_fetched(
                tp, records, fetched_at, aborted, check_crcs=self.check_crcs
            )
        except RecordsError as e:
            raise KafkaError(
                ErrorCode.CORRUPT_MESSAGE, f"partition {tp} at {fetched_at}: {e}"
            ) from None
        self._buffer.extend(out)
        self._positions[tp] = next_offset


def decode_fetched(
    tp: TopicPartition,
    data: bytes | memoryview,
    fetch_offset: int,
    aborted: list[dict] | None = None,
    *,
    check_crcs: bool = True,
) -> tuple[list[ConsumerRecord], int]:
    """Records at or after `fetch_offset` in fetched log bytes, and the next fetch offset.

    A cut-off last batch is ignored; control batches and (with `aborted`, read_committed) the
    batches of aborted transactions are skipped but still advance the position.
    """
    view = memoryview(data)
    out: list[ConsumerRecord] = []
    position = fetch_offset
    pending_aborts = sorted(aborted or [], key=lambda a: a["first_offset"])
    aborting: set[int] = set()
    pos = 0
    while pos + rb.LOG_OVERHEAD <= len(view):
        size = rb.LOG_OVERHEAD + int.from_bytes(view[pos + 8 : pos + 12], "big", signed=True)
        if size <= rb.LOG_OVERHEAD or pos + size > len(view) or pos + rb.MAGIC_OFFSET >= len(view):
            break
        magic = view[pos + rb.MAGIC_OFFSET]
        entry = view[pos : pos + size]
        pos += size
        if magic < 2:
            for m in parse_message_set(entry, check_crc=check_crcs):
                if m.offset >= position:
                    ts_type = 1 if m.log_append_time else 0
                    out.append(
                        ConsumerRecord(
                            tp.topic, tp.partition, m.offset, m.timestamp, ts_type, m.key, m.value
                        )
                    )
                    position = m.offset + 1
            continue
        header, records = decode_batch(entry, check_crc=check_crcs)
        while pending_aborts and pending_aborts[0]["first_offset"] <= header.last_offset:
            aborting.add(pending_aborts.pop(0)["producer_id"])
        if header.is_control:
            for r in records:
                if control_type(r) == ControlType.ABORT:
                    aborting.discard(header.producer_id)
        elif not (header.is_transactional and header.producer_id in aborting):
            ts_type = 1 if header.log_append_time else 0
            for r in records:
                if r.offset >= position:
                    out.append(
                        ConsumerRecord(
                            tp.topic,
                            tp.partition,
                            r.offset,
                            r.timestamp,
                            ts_type,
                            r.key,
                            r.value,
                            r.headers,
                            header.partition_leader_epoch,
                        )
                    )
        position = max(position, header.last_offset + 1)
    return out, position


def _fetch_topics(by_topic: Mapping[str, list], topic_ids: Mapping[str, uuid.UUID]) -> list[dict]:
    """Fetch's topic entries (fetched or forgotten), named both ways: by name and by id."""
    return [
        {"topic": t, "topic_id": topic_ids.get(t, ZERO_UUID), "partitions": ps}
        for t, ps in by_topic.items()
    ]
