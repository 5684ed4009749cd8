"""Replica manager: acks=all against min.insync.replicas, the produce purgatory, and the
leader's ISR writes to the partition state znode (conditional on the partition epoch)."""

from __future__ import annotations

import asyncio
import uuid

from odradek.broker.cluster import zk_data as zk
from odradek.broker.cluster.control import LeaderAndIsrPartition, LeaderAndIsrRequest
from odradek.broker.cluster.embedded_store import EmbeddedStore
from odradek.broker.cluster.kafka_zk import KafkaZk
from odradek.broker.config.listeners import Endpoint
from odradek.broker.protocol.errors import ErrorCode
from odradek.broker.records.record import Record, build_batch
from odradek.broker.replication.replica_manager import ReplicaManager
from odradek.broker.storage import LogConfig
from odradek.broker.storage.log_manager import LogManager

LAG = 30_000


def records(n: int = 1) -> memoryview:
    return memoryview(build_batch([Record(offset=i, timestamp=1000, value=b"x") for i in range(n)]))


def leader_and_isr(
    leader: int, epoch: int, isr, replicas=(1, 2, 3), partition_epoch=0, live_leaders=()
):
    return LeaderAndIsrRequest(
        controller_id=1,
        controller_epoch=1,
        broker_epoch=-1,
        partitions=(
            LeaderAndIsrPartition(
                topic="t",
                topic_id=None,
                partition=0,
                controller_epoch=1,
                leader=leader,
                leader_epoch=epoch,
                isr=tuple(isr),
                partition_epoch=partition_epoch,
                replicas=tuple(replicas),
            ),
        ),
        live_leaders=tuple(live_leaders),
    )


def manager(tmp_path, min_isr: int = 2) -> ReplicaManager:
    config = LogConfig(min_insync_replicas=min_isr)
    lm = LogManager([tmp_path / "logs"], config)
    lm.startup({})
    return ReplicaManager(1, lm, lambda topic: config)


def test_acks_all_refused_below_min_isr_and_nothing_appended(tmp_path):
    rm = manager(tmp_path)
    rm.leader_and_isr(leader_and_isr(1, 0, [1]))
    p = rm.get("t", 0)
    out = rm.append(p, records(), 9, -1)
    assert out.error == ErrorCode.NOT_ENOUGH_REPLICAS
    assert p.log.log_end_offset == 0
    # acks=1 is not subject to min.insync.replicas.
    assert rm.append(p, records(), 9, 1).error == ErrorCode.NONE
    assert p.log.log_end_offset == 1


def test_acks_all_waits_for_the_high_watermark(tmp_path):
    async def run() -> None:
        rm = manager(tmp_path)
        rm.leader_and_isr(leader_and_isr(1, 0, [1, 2, 3]))
        p = rm.get("t", 0)
        out = rm.append(p, records(3), 9, -1)
        assert out.error == ErrorCode.NONE and out.last_offset == 2
        waiting = asyncio.ensure_future(rm.wait_for_replication(p, 3, 10))
        await asyncio.sleep(0)
        rm.record_follower_fetch(p, 2, 3, 0)
        await asyncio.sleep(0)
        assert not waiting.done()
        rm.record_follower_fetch(p, 3, 3, 0)
        assert await waiting == ErrorCode.NONE
        # Nobody fetches the next append: the purgatory times out.
        rm.append(p, records(), 9, -1)
        assert await rm.wait_for_replication(p, 4, 0.05) == ErrorCode.REQUEST_TIMED_OUT
        # Leadership lost while waiting.
        rm.append(p, records(), 9, -1)
        waiting = asyncio.ensure_future(rm.wait_for_replication(p, 5, 10))
        await asyncio.sleep(0)
        rm.leader_and_isr(leader_and_isr(2, 1, [2, 3]))
        assert await waiting == ErrorCode.NOT_LEADER_OR_FOLLOWER
        await rm.shutdown()

    asyncio.run(run())


def test_acks_all_has_its_answer_at_once_only_when_the_leader_is_the_whole_isr(tmp_path):
    """The produce handler answers without deferring when `replicated` has the answer."""
    rm = manager(tmp_path, min_isr=1)
    rm.leader_and_isr(leader_and_isr(1, 0, [1], replicas=(1,)))
    alone = rm.get("t", 0)
    assert rm.append(alone, records(2), 9, -1).error == ErrorCode.NONE
    assert rm.replicated(alone, 2) == ErrorCode.NONE
    rm.leader_and_isr(leader_and_isr(1, 1, [1, 2], replicas=(1, 2)))
    shared = rm.get("t", 0)
    assert rm.append(shared, records(), 9, -1).error == ErrorCode.NONE
    assert rm.replicated(shared, 3) is None  # the follower has not fetched it
    rm.record_follower_fetch(shared, 2, 3, 0)
    assert rm.replicated(shared, 3) == ErrorCode.NONE
    rm.leader_and_isr(leader_and_isr(2, 2, [2], replicas=(1, 2)))
    assert rm.replicated(shared, 3) == ErrorCode.NOT_LEADER_OR_FOLLOWER


def test_not_enough_replicas_after_append_when_the_isr_shrank(tmp_path):
    async def run() -> None:
        rm = manager(tmp_path)
        rm.leader_and_isr(leader_and_isr(1, 0, [1, 2]))
        p = rm.get("t", 0)
        assert rm.append(p, records(), 9, -1).error == ErrorCode.NONE
        waiting = asyncio.ensure_future(rm.wait_for_replication(p, 1, 10))
        await asyncio.sleep(0)
        # The follower lags too long: the ISR shrinks to the leader, whose HW then advances.
        rm.maybe_shrink_isr(p.followers[2].last_caught_up_time_ms + LAG + 1)
        assert p.state.isr == [1]
        assert await waiting == ErrorCode.NOT_ENOUGH_REPLICAS_AFTER_APPEND
        await rm.shutdown()

    asyncio.run(run())


def test_in_controlled_shutdown_a_replica_outside_the_isr_does_not_fetch(tmp_path):
    """The controller moved this broker's leadership and left it out of the new ISR: had it
    fetched and caught up, the new leader would have put it back into the ISR."""

    async def run() -> None:
        rm = manager(tmp_path)
        leader = [zk.BrokerRegistration(2, (Endpoint("PLAINTEXT", "127.0.0.1", 1, "PLAINTEXT"),))]
        rm.leader_and_isr(leader_and_isr(2, 1, [2, 3, 1], live_leaders=leader))
        assert rm._following(("t", 0))  # an ordinary follower fetches
        rm.in_controlled_shutdown = True
        rm.leader_and_isr(leader_and_isr(2, 2, [2, 3], live_leaders=leader))
        assert not rm._following(("t", 0)) and not rm.fetchers
        await rm.shutdown()

    asyncio.run(run())


def test_leader_writes_isr_changes_to_the_state_znode(tmp_path):
    async def run() -> None:
        store = EmbeddedStore(str(tmp_path / "meta"))
        kzk = KafkaZk(store)
        kzk.create_top_level_paths()
        kzk.create_topic_assignment("t", uuid.uuid4(), {0: (1, 2, 3)})
        state = kzk.create_partition_state(
            "t",
            0,
            zk.PartitionState(leader=1, leader_epoch=0, isr=(1, 2), controller_epoch=1),
            None,
        )
        rm = manager(tmp_path)

        async def io(fn, *args):
            return fn(*args)

        rm.attach(kzk, io, None)
        rm.leader_and_isr(leader_and_isr(1, 0, [1, 2], partition_epoch=state.partition_epoch))
        p = rm.get("t", 0)
        rm.append(p, records(2), 9, 1)
        rm.record_follower_fetch(p, 2, 2, 0)
        rm.record_follower_fetch(p, 3, 2, 0)  # caught up: expansion proposed
        for _ in range(10):
            await asyncio.sleep(0)
        written = kzk.get_partition_state("t", 0)
        assert written.isr == (1, 2, 3)
        assert written.leader_epoch == 0 and written.partition_epoch == 1
        assert p.state.isr == [1, 2, 3] and p.state.partition_epoch == 1
        assert store.get_children(zk.ISR_CHANGE_NOTIFICATION)
        # A concurrent write by someone else: the conditional write fails and the leader adopts
        # the stored state instead of overwriting it.
        kzk.update_partition_state(
            "t",
            0,
            zk.PartitionState(
                leader=1, leader_epoch=0, isr=(1, 3), controller_epoch=1, partition_epoch=1
            ),
            None,
        )
        rm.append(p, records(), 9, 1)  # the followers now lag behind the log end
        rm.maybe_shrink_isr(p.followers[2].last_caught_up_time_ms + LAG + 1)
        for _ in range(10):
            await asyncio.sleep(0)
        assert p.pending_isr is None
        assert p.state.partition_epoch == 2
        assert kzk.get_partition_state("t", 0).isr == (1, 3)
        await rm.shutdown()
        store.close()

    asyncio.run(run())
