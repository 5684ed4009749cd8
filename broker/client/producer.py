"""A simple asyncio producer: per-partition batches, linger, compression, acks, retries.

Records accumulate in one open batch per partition; a batch is sent when it is full, when it
has waited `linger_ms`, or on flush(). One Produce request per leader carries every ready batch
for it. At most one batch per partition is in flight, so a retried batch never overtakes the
next one and records keep their order. Not idempotent, not transactional (yet).
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import random
import time
from collections import deque
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Self, Unpack

from ..protocol.api_keys import ApiKey
from ..protocol.errors import ErrorCode, KafkaError
from ..records.compression import CONFIG_CODECS, Codec
from ..records.record import Record, build_batch
from .cluster import (
    REQUEST_TIMEOUT,
    ClusterUser,
    ConnectionOptions,
    TopicPartition,
    error_of,
    group_by_topic,
)

log = logging.getLogger(__name__)

__all__ = ["Producer", "RecordMetadata", "murmur2", "default_partition"]

Headers = Mapping[str, bytes | str | None] | Sequence[tuple[str, bytes | str | None]]

_RECORD_OVERHEAD = 24  # rough per-record framing cost, for the batch size estimate
_BATCH_OVERHEAD = 61


@dataclass(frozen=True, slots=True)
class RecordMetadata:
    """Where a record landed. offset is -1 with acks=0 (the broker does not answer)."""

    topic: str
    partition: int
    offset: int
    timestamp: int
    log_start_offset: int = -1


def murmur2(data: bytes) -> int:
    """Kafka's 32-bit murmur2 (as its default partitioner computes it), as a signed int."""
    m = 0x5BD1E995
    mask = 0xFFFFFFFF
    length = len(data)
    h = (0x9747B28C ^ length) & mask
    whole = length & ~3
    for i in range(0, whole, 4):
        k = data[i] | (data[i + 1] << 8) | (data[i + 2] << 16) | (data[i + 3] << 24)
        k = (k * m) & mask
        k ^= k >> 24
        k = (k * m) & mask
        h = (h * m) & mask
        h ^= k
    rest = length & 3
    if rest == 3:
        h ^= data[whole + 2] << 16
    if rest >= 2:
        h ^= data[whole + 1] << 8
    if rest >= 1:
        h ^= data[whole]
        h = (h * m) & mask
    h ^= h >> 13
    h = (h * m) & mask
    h ^= h >> 15
    return h - (1 << 32) if h & 0x80000000 else h


def default_partition(key: bytes, num_partitions: int) -> int:
    """The partition Kafka's clients pick for a keyed record."""
    return (murmur2(key) & 0x7FFFFFFF) % num_partitions


def parse_acks(acks: int | str) -> int:
    if isinstance(acks, str):
        text = acks.strip().lower()
        if text == "all":
            return -1
        acks = int(text)
    if acks not in (-1, 0, 1):
        raise ValueError(f"acks must be 0, 1 or -1/all, not {acks!r}")
    return acks


def parse_compression(compression: str | int | None) -> Codec:
    if compression is None:
        return Codec.NONE
    if isinstance(compression, int):
        return Codec(compression)
    try:
        return CONFIG_CODECS[compression.strip().lower()]
    except KeyError:
        names = ", ".join(n for n in CONFIG_CODECS if n != "uncompressed")
        raise ValueError(f"unknown compression {compression!r} (one of {names})") from None


def _as_bytes(value: bytes | bytearray | memoryview | str | None) -> bytes | None:
    if value is None or isinstance(value, bytes):
        return value
    if isinstance(value, str):
        return value.encode()
    return bytes(value)


@dataclass(slots=True)
class _Batch:
    tp: TopicPartition
    created: float
    records: list[Record] = field(default_factory=list)
    futures: list[asyncio.Future[RecordMetadata]] = field(default_factory=list)
    size: int = _BATCH_OVERHEAD
    closed: bool = False  # no more appends (full, or being sent)
    forced: bool = False  # flush(): send without waiting for linger
    retry_at: float = 0.0
    attempts: int = 0
    payload: bytes | None = None
    released: bool = False  # its bytes no longer count against buffer_memory


class Producer(ClusterUser):
    """`async with Producer("host:9092") as p: meta = await p.send_and_wait("t", b"v")`."""

    default_client_id = "odradek-producer"

    def __init__(
        self,
        bootstrap_servers: str | Sequence[str] | None = None,
        *,
        acks: int | str = -1,
        compression: str | int | None = "none",
        linger_ms: float = 5.0,
        batch_size: int = 16384,
        max_request_size: int = 1048576,
        buffer_memory: int = 33554432,
        delivery_timeout: float = 120.0,
        max_block: float = 60.0,
        retry_backoff: float = 0.1,
        allow_auto_create_topics: bool = True,
        **connection: Unpack[ConnectionOptions],
    ) -> None:
        super().__init__(bootstrap_servers, connection, retry_timeout=max_block)
        self.acks = parse_acks(acks)
        self.compression = parse_compression(compression)
        self.linger = linger_ms / 1000.0
        self.batch_size = batch_size
        self.max_request_size = max_request_size
        self.buffer_memory = buffer_memory
        self.request_timeout = connection.get("request_timeout", REQUEST_TIMEOUT)
        self.delivery_timeout = delivery_timeout
        self.max_block = max_block
        self.retry_backoff = retry_backoff
        self.allow_auto_create_topics = allow_auto_create_topics
        self._queues: dict[TopicPartition, deque[_Batch]] = {}
        self._in_flight: set[TopicPartition] = set()
        self._requests: set[asyncio.Task[None]] = set()
        self._sending: list[_Batch] = []
        self._sticky: dict[str, int] = {}
        self._wake = asyncio.Event()
        self._buffered = 0  # bytes of records not yet acknowledged or failed
        self._space = asyncio.Event()
        self._sender: asyncio.Task[None] | None = None
        self._closed = False

    async def start(self) -> Self:
        await super().start()
        self._sender = asyncio.get_running_loop().create_task(
            self._sender_loop(), name="odradek-producer-sender"
        )
        return self

    async def close(self) -> None:
        """Send everything pending, then stop."""
        if self._closed:
            return
        with contextlib.suppress(KafkaError):
            await self.flush()
        self._closed = True
        if self._sender is not None:
            self._sender.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await self._sender
        for queue in self._queues.values():
            for batch in queue:
                self._fail(batch, KafkaError(ErrorCode.NETWORK_EXCEPTION, "producer closed"))
        self._queues.clear()
        await super().close()

    # -- sending --------------------------------------------------------------------------

    async def partitions_for(self, topic: str) -> list[int]:
        tm = await self.cluster.retry(
            lambda: self.cluster.topic(topic, allow_auto_create=self.allow_auto_create_topics),
            what=f"metadata for {topic}",
            timeout=self.max_block,
        )
        return sorted(tm.partitions)

    async def send(
        self,
        topic: str,
        value: bytes | str | None,
        key: bytes | str | None = None,
        partition: int | None = None,
        headers: Headers | None = None,
        timestamp_ms: int | None = None,
    ) -> asyncio.Future[RecordMetadata]:
        """Queue one record; the returned future resolves once the broker acknowledged it."""
        if self._closed or self._sender is None:
            raise KafkaError(ErrorCode.NETWORK_EXCEPTION, "producer is not running")
        key_b, value_b = _as_bytes(key), _as_bytes(value)
        header_list = [(str(k), _as_bytes(v)) for k, v in _header_items(headers)]
        size = (
            _RECORD_OVERHEAD
            + len(key_b or b"")
            + len(value_b or b"")
            + sum(len(k) + len(v or b"") + 4 for k, v in header_list)
        )
        if size + _BATCH_OVERHEAD > self.max_request_size:
            raise KafkaError(
                ErrorCode.MESSAGE_TOO_LARGE,
                f"record of {size} bytes exceeds max_request_size {self.max_request_size}",
            )
        partitions = await self.partitions_for(topic)
        if partition is None:
            partition = self._choose_partition(topic, key_b, partitions)
        elif partition not in partitions:
            raise KafkaError(
                ErrorCode.UNKNOWN_TOPIC_OR_PARTITION,
                f"partition {partition} of topic {topic!r} does not exist "
                f"({len(partitions)} partitions)",
            )
        while self._buffered and self._buffered + size > self.buffer_memory:
            self._space.clear()  # wait for acknowledgements to free room
            self._wake.set()
            await self._space.wait()
        ts = int(time.time() * 1000) if timestamp_ms is None else int(timestamp_ms)
        tp = TopicPartition(topic, partition)
        batch = self._open_batch(tp, size)
        future: asyncio.Future[RecordMetadata] = asyncio.get_running_loop().create_future()
        batch.records.append(Record(len(batch.records), ts, key_b, value_b, header_list))
        batch.futures.append(future)
        batch.size += size
        self._buffered += size
        if batch.size >= self.batch_size:
            batch.closed = True
        self._wake.set()
        return future

    async def send_and_wait(
        self,
        topic: str,
        value: bytes | str | None,
        key: bytes | str | None = None,
        partition: int | None = None,
        headers: Headers | None = None,
        timestamp_ms: int | None = None,
    ) -> RecordMetadata:
        future = await self.send(topic, value, key, partition, headers, timestamp_ms)
        return await future

    async def flush(self) -> None:
        """Send every queued record now and wait for all of them (errors are raised)."""
        futures: list[asyncio.Future[RecordMetadata]] = []
        for queue in self._queues.values():
            for batch in queue:
                batch.forced = True
                batch.closed = True
                futures.extend(batch.futures)
        futures.extend(self._in_flight_futures)
        self._wake.set()
        if not futures:
            return
        results = await asyncio.gather(*futures, return_exceptions=True)
        for r in results:
            if isinstance(r, BaseException):
                raise r

    def _choose_partition(self, topic: str, key: bytes | None, partitions: list[int]) -> int:
        if key is not None:
            return partitions[default_partition(key, len(partitions))]
        current = self._sticky.get(topic)
        if current is not None and current in partitions:
            queue = self._queues.get(TopicPartition(topic, current))
            if queue and not queue[-1].closed:
                return current
        choices = [p for p in partitions if p != current] or partitions
        chosen = random.choice(choices)
        self._sticky[topic] = chosen
        return chosen

    def _open_batch(self, tp: TopicPartition, size: int) -> _Batch:
        queue = self._queues.setdefault(tp, deque())
        if queue:
            batch = queue[-1]
            if not batch.closed and batch.size + size <= max(self.batch_size, _BATCH_OVERHEAD):
                return batch
            batch.closed = True
        batch = _Batch(tp, time.monotonic())
        queue.append(batch)
        return batch

    # -- the sender -----------------------------------------------------------------------

    @property
    def _in_flight_futures(self) -> list[asyncio.Future[RecordMetadata]]:
        return [f for b in self._sending for f in b.futures]

    async def _sender_loop(self) -> None:
        while True:
            self._wake.clear()
            try:
                wait = await self._dispatch_ready()
            except asyncio.CancelledError:
                raise
            except Exception:  # keep sending whatever happens to one round
                log.exception("producer sender round failed")
                wait = self.retry_backoff
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(self._wake.wait(), wait)

    async def _dispatch_ready(self) -> float | None:
        """Send every ready batch; return how long until the next one becomes ready."""
        now = time.monotonic()
        next_ready: float | None = None
        by_node: dict[int, list[_Batch]] = {}
        for tp, queue in list(self._queues.items()):
            if not queue:
                del self._queues[tp]
                continue
            if tp in self._in_flight:
                continue
            batch = queue[0]
            if now - batch.created > self.delivery_timeout:
                queue.popleft()
                self._fail(
                    batch,
                    KafkaError(
                        ErrorCode.REQUEST_TIMED_OUT,
                        f"{tp}: not delivered within {self.delivery_timeout:g}s",
                    ),
                )
                continue
            due = max(
                batch.retry_at, now if batch.closed or batch.forced else batch.created + self.linger
            )
            if due > now:
                next_ready = due if next_ready is None else min(next_ready, due)
                continue
            try:
                leader = await self.cluster.leader_for(tp.topic, tp.partition)
            except KafkaError as e:
                self._retry_or_fail(batch, e, requeue=False)
                if queue and queue[0] is batch:
                    next_ready = (
                        batch.retry_at if next_ready is None else min(next_ready, batch.retry_at)
                    )
                continue
            queue.popleft()
            batch.closed = True
            by_node.setdefault(leader, []).append(batch)
            self._in_flight.add(tp)
        for node_id, batches in by_node.items():
            self._sending.extend(batches)
            task = asyncio.get_running_loop().create_task(self._produce(node_id, batches))
            self._requests.add(task)
            task.add_done_callback(self._requests.discard)
        if next_ready is None:
            return None
        return max(next_ready - now, 0.0)

    async def _produce(self, node_id: int, batches: list[_Batch]) -> None:
        try:
            await self._produce_once(node_id, batches)
        except Exception as e:  # every batch must end up answered or requeued
            error = (
                e
                if isinstance(e, KafkaError)
                else KafkaError(ErrorCode.UNKNOWN_SERVER_ERROR, str(e))
            )
            for b in batches:
                if not all(f.done() for f in b.futures):
                    self._retry_or_fail(b, error, requeue=True)
        finally:
            for b in batches:
                self._in_flight.discard(b.tp)
                with contextlib.suppress(ValueError):
                    self._sending.remove(b)
            self._wake.set()

    async def _produce_once(self, node_id: int, batches: list[_Batch]) -> None:
        for b in batches:
            if b.payload is None:
                b.payload = build_batch(b.records, compression=self.compression)
        topics = group_by_topic(
            (b.tp, {"index": b.tp.partition, "records": b.payload}) for b in batches
        )
        body = {
            "transactional_id": None,
            "acks": self.acks,
            "timeout_ms": int(self.request_timeout * 1000),
            "topic_data": [{"name": t, "partition_data": ps} for t, ps in topics.items()],
        }
        conn = await self.cluster.connection(node_id)
        min_version = 7 if self.compression == Codec.ZSTD else 3
        resp = await conn.request(ApiKey.PRODUCE, body, min_version=min_version)
        if self.acks == 0:
            for b in batches:
                self._complete(b, -1, -1, -1)
            return
        answered: set[TopicPartition] = set()
        for t in resp["responses"]:
            for p in t["partition_responses"]:
                tp = TopicPartition(t["name"], p["index"])
                batch = next((b for b in batches if b.tp == tp), None)
                if batch is None:
                    continue
                answered.add(tp)
                error = error_of(p["error_code"], p.get("error_message"), f"partition {tp}")
                if error is not None:
                    self._retry_or_fail(batch, error, requeue=True)
                else:
                    self._complete(
                        batch, p["base_offset"], p["log_append_time_ms"], p["log_start_offset"]
                    )
        for b in batches:
            if b.tp not in answered:
                self._retry_or_fail(
                    b,
                    KafkaError(ErrorCode.UNKNOWN_SERVER_ERROR, f"no response for partition {b.tp}"),
                    requeue=True,
                )

    def _complete(self, batch: _Batch, base_offset: int, append_time: int, start: int) -> None:
        for i, (record, future) in enumerate(zip(batch.records, batch.futures, strict=True)):
            if future.done():
                continue
            offset = base_offset + i if base_offset >= 0 else -1
            ts = append_time if append_time >= 0 else record.timestamp
            future.set_result(RecordMetadata(batch.tp.topic, batch.tp.partition, offset, ts, start))
        self._release(batch)

    def _fail(self, batch: _Batch, error: KafkaError) -> None:
        for future in batch.futures:
            if not future.done():
                future.set_exception(error)
        self._release(batch)

    def _release(self, batch: _Batch) -> None:
        if not batch.released:
            batch.released = True
            self._buffered -= batch.size - _BATCH_OVERHEAD
            self._space.set()

    def _retry_or_fail(self, batch: _Batch, error: KafkaError, *, requeue: bool) -> None:
        """Retry a retriable error (after a backoff, ahead of newer batches) or fail the batch."""
        if error.code == ErrorCode.MESSAGE_TOO_LARGE or not error.retriable or self._closed:
            if not requeue:
                self._queues[batch.tp].popleft()
            self._fail(batch, error)
            return
        if time.monotonic() - batch.created > self.delivery_timeout:
            if not requeue:
                self._queues[batch.tp].popleft()
            self._fail(batch, error)
            return
        self.cluster.mark_stale()
        batch.attempts += 1
        batch.retry_at = time.monotonic() + min(
            self.retry_backoff * (2 ** (batch.attempts - 1)), 1.0
        )
        log.debug("producer: %s; retrying %s (attempt %d)", error, batch.tp, batch.attempts)
        if requeue:
            self._queues.setdefault(batch.tp, deque()).appendleft(batch)


def _header_items(headers: Headers | None) -> Iterable[tuple[str, bytes | str | None]]:
    if headers is None:
        return ()
    if isinstance(headers, Mapping):
        return headers.items()
    return headers
