"""Moving a replica between log dirs (AlterReplicaLogDirs) in the replica manager, and what a
failed log dir does to the partitions it held."""

from __future__ import annotations

import asyncio
from pathlib import Path

from odradek.broker.cluster.control import LeaderAndIsrPartition, LeaderAndIsrRequest
from odradek.broker.protocol.errors import ErrorCode, KafkaError
from odradek.broker.records.record import Record, build_batch, decode_all
from odradek.broker.replication.log_dir_mover import LogDirMover
from odradek.broker.replication.replica_manager import ReplicaManager
from odradek.broker.storage import LogConfig
from odradek.broker.storage.log_manager import LogManager
from odradek.broker.storage.txn_index import AbortedTxn

CONFIG = LogConfig(segment_bytes=4000)


def batch(n: int = 5, key: bytes = b"k") -> memoryview:
    return memoryview(
        build_batch([Record(offset=i, timestamp=1000, key=key, value=b"v" * 20) for i in range(n)])
    )


def leader_request(partitions: int = 1) -> LeaderAndIsrRequest:
    return LeaderAndIsrRequest(
        controller_id=1, controller_epoch=1, broker_epoch=-1,
        partitions=tuple(
            LeaderAndIsrPartition(topic="t", topic_id=None, partition=p, controller_epoch=1,
                                  leader=1, leader_epoch=3, isr=(1,), partition_epoch=0,
                                  replicas=(1,))
            for p in range(partitions)
        ),
        live_leaders=(),
    )  # fmt: skip


def replica_manager(tmp_path: Path) -> tuple[ReplicaManager, list[Path]]:
    dirs = [tmp_path / "a", tmp_path / "b"]
    lm = LogManager(dirs, CONFIG)
    lm.startup({})
    return ReplicaManager(1, lm, lambda topic: CONFIG), [d.absolute() for d in dirs]


def offsets(log) -> list[int]:
    out = []
    for seg in log.segments:
        out += [r.offset for _, rs in decode_all(seg.read_bytes(0, seg.size)) for r in rs]
    return out


def test_alter_replica_log_dirs_errors(tmp_path):
    rm, dirs = replica_manager(tmp_path)
    rm.leader_and_isr(leader_request())
    current = rm.log_manager.log_dir_of("t", 0)
    codes = rm.alter_replica_log_dirs({
        ("t", 0): "relative/dir", ("t", 1): str(dirs[1]), ("t", 2): str(tmp_path / "unknown"),
    })  # fmt: skip
    assert codes == {
        ("t", 0): ErrorCode.LOG_DIR_NOT_FOUND,
        ("t", 1): ErrorCode.REPLICA_NOT_AVAILABLE,  # not hosted yet: created there later
        ("t", 2): ErrorCode.LOG_DIR_NOT_FOUND,
    }
    assert rm.alter_replica_log_dirs({("t", 0): str(current)}) == {("t", 0): ErrorCode.NONE}
    assert rm.log_manager.get_future_log("t", 0) is None  # already there: nothing to move
    # The replica the controller assigns later lands in the dir asked for beforehand.
    rm.leader_and_isr(leader_request(2))
    assert rm.log_manager.log_dir_of("t", 1) == dirs[1]
    rm.log_manager.shutdown()


def test_move_copies_while_appends_go_on_then_swaps(tmp_path):
    rm, dirs = replica_manager(tmp_path)

    async def scenario() -> None:
        rm.leader_and_isr(leader_request())
        p = rm.get("t", 0)
        for _ in range(100):
            rm.append(p, batch(), 9, 1)
        aborted = AbortedTxn(producer_id=9, first_offset=200, last_offset=204,
                             last_stable_offset=205)  # fmt: skip
        p.log.append_aborted_txn(aborted)
        source = rm.log_manager.log_dir_of("t", 0)
        dest = next(d for d in dirs if d != source)
        rm.mover.chunk_bytes = 1000  # many small steps, appends in between
        assert rm.alter_replica_log_dirs({("t", 0): str(dest)}) == {("t", 0): ErrorCode.NONE}
        old_log = p.log
        while rm.mover.moving(("t", 0)):
            rm.append(p, batch(), 9, 1)
            await asyncio.sleep(0)
        assert p.log is not old_log and p.log.dir == dest / "t-0"
        assert offsets(p.log) == list(range(p.log.log_end_offset))
        assert p.log.epoch_cache.entries == old_log.epoch_cache.entries
        assert p.log.collect_aborted(0, p.log.log_end_offset) == [aborted]
        rm.append(p, batch(), 9, 1)  # the partition goes on in its new dir
        assert p.log.log_end_offset == old_log.log_end_offset + 5

    asyncio.run(scenario())
    rm.log_manager.shutdown()


def test_reconcile_cuts_the_future_where_the_current_log_diverged(tmp_path):
    lm = LogManager([tmp_path / "a", tmp_path / "b"], CONFIG)
    lm.startup({})
    current = lm.get_or_create_log("t", 0)
    for _ in range(10):
        current.append(bytearray(batch()), leader_epoch=1)
    dest = next(d for d in lm.log_dirs if d != lm.log_dir_of("t", 0))
    future = lm.create_future_log("t", 0, dest)
    future.append(current.read(0, 1 << 20).read(), assign_offsets=False)
    assert future.log_end_offset == 50
    current.truncate_to(30)  # a new leader's log diverged from offset 30...
    for _ in range(3):
        current.append(bytearray(batch()), leader_epoch=2)  # ...with epoch 2 records
    LogDirMover._reconcile(current, future)
    assert future.log_end_offset == 30
    lm.shutdown()


def test_failed_dir_takes_its_partitions_offline(tmp_path):
    rm, dirs = replica_manager(tmp_path)
    rm.leader_and_isr(leader_request(4))
    lost = sorted(p for p in range(4) if rm.log_manager.log_dir_of("t", p) == dirs[0])
    rm.log_manager.dir_failed(dirs[0], "test")
    assert rm.offline == {("t", p) for p in lost}
    for p in range(4):
        if p in lost:
            try:
                rm.leader_partition("t", p, True)
            except KafkaError as e:
                assert e.code == ErrorCode.KAFKA_STORAGE_ERROR
            else:
                raise AssertionError("an offline partition served")
        else:
            assert rm.leader_partition("t", p, True).log.log_end_offset == 0
    errors = rm.leader_and_isr(leader_request(4))
    assert {tp[1] for tp, e in errors.partitions.items()
            if e == ErrorCode.KAFKA_STORAGE_ERROR} == set(lost)  # fmt: skip
    assert rm.alter_replica_log_dirs({("t", lost[0]): str(dirs[1])}) == {
        ("t", lost[0]): ErrorCode.KAFKA_STORAGE_ERROR
    }
    rm.log_manager.shutdown()
