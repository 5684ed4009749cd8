"""Which log the cleaner works on next, and how far each log is clean (Kafka's
LogCleanerManager).

Runs on the thread that owns the logs (the broker's event loop): the cleaner threads ask it,
through their owner-call, for the dirtiest log (`grab_filthiest`), to swap a cleaned group in
(`swap`), and to record the end of a round (`done_cleaning`). The first dirty offset of every
compacted log is kept per log dir in `cleaner-offset-checkpoint` (Kafka's offset-checkpoint
format). A log being cleaned can be aborted and paused (its deletion, a move between log dirs,
a failed dir); an aborted round's swaps are refused, so nothing it wrote reaches the log.
Cleaning stops at the last stable offset (the high watermark without open transactions) and
the task carries the aborted transactions of its range, from the segments' .txnindex files.
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING

from .checkpoint import (
    CLEANER_CHECKPOINT,
    CheckpointError,
    read_offset_checkpoint,
    write_offset_checkpoint,
)
from .cleaner import CleanTask, SegmentRef
from .errors import KafkaStorageError
from .log import Log, now_ms

if TYPE_CHECKING:
    from .log_manager import LogManager

log = logging.getLogger(__name__)

TopicPartition = tuple[str, int]

CLEANING = "cleaning"
ABORTED = "aborted"


@dataclass
class LogToClean:
    """A compacted log's cleanable range and how dirty it is."""

    tp: TopicPartition
    log: Log
    first_dirty_offset: int
    first_uncleanable_offset: int
    clean_bytes: int
    cleanable_bytes: int
    needs_compaction_now: bool

    @property
    def total_bytes(self) -> int:
        return self.clean_bytes + self.cleanable_bytes

    @property
    def cleanable_ratio(self) -> float:
        return self.cleanable_bytes / self.total_bytes if self.total_bytes else 0.0


def _segments_in(log_: Log, start: int, end: int) -> list:
    """The segments holding offsets in [start, end)."""
    segs = log_.segments
    return [
        s
        for i, s in enumerate(segs)
        if s.base_offset < end and (i + 1 == len(segs) or segs[i + 1].base_offset > start)
    ]


def _non_active_from(log_: Log, offset: int) -> list:
    """The inactive segments from the one holding `offset` on."""
    return _segments_in(log_, offset, log_.active_segment.base_offset)


class CleanerManager:
    def __init__(self, log_manager: LogManager, *, clock: Callable[[], int] = now_ms) -> None:
        self.log_manager = log_manager
        self.clock = clock
        self._checkpoints: dict[Path, dict[TopicPartition, int]] = {}
        # tp -> CLEANING, ABORTED, or a pause count (int)
        self.in_progress: dict[TopicPartition, str | int] = {}
        # logs whose round is running: the live Log and its generation when the round began
        self._running: dict[TopicPartition, tuple[Log, int]] = {}
        self.uncleanable: dict[Path, set[TopicPartition]] = {}
        # metrics (read from the metrics thread)
        self.dirtiest_ratio = 0.0
        self.time_of_last_run = clock()
        self.max_compaction_delay_ms = 0

    # -- checkpoints ---------------------------------------------------------------------------

    def checkpoints(self, log_dir: Path) -> dict[TopicPartition, int]:
        found = self._checkpoints.get(log_dir)
        if found is None:
            try:
                found = read_offset_checkpoint(log_dir / CLEANER_CHECKPOINT)
            except (CheckpointError, OSError) as exc:
                log.warning("ignoring unreadable cleaner checkpoint: %s", exc)
                found = {}
            self._checkpoints[log_dir] = found
        return found

    def all_checkpoints(self) -> dict[TopicPartition, int]:
        out: dict[TopicPartition, int] = {}
        for d in self.log_manager.online_dirs():
            out.update(self.checkpoints(d))
        return out

    def update_checkpoint(self, log_dir: Path, tp: TopicPartition, offset: int | None) -> None:
        """Set (None: remove) one log's first dirty offset and rewrite that dir's file."""
        points = self.checkpoints(log_dir)
        if offset is None:
            if points.pop(tp, None) is None:
                return
        else:
            points[tp] = offset
        try:
            write_offset_checkpoint(log_dir / CLEANER_CHECKPOINT, points)
        except OSError as exc:
            self.log_manager.dir_failed(log_dir, f"cannot write {CLEANER_CHECKPOINT}: {exc}")

    def alter_checkpoint_dir(self, tp: TopicPartition, source: Path, dest: Path) -> None:
        """A log moved between dirs (AlterReplicaLogDirs): its checkpoint moves with it."""
        offset = self.checkpoints(source).get(tp)
        self.update_checkpoint(source, tp, None)
        if offset is not None:
            self.update_checkpoint(dest, tp, offset)

    def forget(self, tp: TopicPartition, log_dir: Path) -> None:
        """The log is deleted: no more cleaning, no checkpoint."""
        self.abort_and_pause(tp)
        self.in_progress.pop(tp, None)
        self.update_checkpoint(log_dir, tp, None)
        for parts in self.uncleanable.values():
            parts.discard(tp)

    def handle_dir_failure(self, log_dir: Path) -> None:
        self._checkpoints.pop(log_dir, None)
        self.uncleanable.pop(log_dir, None)
        for tp, (log_, _) in list(self._running.items()):
            if log_.dir.parent == log_dir:
                self.abort_and_pause(tp)

    # -- what to clean -------------------------------------------------------------------------

    def cleanable_offsets(
        self, log_: Log, last_clean: int | None, now: int
    ) -> tuple[int, int, bool]:
        """(first dirty offset, first uncleanable offset, checkpoint needs rewriting)."""
        start = log_.log_start_offset
        checkpoint = start if last_clean is None else last_clean
        force = False
        if log_.truncated_to is not None:
            if log_.truncated_to < checkpoint:
                checkpoint, force = log_.truncated_to, True
            log_.truncated_to = None
        if checkpoint < start:
            first_dirty, force = start, True
        elif checkpoint > log_.log_end_offset:
            log.warning(
                "resetting the first dirty offset of %s to %d: the checkpointed %d is past "
                "its end", log_.dir.name, start, checkpoint,
            )  # fmt: skip
            first_dirty, force = start, True
        else:
            first_dirty = checkpoint
        # Never past the last stable offset (every transaction below it is decided), never
        # into the active segment, never segments younger than min.compaction.lag.ms.
        stable = log_.stable_offset() if log_.stable_offset is not None else log_.high_watermark
        bounds = [stable, log_.active_segment.base_offset]
        lag = max(log_.config.min_compaction_lag_ms, 0)
        if lag > 0:
            for seg in _non_active_from(log_, first_dirty):
                if seg.largest_timestamp > now - lag:
                    bounds.append(seg.base_offset)
                    break
        return first_dirty, max(first_dirty, min(bounds)), force

    def max_compaction_delay(self, log_: Log, first_dirty: int, now: int) -> int:
        """How long past max.compaction.lag.ms the oldest dirty segment is (0: not yet)."""
        stamps = [
            ts
            for seg in _non_active_from(log_, first_dirty)
            if (ts := seg.first_batch_timestamp()) is not None and ts > 0
        ]
        if not stamps:
            return 0
        until = now - max(log_.config.max_compaction_lag_ms, 0)
        return max(until - min(stamps), 0)

    def log_to_clean(self, tp: TopicPartition, log_: Log, now: int) -> LogToClean:
        log_dir = log_.dir.parent
        first_dirty, uncleanable, force = self.cleanable_offsets(
            log_, self.checkpoints(log_dir).get(tp), now
        )
        if force:
            self.update_checkpoint(log_dir, tp, first_dirty)
        delay = self.max_compaction_delay(log_, first_dirty, now)
        self.max_compaction_delay_ms = max(self.max_compaction_delay_ms, delay)
        first = next(iter(_non_active_from(log_, uncleanable)), log_.active_segment)
        first_uncleanable = first.base_offset
        clean = sum(s.size for s in log_.segments if s.base_offset < first_dirty)
        cleanable = sum(
            s.size
            for s in _segments_in(log_, min(first_dirty, first_uncleanable), first_uncleanable)
        )
        return LogToClean(tp, log_, first_dirty, first_uncleanable, clean, cleanable, delay > 0)

    def grab_filthiest(self, now: int | None = None) -> CleanTask | None:
        """The dirtiest compacted log past its min.cleanable.dirty.ratio (or past its
        max.compaction.lag.ms) as a task, marked in progress; None when there is none."""
        now = self.clock() if now is None else now
        self.time_of_last_run = now
        self.max_compaction_delay_ms = 0
        candidates = []
        for tp, log_ in self.log_manager.all_logs().items():
            if not log_.config.compact or tp in self.in_progress:
                continue
            if tp in self.uncleanable.get(log_.dir.parent, ()):
                continue
            ltc = self.log_to_clean(tp, log_, now)
            if ltc.total_bytes > 0:
                candidates.append(ltc)
        self.dirtiest_ratio = max((c.cleanable_ratio for c in candidates), default=0.0)
        cleanable = [
            c
            for c in candidates
            if (c.needs_compaction_now and c.cleanable_bytes > 0)
            or c.cleanable_ratio > c.log.config.min_cleanable_dirty_ratio
        ]
        if not cleanable:
            return None
        best = max(cleanable, key=lambda c: c.cleanable_ratio)
        self.in_progress[best.tp] = CLEANING
        self._running[best.tp] = (best.log, best.log.generation)
        return self.task_for(best, now)

    @staticmethod
    def task_for(ltc: LogToClean, now: int) -> CleanTask:
        log_ = ltc.log
        segments = tuple(
            SegmentRef(
                s.base_offset,
                str(s.log_path),
                s.size,
                s.offset_index.entries * s.offset_index.entry.size,
                s.time_index.entries * s.time_index.entry.size,
                s.last_modified_ms,
            )
            for s in log_.segments
            if s.base_offset < ltc.first_uncleanable_offset
        )
        producers = log_.active_producers() if log_.active_producers is not None else {}
        start = segments[0].base_offset if segments else ltc.first_uncleanable_offset
        aborted = log_.collect_aborted(start, ltc.first_uncleanable_offset) if segments else []
        return CleanTask(
            topic=log_.topic,
            partition=log_.partition,
            directory=str(log_.dir),
            segments=segments,
            first_dirty_offset=ltc.first_dirty_offset,
            first_uncleanable_offset=ltc.first_uncleanable_offset,
            config=log_.config,
            now_ms=now,
            active_producers=producers,
            aborted=tuple(aborted),
        )

    # -- a round's progress --------------------------------------------------------------------

    def swap(self, task: CleanTask, base: int, old_bases: list[int]) -> bool:
        """Put a cleaned group into the live log, unless the round was aborted or the log
        changed (deleted, moved, truncated) since the round began."""
        tp = (task.topic, task.partition)
        running = self._running.get(tp)
        if running is None or self.in_progress.get(tp) != CLEANING:
            return False
        log_, generation = running
        if self.log_manager.get_log(*tp) is not log_ or str(log_.dir) != task.directory:
            return False
        try:
            return log_.replace_segments(base, old_bases, generation)
        except KafkaStorageError:
            return False  # the dir went offline (the log told the log manager)

    def done_cleaning(self, task: CleanTask, end_offset: int | None) -> None:
        """The round ended: `end_offset` is the new first dirty offset (None: aborted or
        failed, the checkpoint stays)."""
        tp = (task.topic, task.partition)
        self._running.pop(tp, None)
        state = self.in_progress.get(tp)
        if state == CLEANING:
            del self.in_progress[tp]
            log_ = self.log_manager.get_log(*tp)
            if end_offset is not None and log_ is not None and str(log_.dir) == task.directory:
                self.update_checkpoint(log_.dir.parent, tp, end_offset)
        elif state == ABORTED:
            self.in_progress[tp] = 1

    def mark_uncleanable(self, task: CleanTask) -> None:
        """An unexpected error: leave the log alone until it is deleted or moved (Kafka's
        uncleanable partitions)."""
        tp = (task.topic, task.partition)
        self.done_cleaning(task, None)
        self.uncleanable.setdefault(Path(task.directory).parent, set()).add(tp)

    def abort_and_pause(self, tp: TopicPartition) -> None:
        """Stop any round on `tp` (its swaps are refused from now on) and pause it: the log is
        going away (deleted, or its dir failed)."""
        state = self.in_progress.get(tp)
        if state is None:
            self.in_progress[tp] = 1
        elif state == CLEANING:
            self.in_progress[tp] = ABORTED
        elif isinstance(state, int):
            self.in_progress[tp] = state + 1

    def uncleanable_count(self, log_dir: Path) -> int:
        return len(self.uncleanable.get(log_dir, ()))
