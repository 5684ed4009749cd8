"""Sparse segment indexes in Kafka's file formats.

`.index`: (relative offset int32, position int32) — the batch at `position` is the first one that
holds offsets after the previous entry; `.timeindex`: (timestamp int64, relative offset int32) —
the largest timestamp seen up to that offset. Both are big-endian and strictly increasing.

Like Kafka, the active segment's index files are preallocated to segment.index.bytes (a sparse
file) and trimmed to their entries when the segment stops being active (roll, close). Unlike
Kafka, the active index is not memory-mapped: CPython's mmap keeps a dup()ed descriptor per
mapping, which made a broker with thousands of partitions run out of file descriptors. Its
entries live in a bytearray and are written to the file with pwrite when the segment is
flushed (the recovery point moves past them) or trimmed; the file is opened only for that. A
full disk shows up there as ENOSPC, an I/O error the log directory's failure handling knows.
After a crash the file may lack the entries written since the last flush: loading recovers the
segments past the recovery point, rebuilding their indexes, as Kafka does. Inactive indexes are
mapped read-only on first lookup, so a log with many old segments costs no mapping until
someone reads them.
"""

from __future__ import annotations

import mmap
import os
import struct
from pathlib import Path

from .checkpoint import fsync_path


class IndexFull(Exception):
    """No room for another entry: the segment must roll."""


class _Index:
    entry = struct.Struct(">ii")

    def __init__(self, path: Path, base_offset: int, max_index_size: int, *, active: bool) -> None:
        self.path = Path(path)
        self.base_offset = base_offset
        size = self.entry.size
        self._mm: mmap.mmap | None = None  # read-only mapping of an inactive index
        self._buf: bytearray | None = None  # the entries of an active index
        self._written = 0  # leading bytes of _buf already in the file
        self._unsynced = False  # written to the file since its last fsync
        try:
            self.length = os.stat(self.path).st_size
            self.newly_created = False
        except FileNotFoundError:
            os.close(os.open(self.path, os.O_RDWR | os.O_CREAT, 0o644))
            self.length = 0
            self.newly_created = True
        self.entries = self.length // size
        self.max_entries = self.entries
        if active:
            self.make_active(max_index_size)

    # -- activity ------------------------------------------------------------------------------

    def make_active(self, max_index_size: int) -> None:
        """Load the entries into memory and preallocate the file so entries can be appended."""
        size = self.entry.size
        valid = self.entries * size
        target = max(max_index_size // size, self.entries) * size
        self._unmap()
        fd = os.open(self.path, os.O_RDWR)
        try:
            data = os.pread(fd, valid, 0) if valid else b""
            if len(data) != valid:
                raise OSError(f"{self.path}: shorter than its {self.entries} entries")
            os.ftruncate(fd, target)
        finally:
            os.close(fd)
        self._buf = bytearray(data)
        self._written = valid
        self.length = target
        self.max_entries = target // size

    def trim(self) -> None:
        """Write the entries, shrink the file to them and drop the buffer (segment became
        inactive); the fsync is left to the next flush."""
        if self._buf is not None:
            self._write_out()
        self._unmap()
        valid = self.entries * self.entry.size
        if self.length != valid:
            os.truncate(self.path, valid)
            self.length = valid
            self._unsynced = True
        self.max_entries = self.entries
        self._buf = None

    def _map(self) -> mmap.mmap | bytearray | None:
        """What lookups read: the buffer of an active index, else a read-only mapping."""
        if self._buf is not None:
            return self._buf if self.entries else None
        if self._mm is None and self.entries:
            fd = os.open(self.path, os.O_RDONLY)
            try:
                self._mm = mmap.mmap(fd, self.entries * self.entry.size, access=mmap.ACCESS_READ)
            finally:
                os.close(fd)
        return self._mm

    def _unmap(self) -> None:
        if self._mm is not None:
            self._mm.close()
            self._mm = None

    @property
    def active(self) -> bool:
        return self._buf is not None

    # -- entries -------------------------------------------------------------------------------

    def raw_entry(self, i: int) -> tuple[int, int]:
        """Entry i; read with pread when the index is not mapped yet (start-up checks)."""
        size = self.entry.size
        source = self._buf if self._buf is not None else self._mm
        if source is not None:
            return self.entry.unpack_from(source, i * size)
        fd = os.open(self.path, os.O_RDONLY)
        try:
            data = os.pread(fd, size, i * size)
        finally:
            os.close(fd)
        if len(data) != size:
            raise IndexError(f"{self.path}: no entry {i}")
        return self.entry.unpack_from(data)

    def _search(self, target: int, field: int) -> int:
        """Index of the last entry whose `field` is <= target, or -1."""
        mm = self._map()
        if mm is None:
            return -1
        unpack = self.entry.unpack_from
        size = self.entry.size
        lo, hi = 0, self.entries - 1
        if unpack(mm, 0)[field] > target:
            return -1
        while lo < hi:
            mid = (lo + hi + 1) >> 1
            if unpack(mm, mid * size)[field] <= target:
                lo = mid
            else:
                hi = mid - 1
        return lo

    def _write(self, i: int, *values: int) -> None:
        if self._buf is None:
            raise IndexFull(f"{self.path} is not active")
        if self.entries >= self.max_entries:
            raise IndexFull(f"{self.path} is full")
        assert len(self._buf) == i * self.entry.size
        self._buf += self.entry.pack(*values)
        self.entries = i + 1

    def _set_entries(self, entries: int) -> None:
        """Keep the first `entries` entries (the file catches up at the next flush or trim)."""
        self.entries = entries
        if self._buf is not None:
            end = entries * self.entry.size
            del self._buf[end:]
            self._written = min(self._written, end)

    def _write_out(self) -> None:
        """pwrite the entries the file lacks (ENOSPC on a full disk: an I/O error)."""
        assert self._buf is not None
        end = len(self._buf)
        if self._written >= end:
            return
        fd = os.open(self.path, os.O_WRONLY)
        try:
            pos = self._written
            while pos < end:  # a copy: no export of the buffer outlives the call
                pos += os.pwrite(fd, self._buf[pos:end], pos)
        finally:
            os.close(fd)
        self._written = end
        self._unsynced = True

    def reset(self, max_index_size: int) -> None:
        """Drop every entry (before a rebuild) and make the index writable."""
        self.entries = 0
        self._buf = None
        self._unmap()
        os.truncate(self.path, 0)
        self.length = 0
        self.make_active(max_index_size)

    def flush(self) -> None:
        """Make the entries durable: write what the file lacks, then fsync it."""
        if self._buf is not None:
            self._write_out()
        if self._unsynced:
            fsync_path(self.path)
            self._unsynced = False

    def close(self) -> None:
        if self._buf is not None:
            self.trim()
        self._unmap()

    def rename(self, path: Path) -> None:
        os.replace(self.path, path)
        self.path = Path(path)

    def delete_file(self) -> None:
        self._unmap()
        self._buf = None
        try:
            os.unlink(self.path)
        except FileNotFoundError:
            pass


class OffsetIndex(_Index):
    entry = struct.Struct(">ii")

    @property
    def is_full(self) -> bool:
        return self.entries >= self.max_entries

    def entry_at(self, i: int) -> tuple[int, int]:
        """(absolute offset, position) of entry i."""
        rel, pos = self.raw_entry(i)
        return self.base_offset + rel, pos

    def last_entry(self) -> tuple[int, int]:
        return self.entry_at(self.entries - 1) if self.entries else (self.base_offset, 0)

    def append(self, offset: int, position: int) -> None:
        if self.entries and offset <= self.last_entry()[0]:
            raise ValueError(f"offset index entry {offset} not above {self.last_entry()[0]}")
        self._write(self.entries, offset - self.base_offset, position)

    def lookup(self, offset: int) -> tuple[int, int]:
        """Largest entry with offset <= target; (base offset, 0) when there is none."""
        i = self._search(offset - self.base_offset, 0)
        return self.entry_at(i) if i >= 0 else (self.base_offset, 0)

    def lookup_position(self, position: int) -> int:
        """Largest indexed batch position <= `position` (0 when there is none)."""
        i = self._search(position, 1)
        return self.raw_entry(i)[1] if i >= 0 else 0

    def truncate_to(self, offset: int) -> None:
        """Remove entries with offset >= target."""
        self._set_entries(self._search(offset - self.base_offset - 1, 0) + 1)


class TimeIndex(_Index):
    entry = struct.Struct(">qi")

    @property
    def is_full(self) -> bool:
        # The last slot is kept for the entry written when the segment rolls.
        return self.entries >= self.max_entries - 1

    def entry_at(self, i: int) -> tuple[int, int]:
        """(timestamp, absolute offset) of entry i."""
        ts, rel = self.raw_entry(i)
        return ts, self.base_offset + rel

    def last_entry(self) -> tuple[int, int]:
        return self.entry_at(self.entries - 1) if self.entries else (-1, self.base_offset)

    def maybe_append(self, timestamp: int, offset: int, skip_full_check: bool = False) -> None:
        """Add (timestamp, offset) when the timestamp is larger than the last entry's."""
        if timestamp < 0:
            return
        if self.entries:
            last_ts, last_offset = self.last_entry()
            if timestamp <= last_ts:
                return
            if offset < last_offset:
                raise ValueError(f"time index offset {offset} below {last_offset}")
        if not skip_full_check and self.is_full:
            raise IndexFull(f"{self.path} is full")
        self._write(self.entries, timestamp, offset - self.base_offset)

    def lookup(self, timestamp: int) -> tuple[int, int]:
        """Largest entry with timestamp <= target; (-1, base offset) when there is none."""
        i = self._search(timestamp, 0)
        return self.entry_at(i) if i >= 0 else (-1, self.base_offset)

    def truncate_to(self, offset: int) -> None:
        """Remove entries with offset >= target."""
        self._set_entries(self._search(offset - self.base_offset - 1, 1) + 1)
