"""Rolled segments flushed on the log's flusher thread: the recovery point moves only once the
fsyncs are done, a truncation meanwhile voids them, and a failed fsync reaches the log's
I/O error handling on the log's own thread."""

from __future__ import annotations

import errno
import os
import threading
from collections.abc import Iterator
from concurrent.futures import Executor, Future, ThreadPoolExecutor
from pathlib import Path

import pytest
from manual_clock import Clock
from odradek.broker.records.record import Record, build_batch
from odradek.broker.storage import Log, LogConfig
from odradek.broker.storage.errors import KafkaStorageError


class GatedExecutor(Executor):
    """Runs each task on a real thread once the test opens the gate."""

    def __init__(self) -> None:
        self.gate = threading.Event()
        self.pool = ThreadPoolExecutor(1)
        self.submitted: list[Future] = []

    def submit(self, fn, /, *args, **kwargs) -> Future:  # type: ignore[override]
        def gated():
            assert self.gate.wait(30)
            return fn(*args, **kwargs)

        future = self.pool.submit(gated)
        self.submitted.append(future)
        return future


@pytest.fixture
def flusher() -> Iterator[GatedExecutor]:
    ex = GatedExecutor()
    yield ex
    ex.gate.set()
    ex.pool.shutdown(wait=True)


def open_log(tmp_path, flusher: Executor) -> Log:
    log = Log(
        tmp_path / "topic-0", LogConfig(segment_bytes=600), clean_shutdown=True, clock=Clock()
    )
    log.flusher = flusher
    return log


def fill(log: Log, batches: int) -> None:
    for _ in range(batches):
        log.append(build_batch([Record(value=b"v" * 20), Record(value=b"w" * 20)]))


def settle(log: Log, future_of) -> None:
    future_of(log).result(timeout=30)
    log.maybe_flush()


def in_flight(log: Log) -> Future:
    assert log._background_flush is not None
    return log._background_flush[0]


def test_the_recovery_point_moves_once_the_background_fsync_is_done(tmp_path, flusher) -> None:
    log = open_log(tmp_path, flusher)
    fill(log, 20)
    rolled_to = log.active_segment.base_offset
    assert rolled_to > 0
    log.maybe_flush()
    assert log.recovery_point == 0  # handed to the flusher, not done yet
    log.maybe_flush()
    assert log.recovery_point == 0
    flusher.gate.set()
    settle(log, in_flight)
    assert log.recovery_point == rolled_to
    log.close()


def test_a_truncation_voids_the_flush_in_flight(tmp_path, flusher) -> None:
    log = open_log(tmp_path, flusher)
    fill(log, 20)
    log.maybe_flush()
    future = in_flight(log)
    log.truncate_to(4)
    fill(log, 20)  # new records where the flushed ones were
    flusher.gate.set()
    future.result(timeout=30)
    log.maybe_flush()
    assert log.recovery_point <= 4
    log.close()


def test_a_failed_background_fsync_is_an_io_error_of_the_log(
    tmp_path, flusher, monkeypatch
) -> None:
    log = open_log(tmp_path, flusher)
    errors: list[OSError] = []
    log.on_io_error = errors.append
    fill(log, 20)
    log.maybe_flush()  # the rolled segments go to the flusher, held at its gate
    fail_fsyncs_under(monkeypatch, log.dir)
    flusher.gate.set()
    for future in flusher.submitted:
        future.exception(timeout=30)
    with pytest.raises(KafkaStorageError):
        log.maybe_flush()
    assert [e.errno for e in errors] == [errno.EIO]
    assert log.recovery_point == 0


def fail_fsyncs_under(monkeypatch: pytest.MonkeyPatch, prefix: Path) -> None:
    """A dying disk as the process sees it (what the chaos suite's LD_PRELOAD shim does to a
    broker process): every fsync of a file under `prefix` fails with EIO."""
    real_fsync = os.fsync

    def fsync(fd: int) -> None:
        if os.readlink(f"/proc/self/fd/{fd}").startswith(str(prefix)):
            raise OSError(errno.EIO, os.strerror(errno.EIO))
        real_fsync(fd)

    monkeypatch.setattr(os, "fsync", fsync)
