"""The log cleaner's threads and their worker processes.

`log.cleaner.threads` threads each loop: ask the owner of the logs (the broker's event loop,
through `run_on_owner`) for the dirtiest log, have their worker clean it, let the owner swap
each cleaned group in, record the new first dirty offset, and sleep `log.cleaner.backoff.ms` when
nothing needs cleaning. The CPU-heavy part (reading, decompressing, filtering and rewriting
records) runs in a separate worker process per thread (`cleaner_worker`), so the event loop
never waits for the GIL behind it: produce and fetch latency do not depend on the cleaner. A
worker that dies is started again for the next round.
"""

from __future__ import annotations

import logging
import os
import pickle
import subprocess
import sys
import threading
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any, TypeVar

from .cleaner import Cleaner, CleanerStats, CleaningAborted, CleanTask, OffsetMap, Throttler
from .cleaner_manager import CleanerManager

log = logging.getLogger(__name__)

_T = TypeVar("_T")
RunOnOwner = Callable[[Callable[[], _T]], _T]


@dataclass(frozen=True)
class CleanerConfig:
    """The broker's log.cleaner.* settings."""

    enable: bool = True
    threads: int = 1
    dedupe_buffer_size: int = 128 << 20
    io_buffer_size: int = 512 << 10
    load_factor: float = 0.9
    max_io_bytes_per_second: float = 1.7976931348623157e308
    backoff_ms: int = 15000

    @classmethod
    def from_broker_config(cls, config: Any) -> CleanerConfig:
        return cls(
            enable=bool(config.get("log.cleaner.enable")),
            threads=int(config.get("log.cleaner.threads")),
            dedupe_buffer_size=int(config.get("log.cleaner.dedupe.buffer.size")),
            io_buffer_size=int(config.get("log.cleaner.io.buffer.size")),
            load_factor=float(config.get("log.cleaner.io.buffer.load.factor")),
            max_io_bytes_per_second=float(config.get("log.cleaner.io.max.bytes.per.second")),
            backoff_ms=int(config.get("log.cleaner.backoff.ms")),
        )

    def worker_settings(self) -> dict[str, Any]:
        """Each thread's share, as Kafka splits them: dedupe memory and I/O rate per thread,
        half the I/O buffer per read and write side."""
        threads = max(self.threads, 1)
        return {
            "memory": self.dedupe_buffer_size // threads,
            "load_factor": self.load_factor,
            "io_buffer_size": max(self.io_buffer_size // threads // 2, 4096),
            "rate": self.max_io_bytes_per_second / threads,
        }


SwapFn = Callable[[int, list[int]], bool]


class InlineWorker:
    """Cleans in the calling thread (unit tests, and a fallback)."""

    def __init__(self, settings: dict[str, Any]) -> None:
        self.cleaner = Cleaner(
            OffsetMap(settings["memory"], settings["load_factor"]),
            settings["io_buffer_size"],
            Throttler(settings["rate"]),
        )

    def clean(self, task: CleanTask, swap: SwapFn) -> tuple[int, CleanerStats]:
        return self.cleaner.clean(task, swap)

    def close(self) -> None:
        pass


class WorkerDied(Exception):
    pass


class ProcessWorker:
    """A `python -m odradek.broker.storage.cleaner_worker` child speaking pickles on its
    stdin/stdout; it dies with the broker (PR_SET_PDEATHSIG)."""

    def __init__(self, settings: dict[str, Any]) -> None:
        self.settings = settings
        self.proc: subprocess.Popen[bytes] | None = None

    def _start(self) -> subprocess.Popen[bytes]:
        proc = subprocess.Popen(
            [sys.executable, "-m", "odradek.broker.storage.cleaner_worker"],
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
        )
        assert proc.stdin is not None
        pickle.dump({**self.settings, "broker_pid": os.getpid()}, proc.stdin)
        proc.stdin.flush()
        self.proc = proc
        return proc

    def _send(self, proc: subprocess.Popen[bytes], msg: Any) -> None:
        assert proc.stdin is not None
        try:
            pickle.dump(msg, proc.stdin)
            proc.stdin.flush()
        except (BrokenPipeError, OSError) as exc:
            raise WorkerDied(str(exc)) from None

    def _recv(self, proc: subprocess.Popen[bytes]) -> Any:
        assert proc.stdout is not None
        try:
            return pickle.load(proc.stdout)
        except (EOFError, OSError, pickle.UnpicklingError) as exc:
            raise WorkerDied(f"cleaner worker exited ({proc.poll()}): {exc}") from None

    def clean(self, task: CleanTask, swap: SwapFn) -> tuple[int, CleanerStats]:
        proc = self.proc if self.proc is not None and self.proc.poll() is None else self._start()
        try:
            self._send(proc, ("clean", task))
            while True:
                msg = self._recv(proc)
                kind = msg[0]
                if kind == "swap":
                    self._send(proc, swap(msg[1], msg[2]))
                elif kind == "done":
                    return msg[1], msg[2]
                elif kind == "aborted":
                    raise CleaningAborted(msg[1])
                else:
                    raise RuntimeError(f"cleaner worker failed:\n{msg[1]}")
        except WorkerDied:
            self.close()
            raise

    def close(self) -> None:
        proc, self.proc = self.proc, None
        if proc is None:
            return
        if proc.poll() is None:
            proc.kill()
        proc.wait()
        for stream in (proc.stdin, proc.stdout):
            if stream is not None:
                stream.close()


class CleanerThread(threading.Thread):
    def __init__(self, index: int, owner: LogCleaner) -> None:
        super().__init__(name=f"kafka-log-cleaner-thread-{index}", daemon=True)
        self.index = index
        self.owner = owner
        self.worker = owner.make_worker()
        self.last_stats = CleanerStats()
        self.last_stats.end = self.last_stats.start
        self.failed = False

    def run(self) -> None:
        owner = self.owner
        try:
            while not owner.stopping.is_set():
                if not owner.clean_one(self.worker, self):
                    owner.stopping.wait(owner.config.backoff_ms / 1000)
        except Exception:
            if not owner.stopping.is_set():
                self.failed = True
                log.exception("log cleaner thread %d died", self.index)
        finally:
            self.worker.close()


class LogCleaner:
    """`threads` cleaner threads over the logs of one LogManager."""

    def __init__(
        self,
        manager: CleanerManager,
        config: CleanerConfig,
        run_on_owner: RunOnOwner,
        *,
        in_process: bool = False,
    ) -> None:
        self.manager = manager
        self.config = config
        self.run_on_owner = run_on_owner
        self.in_process = in_process
        self.stopping = threading.Event()
        self.threads: list[CleanerThread] = []

    def make_worker(self) -> InlineWorker | ProcessWorker:
        settings = self.config.worker_settings()
        return InlineWorker(settings) if self.in_process else ProcessWorker(settings)

    def startup(self) -> None:
        log.info("starting the log cleaner (%d threads)", self.config.threads)
        for i in range(self.config.threads):
            thread = CleanerThread(i, self)
            self.threads.append(thread)
            thread.start()

    def shutdown(self) -> None:
        """Stop the threads and their workers (blocking: call it off the owner's thread)."""
        self.stopping.set()
        for thread in self.threads:
            thread.worker.close()
        for thread in self.threads:
            thread.join(timeout=30)
        self.threads = []

    def clean_one(self, worker: InlineWorker | ProcessWorker, thread: Any = None) -> bool:
        """One round on the dirtiest log; False when no log needed cleaning."""
        call = self.run_on_owner
        manager = self.manager
        task = call(manager.grab_filthiest)
        if task is None:
            return False
        end: int | None = None
        try:
            end, stats = worker.clean(
                task, lambda base, old: call(lambda: manager.swap(task, base, old))
            )
            if thread is not None:
                thread.last_stats = stats
            log.info("%s", stats.summary(task.name, task.first_dirty_offset, end))
        except CleaningAborted as exc:
            log.info("cleaning of %s aborted: %s", task.name, exc)
        except WorkerDied as exc:
            log.warning("cleaning of %s stopped: %s", task.name, exc)
        except Exception:
            if self.stopping.is_set():
                call(lambda: manager.done_cleaning(task, None))
                return True
            log.exception("cleaning %s failed; marking it uncleanable", task.name)
            call(lambda: manager.mark_uncleanable(task))
            return True
        call(lambda: manager.done_cleaning(task, end))
        return True

    # -- metrics (Kafka's kafka.log:type=LogCleaner gauges) -----------------------------------

    def _stats(self) -> list[CleanerStats]:
        return [t.last_stats for t in self.threads]

    @property
    def max_buffer_utilization_percent(self) -> int:
        return int(max((s.buffer_utilization for s in self._stats()), default=0.0) * 100)

    @property
    def cleaner_recopy_percent(self) -> int:
        stats = self._stats()
        read = max(sum(s.bytes_read for s in stats), 1)
        return int(100 * sum(s.bytes_written for s in stats) / read)

    @property
    def max_clean_time_secs(self) -> int:
        return int(max((s.end - s.start for s in self._stats()), default=0.0))

    @property
    def max_compaction_delay_secs(self) -> int:
        return self.manager.max_compaction_delay_ms // 1000

    @property
    def dead_thread_count(self) -> int:
        return sum(1 for t in self.threads if t.failed or not t.is_alive())
