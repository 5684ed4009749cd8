"""All partition logs of a broker across its log directories.

Start-up loads every `<topic>-<partition>` directory (crash recovery when a directory lacks the
clean-shutdown marker), `tick(now_ms)` does the periodic work (retention, flushes, delayed file
deletion, checkpoints) and `shutdown()` flushes, checkpoints and leaves the marker. Per log dir
the files are Kafka's: meta.properties, recovery-point-offset-checkpoint,
replication-offset-checkpoint, log-start-offset-checkpoint, cleaner-offset-checkpoint and
.kafka_cleanshutdown. The log cleaner (compaction) runs beside it once `start_cleaner` is called.

Several log dirs (JBOD): a new log goes to the online dir holding the fewest logs (or the one an
AlterReplicaLogDirs named for it beforehand). A `-future` log is a replica being moved to another
dir on this broker; it replaces the current one once it caught up (`replace_current_with_future`).
A dir whose disk fails (any OSError from its files) goes offline, as Kafka's
LogDirFailureChannel does: its logs are dropped from service and `on_dir_failure` listeners (the
replica manager) are told; the other dirs keep serving.
"""

from __future__ import annotations

import fcntl
import logging
import os
import shutil
import tempfile
import uuid
from collections.abc import Callable, Iterable, Mapping
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

from .checkpoint import (
    CLEAN_SHUTDOWN_FILE,
    LOG_START_OFFSET_CHECKPOINT,
    META_PROPERTIES,
    PARTITION_METADATA,
    RECOVERY_POINT_CHECKPOINT,
    REPLICATION_CHECKPOINT,
    CheckpointError,
    atomic_write_many,
    partition_metadata_text,
    read_offset_checkpoint,
    read_properties,
    write_clean_shutdown,
    write_meta_properties,
)
from .checkpoint_writer import CheckpointWriter
from .cleaner_manager import CleanerManager
from .errors import InconsistentMetaProperties, KafkaStorageError, LogDirError, LogDirInUse
from .log import Log, now_ms
from .log_cleaner import CleanerConfig, LogCleaner, RunOnOwner
from .log_config import LogConfig
from .partition_dir import (
    DELETE_DIR_SUFFIX,
    FUTURE_DIR_SUFFIX,
    delete_dir_name,
    future_dir_name,
    parse_topic_partition,
    strip_dir_suffix,
)

logger = logging.getLogger(__name__)

LOCK_FILE = ".lock"

TopicPartition = tuple[str, int]


# Directories Odradek itself keeps beside the partitions; never logs, never warned about.
OWN_DIR_PREFIX = "__odradek"


class LogManager:
    def __init__(
        self,
        log_dirs: Iterable[str | Path],
        default_config: LogConfig,
        *,
        clock: Callable[[], int] = now_ms,
        retention_check_interval_ms: int = 300_000,
        recovery_point_checkpoint_interval_ms: int = 60_000,
        log_start_offset_checkpoint_interval_ms: int = 60_000,
        high_watermark_checkpoint_interval_ms: int = 5_000,
        background_checkpoints: bool = False,
    ) -> None:
        self.log_dirs = [Path(d).absolute() for d in log_dirs]
        if not self.log_dirs:
            raise ValueError("at least one log directory is required")
        self.default_config = default_config
        self.clock = clock
        self.retention_check_interval_ms = retention_check_interval_ms
        self.recovery_point_checkpoint_interval_ms = recovery_point_checkpoint_interval_ms
        self.log_start_offset_checkpoint_interval_ms = log_start_offset_checkpoint_interval_ms
        self.high_watermark_checkpoint_interval_ms = high_watermark_checkpoint_interval_ms
        self._logs: dict[TopicPartition, Log] = {}
        self._log_dir_of: dict[TopicPartition, Path] = {}
        self._future_logs: dict[TopicPartition, Log] = {}
        self._future_dir_of: dict[TopicPartition, Path] = {}
        # Where AlterReplicaLogDirs asked a replica this broker does not host yet to be created.
        self._preferred_dirs: dict[TopicPartition, Path] = {}
        self.offline_dirs: set[Path] = set()
        # Called (dir, partitions whose log was there, partitions whose future log was there)
        # when a dir fails.
        self.on_dir_failure: list[
            Callable[[Path, list[TopicPartition], list[TopicPartition]], None]
        ] = []
        self._doomed: list[tuple[int, Log | None, Path]] = []
        self._checkpointed_hw: dict[TopicPartition, int] = {}
        self._topic_configs: dict[str, LogConfig] = {}
        self._locks: list[int] = []
        self._next: dict[str, int] = {}
        self._started = False
        self._checkpoints = CheckpointWriter()
        # tick's periodic checkpoints written on a background thread (the broker's choice: its
        # tick runs on the thread that serves requests)
        self.background_checkpoints = background_checkpoints
        self._flusher: ThreadPoolExecutor | None = None  # rolled segments' fsyncs, likewise
        self.cleaner_manager = CleanerManager(self, clock=clock)
        self.cleaner: LogCleaner | None = None

    # -- start-up ------------------------------------------------------------------------------

    def check_dirs(self) -> None:
        """Create every log dir and make sure this process can write in it. A dir that fails
        (a missing permission, a file in the way, a read-only disk) is offline, as Kafka starts
        on the dirs that work; LogDirError names the first failure when none works."""
        failures: list[tuple[str, OSError]] = []
        for log_dir in self.online_dirs():
            try:
                log_dir.mkdir(parents=True, exist_ok=True)
                with tempfile.TemporaryFile(dir=log_dir):
                    pass
            except OSError as e:
                failures.append(
                    (f"cannot use log directory {log_dir} (log.dirs): {e.strerror or e}", e)
                )
                self.offline_dirs.add(log_dir)
        if not self.online_dirs():
            raise LogDirError(failures[0][0]) from failures[0][1]
        for message, _ in failures:
            logger.error("%s: the directory is offline", message)

    def startup(self, topic_configs: Mapping[str, LogConfig] | None = None) -> None:
        """Lock the log dirs and load every log, recovering those of uncleanly stopped dirs."""
        self._topic_configs = dict(topic_configs or {})
        now = self.clock()
        self.check_dirs()
        for log_dir in self.log_dirs:
            if log_dir in self.offline_dirs:
                continue
            try:
                self._lock(log_dir)
                self._load_dir(log_dir, now)
            except OSError as exc:
                # Kafka starts without a dir it cannot read, as long as one dir works.
                logger.error("log dir %s is offline: %s", log_dir, exc)
                self._forget_dir(log_dir)
                self.offline_dirs.add(log_dir)
        if not self.online_dirs():
            raise LogDirError(f"no usable log directory among {', '.join(map(str, self.log_dirs))}")
        for log_dir in self.online_dirs():
            (log_dir / CLEAN_SHUTDOWN_FILE).unlink(missing_ok=True)
        self._next = {
            "retention": now + self.retention_check_interval_ms,
            "recovery": now + self.recovery_point_checkpoint_interval_ms,
            "start": now + self.log_start_offset_checkpoint_interval_ms,
            "hw": now + self.high_watermark_checkpoint_interval_ms,
        }
        self._started = True

    def _lock(self, log_dir: Path) -> None:
        fd = os.open(log_dir / LOCK_FILE, os.O_RDWR | os.O_CREAT, 0o644)
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            os.close(fd)
            raise LogDirInUse(
                f"log directory {log_dir} is in use by another process (another broker with "
                "the same log.dirs?)"
            ) from None
        self._locks.append(fd)

    def _read_checkpoint(self, path: Path) -> dict[TopicPartition, int]:
        try:
            return read_offset_checkpoint(path)
        except CheckpointError as exc:
            logger.warning("ignoring unreadable checkpoint: %s", exc)
            return {}

    def _load_dir(self, log_dir: Path, now: int) -> None:
        clean = (log_dir / CLEAN_SHUTDOWN_FILE).exists()
        recovery_points = self._read_checkpoint(log_dir / RECOVERY_POINT_CHECKPOINT)
        start_offsets = self._read_checkpoint(log_dir / LOG_START_OFFSET_CHECKPOINT)
        self._checkpointed_hw.update(self._read_checkpoint(log_dir / REPLICATION_CHECKPOINT))
        for entry in sorted(os.scandir(log_dir), key=lambda e: e.name):
            if not entry.is_dir():
                continue
            if entry.name.endswith(DELETE_DIR_SUFFIX):
                self._doomed.append((now, None, Path(entry.path)))
                continue
            future = entry.name.endswith(FUTURE_DIR_SUFFIX)
            tp = parse_topic_partition(strip_dir_suffix(entry.name))
            if tp is None and entry.name.startswith(OWN_DIR_PREFIX):
                continue  # e.g. the embedded metadata store, which may live in a log dir
            if tp is None:
                logger.warning("ignoring directory %s: not <topic>-<partition>", entry.path)
                continue
            logs, dirs = (
                (self._future_logs, self._future_dir_of)
                if future
                else (self._logs, self._log_dir_of)
            )
            if tp in logs:
                raise RuntimeError(f"duplicate log directories for {tp[0]}-{tp[1]}: {entry.path}")
            logs[tp] = self._open_log(
                Path(entry.path),
                log_dir,
                recovery_point=recovery_points.get(tp, 0),
                log_start_offset=start_offsets.get(tp, 0),
                clean_shutdown=clean,
            )
            dirs[tp] = log_dir
            if not clean:
                logger.info("recovered %s after an unclean shutdown", entry.name)

    def _open_log(self, path: Path, log_dir: Path, **kwargs: Any) -> Log:
        log = Log(path, self._config_for(parse_topic_partition(strip_dir_suffix(path.name))[0]),
                  clock=self.clock, **kwargs)  # fmt: skip
        log.on_io_error = lambda exc, d=log_dir: self.dir_failed(d, str(exc))
        log.flusher = self._background()
        return log

    def _background(self) -> ThreadPoolExecutor | None:
        """The thread for the slow file work of tick (rolled segments' fsyncs, removing
        deleted logs), when tick runs on the thread that serves requests."""
        if self.background_checkpoints and self._flusher is None:
            self._flusher = ThreadPoolExecutor(1, thread_name_prefix="log-flush")
        return self._flusher

    def ensure_meta_properties(self, broker_id: int, cluster_id: str | None = None) -> None:
        """Check meta.properties of every log dir against this broker (write it where missing)."""
        for log_dir in self.online_dirs():
            path = log_dir / META_PROPERTIES
            try:
                props = read_properties(path)
            except OSError as exc:
                self.dir_failed(log_dir, f"cannot read {path}: {exc}")
                continue
            if props is None:
                write_meta_properties(path, broker_id, cluster_id)
                continue
            stored_id = props.get("broker.id")
            if stored_id is not None and int(stored_id) != broker_id:
                raise InconsistentMetaProperties(
                    f"configured broker.id {broker_id} does not match stored broker.id "
                    f"{stored_id} in {path}"
                )
            stored_cluster = props.get("cluster.id")
            if cluster_id is not None and stored_cluster not in (None, cluster_id):
                raise InconsistentMetaProperties(
                    f"cluster id {cluster_id} does not match stored cluster.id {stored_cluster} "
                    f"in {path}"
                )
            if stored_cluster is None and cluster_id is not None:
                write_meta_properties(path, broker_id, cluster_id)

    # -- the log cleaner -----------------------------------------------------------------------

    def start_cleaner(
        self, config: CleanerConfig, run_on_owner: RunOnOwner, *, in_process: bool = False
    ) -> LogCleaner | None:
        """Start compaction (when log.cleaner.enable); `run_on_owner(fn)` must run `fn` on the
        thread that drives these logs and return its result."""
        if not config.enable or config.threads < 1:
            return None
        self.cleaner = LogCleaner(self.cleaner_manager, config, run_on_owner, in_process=in_process)
        self.cleaner.startup()
        return self.cleaner

    def stop_cleaner(self) -> None:
        """Blocking: call it off the owner's thread (the cleaner threads may need it)."""
        if self.cleaner is not None:
            self.cleaner.shutdown()
            self.cleaner = None

    # -- log dirs ------------------------------------------------------------------------------

    def online_dirs(self) -> list[Path]:
        return [d for d in self.log_dirs if d not in self.offline_dirs]

    def is_dir_online(self, log_dir: Path) -> bool:
        return log_dir in self.log_dirs and log_dir not in self.offline_dirs

    def dir_failed(self, log_dir: Path, reason: str) -> None:
        """A disk operation in `log_dir` failed: take the dir offline (once). Its logs leave
        service (their fds are closed; nothing more is written there) and the listeners are
        told which partitions lost their log."""
        if log_dir in self.offline_dirs or log_dir not in self.log_dirs:
            return
        logger.error("log dir %s is offline: %s", log_dir, reason)
        self.offline_dirs.add(log_dir)
        self.cleaner_manager.handle_dir_failure(log_dir)
        lost, lost_futures = self._forget_dir(log_dir)
        for listener in list(self.on_dir_failure):
            try:
                listener(log_dir, lost, lost_futures)
            except Exception:
                logger.exception("log dir failure listener failed")

    def _forget_dir(self, log_dir: Path) -> tuple[list[TopicPartition], list[TopicPartition]]:
        """Drop every log of `log_dir`: (partitions, partitions with a future log there)."""
        lost: tuple[list[TopicPartition], list[TopicPartition]] = ([], [])
        for out, logs, dirs in (
            (lost[0], self._logs, self._log_dir_of),
            (lost[1], self._future_logs, self._future_dir_of),
        ):
            for tp in sorted(tp for tp, d in dirs.items() if d == log_dir):
                dirs.pop(tp)
                log = logs.pop(tp)
                out.append(tp)
                try:
                    log.close()
                except (OSError, KafkaStorageError):
                    pass
        self._doomed = [(due, log, path) for due, log, path in self._doomed
                        if not path.is_relative_to(log_dir)]  # fmt: skip
        return lost

    # -- logs ----------------------------------------------------------------------------------

    def _config_for(self, topic: str) -> LogConfig:
        return self._topic_configs.get(topic, self.default_config)

    def get_log(self, topic: str, partition: int) -> Log | None:
        return self._logs.get((topic, partition))

    def all_logs(self) -> dict[TopicPartition, Log]:
        return dict(self._logs)

    def log_dir_of(self, topic: str, partition: int) -> Path | None:
        return self._log_dir_of.get((topic, partition))

    def get_future_log(self, topic: str, partition: int) -> Log | None:
        return self._future_logs.get((topic, partition))

    def all_future_logs(self) -> dict[TopicPartition, Log]:
        return dict(self._future_logs)

    def future_dir_of(self, topic: str, partition: int) -> Path | None:
        return self._future_dir_of.get((topic, partition))

    def _next_log_dir(self, tp: TopicPartition) -> Path:
        preferred = self._preferred_dirs.pop(tp, None)
        online = self.online_dirs()
        if not online:
            raise KafkaStorageError("every log directory is offline")
        if preferred is not None and preferred in online:
            return preferred
        if len(online) == 1:
            return online[0]  # no need to count every log of the broker (once per new log)
        counts = {d: 0 for d in online}
        for d in (*self._log_dir_of.values(), *self._future_dir_of.values()):
            if d in counts:
                counts[d] += 1
        return min(online, key=lambda d: counts[d])

    def get_or_create_log(
        self,
        topic: str,
        partition: int,
        config: LogConfig | None = None,
        *,
        topic_id: uuid.UUID | None = None,
    ) -> Log:
        """The partition's log, created empty in the log dir holding the fewest logs."""
        tp = (topic, partition)
        if config is not None:
            self._topic_configs[topic] = config
        log = self._logs.get(tp)
        if log is None:
            log_dir = self._next_log_dir(tp)
            try:
                log = self._open_log(log_dir / f"{topic}-{partition}", log_dir, clean_shutdown=True)
            except OSError as exc:
                self.dir_failed(log_dir, f"cannot create {topic}-{partition}: {exc}")
                raise KafkaStorageError(f"cannot create {topic}-{partition}: {exc}") from exc
            self._logs[tp] = log
            self._log_dir_of[tp] = log_dir
        elif config is not None:
            log.update_config(config)
        if topic_id is not None:
            log.assign_topic_id(topic_id)
        return log

    def create_logs(
        self, specs: Iterable[tuple[str, int, LogConfig | None, uuid.UUID | None]]
    ) -> None:
        """`get_or_create_log(topic, partition, config, topic_id=...)` for many partitions (a
        LeaderAndIsr for new topics): their partition.metadata files are written together,
        each as durably as alone, so the fsyncs overlap. Best effort: a log whose creation or
        partition.metadata failed is left for get_or_create_log to create or report."""
        pending: dict[TopicPartition, tuple[Log, uuid.UUID]] = {}
        for topic, partition, config, topic_id in specs:
            try:
                log = self.get_or_create_log(topic, partition, config)
                if topic_id is not None and log.topic_id != topic_id:
                    pending[(topic, partition)] = (log, topic_id)
            except (KafkaStorageError, CheckpointError, OSError):
                continue
        todo = list(pending.values())
        texts = [(log.dir / PARTITION_METADATA, partition_metadata_text(tid)) for log, tid in todo]
        for (log, topic_id), error in zip(todo, atomic_write_many(texts), strict=True):
            if error is None:
                log.topic_id_written(topic_id)

    def update_topic_config(self, topic: str, config: LogConfig | None) -> None:
        """Apply a topic's new configuration (None: back to the broker defaults)."""
        if config is None:
            self._topic_configs.pop(topic, None)
        else:
            self._topic_configs[topic] = config
        for (t, _), log in [*self._logs.items(), *self._future_logs.items()]:
            if t == topic:
                log.update_config(self._config_for(topic))

    # -- moving replicas between log dirs (AlterReplicaLogDirs) ------------------------------

    def set_preferred_dir(self, topic: str, partition: int, log_dir: Path) -> None:
        """Create the replica in `log_dir` when it comes (it is not hosted here yet)."""
        self._preferred_dirs[(topic, partition)] = log_dir

    def create_future_log(self, topic: str, partition: int, log_dir: Path) -> Log | None:
        """An empty `-future` log in `log_dir` for the current log to be copied into; None
        when the current log already lives there. A future log elsewhere is dropped first."""
        tp = (topic, partition)
        current = self._logs[tp]
        existing = self._future_dir_of.get(tp)
        if existing == log_dir:
            return self._future_logs[tp]
        if existing is not None:
            self.remove_future_log(topic, partition)
        if self._log_dir_of[tp] == log_dir:
            return None
        start = current.first_batch_offset()
        try:
            future = self._open_log(
                log_dir / future_dir_name(topic, partition), log_dir,
                log_start_offset=start, recovery_point=start, clean_shutdown=True,
            )  # fmt: skip
        except OSError as exc:
            self.dir_failed(log_dir, f"cannot create a future log: {exc}")
            raise KafkaStorageError(f"cannot create a future log in {log_dir}: {exc}") from exc
        if current.topic_id is not None:
            future.assign_topic_id(current.topic_id)
        self._future_logs[tp] = future
        self._future_dir_of[tp] = log_dir
        return future

    def remove_future_log(self, topic: str, partition: int) -> None:
        """Abandon a move: the future log and its directory go."""
        tp = (topic, partition)
        future = self._future_logs.pop(tp, None)
        log_dir = self._future_dir_of.pop(tp, None)
        if future is None or log_dir is None:
            return
        future.rename_dir(log_dir / delete_dir_name(topic, partition))
        self._doomed.append((self.clock(), future, future.dir))

    def replace_current_with_future(self, topic: str, partition: int) -> Log:
        """The future log caught up: it becomes the partition's log (Kafka's order: the future
        directory takes the partition's name first, then the old one is renamed for deletion
        and removed after file.delete.delay.ms, so in-flight reads from it finish)."""
        tp = (topic, partition)
        source, dest = self._logs[tp], self._future_logs.pop(tp)
        source_dir, dest_dir = self._log_dir_of[tp], self._future_dir_of.pop(tp)
        dest.rename_dir(dest_dir / f"{topic}-{partition}")
        self._logs[tp] = dest
        self._log_dir_of[tp] = dest_dir
        self.cleaner_manager.alter_checkpoint_dir(tp, source_dir, dest_dir)
        source.rename_dir(source_dir / delete_dir_name(topic, partition))
        self._doomed.append((self.clock() + source.config.file_delete_delay_ms, source, source.dir))
        for d in (source_dir, dest_dir):
            self._checkpoint_dir(d)
        return dest

    def delete_log(self, topic: str, partition: int) -> bool:
        """Rename the directory to `<topic>-<partition>.<uuid>-delete`, remove it later.

        The log stays open until then so in-flight sendfiles from its fds can finish.
        """
        tp = (topic, partition)
        self.remove_future_log(topic, partition)
        log = self._logs.pop(tp, None)
        log_dir = self._log_dir_of.pop(tp, None)
        if log is None or log_dir is None:
            return False
        self.cleaner_manager.forget(tp, log_dir)
        log.rename_dir(log_dir / delete_dir_name(topic, partition))
        self._doomed.append((self.clock() + log.config.file_delete_delay_ms, log, log.dir))
        self._checkpointed_hw.pop(tp, None)
        return True

    def checkpointed_high_watermark(self, topic: str, partition: int) -> int | None:
        """The high watermark replication-offset-checkpoint held at start-up, if any."""
        return self._checkpointed_hw.get((topic, partition))

    # -- periodic work -------------------------------------------------------------------------

    def tick(self, now: int | None = None) -> None:
        """Do whatever periodic work is due; the server calls this from a timer (~1 s).

        Runs on the thread that appends (logs are not thread-safe); it may fsync (segments
        that rolled; the checkpoint files too unless `background_checkpoints`).
        """
        now = self.clock() if now is None else now
        for log_dir, reason in self._checkpoints.failures():
            self.dir_failed(log_dir, reason)
        if now >= self._next.get("retention", 0):
            self.cleanup_logs(now)
            self._next["retention"] = now + self.retention_check_interval_ms
        for log in [*self._logs.values(), *self._future_logs.values()]:
            try:
                log.maybe_flush(now)
                log.remove_deleted_segments(now)
            except KafkaStorageError:
                pass  # the log's dir went offline
        self._delete_doomed(now)
        background = self.background_checkpoints
        if now >= self._next.get("recovery", 0):
            self.checkpoint_recovery_points(background=background)
            self._next["recovery"] = now + self.recovery_point_checkpoint_interval_ms
        if now >= self._next.get("start", 0):
            self.checkpoint_log_start_offsets(background=background)
            self._next["start"] = now + self.log_start_offset_checkpoint_interval_ms
        if now >= self._next.get("hw", 0):
            self.checkpoint_high_watermarks(background=background)
            self._next["hw"] = now + self.high_watermark_checkpoint_interval_ms

    def cleanup_logs(self, now: int | None = None) -> int:
        """Retention pass over every log; returns the number of segments deleted."""
        now = self.clock() if now is None else now
        deleted = 0
        for log in list(self._logs.values()):
            try:
                deleted += log.delete_old_segments(now)
            except KafkaStorageError:
                pass  # the log's dir went offline
        return deleted

    def _delete_doomed(self, now: int, *, force: bool = False) -> None:
        keep = []
        for due, log, path in self._doomed:
            if force or due <= now:
                if log is not None:
                    try:
                        log.close()
                    except OSError as exc:
                        logger.warning("closing deleted log %s: %s", path, exc)
                # Unlinking a deleted topic's gigabytes frees their page cache: 0.1 to 0.5 s
                # of the kernel's time, which on the serving thread stalled every client.
                if (background := self._background()) is not None:
                    background.submit(shutil.rmtree, path, ignore_errors=True)
                else:
                    shutil.rmtree(path, ignore_errors=True)
            else:
                keep.append((due, log, path))
        self._doomed = keep

    def _checkpoint(
        self, name: str, value: Callable[[Log], int], dirs=None, *, background: bool = False
    ) -> None:
        """Write checkpoint `name` of each dir from a snapshot taken now; with `background`,
        on the writer's thread (a failure takes the dir offline at the next tick)."""
        for log_dir in self.online_dirs() if dirs is None else dirs:
            offsets = {
                tp: value(log) for tp, log in self._logs.items() if self._log_dir_of[tp] == log_dir
            }
            for tp, log in self._future_logs.items():
                if self._future_dir_of[tp] == log_dir and name != REPLICATION_CHECKPOINT:
                    offsets[tp] = value(log)
            if background:
                self._checkpoints.submit(log_dir, name, offsets)
            elif (error := self._checkpoints.write(log_dir, name, offsets)) is not None:
                self.dir_failed(log_dir, error)

    def _checkpoint_dir(self, log_dir: Path) -> None:
        if self.is_dir_online(log_dir):
            self._checkpoint(RECOVERY_POINT_CHECKPOINT, lambda log: log.recovery_point, [log_dir])
            self._checkpoint(
                LOG_START_OFFSET_CHECKPOINT, lambda log: log.log_start_offset, [log_dir]
            )

    def checkpoint_recovery_points(self, *, background: bool = False) -> None:
        self._checkpoint(
            RECOVERY_POINT_CHECKPOINT, lambda log: log.recovery_point, background=background
        )

    def checkpoint_log_start_offsets(self, *, background: bool = False) -> None:
        self._checkpoint(
            LOG_START_OFFSET_CHECKPOINT, lambda log: log.log_start_offset, background=background
        )

    def checkpoint_high_watermarks(self, *, background: bool = False) -> None:
        self._checkpoint(
            REPLICATION_CHECKPOINT, lambda log: log.high_watermark, background=background
        )

    # -- shutdown ------------------------------------------------------------------------------

    def shutdown(self) -> None:
        """Flush and close every log, write the checkpoints, then the clean-shutdown markers.
        A manager that never started (a failed start-up) only lets go of its locks."""
        if not self._started:
            for fd in self._locks:
                os.close(fd)
            self._locks = []
            return
        self._checkpoints.close()
        if self._flusher is not None:
            self._flusher.shutdown(wait=True)
            self._flusher = None
        for log_dir, reason in self._checkpoints.failures():
            self.dir_failed(log_dir, reason)
        for log_dir, log in [
            *((self._log_dir_of[tp], log) for tp, log in self._logs.items()),
            *((self._future_dir_of[tp], log) for tp, log in self._future_logs.items()),
        ]:
            try:
                log.flush()
                log.close()
            except (OSError, KafkaStorageError) as exc:
                self.dir_failed(log_dir, f"flush at shutdown: {exc}")
        self.checkpoint_recovery_points()
        self.checkpoint_log_start_offsets()
        self.checkpoint_high_watermarks()
        for _, log, _path in self._doomed:
            if log is not None:
                log.close()
        self._doomed = []
        for log_dir in self.online_dirs():
            try:
                write_clean_shutdown(log_dir / CLEAN_SHUTDOWN_FILE)
            except OSError as exc:
                logger.error("cannot write the clean-shutdown marker of %s: %s", log_dir, exc)
        for fd in self._locks:
            os.close(fd)
        self._locks = []
        self._logs = {}
        self._log_dir_of = {}
        self._future_logs = {}
        self._future_dir_of = {}
        self._started = False
