"""A byte range of a file, handed to the network layer so it can `os.sendfile` it.

Slices of log segments borrow the segment's file descriptor (segments keep one open fd each and
close it only after file.delete.delay.ms once deleted), so building a slice costs no syscall.
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import Protocol


class _HasFileno(Protocol):
    def fileno(self) -> int: ...


class FileSlice:
    """`size` bytes of a file starting at `position`.

    `source` is an open fd, an object with `fileno()` (borrowed: never closed here) or a path
    (opened on first use and closed by `close()`).
    """

    __slots__ = ("_source", "_fd", "_owned", "position", "size")

    def __init__(self, source: int | _HasFileno | str | Path, position: int, size: int) -> None:
        if position < 0 or size < 0:
            raise ValueError("negative position or size")
        self._source = source
        self._fd: int | None = source if isinstance(source, int) else None
        self._owned = False
        self.position = position
        self.size = size

    def fileno(self) -> int:
        if self._fd is None:
            if isinstance(self._source, (str, Path)):
                self._fd = os.open(self._source, os.O_RDONLY)
                self._owned = True
            else:
                self._fd = self._source.fileno()  # type: ignore[union-attr]
        return self._fd

    def read(self) -> bytes:
        """The bytes of the slice (fewer if the file was truncated since the slice was taken)."""
        fd = self.fileno()
        parts: list[bytes] = []
        done = 0
        while done < self.size:
            chunk = os.pread(fd, self.size - done, self.position + done)
            if not chunk:
                break
            parts.append(chunk)
            done += len(chunk)
        return b"".join(parts)

    def close(self) -> None:
        if self._owned and self._fd is not None:
            os.close(self._fd)
            self._fd = None
            self._owned = False

    def __len__(self) -> int:
        return self.size

    def __repr__(self) -> str:
        return f"FileSlice({self._source!r}, position={self.position}, size={self.size})"
