"""Preferred-leader election and KIP-455 reassignment in the controller, on the embedded store."""

from __future__ import annotations

import asyncio
import json
from collections.abc import Awaitable, Callable

import pytest
from odradek.broker.cluster import zk_data as zk
from odradek.broker.cluster.embedded_store import EmbeddedStore
from odradek.broker.protocol.errors import ErrorCode
from test_cluster_controller import Broker, LocalBroker, settle, state


@pytest.fixture
def store(tmp_path):
    s = EmbeddedStore(str(tmp_path / "meta"))
    yield s
    s.close()


def topic_znode(store, topic: str) -> dict:
    data, _ = store.get(zk.topic_path(topic))
    return json.loads(data)


def join_isr(store, b: Broker, topic: str, isr: tuple[int, ...]) -> None:
    """What a leader does when followers catch up: write the ISR, then announce it."""
    st, version = state(store, topic, 0)
    b.zk.update_partition_state(
        topic,
        0,
        zk.PartitionState(st["leader"], st["leader_epoch"], isr, 1, partition_epoch=version),
        None,
    )
    store.create(
        "/isr_change_notification/isr_change_",
        zk.encode_partition_list([(topic, 0)]),
        sequential=True,
    )


async def three_brokers(store) -> tuple[dict[int, LocalBroker], list[Broker]]:
    locals_: dict[int, LocalBroker] = {}
    brokers = []
    for i in range(3):
        b = Broker(store, i, locals_, **{"auto.leader.rebalance.enable": "false"})
        await b.start()
        await settle(store, *brokers, b)
        brokers.append(b)
    return locals_, brokers


async def create_partition(
    store, brokers: list[Broker], topic: str, replicas: list[int]
) -> tuple[str, int]:
    """Create `topic` with one partition on `replicas` and let the cluster settle; the partition."""
    await brokers[0].admin.create_topic(topic, assignments={0: replicas})
    await settle(store, *brokers)
    return topic, 0


def run_on_three_brokers(
    store, scenario: Callable[[dict[int, LocalBroker], list[Broker]], Awaitable[None]]
) -> None:
    """Run `scenario(locals_, brokers)` on a new three-broker cluster, then stop the brokers."""

    async def main() -> None:
        locals_, brokers = await three_brokers(store)
        await scenario(locals_, brokers)
        for b in reversed(brokers):
            await b.stop()

    asyncio.run(main())


def test_preferred_election(store):
    async def scenario(_: dict[int, LocalBroker], brokers: list[Broker]) -> None:
        ctl = brokers[0].controller
        tp = await create_partition(store, brokers, "e", [1, 2])
        assert await ctl.elect_leaders(0, [tp]) == {tp: ErrorCode.ELECTION_NOT_NEEDED}
        assert await ctl.elect_leaders(0, [("nope", 0)]) == {
            ("nope", 0): ErrorCode.UNKNOWN_TOPIC_OR_PARTITION
        }
        # Leadership on broker 2, broker 1 out of the ISR: the preferred replica is unavailable.
        store.set(
            zk.partition_state_path("e", 0),
            zk.encode_partition_state(zk.PartitionState(2, 1, (2,), 1)),
            version=0,
        )
        store.create(
            "/isr_change_notification/isr_change_",
            zk.encode_partition_list([tp]),
            sequential=True,
        )
        await settle(store, *brokers)
        assert await ctl.elect_leaders(0, [tp]) == {tp: ErrorCode.PREFERRED_LEADER_NOT_AVAILABLE}
        join_isr(store, brokers[0], "e", (2, 1))
        await settle(store, *brokers)
        assert await ctl.elect_leaders(0, None) == {tp: ErrorCode.NONE}
        st, _ = state(store, "e", 0)
        assert (st["leader"], st["leader_epoch"]) == (1, 2)

    run_on_three_brokers(store, scenario)


def test_reassignment_phases_and_cancel(store):
    async def scenario(locals_: dict[int, LocalBroker], brokers: list[Broker]) -> None:
        ctl = brokers[0].controller
        tp = await create_partition(store, brokers, "r", [0, 1])
        result = await ctl.alter_reassignments({tp: (1, 2)})
        assert result == {tp: (ErrorCode.NONE, None)}
        await settle(store, *brokers)
        znode = topic_znode(store, "r")
        assert znode["partitions"]["0"] == [1, 2, 0]
        assert znode["adding_replicas"] == {"0": [2]}
        assert znode["removing_replicas"] == {"0": [0]}
        assert tp in locals_[2].replicas  # the new replica got its LeaderAndIsr
        listed = await ctl.list_reassignments(None)
        assert (listed[tp].adding, listed[tp].removing) == ((2,), (0,))
        # Bad targets are refused per partition.
        bad = await ctl.alter_reassignments({tp: (1, 1), ("r", 5): (1,)})
        assert bad[tp][0] == ErrorCode.INVALID_REPLICA_ASSIGNMENT
        assert bad[("r", 5)][0] == ErrorCode.UNKNOWN_TOPIC_OR_PARTITION

        # Broker 2 catches up: the move completes, the leader moves off broker 0.
        join_isr(store, brokers[0], "r", (0, 1, 2))
        await settle(store, *brokers)
        znode = topic_znode(store, "r")
        assert znode["partitions"]["0"] == [1, 2]
        assert not znode["adding_replicas"] and not znode["removing_replicas"]
        st, _ = state(store, "r", 0)
        assert (st["leader"], sorted(st["isr"])) == (1, [1, 2])
        assert tp in locals_[0].deleted
        assert await ctl.list_reassignments(None) == {}
        assert await ctl.alter_reassignments({tp: None}) == {
            tp: (ErrorCode.NO_REASSIGNMENT_IN_PROGRESS, None)
        }

        # A move back to broker 0, cancelled before it completes: the adding replica goes.
        await ctl.alter_reassignments({tp: (0, 1)})
        await settle(store, *brokers)
        assert topic_znode(store, "r")["adding_replicas"] == {"0": [0]}
        assert await ctl.alter_reassignments({tp: None}) == {tp: (ErrorCode.NONE, None)}
        await settle(store, *brokers)
        znode = topic_znode(store, "r")
        assert znode["partitions"]["0"] == [1, 2] and not znode["adding_replicas"]
        assert locals_[0].deleted.count(tp) == 2

    run_on_three_brokers(store, scenario)


def test_legacy_znode(store):
    async def scenario(_: dict[int, LocalBroker], brokers: list[Broker]) -> None:
        await create_partition(store, brokers, "l", [0, 1])
        store.create(zk.REASSIGN_PARTITIONS, zk.encode_reassignment({("l", 0): (0, 2)}))
        await settle(store, *brokers)
        assert topic_znode(store, "l")["adding_replicas"] == {"0": [2]}
        join_isr(store, brokers[0], "l", (0, 1, 2))
        await settle(store, *brokers)
        assert topic_znode(store, "l")["partitions"]["0"] == [0, 2]
        assert store.exists(zk.REASSIGN_PARTITIONS) is None

    run_on_three_brokers(store, scenario)
