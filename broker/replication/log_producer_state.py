"""The producer state of one partition's storage `Log`: loaded from the log (newest snapshot plus
a replay of the batch headers after it), snapshotted when the log rolls or closes, and writing the
log's aborted-transaction index. The rules themselves live in `producer_state`."""

from __future__ import annotations

import logging
from collections.abc import Iterator

from ..records.batch import BatchHeader
from ..records.record import end_txn_marker
from ..storage.log import AppendResult, Log
from ..storage.segment import LogSegment
from .producer_entry import BatchMetadata
from .producer_state import AppendOrigin, Marker, PendingAppend, ProducerStateManager

logger = logging.getLogger(__name__)


class LogProducerState(ProducerStateManager):
    """The producer state of a storage Log: loaded from it, snapshotted when it rolls or closes,
    writing the log's aborted-transaction index."""

    def __init__(self, log: Log, **kwargs) -> None:
        super().__init__(log.dir, on_aborted=log.append_aborted_txn, **kwargs)
        self.log = log
        self.reload()
        self._attach(log)

    def _attach(self, log: Log) -> None:
        """Take `log` as this state's log: its hooks call back here, snapshots go to its dir."""
        self.log = log
        self.directory = log.dir
        self.on_aborted = log.append_aborted_txn
        log.on_roll = self._on_roll
        log.on_close = self._on_close
        log.active_producers = self.last_batch_offsets
        log.stable_offset = self._stable_offset

    def reload(self) -> None:
        """Rebuild from the newest snapshot and the log after it. After a crash the replay
        starts at or before the first recovered segment, whose .txnindex it writes again."""
        log = self.log
        self.directory = log.dir
        self.on_aborted = log.append_aborted_txn
        self.load(log.log_start_offset, log.log_end_offset, at_most=log.recovered_from)
        if self.map_end_offset < log.log_end_offset:
            self.replay(iter_log_batches(log, self.map_end_offset))
        self.map_end_offset = log.log_end_offset
        log.recovered_from = None

    def prepare_leader_append(
        self, buf: bytes | bytearray | memoryview, origin: AppendOrigin = AppendOrigin.CLIENT
    ) -> PendingAppend:
        return self.prepare_append(buf, self.log.log_end_offset, origin)

    def last_stable_offset(self, high_watermark: int) -> int:
        """min(HW, first unstable offset): what read_committed consumers may read up to."""
        first = self.first_unstable_offset(high_watermark)
        if first is None:
            return high_watermark
        return max(min(first, high_watermark), self.log.log_start_offset)

    def rebind(self, log: Log) -> None:
        """Follow the partition to another copy of its log (a move between log dirs): the
        state is the same, its snapshots go to the new directory."""
        old = self.log
        old.on_roll = old.on_close = old.active_producers = old.stable_offset = None
        self._attach(log)
        self.last_snapshot_offset = 0
        try:
            self.take_snapshot(sync=True)
        except OSError as exc:
            logger.warning("%s: producer snapshot after a move failed: %s", log.dir, exc)

    def _stable_offset(self) -> int:
        return self.last_stable_offset(self.log.high_watermark)

    def last_batch_offsets(self) -> dict[int, int]:
        """producer id -> last offset of its last batch: batches the cleaner must keep."""
        return {pid: e.last_offset for pid, e in self.producers.items() if e.batches}

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


def iter_log_headers(log: Log, start_offset: int) -> Iterator[tuple[LogSegment, int, BatchHeader]]:
    """(segment, position, header) of every batch in `log` whose last offset is >=
    `start_offset`."""
    segments = log.segments
    for i, seg in enumerate(segments):
        if seg.size == 0 or (i + 1 < len(segments) and segments[i + 1].base_offset <= start_offset):
            continue
        found = seg.translate_offset(start_offset)
        if found is None:
            continue
        for pos, header in seg.iter_headers(found[0]):
            if header.last_offset >= start_offset:
                yield seg, pos, header


def iter_log_batches(log: Log, start_offset: int) -> Iterator[tuple[BatchHeader, Marker | None]]:
    """What `replay` takes from the log: headers, and the marker of each control batch (the
    only records read)."""
    for seg, pos, header in iter_log_headers(log, start_offset):
        marker = None
        if header.is_control and header.producer_id >= 0:
            marker = end_txn_marker(seg.read_bytes(pos, header.size))
        yield header, marker
