"""All partition logs of a broker across its log directories.

Start-up loads every `<topic>-<partition>` directory (crash recovery when a directory lacks the
clean-shutdown marker), `tick(now_ms)` does the periodic work (retention, flushes, delayed file
deletion, checkpoints) and `shutdown()` flushes, checkpoints and leaves the marker. Per log dir
the files are Kafka's: meta.properties, recovery-point-offset-checkpoint,
replication-offset-checkpoint, log-start-offset-checkpoint, cleaner-offset-checkpoint and
.kafka_cleanshutdown. The log cleaner (compaction) runs beside it once `start_cleaner` is called.
"""

from __future__ import annotations

import fcntl
import logging
import os
import shutil
import tempfile
import uuid
from collections.abc import Callable, Iterable, Mapping
from pathlib import Path

from .checkpoint import (
    CLEAN_SHUTDOWN_FILE,
    LOG_START_OFFSET_CHECKPOINT,
    META_PROPERTIES,
    RECOVERY_POINT_CHECKPOINT,
    REPLICATION_CHECKPOINT,
    CheckpointError,
    read_offset_checkpoint,
    read_properties,
    write_clean_shutdown,
    write_meta_properties,
    write_offset_checkpoint,
)
from .cleaner_manager import CleanerManager
from .errors import InconsistentMetaProperties, LogDirError, LogDirInUse
from .log import Log, now_ms, parse_topic_partition
from .log_cleaner import CleanerConfig, LogCleaner, RunOnOwner
from .log_config import LogConfig

logger = logging.getLogger(__name__)

DELETE_DIR_SUFFIX = "-delete"
LOCK_FILE = ".lock"

TopicPartition = tuple[str, int]


def delete_dir_name(topic: str, partition: int) -> str:
    """Kafka's name for a partition directory awaiting deletion (at most 255 characters)."""
    suffix = f"-{partition}.{uuid.uuid4().hex}{DELETE_DIR_SUFFIX}"
    return topic[: 255 - len(suffix)] + suffix


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
        self._doomed: list[tuple[int, Log | None, Path]] = []
        self._checkpointed_hw: dict[TopicPartition, int] = {}
        self._topic_configs: dict[str, LogConfig] = {}
        self._locks: list[int] = []
        self._next: dict[str, int] = {}
        self._started = False
        self.cleaner_manager = CleanerManager(self, clock=clock)
        self.cleaner: LogCleaner | None = None

    # -- start-up ------------------------------------------------------------------------------

    def check_dirs(self) -> None:
        """Create every log dir and make sure this process can write in it: LogDirError names
        the first that fails (a missing permission, a file in the way, a read-only disk)."""
        for log_dir in self.log_dirs:
            try:
                log_dir.mkdir(parents=True, exist_ok=True)
                with tempfile.TemporaryFile(dir=log_dir):
                    pass
            except OSError as e:
                raise LogDirError(
                    f"cannot use log directory {log_dir} (log.dirs): {e.strerror or e}"
                ) from e

    def startup(self, topic_configs: Mapping[str, LogConfig] | None = None) -> None:
        """Lock the log dirs and load every log, recovering those of uncleanly stopped dirs."""
        self._topic_configs = dict(topic_configs or {})
        now = self.clock()
        self.check_dirs()
        for log_dir in self.log_dirs:
            self._lock(log_dir)
            self._load_dir(log_dir, now)
        for log_dir in self.log_dirs:
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
            tp = parse_topic_partition(entry.name)
            if tp is None and entry.name.startswith(OWN_DIR_PREFIX):
                continue  # e.g. the embedded metadata store, which may live in a log dir
            if tp is None:
                logger.warning("ignoring directory %s: not <topic>-<partition>", entry.path)
                continue
            if tp in self._logs:
                raise RuntimeError(f"duplicate log directories for {tp[0]}-{tp[1]}: {entry.path}")
            self._logs[tp] = Log(
                entry.path,
                self._config_for(tp[0]),
                recovery_point=recovery_points.get(tp, 0),
                log_start_offset=start_offsets.get(tp, 0),
                clean_shutdown=clean,
                clock=self.clock,
            )
            self._log_dir_of[tp] = log_dir
            if not clean:
                logger.info("recovered %s after an unclean shutdown", entry.name)

    def ensure_meta_properties(self, broker_id: int, cluster_id: str | None = None) -> None:
        """Check meta.properties of every log dir against this broker (write it where missing)."""
        for log_dir in self.log_dirs:
            path = log_dir / META_PROPERTIES
            props = read_properties(path)
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
        return list(self.log_dirs)

    def dir_failed(self, log_dir: Path, reason: str) -> None:
        logger.error("log dir %s failed: %s", log_dir, reason)

    # -- logs ----------------------------------------------------------------------------------

    def _config_for(self, topic: str) -> LogConfig:
        return self._topic_configs.get(topic, self.default_config)

    def get_log(self, topic: str, partition: int) -> Log | None:
        return self._logs.get((topic, partition))

    def all_logs(self) -> dict[TopicPartition, Log]:
        return dict(self._logs)

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
            counts = {d: 0 for d in self.log_dirs}
            for d in self._log_dir_of.values():
                counts[d] += 1
            log_dir = min(self.log_dirs, key=lambda d: counts[d])
            log = Log(
                log_dir / f"{topic}-{partition}",
                self._config_for(topic),
                clean_shutdown=True,
                clock=self.clock,
            )
            self._logs[tp] = log
            self._log_dir_of[tp] = log_dir
        elif config is not None:
            log.update_config(config)
        if topic_id is not None:
            log.assign_topic_id(topic_id)
        return log

    def update_topic_config(self, topic: str, config: LogConfig | None) -> None:
        """Apply a topic's new configuration (None: back to the broker defaults)."""
        if config is None:
            self._topic_configs.pop(topic, None)
        else:
            self._topic_configs[topic] = config
        for (t, _), log in self._logs.items():
            if t == topic:
                log.update_config(self._config_for(topic))

    def delete_log(self, topic: str, partition: int) -> bool:
        """Rename the directory to `<topic>-<partition>.<uuid>-delete`, remove it later.

        The log stays open until then so in-flight sendfiles from its fds can finish.
        """
        tp = (topic, partition)
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

        Runs on the thread that appends (logs are not thread-safe); it may fsync.
        """
        now = self.clock() if now is None else now
        if now >= self._next.get("retention", 0):
            self.cleanup_logs(now)
            self._next["retention"] = now + self.retention_check_interval_ms
        for log in list(self._logs.values()):
            log.maybe_flush(now)
            log.remove_deleted_segments(now)
        self._delete_doomed(now)
        if now >= self._next.get("recovery", 0):
            self.checkpoint_recovery_points()
            self._next["recovery"] = now + self.recovery_point_checkpoint_interval_ms
        if now >= self._next.get("start", 0):
            self.checkpoint_log_start_offsets()
            self._next["start"] = now + self.log_start_offset_checkpoint_interval_ms
        if now >= self._next.get("hw", 0):
            self.checkpoint_high_watermarks()
            self._next["hw"] = now + self.high_watermark_checkpoint_interval_ms

    def cleanup_logs(self, now: int | None = None) -> int:
        """Retention pass over every log; returns the number of segments deleted."""
        now = self.clock() if now is None else now
        return sum(log.delete_old_segments(now) for log in list(self._logs.values()))

    def _delete_doomed(self, now: int, *, force: bool = False) -> None:
        keep = []
        for due, log, path in self._doomed:
            if force or due <= now:
                if log is not None:
                    log.close()
                shutil.rmtree(path, ignore_errors=True)
            else:
                keep.append((due, log, path))
        self._doomed = keep

    def _checkpoint(self, name: str, value: Callable[[Log], int]) -> None:
        for log_dir in self.log_dirs:
            offsets = {
                tp: value(log) for tp, log in self._logs.items() if self._log_dir_of[tp] == log_dir
            }
            write_offset_checkpoint(log_dir / name, offsets)

    def checkpoint_recovery_points(self) -> None:
        self._checkpoint(RECOVERY_POINT_CHECKPOINT, lambda log: log.recovery_point)

    def checkpoint_log_start_offsets(self) -> None:
        self._checkpoint(LOG_START_OFFSET_CHECKPOINT, lambda log: log.log_start_offset)

    def checkpoint_high_watermarks(self) -> None:
        self._checkpoint(REPLICATION_CHECKPOINT, lambda log: log.high_watermark)

    # -- shutdown ------------------------------------------------------------------------------

    def shutdown(self) -> None:
        """Flush and close every log, write the checkpoints, then the clean-shutdown markers.
        A manager that never started (a failed start-up) only lets go of its locks."""
        if not self._started:
            for fd in self._locks:
                os.close(fd)
            self._locks = []
            return
        for log in self._logs.values():
            log.flush()
            log.close()
        self.checkpoint_recovery_points()
        self.checkpoint_log_start_offsets()
        self.checkpoint_high_watermarks()
        for _, log, _path in self._doomed:
            if log is not None:
                log.close()
        self._doomed = []
        for log_dir in self.log_dirs:
            write_clean_shutdown(log_dir / CLEAN_SHUTDOWN_FILE)
        for fd in self._locks:
            os.close(fd)
        self._locks = []
        self._logs = {}
        self._log_dir_of = {}
        self._started = False
