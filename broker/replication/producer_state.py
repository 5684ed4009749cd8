"""Per-partition producer state: how a partition leader recognises retried idempotent batches
and follows the transactions written to it.

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

Transactions: a producer's first transactional batch opens its transaction at that offset; the
COMMIT/ABORT marker the coordinator writes (WriteTxnMarkers) closes it, after checks of the
producer epoch (INVALID_PRODUCER_EPOCH) and coordinator epoch (TRANSACTION_COORDINATOR_FENCED).
Open transactions, and closed ones whose marker is not yet below the high watermark, hold the
last stable offset back; each aborted one is written to the log's .txnindex.

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
from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass, field
from enum import Enum
from pathlib import Path
from typing import NamedTuple

import crc32c

from ..protocol.errors import ErrorCode, KafkaError
from ..records import batch as rb
from ..records.batch import BatchHeader
from ..records.record import ControlType, end_txn_marker
from ..storage.txn_index import AbortedTxn
from .producer_entry import (
    NO_PRODUCER_EPOCH,
    NO_SEQUENCE,
    BatchMetadata,
    ProducerStateEntry,
    in_sequence,
    last_sequence,
)

logger = logging.getLogger(__name__)

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


class AppendOrigin(Enum):
    """Who appends: a producer (every check), a coordinator (its own offsets and the markers:
    no sequence or duplicate checks), or replication (no checks, the leader made them)."""

    CLIENT = "client"
    COORDINATOR = "coordinator"
    REPLICATION = "replication"


class CompletedTxn(NamedTuple):
    """A transaction ended by a marker at `last_offset`."""

    producer_id: int
    first_offset: int
    last_offset: int
    aborted: bool


# (control type, coordinator epoch) of an ABORT/COMMIT marker batch.
Marker = tuple[int, int]


@dataclass
class PendingAppend:
    """What a validated append will do to the producer state once it is in the log.

    `duplicate` set: the append is a retry of that batch and must not be written.
    """

    updates: dict[int, ProducerStateEntry] = field(default_factory=dict)
    duplicate: BatchMetadata | None = None
    started: list[tuple[int, int]] = field(default_factory=list)  # (first offset, producer id)
    completed: list[CompletedTxn] = field(default_factory=list)


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
    """The producer state of one partition, with its snapshots in `directory`.

    Beside each producer's epoch and last batches it tracks transactions: those open in the
    partition (by first offset), and those whose marker is not yet below the high watermark;
    the first offset of either bounds the last stable offset. Each transaction an ABORT
    marker ends is handed to `on_aborted` (the log's .txnindex) with the LSO after it.
    """

    def __init__(
        self,
        directory: Path | None = None,
        *,
        expiration_ms: int = DEFAULT_EXPIRATION_MS,
        expiration_check_interval_ms: int = DEFAULT_EXPIRATION_CHECK_INTERVAL_MS,
        clock: Callable[[], int] = now_ms,
        on_aborted: Callable[[AbortedTxn], None] | None = None,
    ) -> None:
        self.directory = directory
        self.expiration_ms = expiration_ms
        self.expiration_check_interval_ms = expiration_check_interval_ms
        self.clock = clock
        self.on_aborted = on_aborted
        self.producers: dict[int, ProducerStateEntry] = {}
        # Open transactions: first offset -> producer id.
        self.ongoing: dict[int, int] = {}
        # Ended transactions whose marker may be above the HW: first offset -> last offset.
        self.unreplicated: dict[int, int] = {}
        # The state reflects the log up to (not including) this offset.
        self.map_end_offset = 0
        self.last_snapshot_offset = 0
        self._next_expiration_check = clock() + expiration_check_interval_ms

    # -- appends -------------------------------------------------------------------------------

    def prepare_append(
        self,
        buf: bytes | bytearray | memoryview,
        first_offset: int,
        origin: AppendOrigin = AppendOrigin.CLIENT,
    ) -> PendingAppend:
        """Check an append of validated batches that will start at `first_offset`.

        Raises KafkaError (INVALID_PRODUCER_EPOCH, OUT_OF_ORDER_SEQUENCE_NUMBER,
        INVALID_TXN_STATE, TRANSACTION_COORDINATOR_FENCED); changes nothing until
        `complete_append`.
        """
        now = self.clock()
        if now >= self._next_expiration_check:
            self.remove_expired(now)
        pending = PendingAppend()
        offset = first_offset
        for pos, header in _headers(buf):
            if header.producer_id >= 0:
                marker = end_txn_marker(buf, pos) if header.is_control else None
                if origin is AppendOrigin.CLIENT and not header.is_control:
                    current = self.producers.get(header.producer_id)
                    if current is not None:
                        duplicate = current.find_duplicate(
                            header.producer_epoch, header.base_sequence, last_sequence(header)
                        )
                        if duplicate is not None:
                            return PendingAppend(duplicate=duplicate)
                self._apply(pending, header, offset, marker, origin)
            offset += header.last_offset_delta + 1
        return pending

    def _apply(
        self,
        pending: PendingAppend,
        header: BatchHeader,
        offset: int,
        marker: Marker | None,
        origin: AppendOrigin,
    ) -> None:
        """One batch of producer `header.producer_id`, whose base offset is `offset`."""
        pid = header.producer_id
        current = self.producers.get(pid)
        work = pending.updates.get(pid)
        if work is None:
            work = (
                current.same_epoch_no_batches() if current is not None else ProducerStateEntry(pid)
            )
            pending.updates[pid] = work
        checked = origin is not AppendOrigin.REPLICATION
        if header.is_control:
            if marker is None:
                return  # an empty control batch: its transaction was cleaned away
            kind, coordinator_epoch = marker
            if header.producer_epoch < work.epoch and checked:
                raise KafkaError(
                    ErrorCode.INVALID_PRODUCER_EPOCH,
                    f"marker of producer {pid} at offset {offset} has epoch "
                    f"{header.producer_epoch}, older than the last seen epoch {work.epoch}",
                )
            if work.coordinator_epoch > coordinator_epoch and checked:
                raise KafkaError(
                    ErrorCode.TRANSACTION_COORDINATOR_FENCED,
                    f"marker of producer {pid} at offset {offset} from coordinator epoch "
                    f"{coordinator_epoch}, older than {work.coordinator_epoch}",
                )
            if work.current_txn_first_offset >= 0:
                pending.completed.append(
                    CompletedTxn(
                        pid, work.current_txn_first_offset, offset, kind == ControlType.ABORT
                    )
                )
            work.maybe_update_epoch(header.producer_epoch)
            work.coordinator_epoch = coordinator_epoch
            work.current_txn_first_offset = -1
            work.last_timestamp = header.max_timestamp
            return
        if checked:
            _check_batch(current, work, header, offset, sequences=origin is AppendOrigin.CLIENT)
        if work.current_txn_first_offset >= 0 and not header.is_transactional and checked:
            raise KafkaError(
                ErrorCode.INVALID_TXN_STATE,
                f"non-transactional batch from producer {pid} at offset {offset} while its "
                f"transaction from offset {work.current_txn_first_offset} is open",
            )
        work.add_batch(
            header.producer_epoch,
            last_sequence(header),
            offset + header.last_offset_delta,
            header.last_offset_delta,
            header.max_timestamp,
        )
        if header.is_transactional and work.current_txn_first_offset < 0:
            work.current_txn_first_offset = offset
            pending.started.append((offset, pid))

    def complete_append(self, pending: PendingAppend, end_offset: int) -> None:
        """The append is in the log, which now ends at `end_offset`."""
        for pid, update in pending.updates.items():
            current = self.producers.get(pid)
            if current is None:
                self.producers[pid] = update
            else:
                current.update(update)
        for first, pid in pending.started:
            self.ongoing[first] = pid
        for txn in pending.completed:
            if txn.aborted and self.on_aborted is not None:
                lso = self._stable_offset_after(txn)
                self.on_aborted(AbortedTxn(txn.producer_id, txn.first_offset, txn.last_offset, lso))
            self.ongoing.pop(txn.first_offset, None)
            self.unreplicated[txn.first_offset] = txn.last_offset
        self.map_end_offset = end_offset

    # -- replay (loading, followers) -----------------------------------------------------------

    def replay(self, batches: Iterable[tuple[BatchHeader, Marker | None]]) -> None:
        """Apply batches already in the log, without checks (Kafka's replication origin), one
        at a time so that each aborted transaction is indexed with the LSO of its time."""
        for header, marker in batches:
            if header.producer_id >= 0:
                pending = PendingAppend()
                self._apply(pending, header, header.base_offset, marker, AppendOrigin.REPLICATION)
                self.complete_append(pending, header.last_offset + 1)
            else:
                self.map_end_offset = header.last_offset + 1

    def replay_buffer(self, buf: bytes | bytearray | memoryview) -> None:
        """`replay` the (CRC-checked) batches of a follower's fetched data."""
        self.replay(
            (h, end_txn_marker(buf, pos) if h.is_control and h.producer_id >= 0 else None)
            for pos, h in _headers(buf)
        )

    # -- transactions --------------------------------------------------------------------------

    def _stable_offset_after(self, txn: CompletedTxn) -> int:
        """The LSO once `txn` ends: the first open transaction of another producer, else just
        past its marker (recorded with an aborted transaction in the .txnindex)."""
        others = [first for first, pid in self.ongoing.items() if pid != txn.producer_id]
        return min(others) if others else txn.last_offset + 1

    def first_unstable_offset(self, high_watermark: int) -> int | None:
        """First offset of the earliest transaction that is open or whose marker is not yet
        below `high_watermark`; None when every transaction is decided and replicated."""
        if self.unreplicated:
            done = [first for first, last in self.unreplicated.items() if last < high_watermark]
            for first in done:
                del self.unreplicated[first]
        firsts = [*self.ongoing, *self.unreplicated]
        return min(firsts) if firsts else None

    def _rebuild_ongoing(self) -> None:
        self.ongoing = {
            e.current_txn_first_offset: pid
            for pid, e in self.producers.items()
            if e.current_txn_first_offset >= 0
        }
        self.unreplicated = {}

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

    def load(
        self, log_start_offset: int, log_end_offset: int, *, at_most: int | None = None
    ) -> None:
        """Start from the newest valid snapshot within the log (and at or below `at_most`);
        drop the ones outside it.

        The caller replays the log from `map_end_offset` to `log_end_offset` afterwards.
        """
        self.producers = {}
        self.ongoing = {}
        self.unreplicated = {}
        self.map_end_offset = self.last_snapshot_offset = log_start_offset
        if self.directory is None:
            return
        offsets = list_snapshots(self.directory)
        limit = log_end_offset if at_most is None else min(at_most, log_end_offset)
        for off in offsets:
            if off > limit or off <= log_start_offset:
                snapshot_path(self.directory, off).unlink(missing_ok=True)
        offsets = [o for o in offsets if log_start_offset < o <= limit]
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
            self._rebuild_ongoing()
            self.map_end_offset = self.last_snapshot_offset = off
            return


def _headers(buf: bytes | bytearray | memoryview) -> Iterator[tuple[int, BatchHeader]]:
    return rb.iter_batches(buf, check_crc=False)


def _check_batch(
    current: ProducerStateEntry | None,
    work: ProducerStateEntry,
    header: BatchHeader,
    offset: int,
    *,
    sequences: bool = True,
) -> None:
    """Kafka's epoch and (for client appends) sequence rules for one batch (ProducerAppendInfo)."""
    pid, epoch, first_seq = header.producer_id, header.producer_epoch, header.base_sequence
    if epoch < work.epoch:
        raise KafkaError(
            ErrorCode.INVALID_PRODUCER_EPOCH,
            f"epoch {epoch} of producer {pid} at offset {offset} is older than the last seen "
            f"epoch {work.epoch}",
        )
    if not sequences:
        return
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
