"""Checkpoint files written off the serving thread: in order, newest wins, failures reported."""

from __future__ import annotations

from odradek.broker.storage import LogConfig, LogManager
from odradek.broker.storage.checkpoint import REPLICATION_CHECKPOINT, read_offset_checkpoint
from odradek.broker.storage.checkpoint_writer import CheckpointWriter
from odradek.broker.storage.log_manager import TopicPartition


def test_background_write_lands_and_an_older_snapshot_never_replaces_a_newer(tmp_path):
    writer = CheckpointWriter()
    writer.submit(tmp_path, "cp", {("t", 0): 1})
    writer.close()
    assert read_offset_checkpoint(tmp_path / "cp") == {("t", 0): 1}
    # A snapshot taken earlier (number 2) finishing after a later one (number 3) is skipped.
    assert writer._write(tmp_path / "cp", {("t", 0): 3}, 3) is None
    assert writer._write(tmp_path / "cp", {("t", 0): 2}, 2) is None
    assert read_offset_checkpoint(tmp_path / "cp") == {("t", 0): 3}
    assert writer.failures() == []


def test_background_failure_is_reported_once(tmp_path):
    writer = CheckpointWriter()
    writer.submit(tmp_path / "missing", "cp", {("t", 0): 1})
    writer.close()
    [(log_dir, reason)] = writer.failures()
    assert log_dir == tmp_path / "missing" and reason.startswith("cannot write cp")
    assert writer.failures() == []


def test_manager_ticks_checkpoints_in_the_background(tmp_path):
    manager = LogManager([tmp_path], LogConfig(), background_checkpoints=True)
    manager.startup()
    manager.get_or_create_log("t", 0)
    manager.tick(manager.clock() + 10**9)  # every checkpoint due
    manager._checkpoints.close()  # the test waits for what the broker does not wait for
    expected: dict[TopicPartition, int] = {("t", 0): 0}
    assert read_offset_checkpoint(tmp_path / REPLICATION_CHECKPOINT) == expected
    manager.shutdown()
    assert read_offset_checkpoint(tmp_path / REPLICATION_CHECKPOINT) == expected


def test_manager_removes_a_deleted_log_off_the_ticking_thread(tmp_path, monkeypatch):
    import shutil
    import threading

    removed_on: list[str] = []
    real_rmtree = shutil.rmtree

    def rmtree(path, ignore_errors=False):
        removed_on.append(threading.current_thread().name)
        real_rmtree(path, ignore_errors=ignore_errors)

    monkeypatch.setattr(shutil, "rmtree", rmtree)
    manager = LogManager([tmp_path], LogConfig(), background_checkpoints=True)
    manager.startup()
    manager.get_or_create_log("gone", 0)
    assert manager.delete_log("gone", 0)
    [doomed] = [p for p in tmp_path.iterdir() if p.name.endswith("-delete")]
    manager.tick(manager.clock() + 10**9)  # past file.delete.delay.ms
    manager.shutdown()  # waits for the background thread
    assert not doomed.exists()
    assert removed_on and all(name.startswith("log-flush") for name in removed_on)
