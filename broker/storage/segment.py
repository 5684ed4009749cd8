"""One log segment: `<base>.log` with its `.index` and `.timeindex`.

The segment keeps one fd open for its whole life (appends, preads, and the FileSlices handed to
sendfile all use it) and reads only batch headers on lookups: the index gives a position near
the target and the scan steps from header to header.
"""

from __future__ import annotations

import logging
import os
import random
from collections.abc import Iterator, Sequence
from pathlib import Path
from typing import NamedTuple

from ..records import batch as rb
from ..records.batch import BatchHeader, RecordsError
from .errors import CorruptIndex
from .file_slice import FileSlice
from .index import OffsetIndex, TimeIndex
from .log_config import INT_MAX, LogConfig
from .txn_index import TXN_INDEX_SUFFIX, TransactionIndex

log = logging.getLogger(__name__)

LOG_SUFFIX = ".log"
INDEX_SUFFIX = ".index"
TIMEINDEX_SUFFIX = ".timeindex"
DELETED_SUFFIX = ".deleted"
# Kafka's suffixes for a cleaned segment being written, and one being swapped into the log.
CLEANED_SUFFIX = ".cleaned"
SWAP_SUFFIX = ".swap"
_RECOVERY_CHUNK = 4 << 20


def file_stem(base_offset: int) -> str:
    return f"{base_offset:020d}"


def segment_paths(directory: Path, base_offset: int, suffix: str = "") -> list[Path]:
    """The `.log`, `.index`, `.timeindex` and `.txnindex` files of a segment (with `suffix`
    appended); the `.txnindex` exists only once a transaction aborted in the segment."""
    stem = file_stem(base_offset)
    return [
        Path(directory) / f"{stem}{ext}{suffix}"
        for ext in (LOG_SUFFIX, INDEX_SUFFIX, TIMEINDEX_SUFFIX, TXN_INDEX_SUFFIX)
    ]


class BatchAppend(NamedTuple):
    """Where one batch of an append sits in the appended buffer, with its final offsets."""

    position: int
    size: int
    last_offset: int
    max_timestamp: int


class LogSegment:
    def __init__(
        self,
        directory: Path,
        base_offset: int,
        config: LogConfig,
        *,
        now_ms: int,
        active: bool = False,
        suffix: str = "",
    ) -> None:
        """`suffix` names files beside the log's own (the cleaner writes `.cleaned` ones)."""
        self.base_offset = base_offset
        stem = Path(directory) / file_stem(base_offset)
        self.log_path = stem.with_name(stem.name + LOG_SUFFIX + suffix)
        self._fd = os.open(self.log_path, os.O_RDWR | os.O_CREAT | os.O_APPEND, 0o644)
        self.size = os.fstat(self._fd).st_size
        self.offset_index = OffsetIndex(
            stem.with_name(stem.name + INDEX_SUFFIX + suffix),
            base_offset,
            config.segment_index_bytes,
            active=active,
        )
        self.time_index = TimeIndex(
            stem.with_name(stem.name + TIMEINDEX_SUFFIX + suffix),
            base_offset,
            config.segment_index_bytes,
            active=active,
        )
        self.txn_index = TransactionIndex(
            stem.with_name(stem.name + TXN_INDEX_SUFFIX + suffix), base_offset
        )
        self.index_interval_bytes = config.index_interval_bytes
        self.bytes_since_last_index_entry = 0
        self.created_ms = now_ms
        jitter = config.segment_jitter_ms
        self.roll_jitter_ms = random.randrange(min(jitter, config.segment_ms)) if jitter else 0
        self._rolling_timestamp: int | None = None
        self._max_ts: tuple[int, int] | None = None  # (timestamp, offset), loaded lazily
        self.closed = False

    # -- reading -------------------------------------------------------------------------------

    def fileno(self) -> int:
        return self._fd

    def header_at(self, position: int) -> BatchHeader:
        return rb.parse_header(os.pread(self._fd, rb.HEADER_SIZE, position))

    def iter_headers(
        self, start: int = 0, end: int | None = None
    ) -> Iterator[tuple[int, BatchHeader]]:
        """(position, header) of each batch from `start` (a batch boundary) up to `end`."""
        pos = start
        stop = self.size if end is None else min(end, self.size)
        while pos < stop:
            header = self.header_at(pos)
            yield pos, header
            pos += header.size

    def translate_offset(self, offset: int, start: int = 0) -> tuple[int, BatchHeader] | None:
        """The first batch at/after `start` whose last offset is >= `offset` (None: none here)."""
        begin = max(self.offset_index.lookup(offset)[1], start)
        for pos, header in self.iter_headers(begin):
            if header.last_offset >= offset:
                return pos, header
        return None

    def read(
        self, offset: int, max_bytes: int, max_position: int, min_one_batch: bool
    ) -> FileSlice | None:
        """Whole batches from the one holding `offset`, ending at or before `max_position`.

        None when no batch of this segment holds `offset` or later; an empty slice when one
        does but nothing may be returned (limits).
        """
        found = self.translate_offset(offset)
        if found is None:
            return None
        start, header = found
        limit = min(max_position, self.size)
        first_end = start + header.size
        if first_end > limit:
            return FileSlice(self._fd, start, 0)
        if limit - start <= max_bytes:
            return FileSlice(self._fd, start, limit - start)
        if header.size > max_bytes:
            return FileSlice(self._fd, start, header.size if min_one_batch else 0)
        bound = start + max_bytes
        end = max(first_end, self.offset_index.lookup_position(bound))
        for pos, h in self.iter_headers(end, limit):
            if pos + h.size > bound:
                break
            end = pos + h.size
        return FileSlice(self._fd, start, end - start)

    def read_bytes(self, position: int, size: int) -> bytes:
        data = os.pread(self._fd, size, position)
        if len(data) != size:
            raise rb.CorruptRecordError("segment shorter than its batch headers say")
        return data

    def read_next_offset(self) -> int:
        """One past the last offset in the segment (the base offset when empty)."""
        next_offset = self.base_offset
        for _, header in self.iter_headers(self.offset_index.last_entry()[1]):
            next_offset = header.last_offset + 1
        return next_offset

    # -- timestamps ----------------------------------------------------------------------------

    @property
    def max_timestamp_and_offset(self) -> tuple[int, int]:
        """(largest batch max timestamp, last offset of that batch); (-1, base) when none."""
        if self._max_ts is None:
            ts, offset = self.time_index.last_entry()
            best = (ts, offset)
            pos = self.offset_index.lookup(offset)[1] if ts >= 0 else 0
            for _, header in self.iter_headers(pos):
                if header.max_timestamp > best[0]:
                    best = (header.max_timestamp, header.last_offset)
            self._max_ts = best
        return self._max_ts

    @property
    def max_timestamp(self) -> int:
        return self.max_timestamp_and_offset[0]

    @property
    def last_modified_ms(self) -> int:
        return int(os.fstat(self._fd).st_mtime * 1000)

    @property
    def largest_timestamp(self) -> int:
        """What time retention compares: the max timestamp, else the file's mtime."""
        ts = self.max_timestamp
        return ts if ts >= 0 else self.last_modified_ms

    def first_batch_timestamp(self) -> int | None:
        """The first batch's max timestamp (what roll and max.compaction.lag.ms look at)."""
        if self._rolling_timestamp is None and self.size > 0:
            self._rolling_timestamp = self.header_at(0).max_timestamp
        return self._rolling_timestamp

    def should_roll(
        self, config: LogConfig, size: int, max_timestamp: int, last_offset: int, now_ms: int
    ) -> bool:
        """Kafka's roll rules: size, age (first batch timestamp or creation), full indexes."""
        if self.size == 0:
            return last_offset - self.base_offset > INT_MAX
        rolling = self.first_batch_timestamp()
        waited = (
            max_timestamp - rolling
            if rolling is not None and rolling >= 0
            else now_ms - self.created_ms
        )
        return (
            self.size > config.segment_bytes - size
            or waited > config.segment_ms - self.roll_jitter_ms
            or self.offset_index.is_full
            or self.time_index.is_full
            or last_offset - self.base_offset > INT_MAX
        )

    def find_offset_by_timestamp(
        self, timestamp: int, starting_offset: int
    ) -> tuple[int, int, int] | None:
        """(timestamp, offset, leader epoch) of the first record at/after `timestamp`."""
        from ..records.record import decode_batch

        _, ts_offset = self.time_index.lookup(timestamp)
        begin = self.offset_index.lookup(max(ts_offset, starting_offset))[1]
        for pos, header in self.iter_headers(begin):
            if header.max_timestamp < timestamp or header.last_offset < starting_offset:
                continue
            _, records = decode_batch(self.read_bytes(pos, header.size), check_crc=False)
            for record in records:
                if record.timestamp >= timestamp and record.offset >= starting_offset:
                    return record.timestamp, record.offset, header.partition_leader_epoch
        return None

    # -- writing -------------------------------------------------------------------------------

    def append(self, buf: bytearray | memoryview, batches: Sequence[BatchAppend]) -> None:
        """Write the whole buffer with one write, then index its batches."""
        physical = self.size
        max_ts = self.max_timestamp_and_offset if physical else (-1, self.base_offset)
        view = memoryview(buf)
        total = len(view)
        written = 0
        try:
            while written < total:
                written += os.write(self._fd, view[written:])
        except BaseException:
            if written:
                os.ftruncate(self._fd, physical)
            raise
        self.size = physical + total
        if physical == 0:
            self._rolling_timestamp = max(b.max_timestamp for b in batches)
        interval = self.index_interval_bytes
        since = self.bytes_since_last_index_entry
        for b in batches:
            if b.max_timestamp > max_ts[0]:
                max_ts = (b.max_timestamp, b.last_offset)
            if since > interval and not (self.offset_index.is_full or self.time_index.is_full):
                self.offset_index.append(b.last_offset, physical + b.position)
                self.time_index.maybe_append(*max_ts)
                since = 0
            since += b.size
        self.bytes_since_last_index_entry = since
        self._max_ts = max_ts

    def recover(self, config: LogConfig) -> int:
        """CRC-check every batch, rebuild both indexes, cut the file after the last valid batch.

        Returns the number of bytes truncated.
        """
        self.offset_index.reset(config.segment_index_bytes)
        self.time_index.reset(config.segment_index_bytes)
        # Rebuilt by the replay of the producer state over this segment (the layer above).
        self.txn_index.reset()
        self.index_interval_bytes = config.index_interval_bytes
        valid = 0
        last_index_pos = 0
        max_ts = (-1, self.base_offset)
        next_min = self.base_offset
        buf = b""
        buf_start = 0
        file_size = os.fstat(self._fd).st_size
        while valid < file_size:
            rel = valid - buf_start
            if rel + rb.LOG_OVERHEAD > len(buf):
                buf, buf_start, rel = os.pread(self._fd, _RECOVERY_CHUNK, valid), valid, 0
                if len(buf) < rb.LOG_OVERHEAD:
                    break
            size = rb.LOG_OVERHEAD + int.from_bytes(buf[rel + 8 : rel + 12], "big", signed=True)
            if size < rb.HEADER_SIZE or valid + size > file_size:
                break
            if rel + size > len(buf):
                buf = os.pread(self._fd, max(_RECOVERY_CHUNK, size), valid)
                buf_start, rel = valid, 0
            try:
                header = rb.validate(buf, rel)
            except RecordsError as exc:
                log.warning("%s: invalid batch at position %d: %s", self.log_path, valid, exc)
                break
            if header.base_offset < next_min or header.last_offset - self.base_offset > INT_MAX:
                log.warning("%s: out of order offset at position %d", self.log_path, valid)
                break
            next_min = header.last_offset + 1
            if header.max_timestamp > max_ts[0]:
                max_ts = (header.max_timestamp, header.last_offset)
            if valid - last_index_pos > config.index_interval_bytes:
                if not self.offset_index.is_full:
                    self.offset_index.append(header.last_offset, valid)
                if not self.time_index.is_full:
                    self.time_index.maybe_append(*max_ts)
                last_index_pos = valid
            valid += size
        truncated = file_size - valid
        if truncated:
            log.warning("%s: truncating %d invalid bytes at %d", self.log_path, truncated, valid)
            os.ftruncate(self._fd, valid)
        self.size = valid
        self.time_index.maybe_append(*max_ts, skip_full_check=True)
        self.offset_index.trim()
        self.time_index.trim()
        self._max_ts = max_ts
        self._rolling_timestamp = None
        self.bytes_since_last_index_entry = valid - last_index_pos
        return truncated

    def sanity_check(self, next_base_offset: int | None) -> None:
        """Cheap checks that the index files plausibly describe this log (raises CorruptIndex)."""
        oi, ti = self.offset_index, self.time_index
        for index in (oi, ti):
            if index.newly_created:
                raise CorruptIndex(f"{index.path} is missing")
            if index.length % index.entry.size and not index.active:
                raise CorruptIndex(f"{index.path} has a partial entry")
        upper = next_base_offset if next_base_offset is not None else 1 << 63
        if oi.entries:
            first_off, first_pos = oi.entry_at(0)
            last_off, last_pos = oi.last_entry()
            if first_off < self.base_offset or first_pos < 0 or last_off >= upper:
                raise CorruptIndex(f"{oi.path}: entries outside the segment")
            if oi.entries > 1 and (last_off <= first_off or last_pos <= first_pos):
                raise CorruptIndex(f"{oi.path}: entries not increasing")
            for off, pos in ((first_off, first_pos), (last_off, last_pos)):
                if pos >= self.size:
                    raise CorruptIndex(f"{oi.path}: position {pos} past the end of the log")
                try:
                    header = self.header_at(pos)
                except RecordsError:
                    raise CorruptIndex(f"{oi.path}: position {pos} is not a batch") from None
                if not header.base_offset <= off < upper:
                    raise CorruptIndex(f"{oi.path}: entry {off} does not match the batch at {pos}")
        if ti.entries:
            first_ts, first_off = ti.entry_at(0)
            last_ts, last_off = ti.last_entry()
            if last_ts < first_ts or first_off < self.base_offset or last_off >= upper:
                raise CorruptIndex(f"{ti.path}: entries outside the segment")
            if ti.entries > 1 and last_off < first_off:
                raise CorruptIndex(f"{ti.path}: entries not increasing")
        self.txn_index.sanity_check()

    def truncate_to(self, offset: int, config: LogConfig, now_ms: int) -> int:
        """Drop the batch holding `offset` and everything after it; returns bytes removed."""
        found = self.translate_offset(offset)
        self.make_active(config)
        if found is None:
            return 0
        position = found[0]
        self.offset_index.truncate_to(offset)
        self.time_index.truncate_to(offset)
        self.txn_index.truncate_to(offset)
        os.ftruncate(self._fd, position)
        removed = self.size - position
        self.size = position
        if position == 0:
            self.created_ms = now_ms
            self._rolling_timestamp = None
        self.bytes_since_last_index_entry = 0
        self._max_ts = None
        return removed

    def make_active(self, config: LogConfig) -> None:
        """Become the segment appends go to: indexes writable and preallocated again."""
        self.index_interval_bytes = config.index_interval_bytes
        for index in (self.offset_index, self.time_index):
            if not index.active:
                index.make_active(config.segment_index_bytes)

    def on_become_inactive(self) -> None:
        """Write the final time index entry and trim both indexes (the segment rolled)."""
        ts, offset = self.max_timestamp_and_offset
        if self.time_index.active:
            self.time_index.maybe_append(ts, offset, skip_full_check=True)
        self.offset_index.trim()
        self.time_index.trim()

    def flush(self) -> None:
        os.fsync(self._fd)
        self.offset_index.flush()
        self.time_index.flush()
        self.txn_index.flush()

    def close(self) -> None:
        if self.closed:
            return
        if self.offset_index.active or self.time_index.active:
            self.on_become_inactive()
        self.offset_index.close()
        self.time_index.close()
        os.close(self._fd)
        self.closed = True

    # -- deletion ------------------------------------------------------------------------------

    def paths(self) -> list[Path]:
        return [self.log_path, self.offset_index.path, self.time_index.path, self.txn_index.path]

    def rename_to_deleted(self) -> None:
        """Mark the files for deletion; the fd stays open so in-flight slices remain valid."""
        new_log = self.log_path.with_name(self.log_path.name + DELETED_SUFFIX)
        os.replace(self.log_path, new_log)
        self.log_path = new_log
        for index in (self.offset_index, self.time_index):
            if index.active:
                index.trim()
            index.rename(index.path.with_name(index.path.name + DELETED_SUFFIX))
        txn = self.txn_index
        txn.rename(txn.path.with_name(txn.path.name + DELETED_SUFFIX))

    def move_to(self, directory: Path) -> None:
        """Follow a rename of the partition directory (paths only; fds are unaffected)."""
        self.log_path = Path(directory) / self.log_path.name
        for index in (self.offset_index, self.time_index, self.txn_index):
            index.path = Path(directory) / index.path.name

    def delete_files(self) -> None:
        if not self.closed:
            self.offset_index.delete_file()
            self.time_index.delete_file()
            os.close(self._fd)
            self.closed = True
        for path in self.paths():
            try:
                os.unlink(path)
            except FileNotFoundError:
                pass

    def __repr__(self) -> str:
        return f"LogSegment(base={self.base_offset}, size={self.size})"
