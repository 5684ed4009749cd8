"""LogManager: log dirs, create/delete, periodic work, clean shutdown and reopen."""

from __future__ import annotations

import os
import uuid

import pytest
from manual_clock import Clock
from odradek.broker.records.record import Record, build_batch
from odradek.broker.storage import LogConfig, LogManager
from odradek.broker.storage.checkpoint import (
    CLEAN_SHUTDOWN_FILE,
    LOG_START_OFFSET_CHECKPOINT,
    META_PROPERTIES,
    RECOVERY_POINT_CHECKPOINT,
    REPLICATION_CHECKPOINT,
    read_offset_checkpoint,
    read_partition_metadata,
    read_properties,
)
from odradek.broker.storage.errors import InconsistentMetaProperties, LogDirError, LogDirInUse

NOW = 10_000_000


def make_batch(ts: int = 1000) -> bytearray:
    return bytearray(
        build_batch([Record(offset=i, timestamp=ts, value=b"m" * 40) for i in range(2)])
    )


CONFIG = LogConfig(segment_bytes=700, index_interval_bytes=100)


def started(dirs, clock=None, **kw) -> LogManager:
    manager = LogManager(dirs, CONFIG, clock=clock or Clock(NOW), **kw)
    manager.startup()
    return manager


def test_reopen_after_clean_shutdown_keeps_everything(tmp_path):
    clock = Clock(NOW)
    manager = started([tmp_path], clock)
    topic_id = uuid.uuid4()
    log = manager.get_or_create_log("orders", 3, topic_id=topic_id)
    for i in range(20):
        log.append(make_batch(ts=1000 + i), leader_epoch=i // 10)
    log.delete_records_before(9)
    other = manager.get_or_create_log("audit.log-v2", 0)
    other.append(make_batch())
    data = log.read(9, 1 << 20).read()
    segments = [s.base_offset for s in log.segments]
    manager.shutdown()

    assert (tmp_path / CLEAN_SHUTDOWN_FILE).exists()
    assert read_offset_checkpoint(tmp_path / RECOVERY_POINT_CHECKPOINT) == {
        ("orders", 3): 40,
        ("audit.log-v2", 0): 2,
    }
    assert read_offset_checkpoint(tmp_path / LOG_START_OFFSET_CHECKPOINT)[("orders", 3)] == 9
    assert read_offset_checkpoint(tmp_path / REPLICATION_CHECKPOINT)[("orders", 3)] == 40
    assert read_partition_metadata(tmp_path / "orders-3" / "partition.metadata") == topic_id
    assert (tmp_path / "orders-3" / "leader-epoch-checkpoint").read_text() == "0\n2\n0 9\n1 20\n"

    manager = started([tmp_path], clock)
    assert not (tmp_path / CLEAN_SHUTDOWN_FILE).exists()
    log = manager.get_log("orders", 3)
    assert (log.log_start_offset, log.log_end_offset, log.recovery_point) == (9, 40, 40)
    assert [s.base_offset for s in log.segments] == segments
    assert log.read(9, 1 << 20).read() == data
    assert log.topic_id == topic_id
    assert log.epoch_cache.entries == [(0, 9), (1, 20)]
    assert manager.checkpointed_high_watermark("orders", 3) == 40
    assert manager.get_log("audit.log-v2", 0).log_end_offset == 2
    assert log.append(make_batch(), leader_epoch=1).first_offset == 40
    manager.shutdown()


def test_logs_spread_over_log_dirs(tmp_path):
    dirs = [tmp_path / "a", tmp_path / "b"]
    manager = started(dirs)
    for p in range(4):
        manager.get_or_create_log("t", p)
    assert sorted(os.listdir(dirs[0])).count("t-0") + sorted(os.listdir(dirs[1])).count("t-0") == 1
    assert len([n for n in os.listdir(dirs[0]) if n.startswith("t-")]) == 2
    assert len([n for n in os.listdir(dirs[1]) if n.startswith("t-")]) == 2
    manager.get_log("t", 1).append(make_batch())
    manager.shutdown()
    manager = started(dirs)
    assert sorted(manager.all_logs()) == [("t", 0), ("t", 1), ("t", 2), ("t", 3)]
    assert manager.get_log("t", 1).log_end_offset == 2
    manager.shutdown()


def test_delete_log_renames_then_removes_after_delay(tmp_path):
    clock = Clock(NOW)
    manager = started([tmp_path], clock)
    log = manager.get_or_create_log("gone", 0, LogConfig(file_delete_delay_ms=1000))
    log.append(make_batch())
    sl = log.read(0, 100)
    assert manager.delete_log("gone", 0)
    assert manager.get_log("gone", 0) is None
    names = os.listdir(tmp_path)
    doomed = [n for n in names if n.endswith("-delete")]
    assert len(doomed) == 1 and doomed[0].startswith("gone-0.") and "gone-0" not in names
    assert len(doomed[0].split(".")[1]) == len(uuid.uuid4().hex) + len("-delete")
    assert sl.read()  # an in-flight slice is still readable until the delay passes
    manager.tick(clock.now + 999)
    assert (tmp_path / doomed[0]).exists()
    manager.tick(clock.now + 1000)
    assert not (tmp_path / doomed[0]).exists()
    assert not manager.delete_log("gone", 0)
    manager.shutdown()


def test_leftover_delete_dirs_are_removed_after_restart(tmp_path):
    leftover = tmp_path / f"x-1.{uuid.uuid4().hex}-delete"
    leftover.mkdir()
    (leftover / "00000000000000000000.log").write_bytes(b"")
    manager = started([tmp_path])
    assert manager.all_logs() == {}
    manager.tick()
    assert not leftover.exists()
    manager.shutdown()


def test_tick_runs_retention_and_checkpoints(tmp_path):
    clock = Clock(NOW)
    manager = started(
        [tmp_path],
        clock,
        retention_check_interval_ms=1000,
        log_start_offset_checkpoint_interval_ms=6000,
        high_watermark_checkpoint_interval_ms=6000,
        recovery_point_checkpoint_interval_ms=60_000,
    )
    log = manager.get_or_create_log("t", 0, LogConfig(segment_bytes=700, retention_ms=5000))
    for _ in range(20):
        log.append(make_batch(ts=clock.now))
    segments = len(log.segments)
    assert segments > 2
    clock.now += 6000
    manager.tick()
    assert len(log.segments) == 1 and log.log_start_offset == log.log_end_offset == 40
    assert read_offset_checkpoint(tmp_path / LOG_START_OFFSET_CHECKPOINT) == {("t", 0): 40}
    assert read_offset_checkpoint(tmp_path / REPLICATION_CHECKPOINT) == {("t", 0): 40}
    assert read_offset_checkpoint(tmp_path / RECOVERY_POINT_CHECKPOINT) == {}  # not due yet
    manager.shutdown()


def test_topic_config_update_reaches_logs(tmp_path):
    manager = started([tmp_path])
    log = manager.get_or_create_log("t", 0)
    manager.update_topic_config("t", LogConfig(retention_bytes=10))
    assert log.config.retention_bytes == 10
    manager.update_topic_config("t", None)
    assert log.config == CONFIG
    manager.shutdown()


def test_startup_uses_topic_configs(tmp_path):
    manager = started([tmp_path])
    manager.get_or_create_log("t", 0).append(make_batch())
    manager.shutdown()
    manager = LogManager([tmp_path], CONFIG)
    manager.startup({"t": LogConfig(retention_ms=1)})
    assert manager.get_log("t", 0).config.retention_ms == 1
    manager.shutdown()


def test_log_dir_lock(tmp_path):
    manager = started([tmp_path])
    with pytest.raises(LogDirInUse):
        started([tmp_path])
    manager.shutdown()
    started([tmp_path]).shutdown()


def test_meta_properties(tmp_path):
    manager = started([tmp_path])
    manager.ensure_meta_properties(3, "AbCdEfGhIjKlMnOpQrStUv")
    props = read_properties(tmp_path / META_PROPERTIES)
    assert props == {"version": "0", "broker.id": "3", "cluster.id": "AbCdEfGhIjKlMnOpQrStUv"}
    manager.ensure_meta_properties(3, "AbCdEfGhIjKlMnOpQrStUv")
    with pytest.raises(InconsistentMetaProperties):
        manager.ensure_meta_properties(4)
    with pytest.raises(InconsistentMetaProperties):
        manager.ensure_meta_properties(3, "another-cluster-id-xyz")
    manager.shutdown()


def test_directories_that_are_not_partitions_are_ignored(tmp_path):
    (tmp_path / "lost+found").mkdir()
    (tmp_path / "t-0.abc-future").mkdir()
    manager = started([tmp_path])
    assert manager.all_logs() == {}
    manager.shutdown()


def test_future_log_replaces_the_current_one(tmp_path):
    """AlterReplicaLogDirs' storage side: a -future log in another dir, filled from the
    current one, takes its place; the old dir goes after file.delete.delay.ms."""
    clock = Clock(NOW)
    a, b = tmp_path / "a", tmp_path / "b"
    manager = started([a, b], clock)
    log = manager.get_or_create_log("moving", 0, topic_id=uuid.uuid4())
    source_dir = manager.log_dir_of("moving", 0)
    dest_dir = b if source_dir == a else a
    for i in range(30):
        log.append(make_batch(ts=1000 + i), leader_epoch=1)
    log.delete_records_before(10)
    assert manager.create_future_log("moving", 0, source_dir) is None  # already there
    future = manager.create_future_log("moving", 0, dest_dir)
    assert future is not None and future.dir.name.endswith("-future")
    assert future.topic == "moving" and future.topic_id == log.topic_id
    assert future.log_end_offset == 10  # starts at the batch holding the log start offset
    while (chunk := log.read(future.log_end_offset, 1 << 20)) is not None:
        future.append(chunk.read(), assign_offsets=False)
    assert future.log_end_offset == log.log_end_offset == 60
    data = log.read(10, 1 << 20).read()
    new = manager.replace_current_with_future("moving", 0)
    assert new is future and manager.get_log("moving", 0) is future
    assert future.dir == dest_dir / "moving-0" and manager.log_dir_of("moving", 0) == dest_dir
    assert manager.get_future_log("moving", 0) is None
    assert not (source_dir / "moving-0").exists()
    clock.now += CONFIG.file_delete_delay_ms + 1
    manager.tick()
    assert not [p for p in source_dir.iterdir() if p.name.startswith("moving")]
    manager.shutdown()
    again = started([a, b], clock)
    assert again.log_dir_of("moving", 0) == dest_dir
    assert again.get_log("moving", 0).read(10, 1 << 20).read() == data
    again.shutdown()


def test_future_logs_survive_a_restart(tmp_path):
    manager = started([tmp_path / "a", tmp_path / "b"])
    manager.get_or_create_log("t", 0).append(make_batch())
    dest = [d for d in manager.log_dirs if d != manager.log_dir_of("t", 0)][0]
    manager.create_future_log("t", 0, dest).append(make_batch(), assign_offsets=False)
    manager.shutdown()
    again = started([tmp_path / "a", tmp_path / "b"])
    future = again.get_future_log("t", 0)
    assert future is not None and again.future_dir_of("t", 0) == dest
    assert future.log_end_offset == 2 and again.get_log("t", 0).log_end_offset == 2
    again.shutdown()


def test_failed_dir_goes_offline_and_the_others_keep_working(tmp_path):
    a, b = tmp_path / "a", tmp_path / "b"
    manager = started([a, b])
    told = []
    manager.on_dir_failure.append(lambda d, lost, futures: told.append((d, lost, futures)))
    logs = {p: manager.get_or_create_log("t", p) for p in range(4)}
    in_a = sorted(p for p in logs if manager.log_dir_of("t", p) == a)
    assert len(in_a) == 2
    # An OSError from a log's files takes its dir offline, once.
    logs[in_a[0]].on_io_error(OSError(5, "Input/output error"))
    logs[in_a[1]].on_io_error(OSError(5, "Input/output error"))
    assert told == [(a, [("t", p) for p in in_a], [])]
    assert manager.offline_dirs == {a} and manager.online_dirs() == [b]
    assert sorted(p for _, p in manager.all_logs()) == sorted(set(range(4)) - set(in_a))
    manager.get_or_create_log("t", 9)
    assert manager.log_dir_of("t", 9) == b  # new logs go to the dirs left
    manager.tick(manager.clock() + 10**9)  # checkpoints skip the offline dir
    manager.shutdown()
    assert not (a / CLEAN_SHUTDOWN_FILE).exists() and (b / CLEAN_SHUTDOWN_FILE).exists()


def test_unusable_dir_at_startup_is_offline(tmp_path):
    bad = tmp_path / "not-a-dir"
    bad.write_text("a file where a log dir should be")
    manager = started([bad, tmp_path / "ok"])
    assert manager.offline_dirs == {bad}
    manager.get_or_create_log("t", 0)
    assert manager.log_dir_of("t", 0) == tmp_path / "ok"
    manager.shutdown()
    with pytest.raises(LogDirError, match="cannot use log directory"):
        started([bad])


def test_create_logs_writes_each_partition_metadata_durably(tmp_path):
    manager = started([tmp_path])
    ids = {p: uuid.uuid4() for p in range(5)}
    existing = manager.get_or_create_log("t", 0)
    manager.create_logs([("t", p, None, ids[p]) for p in range(5)] + [("u", 0, None, None)])
    assert manager.get_log("t", 0) is existing
    for p, topic_id in ids.items():
        log = manager.get_log("t", p)
        assert log.topic_id == topic_id
        assert read_partition_metadata(log.dir / "partition.metadata") == topic_id
        assert not (log.dir / "partition.metadata.tmp").exists()
    assert manager.get_log("u", 0).topic_id is None
    manager.shutdown()
    reopened = started([tmp_path])
    assert {p: reopened.get_log("t", p).topic_id for p in range(5)} == ids
    reopened.shutdown()
