"""Per-partition producer state: how a partition leader recognises retried idempotent batches.

For every producer id that wrote to the partition the leader remembers its epoch and the
metadata of its last five batches (first/last sequence, last offset). A client append is
checked against it batch by batch, on headers only:

* a batch equal (same epoch, same first and last sequence) to one of the five is a retry of a
  batch already in the log: nothing is appended and the producer gets the original offsets;
* an epoch below the known one is refused with INVALID_PRODUCER_EPOCH;
* a new epoch must start at sequence 0, and within an epoch each batch must continue the last
  one (sequences wrap from 2^31-1 to 0), else OUT_OF_ORDER_SEQUENCE_NUMBER; a producer the
  partition knows nothing about (new, or expired) may start at any sequence, as in Kafka since
  KIP-360, so UNKNOWN_PRODUCER_ID is never answered.

The state survives restarts the way Kafka's does: `<offset>.snapshot` files in the partition
directory (Kafka's format, below) written when the log rolls and when it closes, and on load the
latest usable snapshot plus a replay of the batch headers after it. The log alone always suffices
to rebuild the state; snapshots only shorten the replay.

Snapshot file (big-endian): version int16 (1) | crc uint32 (CRC-32C of everything after it) |
count int32 | count x (producer_id int64, epoch int16, last_sequence int32, last_offset int64,
offset_delta int32, timestamp int64, coordinator_epoch int32, current_txn_first_offset int64).
Only the producer's last batch is kept in a snapshot, as in Kafka.
"""

from __future__ import annotations

import logging
import os
import re
import struct
import time
from collections import deque
from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass, field
from pathlib import Path

import crc32c

from ..protocol.errors import ErrorCode, KafkaError
from ..records import batch as rb
from ..records.batch import BatchHeader
from ..storage.log import AppendResult, Log

logger = logging.getLogger(__name__)

NUM_BATCHES_TO_RETAIN = 5
NO_PRODUCER_EPOCH = -1
NO_SEQUENCE = -1
INT32_MAX = (1 << 31) - 1
DEFAULT_EXPIRATION_MS = 86_400_000  # producer.id.expiration.ms
DEFAULT_EXPIRATION_CHECK_INTERVAL_MS = 600_000  # producer.id.expiration.check.interval.ms

SNAPSHOT_SUFFIX = ".snapshot"
SNAPSHOT_VERSION = 1
_SNAPSHOT_FILE = re.compile(r"^(\d{20})\.snapshot$")
_SNAPSHOT_HEAD = struct.Struct(">hIi")
_SNAPSHOT_ENTRY = struct.Struct(">qhiqiqiq")
_CRC_START = 6  # version int16 + crc uint32


def now_ms() -> int:
    return time.time_ns() // 1_000_000


def increment_sequence(sequence: int, increment: int) -> int:
    """`sequence + increment` in the int32 sequence space, which wraps to 0 after 2^31-1."""
    if sequence > INT32_MAX - increment:
        return increment - (INT32_MAX - sequence) - 1
    return sequence + increment


def decrement_sequence(sequence: int, decrement: int) -> int:
    if sequence < decrement:
        return INT32_MAX - (decrement - sequence) + 1
    return sequence - decrement


def in_sequence(last_seq: int, next_seq: int) -> bool:
    return next_seq == last_seq + 1 or (next_seq == 0 and last_seq == INT32_MAX)


def last_sequence(header: BatchHeader) -> int:
    return increment_sequence(header.base_sequence, header.last_offset_delta)


class BatchMetadata:
    """One appended batch of a producer: enough to recognise its retry and answer it."""

    __slots__ = ("last_seq", "last_offset", "offset_delta", "timestamp")

    def __init__(self, last_seq: int, last_offset: int, offset_delta: int, timestamp: int) -> None:
        self.last_seq = last_seq
        self.last_offset = last_offset
        self.offset_delta = offset_delta
        self.timestamp = timestamp

    @property
    def first_seq(self) -> int:
        return decrement_sequence(self.last_seq, self.offset_delta)

    @property
    def first_offset(self) -> int:
        return self.last_offset - self.offset_delta

    def __repr__(self) -> str:
        return (
            f"BatchMetadata(seq={self.first_seq}..{self.last_seq}, "
            f"offsets={self.first_offset}..{self.last_offset}, ts={self.timestamp})"
        )


@dataclass
class ProducerStateEntry:
    producer_id: int
    epoch: int = NO_PRODUCER_EPOCH
    batches: deque[BatchMetadata] = field(
        default_factory=lambda: deque(maxlen=NUM_BATCHES_TO_RETAIN)
    )
    last_timestamp: int = -1
    coordinator_epoch: int = -1
    current_txn_first_offset: int = -1

    @property
    def last_seq(self) -> int:
        return self.batches[-1].last_seq if self.batches else NO_SEQUENCE

    @property
    def first_seq(self) -> int:
        return self.batches[0].first_seq if self.batches else NO_SEQUENCE

    @property
    def last_offset(self) -> int:
        return self.batches[-1].last_offset if self.batches else -1

    @property
    def last_offset_delta(self) -> int:
        return self.batches[-1].offset_delta if self.batches else 0

    def same_epoch_no_batches(self) -> ProducerStateEntry:
        """The starting point of an append: this entry's epoch and metadata, no batches yet."""
        return ProducerStateEntry(
            self.producer_id,
            self.epoch,
            last_timestamp=self.last_timestamp,
            coordinator_epoch=self.coordinator_epoch,
            current_txn_first_offset=self.current_txn_first_offset,
        )

    def maybe_update_epoch(self, epoch: int) -> None:
        if epoch != self.epoch:
            self.batches.clear()
            self.epoch = epoch

    def add_batch(
        self, epoch: int, last_seq: int, last_offset: int, offset_delta: int, timestamp: int
    ) -> None:
        self.maybe_update_epoch(epoch)
        self.batches.append(BatchMetadata(last_seq, last_offset, offset_delta, timestamp))
        self.last_timestamp = timestamp

    def update(self, other: ProducerStateEntry) -> None:
        """Fold in the result of an append (`other` started from this entry)."""
        self.maybe_update_epoch(other.epoch)
        self.coordinator_epoch = other.coordinator_epoch
        self.last_timestamp = other.last_timestamp
        self.current_txn_first_offset = other.current_txn_first_offset
        self.batches.extend(other.batches)

    def find_duplicate(self, epoch: int, first_seq: int, last_seq: int) -> BatchMetadata | None:
        if epoch != self.epoch:
            return None
        for b in self.batches:
            if b.last_seq == last_seq and b.first_seq == first_seq:
                return b
        return None


@dataclass
class PendingAppend:
    """What a validated client append will do to the producer state once it is in the log.

    `duplicate` set: the append is a retry of that batch and must not be written.
    """

    updates: dict[int, ProducerStateEntry] = field(default_factory=dict)
    duplicate: BatchMetadata | None = None


class CorruptSnapshot(Exception):
    pass


# --- snapshot files ---------------------------------------------------------------------------


def snapshot_path(directory: Path, offset: int) -> Path:
    return directory / f"{offset:020d}{SNAPSHOT_SUFFIX}"


def list_snapshots(directory: Path) -> list[int]:
    """Offsets of the snapshot files in `directory`, ascending."""
    try:
        names = os.listdir(directory)
    except FileNotFoundError:
        return []
    return sorted(int(m.group(1)) for n in names if (m := _SNAPSHOT_FILE.match(n)))


def encode_snapshot(entries: Iterable[ProducerStateEntry]) -> bytes:
    items = list(entries)
    body = bytearray(struct.pack(">i", len(items)))
    for e in items:
        body += _SNAPSHOT_ENTRY.pack(
            e.producer_id,
            e.epoch,
            e.last_seq,
            e.last_offset,
            e.last_offset_delta,
            e.last_timestamp,
            e.coordinator_epoch,
            e.current_txn_first_offset,
        )
    return struct.pack(">hI", SNAPSHOT_VERSION, crc32c.crc32c(body)) + bytes(body)


def decode_snapshot(data: bytes) -> list[ProducerStateEntry]:
    if len(data) < _SNAPSHOT_HEAD.size:
        raise CorruptSnapshot("snapshot shorter than its header")
    version, crc, count = _SNAPSHOT_HEAD.unpack_from(data)
    if version != SNAPSHOT_VERSION:
        raise CorruptSnapshot(f"unknown snapshot version {version}")
    if crc32c.crc32c(memoryview(data)[_CRC_START:]) != crc:
        raise CorruptSnapshot("snapshot CRC mismatch")
    if count < 0 or len(data) != _SNAPSHOT_HEAD.size + count * _SNAPSHOT_ENTRY.size:
        raise CorruptSnapshot(f"snapshot size does not match its {count} entries")
    entries = []
    for fields in _SNAPSHOT_ENTRY.iter_unpack(memoryview(data)[_SNAPSHOT_HEAD.size :]):
        pid, epoch, seq, offset, delta, ts, coordinator_epoch, txn_first = fields
        entry = ProducerStateEntry(
            pid,
            epoch,
            last_timestamp=ts,
            coordinator_epoch=coordinator_epoch,
            current_txn_first_offset=txn_first,
        )
        if offset >= 0:
            entry.batches.append(BatchMetadata(seq, offset, delta, ts))
        entries.append(entry)
    return entries


def write_snapshot(path: Path, entries: Iterable[ProducerStateEntry], *, sync: bool) -> None:
    """Write through a temporary file and rename, so a reader never sees half a snapshot."""
    data = encode_snapshot(entries)
    tmp = path.with_name(path.name + ".tmp")
    fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o644)
    try:
        os.write(fd, data)
        if sync:
            os.fsync(fd)
    finally:
        os.close(fd)
    os.replace(tmp, path)


# --- the state ------------------------------------------------------------------------------


class ProducerStateManager:
    """The producer state of one partition, with its snapshots in `directory`."""

    def __init__(
        self,
        directory: Path | None = None,
        *,
        expiration_ms: int = DEFAULT_EXPIRATION_MS,
        expiration_check_interval_ms: int = DEFAULT_EXPIRATION_CHECK_INTERVAL_MS,
        clock: Callable[[], int] = now_ms,
    ) -> None:
        self.directory = directory
        self.expiration_ms = expiration_ms
        self.expiration_check_interval_ms = expiration_check_interval_ms
        self.clock = clock
        self.producers: dict[int, ProducerStateEntry] = {}
        # The state reflects the log up to (not including) this offset.
        self.map_end_offset = 0
        self.last_snapshot_offset = 0
        self._next_expiration_check = clock() + expiration_check_interval_ms

    # -- client appends (leader) ---------------------------------------------------------------

    def prepare_append(
        self, buf: bytes | bytearray | memoryview, first_offset: int
    ) -> PendingAppend:
        """Check a client append of validated batches that will start at `first_offset`.

        Raises KafkaError (INVALID_PRODUCER_EPOCH, OUT_OF_ORDER_SEQUENCE_NUMBER); changes
        nothing until `complete_append`.
        """
        now = self.clock()
        if now >= self._next_expiration_check:
            self.remove_expired(now)
        pending = PendingAppend()
        offset = first_offset
        for _, header in _headers(buf):
            if header.producer_id >= 0 and not header.is_control:
                pid = header.producer_id
                current = self.producers.get(pid)
                last_seq = last_sequence(header)
                if current is not None:
                    duplicate = current.find_duplicate(
                        header.producer_epoch, header.base_sequence, last_seq
                    )
                    if duplicate is not None:
                        return PendingAppend(duplicate=duplicate)
                work = pending.updates.get(pid)
                if work is None:
                    work = (
                        current.same_epoch_no_batches()
                        if current is not None
                        else ProducerStateEntry(pid)
                    )
                    pending.updates[pid] = work
                _check_batch(current, work, header, offset)
                last_offset = offset + header.last_offset_delta
                work.add_batch(
                    header.producer_epoch,
                    last_seq,
                    last_offset,
                    header.last_offset_delta,
                    header.max_timestamp,
                )
            offset += header.last_offset_delta + 1
        return pending

    def complete_append(self, pending: PendingAppend, end_offset: int) -> None:
        """The append is in the log, which now ends at `end_offset`."""
        for pid, update in pending.updates.items():
            current = self.producers.get(pid)
            if current is None:
                self.producers[pid] = update
            else:
                current.update(update)
        self.map_end_offset = end_offset

    # -- replay (loading, or appends that need no validation) ----------------------------------

    def replay(self, headers: Iterable[BatchHeader]) -> None:
        """Apply batches already in the log, without checks (Kafka's replication origin)."""
        for header in headers:
            pid = header.producer_id
            if pid >= 0:
                entry = self.producers.get(pid)
                if entry is None:
                    entry = self.producers[pid] = ProducerStateEntry(pid)
                if header.is_control:
                    entry.maybe_update_epoch(header.producer_epoch)
                    entry.last_timestamp = header.max_timestamp
                else:
                    entry.add_batch(
                        header.producer_epoch,
                        last_sequence(header),
                        header.last_offset,
                        header.last_offset_delta,
                        header.max_timestamp,
                    )
            self.map_end_offset = header.last_offset + 1

    # -- expiration ------------------------------------------------------------------------------

    def is_expired(self, entry: ProducerStateEntry, now: int) -> bool:
        return entry.current_txn_first_offset < 0 and now - entry.last_timestamp >= (
            self.expiration_ms
        )

    def remove_expired(self, now: int | None = None) -> int:
        """Forget producers idle for producer.id.expiration.ms (by their last batch timestamp)."""
        now = self.clock() if now is None else now
        self._next_expiration_check = now + self.expiration_check_interval_ms
        expired = [pid for pid, e in self.producers.items() if self.is_expired(e, now)]
        for pid in expired:
            del self.producers[pid]
        return len(expired)

    # -- snapshots -------------------------------------------------------------------------------

    def take_snapshot(self, *, sync: bool = True) -> Path | None:
        """Write `<map end offset>.snapshot` unless one was already written at that offset."""
        if self.directory is None or self.map_end_offset <= self.last_snapshot_offset:
            return None
        path = snapshot_path(self.directory, self.map_end_offset)
        write_snapshot(path, self.producers.values(), sync=sync)
        self.last_snapshot_offset = self.map_end_offset
        return path

    def delete_snapshots_before(self, offset: int) -> None:
        """Remove snapshots below `offset`, always keeping the newest one."""
        if self.directory is None:
            return
        offsets = list_snapshots(self.directory)
        for off in offsets[:-1]:
            if off < offset:
                snapshot_path(self.directory, off).unlink(missing_ok=True)

    def load(self, log_start_offset: int, log_end_offset: int) -> None:
        """Start from the newest valid snapshot within the log; drop the ones outside it.

        The caller replays the log from `map_end_offset` to `log_end_offset` afterwards.
        """
        self.producers = {}
        self.map_end_offset = self.last_snapshot_offset = log_start_offset
        if self.directory is None:
            return
        offsets = list_snapshots(self.directory)
        for off in offsets:
            if off > log_end_offset or off <= log_start_offset:
                snapshot_path(self.directory, off).unlink(missing_ok=True)
        offsets = [o for o in offsets if log_start_offset < o <= log_end_offset]
        now = self.clock()
        while offsets:
            off = offsets.pop()
            path = snapshot_path(self.directory, off)
            try:
                entries = decode_snapshot(path.read_bytes())
            except (OSError, CorruptSnapshot) as exc:
                logger.warning("%s: ignoring producer snapshot: %s", path, exc)
                path.unlink(missing_ok=True)
                continue
            self.producers = {e.producer_id: e for e in entries if not self.is_expired(e, now)}
            self.map_end_offset = self.last_snapshot_offset = off
            return


def _headers(buf: bytes | bytearray | memoryview) -> Iterator[tuple[int, BatchHeader]]:
    return rb.iter_batches(buf, check_crc=False)


def _check_batch(
    current: ProducerStateEntry | None,
    work: ProducerStateEntry,
    header: BatchHeader,
    offset: int,
) -> None:
    """Kafka's epoch and sequence rules for one client batch (ProducerAppendInfo)."""
    pid, epoch, first_seq = header.producer_id, header.producer_epoch, header.base_sequence
    if epoch < work.epoch:
        raise KafkaError(
            ErrorCode.INVALID_PRODUCER_EPOCH,
            f"epoch {epoch} of producer {pid} at offset {offset} is older than the last seen "
            f"epoch {work.epoch}",
        )
    if epoch != work.epoch:
        if first_seq != 0 and work.epoch != NO_PRODUCER_EPOCH:
            raise KafkaError(
                ErrorCode.OUT_OF_ORDER_SEQUENCE_NUMBER,
                f"new epoch {epoch} of producer {pid} at offset {offset} starts at sequence "
                f"{first_seq}, not 0 (current epoch {work.epoch})",
            )
        return
    if work.batches:
        last_seq = work.last_seq
    elif current is not None and epoch == current.epoch:
        last_seq = current.last_seq
    else:
        last_seq = NO_SEQUENCE
    current_epoch = current.epoch if current is not None else NO_PRODUCER_EPOCH
    if current_epoch != NO_PRODUCER_EPOCH and not in_sequence(last_seq, first_seq):
        raise KafkaError(
            ErrorCode.OUT_OF_ORDER_SEQUENCE_NUMBER,
            f"out of order sequence {first_seq} for producer {pid} at offset {offset}; "
            f"the last sequence was {last_seq}",
        )


# --- a partition log's producer state -------------------------------------------------------


class LogProducerState(ProducerStateManager):
    """The producer state of a storage Log: loaded from it, snapshotted when it rolls or closes."""

    def __init__(self, log: Log, **kwargs) -> None:
        super().__init__(log.dir, **kwargs)
        self.log = log
        self.reload()
        log.on_roll = self._on_roll
        log.on_close = self._on_close

    def reload(self) -> None:
        log = self.log
        self.directory = log.dir
        self.load(log.log_start_offset, log.log_end_offset)
        if self.map_end_offset < log.log_end_offset:
            self.replay(h for _, h in iter_log_headers(log, self.map_end_offset))
        self.map_end_offset = log.log_end_offset

    def prepare_leader_append(self, buf: bytes | bytearray | memoryview) -> PendingAppend:
        return self.prepare_append(buf, self.log.log_end_offset)

    def duplicate_result(self, duplicate: BatchMetadata) -> AppendResult:
        """What the append of a retried batch answers: the original batch's offsets."""
        return AppendResult(
            duplicate.first_offset,
            duplicate.last_offset,
            duplicate.timestamp,
            self.log.log_start_offset,
        )

    def _on_roll(self, new_base_offset: int) -> None:
        # Snapshot at the new segment's base, so recovery can start from it; no fsync on the
        # append path (a torn snapshot fails its CRC and an older one, or the log, is used).
        self.directory = self.log.dir
        self.map_end_offset = max(self.map_end_offset, new_base_offset)
        try:
            self.take_snapshot(sync=False)
            self.delete_snapshots_before(self.log.segments[0].base_offset)
        except OSError as exc:
            logger.warning("%s: producer snapshot on roll failed: %s", self.log.dir, exc)

    def _on_close(self) -> None:
        self.directory = self.log.dir
        self.map_end_offset = max(self.map_end_offset, self.log.log_end_offset)
        try:
            self.take_snapshot(sync=True)
            self.delete_snapshots_before(self.log.segments[0].base_offset)
        except OSError as exc:
            logger.warning("%s: producer snapshot on close failed: %s", self.log.dir, exc)


def iter_log_headers(log: Log, start_offset: int) -> Iterator[tuple[int, BatchHeader]]:
    """(segment base, header) of every batch in `log` whose last offset is >= `start_offset`."""
    segments = log.segments
    for i, seg in enumerate(segments):
        if seg.size == 0 or (i + 1 < len(segments) and segments[i + 1].base_offset <= start_offset):
            continue
        found = seg.translate_offset(start_offset)
        if found is None:
            continue
        for _, header in seg.iter_headers(found[0]):
            if header.last_offset >= start_offset:
                yield seg.base_offset, header
