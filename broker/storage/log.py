"""A partition's log: an ordered list of segments in `<log.dir>/<topic>-<partition>/`.

Appends patch base offsets and leader epochs into the caller's buffer and write it with one
`os.write`; reads return FileSlices of whole batches for sendfile. Opening a log loads its
segments, checks their indexes, and (after a crash) CRC-checks every batch past the recovery point,
cutting the log after the last valid one.

The log is not thread-safe: the broker drives it from its event loop.
"""

from __future__ import annotations

import bisect
import logging
import os
import shutil
import time
import uuid
from collections.abc import Callable, Sequence
from concurrent.futures import Executor, Future
from pathlib import Path
from typing import NamedTuple

from ..records import batch as rb
from .checkpoint import (
    PARTITION_METADATA,
    fsync_path,
    read_partition_metadata,
    write_partition_metadata,
)
from .checkpoint import fsync_dir as _fsync_dir
from .crash_points import crash_point
from .errors import (
    OffsetOutOfRange,
    RecordListTooLarge,
    UnexpectedAppendOffset,
    guard_io,
)
from .file_slice import FileSlice
from .leader_epoch import LeaderEpochCache
from .log_config import LogConfig
from .log_loading import load_segments
from .log_retention import LogRetention
from .log_timestamps import LogTimestamps
from .partition_dir import parse_topic_partition, strip_dir_suffix
from .segment import (
    CLEANED_SUFFIX,
    INDEX_SUFFIX,
    LOG_SUFFIX,
    SWAP_SUFFIX,
    TIMEINDEX_SUFFIX,
    BatchAppend,
    LogSegment,
    segment_paths,
)
from .txn_index import TXN_INDEX_SUFFIX, AbortedTxn

logger = logging.getLogger(__name__)


def now_ms() -> int:
    return time.time_ns() // 1_000_000


class AppendResult(NamedTuple):
    first_offset: int
    last_offset: int
    max_timestamp: int
    log_start_offset: int
    offset_of_max_timestamp: int = -1


class Log(LogRetention, LogTimestamps):
    def __init__(
        self,
        directory: str | Path,
        config: LogConfig,
        *,
        recovery_point: int = 0,
        log_start_offset: int = 0,
        clean_shutdown: bool = False,
        clock: Callable[[], int] = now_ms,
    ) -> None:
        self.dir = Path(directory)
        parsed = parse_topic_partition(strip_dir_suffix(self.dir.name))
        self.topic, self.partition = parsed if parsed else (self.dir.name, 0)
        self.config = config
        self.clock = clock
        self.hw_tracks_leo = True
        self._segments: list[LogSegment] = []
        self._bases: list[int] = []
        self._pending_deletes: list[tuple[int, LogSegment]] = []
        self._topic_id: uuid.UUID | None = None
        self._dir_dirty = False
        self._flush_pending_to = -1
        self._closed = False
        # Where the fsyncs of rolled segments run when set (the broker's log manager sets one
        # worker): a 64 MiB segment's fsync takes tens of milliseconds, which the thread that
        # appends should not wait out, as Kafka's roll hands its flush to the scheduler. The
        # flush in flight: (its future, the offset it makes durable, the log's generation).
        self.flusher: Executor | None = None
        self._background_flush: tuple[Future[None], int, int] | None = None
        # Hooks for the layer above (the partition's producer state, which snapshots itself):
        # on_roll(new segment base offset) after each roll, on_close() once before closing.
        self.on_roll: Callable[[int], None] | None = None
        self.on_close: Callable[[], None] | None = None
        # Base offset of the first segment recovery rebuilt (its .txnindex included), or None:
        # the producer state replays the log from there to write the aborted transactions again.
        self.recovered_from: int | None = None
        # Told of any OSError from this log's files (the log manager takes the dir offline).
        self.on_io_error: Callable[[OSError], None] | None = None
        # For the cleaner: producer id -> offset of its last batch (those batches must stay),
        # and the last stable offset (it cleans no further); both from the producer state.
        self.active_producers: Callable[[], dict[int, int]] | None = None
        self.stable_offset: Callable[[], int] | None = None
        # Bumped by every truncation: a cleaning planned before one is not swapped in.
        self.generation = 0
        # The lowest offset a truncation cut the log to since the cleaner last looked.
        self.truncated_to: int | None = None
        self.dir.mkdir(parents=True, exist_ok=True)
        self._load(recovery_point, log_start_offset, clean_shutdown)
        self.last_flush_ms = self.clock()

    # -- loading -------------------------------------------------------------------------------

    def _load(self, recovery_point: int, log_start_offset: int, clean: bool) -> None:
        loaded = load_segments(
            self.dir,
            self.config,
            recovery_point=recovery_point,
            log_start_offset=log_start_offset,
            clean=clean,
            now=self.clock(),
        )
        self._segments = loaded.segments
        self._bases = [s.base_offset for s in self._segments]
        self._dir_dirty = loaded.created
        self._leo = loaded.next_offset
        self.recovered_from = loaded.recovered_from

        self._log_start = max(log_start_offset, self._segments[0].base_offset)
        self._recovery_point = self._leo if clean else min(recovery_point, self._leo)
        self._recovery_point = max(self._recovery_point, self._log_start)
        self._hw = self._leo
        self.epoch_cache = LeaderEpochCache.load(self.dir)
        self.epoch_cache.truncate_from_end(self._leo)
        self.epoch_cache.truncate_from_start(self._log_start)
        if self._log_start > self._leo:
            # Recovery cut the log below a start offset DeleteRecords had already moved past.
            self.truncate_fully_and_start_at(self._log_start)

    @guard_io
    def replace_segments(self, base: int, old_bases: Sequence[int], generation: int) -> bool:
        """Put the cleaner's `<base>.*.cleaned` segment in place of the segments at
        `old_bases`; False (nothing changed) when those are no longer the log's, unchanged.

        Crash-safe in Kafka's order: the cleaned files become `.swap` (the log file first:
        that rename commits), the old segments become `.deleted` (their fds stay open for
        in-flight reads until file.delete.delay.ms), then the `.swap` suffix goes.
        """
        if self._closed or generation != self.generation or not old_bases:
            return False
        try:
            i = self._bases.index(old_bases[0])
        except ValueError:
            return False
        old = self._segments[i : i + len(old_bases)]
        if [s.base_offset for s in old] != list(old_bases) or self.active_segment in old:
            return False
        cleaned = segment_paths(self.dir, base, CLEANED_SUFFIX)
        swap = segment_paths(self.dir, base, SWAP_SUFFIX)
        # The .log (always) and whichever indexes were written (no .txnindex without aborts).
        present = [k for k, path in enumerate(cleaned) if k == 0 or path.exists()]
        for k in present:
            os.replace(cleaned[k], swap[k])
        crash_point("cleaner-swap-renamed")
        self._remove_segments(old)
        crash_point("cleaner-old-deleted")
        final = segment_paths(self.dir, base)
        for k in present:
            os.replace(swap[k], final[k])
        _fsync_dir(self.dir)
        self._segments.insert(i, LogSegment(self.dir, base, self.config, now_ms=self.clock()))
        self._bases = [s.base_offset for s in self._segments]
        crash_point("cleaner-swapped")
        return True

    def first_batch_offset(self) -> int:
        """Base offset of the first batch holding the log start offset or later (the log end
        offset when there is none): where a copy of this log starts."""
        for seg in self._segments:
            found = seg.translate_offset(self._log_start)
            if found is not None:
                return found[1].base_offset
        return self._leo

    def _note_truncation(self, offset: int) -> None:
        self.generation += 1
        self.truncated_to = offset if self.truncated_to is None else min(self.truncated_to, offset)

    def _add_segment(self, seg: LogSegment) -> None:
        self._segments.append(seg)
        self._bases.append(seg.base_offset)
        self._dir_dirty = True

    # -- properties ----------------------------------------------------------------------------

    @property
    def log_start_offset(self) -> int:
        return self._log_start

    @property
    def log_end_offset(self) -> int:
        return self._leo

    @property
    def high_watermark(self) -> int:
        return self._hw

    @high_watermark.setter
    def high_watermark(self, offset: int) -> None:
        self._hw = min(max(offset, self._log_start), self._leo)

    @property
    def recovery_point(self) -> int:
        return self._recovery_point

    @property
    def segments(self) -> tuple[LogSegment, ...]:
        return tuple(self._segments)

    @property
    def active_segment(self) -> LogSegment:
        return self._segments[-1]

    @property
    def size(self) -> int:
        return sum(s.size for s in self._segments)

    @property
    def topic_id(self) -> uuid.UUID | None:
        if self._topic_id is None:
            self._topic_id = read_partition_metadata(self.dir / PARTITION_METADATA)
        return self._topic_id

    def assign_topic_id(self, topic_id: uuid.UUID) -> None:
        """Persist the topic id in partition.metadata (written once per partition)."""
        if self.topic_id != topic_id:
            write_partition_metadata(self.dir / PARTITION_METADATA, topic_id)
            self._topic_id = topic_id

    def topic_id_written(self, topic_id: uuid.UUID) -> None:
        """partition.metadata now holds `topic_id`, written (durably) by the log manager for
        many logs at once."""
        self._topic_id = topic_id

    def update_config(self, config: LogConfig) -> None:
        """New settings apply to later appends, rolls, retention and flushes."""
        self.config = config
        self.active_segment.index_interval_bytes = config.index_interval_bytes

    # -- append --------------------------------------------------------------------------------

    @guard_io
    def append(
        self,
        records: bytes | bytearray | memoryview,
        *,
        assign_offsets: bool = True,
        leader_epoch: int = 0,
    ) -> AppendResult:
        """Append already-validated v2 batches.

        Leader path (assign_offsets): base offsets continue from the log end offset and every
        batch gets `leader_epoch`, patched in `records` itself. Follower path: the batches keep
        their offsets and epochs, which must continue the log.
        """
        buf = records if isinstance(records, (bytearray, memoryview)) else bytearray(records)
        total = len(buf)
        if total == 0:
            return AppendResult(self._leo, self._leo - 1, -1, self._log_start)
        if total > self.config.segment_bytes:
            if not assign_offsets:
                return self._append_in_chunks(buf)
            raise RecordListTooLarge(
                f"append of {total} bytes exceeds the segment size {self.config.segment_bytes}"
            )
        next_offset = self._leo
        first_offset = -1
        max_ts, offset_of_max = -1, -1
        batches: list[BatchAppend] = []
        epochs: list[tuple[int, int]] = []
        pos = 0
        while pos < total:
            header = rb.parse_header(buf, pos)
            size = header.size
            if pos + size > total:
                raise rb.CorruptRecordError("partial record batch in append")
            if assign_offsets:
                base = next_offset
                rb.set_base_offset(buf, pos, base)
                rb.set_partition_leader_epoch(buf, pos, leader_epoch)
            else:
                base = header.base_offset
                if base < next_offset:
                    raise UnexpectedAppendOffset(
                        f"batch at offset {base} below the expected {next_offset} in {self.dir.name}"
                    )
                if header.partition_leader_epoch >= 0:
                    epochs.append((header.partition_leader_epoch, base))
            last = base + header.last_offset_delta
            if first_offset < 0:
                first_offset = base
            if header.max_timestamp > max_ts:
                max_ts, offset_of_max = header.max_timestamp, last
            batches.append(BatchAppend(pos, size, last, header.max_timestamp))
            next_offset = last + 1
            pos += size
        if assign_offsets and leader_epoch >= 0:
            epochs.append((leader_epoch, first_offset))

        segment = self._maybe_roll(total, max_ts, next_offset - 1, first_offset)
        segment.append(buf, batches)
        self._leo = next_offset
        if self.hw_tracks_leo:
            self._hw = next_offset
        for epoch, start in epochs:
            latest = self.epoch_cache.latest_epoch
            if latest is None or epoch > latest:
                self.epoch_cache.assign(epoch, start)
        if self._leo - self._recovery_point >= self.config.flush_messages:
            self.flush()
        return AppendResult(first_offset, next_offset - 1, max_ts, self._log_start, offset_of_max)

    @guard_io
    def _append_in_chunks(self, buf: bytearray | memoryview) -> AppendResult:
        """A follower's fetch may exceed segment.bytes: append it in segment-sized runs."""
        view = memoryview(buf)
        limit = self.config.segment_bytes
        results = []
        start = end = 0
        for pos, header in rb.iter_batches(view, check_crc=False):
            if header.size > limit:
                raise RecordListTooLarge(
                    f"batch of {header.size} bytes exceeds the segment size {limit}"
                )
            if pos + header.size - start > limit and end > start:
                results.append(self.append(view[start:end], assign_offsets=False))
                start = pos
            end = pos + header.size
        results.append(self.append(view[start:end], assign_offsets=False))
        best = max(results, key=lambda r: r.max_timestamp)
        return AppendResult(
            results[0].first_offset,
            results[-1].last_offset,
            best.max_timestamp,
            self._log_start,
            best.offset_of_max_timestamp,
        )

    def _maybe_roll(
        self, size: int, max_ts: int, last_offset: int, first_offset: int
    ) -> LogSegment:
        segment = self.active_segment
        if segment.should_roll(self.config, size, max_ts, last_offset, self.clock()):
            segment = self.roll(first_offset)
        return segment

    @guard_io
    def roll(self, expected_next_offset: int | None = None) -> LogSegment:
        """Start a new active segment at the log end offset (or the given later offset)."""
        new_base = max(expected_next_offset or 0, self._leo)
        active = self.active_segment
        if active.size == 0:
            if active.base_offset == new_base:
                return active
            # An empty active segment is replaced rather than left behind.
            self._segments.pop()
            self._bases.pop()
            active.delete_files()
        else:
            active.on_become_inactive()
            self._flush_pending_to = max(self._flush_pending_to, new_base)
        for suffix in (LOG_SUFFIX, INDEX_SUFFIX, TIMEINDEX_SUFFIX, TXN_INDEX_SUFFIX):
            stale = self.dir / f"{new_base:020d}{suffix}"
            if stale.exists():
                logger.warning("%s: deleting stale file %s before rolling", self.dir, stale.name)
                stale.unlink()
        segment = LogSegment(self.dir, new_base, self.config, now_ms=self.clock(), active=True)
        self._add_segment(segment)
        if self.on_roll is not None:
            self.on_roll(new_base)
        return segment

    # -- read ----------------------------------------------------------------------------------

    @guard_io
    def read(
        self,
        offset: int,
        max_bytes: int,
        *,
        max_offset: int | None = None,
        min_one_batch: bool = True,
    ) -> FileSlice | None:
        """Whole batches starting with the one that holds `offset`, at most `max_bytes` of them
        (but the first one whole when `min_one_batch`), none reaching `max_offset` (the high
        watermark for consumers). None when there is nothing to return.
        """
        found = self._read(offset, max_bytes, max_offset, min_one_batch)
        return None if found is None else found[1]

    def read_committed(
        self, offset: int, max_bytes: int, *, max_offset: int, min_one_batch: bool = True
    ) -> tuple[FileSlice | None, list[AbortedTxn]]:
        """`read` up to `max_offset` (the last stable offset), with the aborted transactions
        overlapping the returned batches (a read_committed consumer skips their records)."""
        found = self._read(offset, max_bytes, max_offset, min_one_batch)
        if found is None:
            return None, []
        i, region = found
        seg = self._segments[i]
        end = region.position + region.size
        if end < seg.size:
            upper = seg.header_at(end).base_offset
        else:
            upper = self._bases[i + 1] if i + 1 < len(self._bases) else self._leo
        return region, self.collect_aborted(offset, upper, start_segment=i)

    def _read(
        self, offset: int, max_bytes: int, max_offset: int | None, min_one_batch: bool
    ) -> tuple[int, FileSlice] | None:
        leo = self._leo
        if offset < self._log_start or offset > leo:
            raise OffsetOutOfRange(
                f"offset {offset} is outside [{self._log_start}, {leo}] of {self.dir.name}"
            )
        limit = leo if max_offset is None else min(max_offset, leo)
        if offset >= limit:
            return None
        i = bisect.bisect_right(self._bases, offset) - 1
        while i < len(self._segments):
            seg = self._segments[i]
            next_base = self._bases[i + 1] if i + 1 < len(self._bases) else leo
            max_position = seg.size
            if limit < next_base:
                found = seg.translate_offset(limit)
                if found is not None:
                    max_position = found[0]
            result = seg.read(offset, max_bytes, max_position, min_one_batch)
            if result is not None:
                return (i, result) if result.size else None
            if limit <= next_base:
                return None
            i += 1
        return None

    # -- aborted transactions ------------------------------------------------------------------

    def collect_aborted(
        self, fetch_offset: int, upper_bound: int, *, start_segment: int | None = None
    ) -> list[AbortedTxn]:
        """Aborted transactions with their marker at/after `fetch_offset` and their first
        offset below `upper_bound`, from the segment holding `fetch_offset` onwards: what a
        read_committed fetch returns, and what a log cleaner needs to drop aborted records."""
        i = start_segment
        if i is None:
            i = max(bisect.bisect_right(self._bases, fetch_offset) - 1, 0)
        out: list[AbortedTxn] = []
        for seg in self._segments[i:]:
            found, complete = seg.txn_index.collect(fetch_offset, upper_bound)
            out.extend(found)
            if complete:
                break
        return out

    @guard_io
    def append_aborted_txn(self, txn: AbortedTxn) -> None:
        """Index an aborted transaction in the segment holding its ABORT marker (once)."""
        i = bisect.bisect_right(self._bases, txn.last_offset) - 1
        if i >= 0:
            self._segments[i].txn_index.append(txn)

    # -- truncation (followers) ----------------------------------------------------------------

    @guard_io
    def truncate_to(self, offset: int) -> bool:
        """Remove everything at and after `offset` (follower divergence). True if anything went."""
        if offset < 0:
            raise ValueError("negative truncation offset")
        if offset >= self._leo:
            # No record goes, but an epoch this replica began at the log end as leader and
            # wrote nothing in before the next leader took over must: sent on as its last
            # fetched epoch, the leader answers every fetch with a diverging epoch at once,
            # and the two brokers fetch in a tight loop (Kafka's truncateTo does the same).
            self.epoch_cache.truncate_from_end(self._leo)
            return False
        if offset < self._log_start:
            self.truncate_fully_and_start_at(offset)
            return True
        self._note_truncation(offset)
        self._remove_segments([s for s in self._segments if s.base_offset > offset])
        active = self.active_segment
        active.truncate_to(offset, self.config, self.clock())
        self._leo = active.read_next_offset()
        self._recovery_point = min(self._recovery_point, self._leo)
        self._hw = min(self._hw, self._leo)
        self._flush_pending_to = min(self._flush_pending_to, self._leo)
        self.epoch_cache.truncate_from_end(self._leo)
        return True

    @guard_io
    def truncate_fully_and_start_at(self, offset: int) -> None:
        """Drop every segment and restart the log, empty, at `offset`."""
        self._note_truncation(offset)
        doomed = list(self._segments)
        self._segments, self._bases = [], []
        self._remove_segments(doomed)
        self._add_segment(
            LogSegment(self.dir, offset, self.config, now_ms=self.clock(), active=True)
        )
        self._leo = self._log_start = self._recovery_point = self._hw = offset
        self._flush_pending_to = -1
        self.epoch_cache.clear()

    # -- flush, close --------------------------------------------------------------------------

    @guard_io
    def flush(self, offset: int | None = None) -> None:
        """fsync the segments holding offsets below `offset` (default: everything) and move
        the recovery point there."""
        target = self._leo if offset is None else min(offset, self._leo)
        if target > self._recovery_point:
            first = max(bisect.bisect_right(self._bases, self._recovery_point) - 1, 0)
            for seg in self._segments[first:]:
                if seg.base_offset >= target:
                    break
                seg.flush()
            self._recovery_point = target
        if self._dir_dirty:
            _fsync_dir(self.dir)
            self._dir_dirty = False
        if offset is None:
            self.last_flush_ms = self.clock()

    @guard_io
    def maybe_flush(self, now: int | None = None) -> None:
        """Periodic work: flush segments that rolled (on `flusher` when there is one), and
        everything once flush.ms has passed."""
        now = self.clock() if now is None else now
        self._finish_background_flush()
        if now - self.last_flush_ms >= self.config.flush_ms:
            self.flush()
        elif self._flush_pending_to > self._recovery_point:
            if self.flusher is None:
                self.flush(self._flush_pending_to)
            elif self._background_flush is None:
                self._start_background_flush(self._flush_pending_to)
            else:
                return  # one at a time: what rolled since waits for the next tick
        self._flush_pending_to = -1

    def _start_background_flush(self, target: int) -> None:
        """fsync the inactive segments below `target` on the flusher, by path: a segment
        deleted or swapped meanwhile needs nothing, and no descriptor is shared."""
        assert self.flusher is not None
        first = max(bisect.bisect_right(self._bases, self._recovery_point) - 1, 0)
        paths = [
            p for seg in self._segments[first:] if seg.base_offset < target for p in seg.paths()
        ]
        directory = self.dir if self._dir_dirty else None
        self._dir_dirty = False
        future = self.flusher.submit(_fsync_paths, paths, directory)
        self._background_flush = (future, target, self.generation)

    def _finish_background_flush(self) -> None:
        """Move the recovery point once the flush in flight is done (its OSError is raised
        here, on the log's thread); a truncation since then voids it."""
        if self._background_flush is None or not self._background_flush[0].done():
            return
        future, target, generation = self._background_flush
        self._background_flush = None
        future.result()
        if generation == self.generation:
            self._recovery_point = max(self._recovery_point, min(target, self._leo))

    def close(self) -> None:
        if self._closed:
            return
        if self.on_close is not None:
            self.on_close()
        for seg in self._segments:
            seg.close()
        self.remove_deleted_segments(force=True)
        self._closed = True

    def delete(self) -> None:
        """Close and remove the whole directory now."""
        self.close()
        shutil.rmtree(self.dir, ignore_errors=True)

    def rename_dir(self, new_dir: Path) -> None:
        """Move the partition directory (deletion renames it); open fds keep working."""
        new_dir = Path(new_dir)
        os.replace(self.dir, new_dir)
        self.dir = new_dir
        self.epoch_cache.path = new_dir / self.epoch_cache.path.name
        for seg in self._segments:
            seg.move_to(new_dir)
        for _, seg in self._pending_deletes:
            seg.move_to(new_dir)

    def __repr__(self) -> str:
        return (
            f"Log({self.dir.name}, start={self._log_start}, end={self._leo}, "
            f"segments={len(self._segments)})"
        )


def _fsync_paths(paths: list[Path], directory: Path | None) -> None:
    # A path gone since was deleted or renamed (a promoted future log, a deleted partition).
    for path in paths:
        fsync_path(path, missing_ok=True)
    if directory is not None:
        _fsync_dir(directory, missing_ok=True)
