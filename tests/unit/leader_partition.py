"""A one-replica partition led by broker 1 on a real log, for tests of what a leader appends."""

from __future__ import annotations

from pathlib import Path

from odradek.broker.replication.partition import Partition, PartitionState
from odradek.broker.storage import Log, LogConfig


def open_partition(tmp_path: Path, *, clean: bool = True, **cfg) -> Partition:
    log = Log(tmp_path / "topic-0", LogConfig(**cfg), clean_shutdown=clean)
    state = PartitionState(leader=1, leader_epoch=0, isr=[1], replicas=[1])
    return Partition("topic", 0, None, log, state, 1)


def append(partition: Partition, data: bytes) -> int:
    """Append a client's batch as the leader; its first offset."""
    return partition.append_as_leader(bytearray(data)).first_offset
