"""Kafka's checkpoint and metadata file formats, the leader-epoch cache and LogConfig."""

from __future__ import annotations

import os
import uuid

import pytest
from odradek.broker.storage.checkpoint import (
    CheckpointError,
    atomic_write_many,
    read_epoch_checkpoint,
    read_offset_checkpoint,
    read_partition_metadata,
    topic_id_from_str,
    topic_id_to_str,
    write_epoch_checkpoint,
    write_offset_checkpoint,
    write_partition_metadata,
)
from odradek.broker.storage.leader_epoch import LeaderEpochCache
from odradek.broker.storage.log_config import InvalidConfig, LogConfig


def test_offset_checkpoint_round_trip(tmp_path):
    path = tmp_path / "recovery-point-offset-checkpoint"
    offsets = {("orders", 0): 42, ("orders", 1): 0, ("__consumer_offsets", 17): 9_000_000_000}
    write_offset_checkpoint(path, offsets)
    assert path.read_text() == "0\n3\norders 0 42\norders 1 0\n__consumer_offsets 17 9000000000\n"
    assert read_offset_checkpoint(path) == offsets
    assert not [n for n in os.listdir(tmp_path) if n.endswith(".tmp")]
    write_offset_checkpoint(path, {})
    assert path.read_text() == "0\n0\n"
    assert read_offset_checkpoint(path) == {}
    assert read_offset_checkpoint(tmp_path / "absent") == {}


@pytest.mark.parametrize(
    "text",
    ["", "1\n0\n", "0\n2\nt 0 1\n", "0\n1\nt 0\n", "0\n1\nt x 1\n", "zero\n0\n"],
)
def test_malformed_offset_checkpoint(tmp_path, text):
    path = tmp_path / "cp"
    path.write_text(text)
    with pytest.raises(CheckpointError):
        read_offset_checkpoint(path)


def test_epoch_checkpoint_round_trip(tmp_path):
    path = tmp_path / "leader-epoch-checkpoint"
    write_epoch_checkpoint(path, [(0, 0), (3, 120)])
    assert path.read_text() == "0\n2\n0 0\n3 120\n"
    assert read_epoch_checkpoint(path) == [(0, 0), (3, 120)]
    assert read_epoch_checkpoint(tmp_path / "none") is None


def test_partition_metadata_and_topic_id_text(tmp_path):
    assert topic_id_to_str(uuid.UUID(int=0)) == "AAAAAAAAAAAAAAAAAAAAAA"
    topic_id = uuid.UUID("f3a1a6e2-5f0e-4c8b-9a4b-0d9e2b7c6a11")
    text = topic_id_to_str(topic_id)
    assert len(text) == 22 and "=" not in text and "+" not in text and "/" not in text
    assert topic_id_from_str(text) == topic_id
    path = tmp_path / "partition.metadata"
    write_partition_metadata(path, topic_id)
    assert path.read_text() == f"version: 0\ntopic_id: {text}\n"
    assert read_partition_metadata(path) == topic_id


def test_leader_epoch_cache(tmp_path):
    cache = LeaderEpochCache.load(tmp_path)
    assert cache.latest_epoch is None
    assert cache.end_offset_for(0, 10) == (-1, -1)
    assert cache.assign(1, 0)
    assert not cache.assign(1, 5)  # same epoch, later offset: nothing to record
    cache.assign(2, 10)
    cache.assign(4, 25)
    log_end = 40
    assert cache.end_offset_for(4, log_end) == (4, 40)
    assert cache.end_offset_for(3, log_end) == (2, 25)
    assert cache.end_offset_for(2, log_end) == (2, 25)
    assert cache.end_offset_for(0, log_end) == (0, 0)
    assert cache.end_offset_for(5, log_end) == (-1, -1)
    assert cache.end_offset_for(-1, log_end) == (-1, -1)
    assert cache.epoch_for_offset(12) == 2
    assert LeaderEpochCache.load(tmp_path).entries == [(1, 0), (2, 10), (4, 25)]
    cache.truncate_from_start(12)
    assert cache.entries == [(2, 12), (4, 25)]
    cache.truncate_from_end(25)
    assert cache.entries == [(2, 12)]
    cache.assign(3, 5)  # contradicts later entries: they go
    assert cache.entries == [(3, 5)]
    assert LeaderEpochCache.load(tmp_path).entries == [(3, 5)]


def test_log_config_from_props():
    cfg = LogConfig.from_props(
        {
            "segment.bytes": "1048576",
            "retention.ms": "-1",
            "cleanup.policy": "compact, delete",
            "min.cleanable.dirty.ratio": "0.1",
            "preallocate": "TRUE",
            "message.timestamp.type": "LogAppendTime",
            "unknown.key": "whatever",
        }
    )
    assert cfg.segment_bytes == 1 << 20 and cfg.retention_ms == -1
    assert cfg.compact and cfg.delete and cfg.preallocate
    assert cfg.min_cleanable_dirty_ratio == 0.1
    assert cfg.message_timestamp_type == "LogAppendTime"
    assert LogConfig.from_props(cfg.to_props()) == cfg
    layered = LogConfig.from_props({"retention.bytes": "100"}, cfg)
    assert layered.retention_bytes == 100 and layered.segment_bytes == 1 << 20
    assert LogConfig().to_props()["flush.ms"] == str((1 << 63) - 1)


@pytest.mark.parametrize(
    ("key", "value"),
    [
        ("segment.bytes", "10"),
        ("segment.bytes", "lots"),
        ("retention.ms", "-2"),
        ("cleanup.policy", "forever"),
        ("compression.type", "brotli"),
        ("preallocate", "yes"),
        ("min.cleanable.dirty.ratio", "1.5"),
    ],
)
def test_log_config_rejects_bad_values(key, value):
    with pytest.raises(InvalidConfig) as info:
        LogConfig.from_props({key: value})
    assert key in str(info.value) and info.value.key == key


def test_atomic_write_many_writes_each_file_and_reports_each_error(tmp_path):
    (tmp_path / "a").mkdir()
    (tmp_path / "b").mkdir()
    (tmp_path / "b" / "f").write_text("old")
    items = [
        (tmp_path / "a" / "f", "one"),
        (tmp_path / "missing" / "f", "two"),
        (tmp_path / "b" / "f", "three"),
    ]
    errors = atomic_write_many(items)
    assert errors[0] is None and errors[2] is None
    assert isinstance(errors[1], FileNotFoundError)
    assert (tmp_path / "a" / "f").read_text() == "one"
    assert (tmp_path / "b" / "f").read_text() == "three"
    assert sorted(p.name for p in (tmp_path / "b").iterdir()) == ["f"]
    assert atomic_write_many([(tmp_path / "a" / "g", "alone")]) == [None]
    assert (tmp_path / "a" / "g").read_text() == "alone"
