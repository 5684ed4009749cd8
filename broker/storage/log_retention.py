"""Moving a partition log's start forward: DeleteRecords, time and size retention, and the
deferred unlinking of the segments they drop (file.delete.delay.ms).

A mixin of `Log`, kept apart because none of it is on the append or read path; it works on the
log's segment list and offsets, declared below.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING

from .errors import OffsetOutOfRange, guard_io
from .segment import LogSegment

if TYPE_CHECKING:
    from pathlib import Path

    from .leader_epoch import LeaderEpochCache
    from .log_config import LogConfig


class LogRetention:
    """Retention and log-start movement over the state `Log` owns."""

    dir: Path
    config: LogConfig
    clock: Callable[[], int]
    epoch_cache: LeaderEpochCache
    _segments: list[LogSegment]
    _bases: list[int]
    _pending_deletes: list[tuple[int, LogSegment]]
    _log_start: int
    _leo: int
    _hw: int
    _recovery_point: int

    if TYPE_CHECKING:

        @property
        def size(self) -> int: ...

        def roll(self, expected_next_offset: int | None = None) -> LogSegment: ...

    @guard_io
    def delete_records_before(self, offset: int) -> int:
        """DeleteRecords: move the log start offset up to `offset` (at most the high watermark)
        and drop the segments wholly below it. Returns the new log start offset."""
        if offset > self._hw:
            raise OffsetOutOfRange(
                f"cannot move the log start offset of {self.dir.name} to {offset}, "
                f"beyond the high watermark {self._hw}"
            )
        self._increment_log_start(offset)
        self._delete_log_start_breached()
        return self._log_start

    def _increment_log_start(self, offset: int) -> None:
        if offset <= self._log_start:
            return
        self._log_start = offset
        self._hw = max(self._hw, offset)
        self._recovery_point = max(self._recovery_point, offset)
        self.epoch_cache.truncate_from_start(offset)

    @guard_io
    def delete_old_segments(self, now: int | None = None) -> int:
        """Retention: segments past retention.ms or beyond retention.bytes, and segments below
        the log start offset. Returns how many were deleted."""
        now = self.clock() if now is None else now
        deleted = self._delete_log_start_breached()
        if self.config.delete:
            deleted += self._delete_retention_size_breached()
            deleted += self._delete_retention_ms_breached(now)
        return deleted

    def _delete_log_start_breached(self) -> int:
        return self._delete_where(
            lambda seg, nxt: nxt is not None and nxt.base_offset <= self._log_start
        )

    def _delete_retention_ms_breached(self, now: int) -> int:
        retention = self.config.retention_ms
        if retention < 0:
            return 0
        return self._delete_where(lambda seg, nxt: now - seg.largest_timestamp > retention)

    def _delete_retention_size_breached(self) -> int:
        retention = self.config.retention_bytes
        size = self.size
        if retention < 0 or size < retention:
            return 0
        diff = size - retention

        def over(seg: LogSegment, nxt: LogSegment | None) -> bool:
            nonlocal diff
            if diff - seg.size >= 0:
                diff -= seg.size
                return True
            return False

        return self._delete_where(over)

    def _delete_where(self, predicate: Callable[[LogSegment, LogSegment | None], bool]) -> int:
        deletable: list[LogSegment] = []
        segs = self._segments
        for i, seg in enumerate(segs):
            nxt = segs[i + 1] if i + 1 < len(segs) else None
            upper = nxt.base_offset if nxt is not None else self._leo
            if nxt is None and seg.size == 0:
                break
            if not (self._hw >= upper and predicate(seg, nxt)):
                break
            deletable.append(seg)
        if not deletable:
            return 0
        if len(deletable) == len(self._segments):
            # A log always keeps one segment: roll so the expired active one can go.
            self.roll()
        self._remove_segments(deletable)
        self._increment_log_start(self._segments[0].base_offset)
        return len(deletable)

    def _remove_segments(self, doomed: list[LogSegment]) -> None:
        due = self.clock() + self.config.file_delete_delay_ms
        ids = {id(s) for s in doomed}
        self._segments = [s for s in self._segments if id(s) not in ids]
        self._bases = [s.base_offset for s in self._segments]
        for seg in doomed:
            if seg.offset_index.active:
                seg.on_become_inactive()
            try:
                seg.rename_to_deleted()
            except FileNotFoundError:
                pass
            self._pending_deletes.append((due, seg))

    @guard_io
    def remove_deleted_segments(self, now: int | None = None, *, force: bool = False) -> int:
        """Close and unlink the files of segments deleted at least file.delete.delay.ms ago
        (the delay lets in-flight sendfiles from their fds finish)."""
        now = self.clock() if now is None else now
        keep, done = [], 0
        for due, seg in self._pending_deletes:
            if force or due <= now:
                seg.delete_files()
                done += 1
            else:
                keep.append((due, seg))
        self._pending_deletes = keep
        return done
