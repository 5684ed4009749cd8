"""ListOffsets on a partition log: the offset for a timestamp, and the special timestamps
(latest, earliest, max timestamp, earliest local).

A mixin of `Log`, kept apart because none of it is on the append or read path; it works on the
log's segment list and offsets, declared below.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, NamedTuple

from .errors import guard_io

if TYPE_CHECKING:
    from .leader_epoch import LeaderEpochCache
    from .segment import LogSegment

# ListOffsets special timestamps.
LATEST_TIMESTAMP = -1
EARLIEST_TIMESTAMP = -2
MAX_TIMESTAMP = -3
EARLIEST_LOCAL_TIMESTAMP = -4


class TimestampAndOffset(NamedTuple):
    timestamp: int
    offset: int
    leader_epoch: int = -1


class LogTimestamps:
    """Timestamp lookups over the state `Log` owns."""

    epoch_cache: LeaderEpochCache
    _segments: list[LogSegment]
    _log_start: int
    _leo: int

    @guard_io
    def offset_for_timestamp(self, timestamp: int) -> TimestampAndOffset | None:
        """ListOffsets: the first offset whose timestamp is >= `timestamp`, or a special one
        (-1 latest, -2 earliest, -3 max timestamp, -4 earliest local)."""
        if timestamp in (EARLIEST_TIMESTAMP, EARLIEST_LOCAL_TIMESTAMP):
            first = self.epoch_cache.earliest_entry
            epoch = first.epoch if first and first.start_offset <= self._log_start else -1
            return TimestampAndOffset(-1, self._log_start, epoch)
        if timestamp == LATEST_TIMESTAMP:
            latest = self.epoch_cache.latest_epoch
            return TimestampAndOffset(-1, self._leo, -1 if latest is None else latest)
        if timestamp == MAX_TIMESTAMP:
            return self._max_timestamp_offset()
        for seg in self._segments:
            if seg.largest_timestamp >= timestamp:
                found = seg.find_offset_by_timestamp(timestamp, self._log_start)
                if found is not None:
                    return TimestampAndOffset(*found)
        return None

    def _max_timestamp_offset(self) -> TimestampAndOffset | None:
        from ..records.record import decode_batch

        seg = max(self._segments, key=lambda s: s.max_timestamp)
        ts, offset = seg.max_timestamp_and_offset
        if ts < 0:
            return None
        for pos, header in seg.iter_headers(seg.offset_index.lookup(offset)[1]):
            if header.max_timestamp == ts:
                _, records = decode_batch(seg.read_bytes(pos, header.size), check_crc=False)
                for record in records:
                    if record.timestamp == ts:
                        return TimestampAndOffset(ts, record.offset, header.partition_leader_epoch)
        return None
