"""The controller on the embedded store: topics become partition states and broker commands."""

from __future__ import annotations

import asyncio
import dataclasses
import json
import random

import pytest
from odradek.broker.cluster import zk_data as zk
from odradek.broker.cluster.config_changes import ConfigChangeListener
from odradek.broker.cluster.control import (
    EPOCH_DURING_DELETE,
    LeaderAndIsrRequest,
    PartitionErrors,
    StopReplicaRequest,
    UpdateMetadataRequest,
)
from odradek.broker.cluster.controller import Controller
from odradek.broker.cluster.embedded_store import EmbeddedStore
from odradek.broker.cluster.kafka_zk import KafkaZk
from odradek.broker.cluster.metadata_cache import MetadataCache
from odradek.broker.cluster.topic_admin import ResourceType, TopicAdmin
from odradek.broker.config import BrokerConfig, Endpoint
from odradek.broker.protocol.errors import ErrorCode


class LocalBroker:
    """A BrokerControl that keeps what a broker would: a metadata cache and its replicas."""

    def __init__(self, broker_id: int) -> None:
        self.id = broker_id
        self.cache = MetadataCache(broker_id)
        self.lai_requests: list[LeaderAndIsrRequest] = []
        self.stop_requests: list[StopReplicaRequest] = []
        self.metadata_requests: list[UpdateMetadataRequest] = []
        self.replicas: dict[tuple[str, int], int] = {}  # partition -> leader epoch
        self.deleted: list[tuple[str, int]] = []
        self.failing_deletes = 0

    async def leader_and_isr(self, request: LeaderAndIsrRequest) -> PartitionErrors:
        self.lai_requests.append(request)
        for p in request.partitions:
            self.replicas[(p.topic, p.partition)] = p.leader_epoch
        return PartitionErrors(
            partitions={(p.topic, p.partition): ErrorCode.NONE for p in request.partitions}
        )

    async def stop_replica(self, request: StopReplicaRequest) -> PartitionErrors:
        self.stop_requests.append(request)
        if self.failing_deletes:
            self.failing_deletes -= 1
            return PartitionErrors(error=ErrorCode.KAFKA_STORAGE_ERROR)
        for p in request.partitions:
            self.replicas.pop((p.topic, p.partition), None)
            if p.delete:
                self.deleted.append((p.topic, p.partition))
        return PartitionErrors()

    async def update_metadata(self, request: UpdateMetadataRequest) -> ErrorCode:
        self.metadata_requests.append(request)
        self.cache.update(request)
        return ErrorCode.NONE

    def partitions_told(self) -> list[tuple[str, int, int, bool]]:
        return [
            (p.topic, p.partition, p.leader, p.is_new)
            for r in self.lai_requests
            for p in r.partitions
        ]


class Broker:
    """One broker's cluster layer: a store session, registration, controller, admin."""

    def __init__(
        self, store: EmbeddedStore, broker_id: int, brokers: dict[int, LocalBroker], **props
    ):
        self.session = store.new_session()
        self.zk = KafkaZk(self.session)
        self.config = BrokerConfig({"broker.id": str(broker_id), **props})
        self.local = brokers.setdefault(broker_id, LocalBroker(broker_id))
        self.controller = Controller(
            broker_id,
            self.zk,
            self.config,
            lambda reg: brokers[reg.id],
            deletion_retry_seconds=0.05,
        )
        self.admin = TopicAdmin(self.zk, self.config, rng=random.Random(3))
        self.id = broker_id

    async def start(self) -> None:
        self.zk.create_top_level_paths()
        self.zk.get_or_create_cluster_id()
        self.zk.register_broker(
            zk.BrokerRegistration(
                self.id, (Endpoint("PLAINTEXT", "localhost", 9092 + self.id, "PLAINTEXT"),)
            )
        )
        await self.controller.startup()

    async def stop(self) -> None:
        await self.controller.shutdown()
        self.admin.close()
        self.session.close()


async def settle(store: EmbeddedStore, *brokers: Broker) -> None:
    """Let every watch callback, controller event and control request run to completion."""
    for _ in range(6):
        await asyncio.to_thread(store.wait_for_watches)
        for b in brokers:
            await b.controller.wait_idle()


async def start_brokers(
    store: EmbeddedStore, brokers: dict[int, LocalBroker], *props: dict[str, str]
) -> list[Broker]:
    """Start one broker per ``props`` in id order, settling after each: broker 0 becomes controller."""
    started: list[Broker] = []
    for broker_id, extra in enumerate(props):
        b = Broker(store, broker_id, brokers, **extra)
        await b.start()
        started.append(b)
        await settle(store, *started)
    return started


async def broker_with_topic(
    store: EmbeddedStore, topic: str, partitions: int, props: dict[str, str] | None = None
) -> Broker:
    """Broker 0 alone (so the controller), with `topic` created (one replica) and settled."""
    (b,) = await start_brokers(store, {}, props or {})
    await b.admin.create_topic(topic, partitions, 1)
    await settle(store, b)
    return b


def state(store: EmbeddedStore, topic: str, partition: int) -> tuple[dict, int]:
    data, stat = store.get(zk.partition_state_path(topic, partition))
    return json.loads(data), stat.version


@pytest.fixture
def store(tmp_path):
    s = EmbeddedStore(str(tmp_path / "meta"))
    yield s
    s.close()


def test_single_broker_create_grow_and_delete(store):
    async def scenario():
        locals_: dict[int, LocalBroker] = {}
        (b,) = await start_brokers(store, locals_, {})
        assert b.controller.active and b.controller.epoch == 1
        assert json.loads(store.get("/controller")[0])["brokerid"] == 0
        assert store.get("/controller_epoch")[0] == b"1"
        assert b.local.cache.controller_id == 0
        assert [r.id for r in b.local.cache.alive_brokers()] == [0]

        created = await b.admin.create_topic("orders", 3, 1, configs={"cleanup.policy": "compact"})
        await settle(store, b)
        for p in range(3):
            assert state(store, "orders", p) == (
                {"controller_epoch": 1, "leader": 0, "version": 1, "leader_epoch": 0, "isr": [0]},
                0,
            )
        assert sorted(b.local.partitions_told()) == [("orders", p, 0, True) for p in range(3)]
        assert all(
            p.topic_id == created.topic_id for r in b.local.lai_requests for p in r.partitions
        )
        assert b.local.cache.has_leaders("orders")
        assert b.local.cache.topic_id("orders") == created.topic_id
        assert b.local.cache.topic_name(created.topic_id) == "orders"

        await b.admin.create_partitions("orders", 5)
        await settle(store, b)
        assert state(store, "orders", 4)[0]["leader"] == 0
        assert ("orders", 4, 0, True) in b.local.partitions_told()
        assert b.local.cache.partition_count("orders") == 5

        await b.admin.delete_topic("orders")
        await settle(store, b)
        assert store.exists("/brokers/topics/orders") is None
        assert store.exists("/config/topics/orders") is None
        assert store.get_children("/admin/delete_topics") == []
        assert sorted(b.local.deleted) == [("orders", p) for p in range(5)]
        stops = [p for r in b.local.stop_requests for p in r.partitions]
        assert all(p.delete and p.leader_epoch == EPOCH_DURING_DELETE for p in stops)
        assert not b.local.cache.contains("orders")
        assert b.controller.ctx.assignments == {}
        await b.stop()

    asyncio.run(scenario())


def test_restart_reloads_topics_without_new_leader_epochs(tmp_path):
    path = str(tmp_path / "meta")

    async def first_run() -> dict[str, object]:
        store = EmbeddedStore(path)
        (b,) = await start_brokers(store, {}, {})
        ids = {}
        for name in ("a", "b"):
            ids[name] = (await b.admin.create_topic(name, 2, 1)).topic_id
        await settle(store, b)
        await b.stop()
        store.close()
        return ids

    async def second_run(ids) -> None:
        store = EmbeddedStore(path)
        assert store.exists("/controller") is None  # the ephemeral died with the old session
        (b,) = await start_brokers(store, {}, {})
        assert b.controller.epoch == 2
        told = sorted(b.local.partitions_told())
        assert told == [(t, p, 0, False) for t in ("a", "b") for p in (0, 1)]
        assert all(p.leader_epoch == 0 for r in b.local.lai_requests for p in r.partitions)
        assert b.local.cache.topic_names() == ["a", "b"]
        assert b.local.cache.topic_id("a") == ids["a"]
        # The broker learnt the live brokers before any leadership.
        assert isinstance(b.local.metadata_requests[0], UpdateMetadataRequest)
        assert b.local.metadata_requests[0].partitions == ()
        await b.stop()
        store.close()

    ids = asyncio.run(first_run())
    asyncio.run(second_run(ids))


def test_deletion_disabled_discards_the_request(store):
    async def scenario():
        b = await broker_with_topic(store, "keep", 1, {"delete.topic.enable": "false"})
        KafkaZk(store).mark_topic_for_deletion("keep")  # as an old tool would
        await settle(store, b)
        assert store.get_children("/admin/delete_topics") == []
        assert store.exists("/brokers/topics/keep") is not None
        assert b.local.deleted == []
        await b.stop()

    asyncio.run(scenario())


def test_failed_replica_deletion_is_retried(store):
    async def scenario():
        b = await broker_with_topic(store, "sticky", 2)
        b.local.failing_deletes = 2
        await b.admin.delete_topic("sticky")
        await settle(store, b)

        def gone() -> bool:
            return store.exists("/brokers/topics/sticky") is None

        assert await b.local.cache.wait_for(lambda: False, 0) is False
        for _ in range(200):
            if gone():
                break
            await asyncio.sleep(0.05)
            await settle(store, b)
        assert gone()
        assert sorted(b.local.deleted) == [("sticky", 0), ("sticky", 1)]
        assert len(b.local.stop_requests) == 3
        await b.stop()

    asyncio.run(scenario())


def test_topic_without_id_gets_one(store):
    async def scenario():
        KafkaZk(store).create_top_level_paths()
        store.create("/brokers/topics/legacy", b'{"version":1,"partitions":{"0":[0]}}')
        (b,) = await start_brokers(store, {}, {})
        node = json.loads(store.get("/brokers/topics/legacy")[0])
        assert node["version"] == 3 and len(node["topic_id"]) == 22
        assert b.local.cache.topic_id("legacy") == zk.base64_to_uuid(node["topic_id"])
        assert state(store, "legacy", 0)[0]["leader"] == 0
        await b.stop()

    asyncio.run(scenario())


def test_stale_controller_is_fenced_and_resigns(store):
    async def scenario():
        (b,) = await start_brokers(store, {}, {})
        assert b.controller.active
        store.set("/controller_epoch", b"7")  # a newer controller elsewhere bumped the epoch
        await b.admin.create_topic("late", 1, 1)
        await settle(store, b)
        assert not b.controller.active
        assert store.exists(zk.partition_state_path("late", 0)) is None
        await b.stop()

    asyncio.run(scenario())


def test_two_brokers_failover_and_isr_shrink(store):
    async def scenario():
        locals_: dict[int, LocalBroker] = {}
        b0, b1 = await start_brokers(store, locals_, {}, {})
        assert b0.controller.active and not b1.controller.active
        assert b1.controller.active_controller_id == 0
        assert [r.id for r in b1.local.cache.alive_brokers()] == [0, 1]

        await b0.admin.create_topic("rep", assignments={0: [0, 1], 1: [1, 0]})
        await settle(store, b0, b1)
        assert state(store, "rep", 0)[0]["isr"] == [0, 1]
        assert ("rep", 1, 1, True) in b1.local.partitions_told()
        assert b0.local.cache.get_partition("rep", 1).leader == 1

        # Broker 1 dies: partition 1 moves to broker 0, both ISRs shrink.
        await b1.controller.shutdown()
        b1.session.close()
        await settle(store, b0)
        st0, epoch0 = state(store, "rep", 0)
        st1, _ = state(store, "rep", 1)
        assert (st0["leader"], st0["isr"], st0["leader_epoch"], epoch0) == (0, [0], 1, 1)
        assert (st1["leader"], st1["isr"], st1["leader_epoch"]) == (0, [0], 1)
        assert [r.id for r in b0.local.cache.alive_brokers()] == [0]
        assert b0.local.cache.get_partition("rep", 1).offline_replicas == (1,)

        # Broker 1 returns, then the controller (broker 0) goes away: broker 1 takes over.
        b1 = Broker(store, 1, locals_)
        await b1.start()
        await settle(store, b0, b1)
        assert b0.controller.active
        await b0.stop()
        await settle(store, b1)
        assert b1.controller.active and b1.controller.epoch == 2
        st0, _ = state(store, "rep", 0)
        # Broker 1 never rejoined the ISR (replication does that), so no clean leader exists.
        assert (st0["leader"], st0["isr"]) == (-1, [0])
        await b1.stop()

    asyncio.run(scenario())


def test_unclean_election_when_enabled(store):
    async def scenario():
        locals_: dict[int, LocalBroker] = {}
        b0, b1 = await start_brokers(store, locals_, {}, {"unclean.leader.election.enable": "true"})
        await b0.admin.create_topic("u", assignments={0: [0, 1]})
        await settle(store, b0, b1)
        store.set(
            zk.partition_state_path("u", 0),
            zk.encode_partition_state(zk.PartitionState(0, 0, (0,), 1)),
            version=0,
        )
        await b0.stop()
        await settle(store, b1)
        st, _ = state(store, "u", 0)
        assert (st["leader"], st["isr"], st.get("leader_recovery_state")) == (1, [1], 1)
        await b1.stop()

    asyncio.run(scenario())


def test_config_change_listener(store):
    async def scenario():
        b = await broker_with_topic(store, "cfg", 1)
        seen: list[tuple[str, dict[str, str]]] = []
        changed: list[set[str]] = []
        got = asyncio.Event()

        def on_topic(topic: str, overrides: dict[str, str]) -> None:
            seen.append((topic, overrides))
            got.set()

        async def on_broker(names: set[str]) -> None:
            changed.append(names)
            got.set()

        listener = ConfigChangeListener(
            b.zk, b.config, on_topic_config=on_topic, on_broker_config=on_broker
        )
        await listener.start()
        await b.admin.alter_configs(ResourceType.TOPIC, "cfg", {"retention.ms": "1234"})
        await asyncio.wait_for(got.wait(), 30)
        assert seen == [("cfg", {"retention.ms": "1234"})]
        got.clear()
        await b.admin.alter_configs(ResourceType.BROKER, "", {"log.retention.ms": "999"})
        await asyncio.wait_for(got.wait(), 30)
        assert changed == [{"log.retention.ms"}]
        assert b.config.topic_config({})["retention.ms"] == 999
        await listener.stop()

        # A restarted broker picks the dynamic config up at start, and skips old notifications.
        config = BrokerConfig({"broker.id": "0"})
        again = ConfigChangeListener(b.zk, config, on_topic_config=on_topic)
        await again.start()
        assert config.get("log.retention.ms") == 999
        assert again.last_sequence == 1
        await again.stop()
        await b.stop()

    asyncio.run(scenario())


def test_isr_change_notification_reaches_every_broker(store):
    async def scenario():
        locals_: dict[int, LocalBroker] = {}
        b0, b1 = await start_brokers(store, locals_, {}, {})
        await b0.admin.create_topic("n", assignments={0: [1, 0], 1: [0, 1]})
        await settle(store, b0, b1)

        # The leader of n-0 (broker 1) drops broker 0 from the ISR itself, as a ZK-mode leader
        # does: a conditional write of the state znode (same leader epoch), then a notification.
        b1.zk.update_partition_state(
            "n", 0, zk.PartitionState(1, 0, (1,), 1, partition_epoch=0), None
        )
        store.create(
            "/isr_change_notification/isr_change_",
            zk.encode_partition_list([("n", 0)]),
            sequential=True,
        )
        await settle(store, b0, b1)
        for local in locals_.values():
            p = local.cache.get_partition("n", 0)
            assert (p.leader, p.leader_epoch, tuple(p.isr)) == (1, 0, (1,))
            assert tuple(local.cache.get_partition("n", 1).isr) == (0, 1)
        assert b0.controller.ctx.states[("n", 0)].partition_epoch == 1
        assert store.get_children("/isr_change_notification") == []
        # A notification naming an unknown partition is dropped as well.
        store.create(
            "/isr_change_notification/isr_change_",
            zk.encode_partition_list([("gone", 3)]),
            sequential=True,
        )
        await settle(store, b0, b1)
        assert store.get_children("/isr_change_notification") == []
        await b1.stop()
        await b0.stop()

    asyncio.run(scenario())


def test_failover_drops_brokers_that_died_without_a_controller(store):
    async def scenario():
        locals_: dict[int, LocalBroker] = {}
        b0, b1, b2 = await start_brokers(store, locals_, {}, {}, {})
        assert b0.controller.active
        await b0.admin.create_topic("f", assignments={0: [1, 2, 0], 1: [2, 1, 0]})
        await b0.admin.create_topic("g", assignments={0: [0, 2]})
        await settle(store, b0, b1, b2)
        assert state(store, "f", 0)[0]["isr"] == [1, 2, 0]

        # The controller stops handling events, then broker 2 dies: nobody shrinks the ISRs.
        await b0.controller.shutdown()
        await b2.controller.shutdown()
        b2.session.close()
        await asyncio.to_thread(store.wait_for_watches)
        assert state(store, "f", 0)[0]["isr"] == [1, 2, 0]
        # Broker 0 goes too; broker 1 takes over and finds 0 and 2 in the ISRs.
        b0.session.close()
        b0.admin.close()
        await settle(store, b1)
        assert b1.controller.active
        st0, _ = state(store, "f", 0)  # leader 1 alive: ISR shrunk, leader epoch bumped
        assert (st0["leader"], st0["isr"], st0["leader_epoch"]) == (1, [1], 1)
        st1, _ = state(store, "f", 1)  # leader 2 dead: offline election
        assert (st1["leader"], st1["isr"], st1["leader_epoch"]) == (1, [1], 1)
        st2, _ = state(store, "g", 0)  # no live replica: no leader, the last ISR member stays
        assert (st2["leader"], st2["isr"]) == (-1, [2])
        cache = b1.local.cache
        assert tuple(cache.get_partition("f", 0).isr) == (1,)
        assert tuple(cache.get_partition("f", 1).isr) == (1,)
        assert [r.id for r in cache.alive_brokers()] == [1]
        await b1.stop()

    asyncio.run(scenario())


class FencingBroker(LocalBroker):
    """A LocalBroker that fences its broker epoch as a real one does: a request addressed to an
    earlier registration (a lower epoch, -1 meaning unknown) is refused as STALE_BROKER_EPOCH."""

    def __init__(self, broker_id: int) -> None:
        super().__init__(broker_id)
        self.epoch = -1
        self.refused = 0

    def _stale(self, epoch: int) -> bool:
        if epoch != -1 and epoch < self.epoch:
            self.refused += 1
            return True
        return False

    async def leader_and_isr(self, request: LeaderAndIsrRequest) -> PartitionErrors:
        if self._stale(request.broker_epoch):
            return PartitionErrors(ErrorCode.STALE_BROKER_EPOCH)
        return await super().leader_and_isr(request)

    async def stop_replica(self, request: StopReplicaRequest) -> PartitionErrors:
        if self._stale(request.broker_epoch):
            return PartitionErrors(ErrorCode.STALE_BROKER_EPOCH)
        return await super().stop_replica(request)

    async def update_metadata(self, request: UpdateMetadataRequest) -> ErrorCode:
        if self._stale(request.broker_epoch):
            return ErrorCode.STALE_BROKER_EPOCH
        return await super().update_metadata(request)


def test_a_refused_broker_epoch_makes_the_controller_read_the_registration_again(store):
    """The chaos suite's kill-all (every broker kill -9'd five times within a minute): the
    controller knew a restarted broker by its predecessor's registration, the broker refused
    its LeaderAndIsr as STALE_BROKER_EPOCH, and nothing was sent again, so the broker never
    took its replicas back. A refusal now sends the controller to ZooKeeper: the newer
    registration makes the broker a bounced one, and it gets everything again, with its
    new epoch."""

    async def scenario():
        locals_: dict[int, LocalBroker] = {i: FencingBroker(i) for i in (0, 1, 2)}
        brokers = dict(enumerate(await start_brokers(store, locals_, {}, {}, {})))
        ctl = brokers[0].controller
        assert ctl.active
        await brokers[0].admin.create_topic("k", assignments={0: [2, 1, 0], 1: [1, 2, 0]})
        await settle(store, *brokers.values())

        # Broker 2 restarts: a new session registers it again, with a newer epoch...
        b2 = brokers[2]
        await b2.controller.shutdown()
        b2.session.close()
        await settle(store, brokers[0], brokers[1])
        b2 = brokers[2] = Broker(store, 2, locals_)
        await b2.start()
        await settle(store, *brokers.values())
        registration = ctl.ctx.live[2]
        fresh = store.exists(zk.broker_path(2)).czxid
        assert registration.epoch == fresh
        # ... but this controller's picture holds the previous registration, as after a missed
        # /brokers/ids event, and the broker fences the epoch it registered with.
        ctl.ctx.live[2] = dataclasses.replace(registration, epoch=fresh - 1)
        server = locals_[2]
        assert isinstance(server, FencingBroker)
        server.epoch = fresh
        server.replicas.clear()

        # The next order to broker 2 (a new partition on it) is refused; the controller looks
        # again, finds the newer registration and sends everything with that epoch.
        await brokers[0].admin.create_topic("l", assignments={0: [2, 0]})
        await settle(store, *brokers.values())
        assert server.refused >= 1
        assert ctl.ctx.live[2].epoch == fresh
        assert set(server.replicas) == {("k", 0), ("k", 1), ("l", 0)}
        assert server.lai_requests[-1].broker_epoch == fresh
        assert server.metadata_requests[-1].broker_epoch == fresh
        assert server.cache.get_partition("l", 0) is not None
        assert state(store, "l", 0)[0]["leader"] in (0, 2)
        for b in brokers.values():
            await b.stop()

    asyncio.run(scenario())


class StubbornBroker(LocalBroker):
    """A LocalBroker whose next LeaderAndIsr hangs and then swallows the cancellation that
    stops it, as a channel closing its broken connection once did."""

    def __init__(self, broker_id: int) -> None:
        super().__init__(broker_id)
        self.hang = False
        self.swallowed = 0

    async def leader_and_isr(self, request: LeaderAndIsrRequest) -> PartitionErrors:
        if self.hang:
            self.hang = False
            try:
                await asyncio.Event().wait()
            except asyncio.CancelledError:
                self.swallowed += 1
            raise ConnectionError("connection closed")  # the channel retries
        return await super().leader_and_isr(request)


@pytest.mark.timeout(60)  # the stalled controller hung here, shutdown included
def test_a_channel_that_swallows_its_cancellation_does_not_stall_the_controller(store):
    """Closing the channel of a broker found dead must end its task even when one cancellation
    gets lost on the way; the controller waited on it for ever and handled no event again."""

    async def handled() -> None:
        """Run on the controller's event queue: returns once the events before it are done."""

    async def scenario():
        locals_: dict[int, LocalBroker] = {i: StubbornBroker(i) for i in (0, 1, 2)}
        brokers = dict(enumerate(await start_brokers(store, locals_, {}, {}, {})))
        ctl = brokers[0].controller
        stubborn = locals_[2]
        assert ctl.active and isinstance(stubborn, StubbornBroker)
        stubborn.hang = True
        await brokers[0].admin.create_topic("s", assignments={0: [2, 1, 0]})
        await asyncio.to_thread(store.wait_for_watches)
        await asyncio.wait_for(ctl.call(handled), 10)  # LeaderAndIsr to broker 2 now hangs

        # Broker 2 dies while its LeaderAndIsr hangs: the controller moves the leadership.
        await brokers[2].controller.shutdown()
        brokers[2].session.close()
        await asyncio.to_thread(store.wait_for_watches)
        await asyncio.wait_for(ctl.call(handled), 10)  # the broker change was handled
        assert stubborn.swallowed == 1
        st, _ = state(store, "s", 0)
        assert (st["leader"], st["isr"]) == (1, [1, 0])
        await asyncio.wait_for(settle(store, brokers[0], brokers[1]), 30)
        assert locals_[1].cache.get_partition("s", 0).leader == 1
        for i in (0, 1):
            await brokers[i].stop()

    asyncio.run(scenario())
