"""Offset checkpoint files written in order, now or on one background thread.

A checkpoint ends in two fsyncs (the file, its directory). On a disk busy writing back what
producers just sent they take milliseconds to tens of milliseconds, and the broker's periodic
checkpoints (the high watermarks every 5 s) run on the thread that serves requests: every
request arriving meanwhile waits. Kafka writes them from its scheduler threads; here the
caller takes the snapshot on its own thread and `submit` hands the file I/O to a worker.

Writes of one file are numbered when their snapshot is taken: one older than what is already
on disk is skipped, so a late background write never replaces a newer checkpoint written
meanwhile (by shutdown, or by DeleteRecords).
"""

from __future__ import annotations

import threading
from collections.abc import Mapping
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

from .checkpoint import write_offset_checkpoint


class CheckpointWriter:
    def __init__(self) -> None:
        self._lock = threading.Lock()  # held while a file is written
        self._failures_lock = threading.Lock()  # never held across I/O: the owner takes it
        self._taken = 0  # snapshots numbered, on the owner's thread
        self._written: dict[Path, int] = {}
        self._failures: list[tuple[Path, str]] = []
        self._executor: ThreadPoolExecutor | None = None

    def write(self, log_dir: Path, name: str, offsets: Mapping[tuple[str, int], int]) -> str | None:
        """Write `log_dir/name` now; what failed, or None."""
        self._taken += 1
        return self._write(log_dir / name, offsets, self._taken)

    def submit(self, log_dir: Path, name: str, offsets: Mapping[tuple[str, int], int]) -> None:
        """Write `log_dir/name` on the background thread; a failure is kept for `failures`."""
        self._taken += 1
        if self._executor is None:
            self._executor = ThreadPoolExecutor(1, thread_name_prefix="log-checkpoints")
        self._executor.submit(self._write_reporting, log_dir, log_dir / name, offsets, self._taken)

    def failures(self) -> list[tuple[Path, str]]:
        """(log dir, what failed) of the background writes that failed since the last call."""
        with self._failures_lock:
            out, self._failures = self._failures, []
        return out

    def close(self) -> None:
        """Wait for the background writes still pending."""
        if self._executor is not None:
            self._executor.shutdown(wait=True)
            self._executor = None

    def _write_reporting(
        self, log_dir: Path, path: Path, offsets: Mapping[tuple[str, int], int], number: int
    ) -> None:
        error = self._write(path, offsets, number)
        if error is not None:
            with self._failures_lock:
                self._failures.append((log_dir, error))

    def _write(self, path: Path, offsets: Mapping[tuple[str, int], int], number: int) -> str | None:
        with self._lock:
            if self._written.get(path, 0) > number:
                return None  # a newer snapshot of this file is on disk already
            try:
                write_offset_checkpoint(path, offsets)
            except OSError as exc:
                return f"cannot write {path.name}: {exc}"
            self._written[path] = number
        return None
