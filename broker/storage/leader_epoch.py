"""The leader-epoch cache: which leader epoch started at which offset (KIP-101).

Persisted in `<partition dir>/leader-epoch-checkpoint` after every change; replication uses
`end_offset_for` to answer OffsetForLeaderEpoch and to find where a follower diverged.
"""

from __future__ import annotations

from pathlib import Path
from typing import NamedTuple

from .checkpoint import LEADER_EPOCH_CHECKPOINT, read_epoch_checkpoint, write_epoch_checkpoint

UNDEFINED_EPOCH = -1
UNDEFINED_OFFSET = -1


class EpochEntry(NamedTuple):
    epoch: int
    start_offset: int


class LeaderEpochCache:
    """Ordered (epoch, start offset) entries: both strictly increasing."""

    def __init__(self, directory: Path, entries: list[EpochEntry] | None = None) -> None:
        self.path = Path(directory) / LEADER_EPOCH_CHECKPOINT
        self._entries: list[EpochEntry] = list(entries or [])

    @classmethod
    def load(cls, directory: Path) -> LeaderEpochCache:
        raw = read_epoch_checkpoint(Path(directory) / LEADER_EPOCH_CHECKPOINT) or []
        cache = cls(directory)
        for epoch, start in raw:
            cache._assign(EpochEntry(epoch, start))
        return cache

    @property
    def entries(self) -> list[EpochEntry]:
        return list(self._entries)

    @property
    def latest_epoch(self) -> int | None:
        return self._entries[-1].epoch if self._entries else None

    @property
    def latest_entry(self) -> EpochEntry | None:
        return self._entries[-1] if self._entries else None

    @property
    def earliest_entry(self) -> EpochEntry | None:
        return self._entries[0] if self._entries else None

    def _assign(self, entry: EpochEntry) -> bool:
        if entry.epoch < 0 or entry.start_offset < 0:
            raise ValueError(f"invalid epoch entry {entry}")
        latest = self.latest_entry
        if (
            latest is not None
            and latest.epoch == entry.epoch
            and entry.start_offset >= latest.start_offset
        ):
            return False
        # Drop entries the new one contradicts, keeping both columns monotonic.
        self._entries = [
            e
            for e in self._entries
            if e.epoch < entry.epoch and e.start_offset < entry.start_offset
        ]
        self._entries.append(entry)
        return True

    def assign(self, epoch: int, start_offset: int) -> bool:
        """Record that `epoch` starts at `start_offset`; persists when something changed."""
        changed = self._assign(EpochEntry(epoch, start_offset))
        if changed:
            self.flush()
        return changed

    def end_offset_for(self, epoch: int, log_end_offset: int) -> tuple[int, int]:
        """(epoch, end offset) as OffsetForLeaderEpoch answers for a requested epoch."""
        if epoch == UNDEFINED_EPOCH or not self._entries:
            return UNDEFINED_EPOCH, UNDEFINED_OFFSET
        if epoch == self._entries[-1].epoch:
            return epoch, log_end_offset
        higher = next((e for e in self._entries if e.epoch > epoch), None)
        if higher is None:
            return UNDEFINED_EPOCH, UNDEFINED_OFFSET
        floor = None
        for e in self._entries:
            if e.epoch <= epoch:
                floor = e
        if floor is None:
            return epoch, higher.start_offset
        return floor.epoch, higher.start_offset

    def epoch_for_offset(self, offset: int) -> int | None:
        """Epoch of the leader that wrote `offset`, if known."""
        found = None
        for e in self._entries:
            if e.start_offset <= offset:
                found = e.epoch
        return found

    def truncate_from_end(self, end_offset: int) -> None:
        """Forget epochs starting at or after `end_offset` (the log was truncated there)."""
        kept = [e for e in self._entries if e.start_offset < end_offset]
        if len(kept) != len(self._entries):
            self._entries = kept
            self.flush()

    def truncate_from_start(self, start_offset: int) -> None:
        """The log start moved: entries before it collapse into one starting at `start_offset`."""
        before = [e for e in self._entries if e.start_offset <= start_offset]
        if not before or (len(before) == 1 and before[0].start_offset == start_offset):
            return
        last = before[-1]
        self._entries = [EpochEntry(last.epoch, start_offset)] + [
            e for e in self._entries if e.start_offset > start_offset
        ]
        self.flush()

    def replace(self, entries: list[EpochEntry]) -> None:
        """Take another cache's entries (a replica moved to another log dir)."""
        self._entries = list(entries)
        self.flush()

    def clear(self) -> None:
        if self._entries:
            self._entries = []
            self.flush()

    def flush(self) -> None:
        write_epoch_checkpoint(self.path, self._entries)
