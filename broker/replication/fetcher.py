"""Follower fetchers: one task per source broker copying its led partitions into local logs.

Each partition starts by truncating its log where it diverges from the leader's
(OffsetForLeaderEpoch, repeated while the follower lacks the leader's epoch, KIP-101/279);
then Fetch v12 with the follower's broker id as replica id and the last fetched epoch, whose
diverging-epoch answers truncate again (reference §3.1, §3.5). Fetched batches are appended
as they came (offsets and epochs kept), producer state is replayed from their headers, and
the follower's high watermark follows the leader's.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import time
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from ..client.connection import BrokerConnection
from ..client.security import ClientSecurity
from ..protocol.api_keys import ApiKey
from ..protocol.errors import ErrorCode, KafkaError
from ..records import batch as rb
from .truncation import UNDEFINED, truncation_for

if TYPE_CHECKING:
    from .partition import Partition

log = logging.getLogger(__name__)

# Fetch v12: topic names, LastFetchedEpoch and DivergingEpoch; no topic ids needed.
FETCH_VERSION = 12
MAX_TRUNCATION_ROUNDS = 16


@dataclass
class FetcherSettings:
    broker_id: int
    fetch_max_bytes: int = 1048576
    fetch_min_bytes: int = 1
    fetch_wait_max_ms: int = 500
    fetch_response_max_bytes: int = 10485760
    fetch_backoff_ms: int = 1000
    socket_timeout_ms: int = 30000
    security: ClientSecurity | None = None  # how to log in to the leader's listener


@dataclass
class FetchPartition:
    partition: Partition
    leader_epoch: int
    truncating: bool = True
    rounds: int = 0
    delay_until: float = 0.0


def whole_batches(records: Any, log_end_offset: int) -> memoryview:
    """The complete v2 batches of a fetched region that lie at or after `log_end_offset` (a
    fetch may end inside a batch cut by the byte limit)."""
    view = memoryview(records) if records is not None else memoryview(b"")
    start = end = 0
    pos = 0
    n = len(view)
    while pos + rb.HEADER_SIZE <= n:
        header = rb.parse_header(view, pos)
        if pos + header.size > n:
            break
        if header.last_offset < log_end_offset:
            start = pos + header.size
        pos += header.size
        end = pos
    return view[start:end] if end > start else memoryview(b"")


def apply_truncation(partition: Partition, offset: int) -> None:
    if partition.log.truncate_to(offset):
        log.info("%s-%d: truncated to offset %d", partition.topic, partition.index, offset)
        partition.producer_state.reload()


class ReplicaFetcher:
    """Fetches every partition this broker follows from one leader broker."""

    def __init__(self, source_id: int, host: str, port: int, settings: FetcherSettings) -> None:
        self.source_id = source_id
        self.host = host
        self.port = port
        self.settings = settings
        self.partitions: dict[tuple[str, int], FetchPartition] = {}
        self._conn: BrokerConnection | None = None
        self._task: asyncio.Task[None] | None = None
        # Checked by the loop: Python 3.11's asyncio.wait_for (its back-off wait) drops a
        # cancellation that arrives together with the result, so cancel() alone may not stop it.
        self._stopping = False
        self._wake = asyncio.Event()

    # --- membership -------------------------------------------------------------------------

    def add(self, partition: Partition, leader_epoch: int) -> None:
        self.partitions[(partition.topic, partition.index)] = FetchPartition(
            partition, leader_epoch
        )
        self._wake.set()
        if self._task is None:
            self._stopping = False
            self._task = asyncio.get_running_loop().create_task(
                self._run(), name=f"replica-fetcher-{self.source_id}"
            )

    def remove(self, tp: tuple[str, int]) -> None:
        self.partitions.pop(tp, None)

    def _current(self, fp: FetchPartition) -> bool:
        """The partition is still followed from here, under the same leader epoch."""
        p = fp.partition
        return (
            self.partitions.get((p.topic, p.index)) is fp
            and not p.is_leader
            and p.state.leader_epoch == fp.leader_epoch
        )

    async def stop(self) -> None:
        if self._task is not None:
            self._stopping = True
            self._task.cancel()
            with contextlib.suppress(asyncio.CancelledError, Exception):
                await self._task
            self._task = None
        await self._close()

    async def _close(self) -> None:
        conn, self._conn = self._conn, None
        if conn is not None:
            with contextlib.suppress(Exception):
                await conn.close()

    # --- the loop ---------------------------------------------------------------------------

    async def _run(self) -> None:
        backoff = self.settings.fetch_backoff_ms / 1000
        while not self._stopping:
            try:
                if self._conn is None or not self._conn.connected:
                    await self._close()
                    self._conn = await BrokerConnection.open(
                        self.host,
                        self.port,
                        client_id=f"broker-{self.settings.broker_id}-fetcher-{self.source_id}",
                        request_timeout=self.settings.socket_timeout_ms / 1000,
                        node_id=self.source_id,
                        security=self.settings.security,
                    )
                if any(fp.truncating for fp in self.partitions.values()):
                    await self._truncate()
                did_fetch = await self._fetch()
                if not did_fetch:
                    self._wake.clear()
                    with contextlib.suppress(TimeoutError):
                        await asyncio.wait_for(self._wake.wait(), min(backoff, 0.2))
            except asyncio.CancelledError:
                raise
            except (KafkaError, OSError) as e:
                log.info("fetcher from broker %d: %s; retrying", self.source_id, e)
                await self._close()
                await asyncio.sleep(backoff)
            except Exception:
                log.exception("fetcher from broker %d failed; retrying", self.source_id)
                await self._close()
                await asyncio.sleep(backoff)

    def _ready(self, fp: FetchPartition, now: float) -> bool:
        return fp.delay_until <= now

    def _delay(self, fp: FetchPartition) -> None:
        fp.delay_until = time.monotonic() + self.settings.fetch_backoff_ms / 1000

    async def _truncate(self) -> None:
        assert self._conn is not None
        now = time.monotonic()
        wanted = [fp for fp in self.partitions.values() if fp.truncating and self._ready(fp, now)]
        if not wanted:
            return
        topics: dict[str, list[dict[str, Any]]] = {}
        for fp in wanted:
            p = fp.partition
            latest = p.log.epoch_cache.latest_epoch
            if latest is None:
                # No epochs (an empty log): nothing can diverge below the high watermark.
                apply_truncation(p, p.log.high_watermark)
                fp.truncating = False
                continue
            topics.setdefault(p.topic, []).append(
                {
                    "partition": p.index,
                    "current_leader_epoch": fp.leader_epoch,
                    "leader_epoch": latest,
                }
            )
        if not topics:
            return
        body = {
            "replica_id": self.settings.broker_id,
            "topics": [{"topic": t, "partitions": ps} for t, ps in topics.items()],
        }
        resp = await self._conn.request(ApiKey.OFFSET_FOR_LEADER_EPOCH, body, max_version=4)
        for topic in resp["topics"]:
            for part in topic["partitions"]:
                fp = self.partitions.get((topic["topic"], part["partition"]))
                if fp is None or not fp.truncating or not self._current(fp):
                    continue
                if part["error_code"] != ErrorCode.NONE:
                    self._delay(fp)
                    continue
                self._apply_epoch_answer(
                    fp, part.get("leader_epoch", UNDEFINED), part["end_offset"]
                )

    def _apply_epoch_answer(self, fp: FetchPartition, epoch: int, end_offset: int) -> None:
        p = fp.partition
        lg = p.log
        t = truncation_for(epoch, end_offset, lg.epoch_cache, lg.log_end_offset, lg.high_watermark)
        apply_truncation(p, t.offset)
        fp.rounds += 1
        fp.truncating = not t.done and fp.rounds < MAX_TRUNCATION_ROUNDS
        if not fp.truncating:
            fp.rounds = 0

    async def _fetch(self) -> bool:
        assert self._conn is not None
        s = self.settings
        now = time.monotonic()
        wanted = [
            fp
            for fp in self.partitions.values()
            if not fp.truncating and self._ready(fp, now) and self._current(fp)
        ]
        if not wanted:
            return False
        topics: dict[str, list[dict[str, Any]]] = {}
        for fp in wanted:
            p = fp.partition
            latest = p.log.epoch_cache.latest_epoch
            topics.setdefault(p.topic, []).append(
                {
                    "partition": p.index,
                    "current_leader_epoch": fp.leader_epoch,
                    "fetch_offset": p.log.log_end_offset,
                    "last_fetched_epoch": latest if latest is not None else -1,
                    "log_start_offset": p.log.log_start_offset,
                    "partition_max_bytes": s.fetch_max_bytes,
                }
            )
        body = {
            "replica_id": s.broker_id,
            "max_wait_ms": s.fetch_wait_max_ms,
            "min_bytes": s.fetch_min_bytes,
            "max_bytes": s.fetch_response_max_bytes,
            "isolation_level": 0,
            "session_id": 0,
            "session_epoch": -1,
            "topics": [{"topic": t, "partitions": ps} for t, ps in topics.items()],
            "forgotten_topics_data": [],
            "rack_id": "",
        }
        resp = await self._conn.request(
            ApiKey.FETCH,
            body,
            max_version=FETCH_VERSION,
            timeout=(s.socket_timeout_ms + s.fetch_wait_max_ms) / 1000,
        )
        if resp.get("error_code", 0):
            raise KafkaError(resp["error_code"], "follower fetch refused")
        for topic in resp["responses"]:
            for part in topic["partitions"]:
                fp = self.partitions.get((topic["topic"], part["partition_index"]))
                if fp is None or fp.truncating or not self._current(fp):
                    continue
                self._process(fp, part)
        return True

    def _process(self, fp: FetchPartition, part: dict[str, Any]) -> None:
        p = fp.partition
        lg = p.log
        error = part["error_code"]
        if error == ErrorCode.OFFSET_OUT_OF_RANGE:
            leader_start = part.get("log_start_offset", -1)
            if leader_start > lg.log_end_offset:
                lg.truncate_fully_and_start_at(leader_start)
                p.producer_state.reload()
            else:
                fp.truncating = True
                self._delay(fp)
            return
        if error != ErrorCode.NONE:
            self._delay(fp)
            return
        diverging = part.get("diverging_epoch") or {}
        if (
            diverging.get("epoch", UNDEFINED) != UNDEFINED
            or diverging.get("end_offset", UNDEFINED) != UNDEFINED
        ):
            self._apply_epoch_answer(fp, diverging["epoch"], diverging["end_offset"])
            return
        data = whole_batches(part.get("records"), lg.log_end_offset)
        if len(data):
            buf = bytearray(data)
            for _ in rb.iter_batches(buf, check_crc=True):
                pass
            lg.append(buf, assign_offsets=False)
            p.producer_state.replay_buffer(buf)
        p.update_follower_hw(part["high_watermark"])
        leader_start = part.get("log_start_offset", -1)
        if lg.log_start_offset < leader_start <= lg.high_watermark:
            lg.delete_records_before(leader_start)
