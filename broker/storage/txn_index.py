"""The aborted-transaction index of a segment: `<base offset>.txnindex`, Kafka's format.

One 34-byte entry (big-endian) per transaction aborted by a marker in the segment: version int16
(0) | producer id int64 | first offset int64 | last offset int64 (the ABORT marker) | last stable
offset int64 (the LSO just after the marker). Entries are appended in marker order; a read_committed
fetch collects the ones overlapping the fetched range to tell the consumer what to skip.

The file is created with its first entry (most segments never see an abort). It is written with
plain appends; after a crash the log layer rebuilds the indexes of the segments it recovered.
"""

from __future__ import annotations

import os
import struct
from pathlib import Path
from typing import NamedTuple

from .checkpoint import fsync_path
from .errors import CorruptIndex

TXN_INDEX_SUFFIX = ".txnindex"
ENTRY = struct.Struct(">hqqqq")
ENTRY_SIZE = ENTRY.size  # 34
VERSION = 0


class AbortedTxn(NamedTuple):
    producer_id: int
    first_offset: int
    last_offset: int
    last_stable_offset: int


class TransactionIndex:
    def __init__(self, path: Path, base_offset: int) -> None:
        self.path = Path(path)
        self.base_offset = base_offset
        self._entries: list[AbortedTxn] | None = None  # read on first use

    # -- reading ---------------------------------------------------------------------------

    @property
    def entries(self) -> list[AbortedTxn]:
        if self._entries is None:
            self._entries = self._read()
        return self._entries

    def _read(self) -> list[AbortedTxn]:
        try:
            data = self.path.read_bytes()
        except FileNotFoundError:
            return []
        out = []
        for i in range(len(data) // ENTRY_SIZE):
            version, *fields = ENTRY.unpack_from(data, i * ENTRY_SIZE)
            if version > VERSION:
                raise CorruptIndex(f"{self.path}: unknown aborted transaction version {version}")
            out.append(AbortedTxn(*fields))
        return out

    @property
    def last_offset(self) -> int:
        """Last offset of the newest entry; -1 when there is none."""
        entries = self.entries
        return entries[-1].last_offset if entries else -1

    def sanity_check(self) -> None:
        """Whole entries, none ending before the segment (raises CorruptIndex)."""
        try:
            size = os.stat(self.path).st_size
        except FileNotFoundError:
            return
        if size % ENTRY_SIZE:
            raise CorruptIndex(f"{self.path} has a partial entry")
        for txn in self.entries:
            if txn.last_offset < self.base_offset:
                raise CorruptIndex(
                    f"{self.path}: aborted transaction ending at {txn.last_offset}, before "
                    f"the segment's base offset {self.base_offset}"
                )

    def collect(self, fetch_offset: int, upper_bound: int) -> tuple[list[AbortedTxn], bool]:
        """Entries overlapping [fetch_offset, upper_bound); True when no later segment can
        hold more (an entry's LSO already reaches the bound)."""
        found = []
        for txn in self.entries:
            if txn.last_offset >= fetch_offset and txn.first_offset < upper_bound:
                found.append(txn)
            if txn.last_stable_offset >= upper_bound:
                return found, True
        return found, False

    # -- writing ---------------------------------------------------------------------------

    def append(self, txn: AbortedTxn) -> bool:
        """Add `txn` unless an entry at or after its marker is already there (a replay of the
        log writes each abort once). True when written."""
        if txn.last_offset <= self.last_offset:
            return False
        fd = os.open(self.path, os.O_WRONLY | os.O_CREAT | os.O_APPEND, 0o644)
        try:
            os.write(fd, ENTRY.pack(VERSION, *txn))
        finally:
            os.close(fd)
        self.entries.append(txn)
        return True

    def truncate_to(self, offset: int) -> None:
        """Drop entries whose marker is at or after `offset`."""
        keep = [t for t in self.entries if t.last_offset < offset]
        if len(keep) != len(self.entries):
            self._rewrite(keep)

    def reset(self) -> None:
        """Drop every entry (the segment is being recovered; replay writes them again)."""
        self._rewrite([])

    def _rewrite(self, entries: list[AbortedTxn]) -> None:
        if not entries:
            self.path.unlink(missing_ok=True)
        else:
            with open(self.path, "r+b") as f:
                f.truncate(len(entries) * ENTRY_SIZE)
        self._entries = entries

    def flush(self) -> None:
        fsync_path(self.path, missing_ok=True)

    def rename(self, path: Path) -> None:
        if self.path.exists():
            os.replace(self.path, path)
        self.path = Path(path)

    def delete_file(self) -> None:
        self.path.unlink(missing_ok=True)
