"""The inter-broker control plane on three real brokers and a real ZooKeeper ensemble:
registration, controller election and failover, LeaderAndIsr/UpdateMetadata propagation,
controlled shutdown on SIGTERM, re-registration after a ZooKeeper session expiry, and the
epoch fencing of the control RPCs.

Data replication (follower fetching, ISR changes, acks=all) is covered by its own tests.
"""

from __future__ import annotations

import json
import time

import pytest
from cluster import (  # noqa: F401  (fixtures)
    SESSION_TIMEOUT_MS,
    Cluster,
    cluster_factory_fixture,
    shared_cluster_fixture,
)
from odradek.broker.protocol.api_keys import ApiKey
from odradek.broker.protocol.errors import ErrorCode
from odradek.broker.records.record import Record, build_batch
from session_expiry import session_expired

ALL = {1, 2, 3}


def _leaders(summary: dict, topic: str) -> dict[int, int]:
    return {p: state[0] for p, state in summary["topics"][topic].items()}


def _create_and_converge(cluster: Cluster, topic: str, partitions: int) -> dict:
    cluster.create_topic(topic, partitions, 3)

    def ready() -> dict | None:
        s = cluster.converged([topic])
        if s is None or len(s["topics"].get(topic, {})) != partitions:
            return None
        if any(st[0] < 0 for st in s["topics"][topic].values()):
            return None
        return s

    return cluster.wait_until(ready, f"metadata of {topic} on every broker")


def test_brokers_register_and_agree_on_the_controller(shared_cluster: Cluster) -> None:
    c = shared_cluster
    c.wait_until(lambda: c.registered() == ALL, "three registrations")
    summary = c.wait_until(lambda: c.converged([]), "the same broker list and controller")
    assert summary["brokers"] == [1, 2, 3]
    assert summary["controller"] == c.zk_controller()
    # Every broker advertises every other one on its registered endpoint.
    view = c[1].metadata([])
    ports = {b["node_id"]: b["port"] for b in view["brokers"]}
    assert ports == {i: c[i].port for i in ALL}
    assert len({v["cluster_id"] for v in c.views([]).values()}) == 1


def test_replicated_topic_metadata_converges(shared_cluster: Cluster) -> None:
    c = shared_cluster
    summary = _create_and_converge(c, "rf3-spread", 6)
    parts = summary["topics"]["rf3-spread"]
    for leader, _epoch, replicas, isr in parts.values():
        assert sorted(replicas) == [1, 2, 3]
        assert isr == (1, 2, 3)
        assert leader == replicas[0]  # the preferred replica leads a new partition
    # Kafka's assignment spreads the preferred leaders over all brokers.
    assert set(_leaders(summary, "rf3-spread").values()) == ALL


def test_control_requests_are_fenced_by_epochs(shared_cluster: Cluster) -> None:
    c = shared_cluster
    c.wait_until(lambda: c.converged([]), "a converged cluster")
    controller = c.controller()
    follower = next(b for i, b in c.brokers.items() if i != controller.broker_id)
    # An UpdateMetadata from controller epoch 0 (older than the live controller's): refused,
    # by the controller's own broker too (its orders to itself never cross the network).
    for broker in c.brokers.values():
        stale = broker.request(
            ApiKey.UPDATE_METADATA,
            {"controller_id": 99, "controller_epoch": 0, "broker_epoch": -1, "live_brokers": []},
        )
        assert stale["error_code"] == ErrorCode.STALE_CONTROLLER_EPOCH, broker.broker_id
    # A LeaderAndIsr addressed to an earlier registration of the broker: refused.
    old_epoch = follower.request(
        ApiKey.LEADER_AND_ISR,
        {"controller_id": 99, "controller_epoch": 1 << 30, "broker_epoch": 1, "live_leaders": []},
    )
    assert old_epoch["error_code"] == ErrorCode.STALE_BROKER_EPOCH
    # Only the controller answers ControlledShutdown.
    resp = follower.request(ApiKey.CONTROLLED_SHUTDOWN, {"broker_id": 1, "broker_epoch": -1})
    assert resp["error_code"] == ErrorCode.NOT_CONTROLLER
    # The refused requests changed nothing.
    assert c.converged([]) is not None


def test_controller_killed_another_takes_over(cluster_factory) -> None:
    c = cluster_factory()
    before = _create_and_converge(c, "failover", 3)
    old = c.controller()
    old.kill()
    survivors = ALL - {old.broker_id}

    def new_controller() -> dict | None:
        s = c.converged(["failover"])
        if s is None or s["controller"] == old.broker_id:
            return None
        if any(st[0] not in survivors for st in s["topics"]["failover"].values()):
            return None
        return s

    after = c.wait_until(new_controller, "a new controller and converged metadata")
    assert after["controller"] in survivors
    assert c.zk_controller() == after["controller"]
    assert after["brokers"] == sorted(survivors)
    # The old controller died with no controller to notice: the new one found it in every ISR
    # and removed it (new leader where it led, a shrunk ISR elsewhere; both bump the epoch).
    for p, (_leader, epoch, _replicas, isr) in after["topics"]["failover"].items():
        assert epoch > before["topics"]["failover"][p][1]
        assert old.broker_id not in isr
        state = json.loads(c.zk.get(f"/brokers/topics/failover/partitions/{p}/state")[0])
        assert old.broker_id not in state["isr"]
    # The old controller comes back as an ordinary broker and learns the whole picture.
    old.start()
    back = c.wait_until(lambda: c.converged(["failover"]), "metadata with the broker back")
    assert back["controller"] == after["controller"]
    assert back["brokers"] == [1, 2, 3]


@pytest.mark.parametrize("role", ["broker", "controller"])
def test_sigterm_moves_leadership_before_exit(cluster_factory, role: str) -> None:
    c = cluster_factory()
    topic = "controlled"
    before = _create_and_converge(c, topic, 6)
    controller = c.controller().broker_id
    # A broker that leads partitions: the controller itself, or another one.
    leaders = sorted(set(_leaders(before, topic).values()))
    if role == "controller":
        victim = controller
    else:
        victim = next(b for b in leaders if b != controller)
    led = [p for p, leader in _leaders(before, topic).items() if leader == victim]
    assert led
    code = c[victim].stop()
    assert code == 0, c[victim].log_tail()
    assert "controlled shutdown succeeded" in c[victim].log_text()
    # ZooKeeper's order of events: every moved partition's state was rewritten (new leader,
    # ISR without the victim) before the victim's registration disappeared.
    deregistered = c.zk.get("/brokers/ids")[1].pzxid
    for p in led:
        data, stat = c.zk.get(f"/brokers/topics/{topic}/partitions/{p}/state")
        state = json.loads(data)
        assert state["leader"] != victim
        assert victim not in state["isr"]
        assert stat.mzxid < deregistered, f"partition {p} moved only after the broker left"
    after = c.wait_until(lambda: c.converged([topic]), "metadata without the stopped broker")
    for p in led:
        assert after["topics"][topic][p][0] in ALL - {victim}


@pytest.mark.parametrize("role", ["follower", "controller"])
def test_session_expiry_reregisters(cluster_factory, role: str) -> None:
    c = cluster_factory()
    topic = "expiry"
    _create_and_converge(c, topic, 3)
    controller = c.controller().broker_id
    epoch_data, _ = c.zk.get("/controller_epoch")
    if role == "controller":
        victim = controller
    else:
        victim = next(i for i in sorted(ALL) if i != controller)
    with session_expired(c, victim):
        pass
    summary = c.wait_until(lambda: c.converged([topic]), "metadata with the broker back")
    assert summary["brokers"] == [1, 2, 3]
    # The controller treated it as a restarted broker and gave it its replicas again.
    assert all(victim in st[2] for st in summary["topics"][topic].values())
    assert c[victim].running
    # Re-registering ran to its end (it re-reads the config change notifications last).
    assert "Task exception was never retrieved" not in c[victim].log_text()
    if role == "controller":
        # It resigned with its session; another broker won a newer controller epoch.
        assert summary["controller"] != victim
        assert int(c.zk.get("/controller_epoch")[0]) > int(epoch_data)


def test_control_rpc_versions_are_kafka_39s(shared_cluster: Cluster) -> None:
    """Brokers announce keys 4-7 with the versions a 3.9 ZooKeeper-mode broker does."""
    resp = shared_cluster[2].request(ApiKey.API_VERSIONS, {}, version=3)
    versions = {k["api_key"]: (k["min_version"], k["max_version"]) for k in resp["api_keys"]}
    assert versions[ApiKey.LEADER_AND_ISR] == (0, 7)
    assert versions[ApiKey.STOP_REPLICA] == (0, 4)
    assert versions[ApiKey.UPDATE_METADATA] == (0, 8)
    assert versions[ApiKey.CONTROLLED_SHUTDOWN] == (0, 3)


def _produce_one(broker, topic: str) -> int:
    batch = build_batch([Record(offset=0, timestamp=int(time.time() * 1000), value=b"x")])
    body = {
        "transactional_id": None,
        "acks": 1,
        "timeout_ms": 10000,
        "topic_data": [{"name": topic, "partition_data": [{"index": 0, "records": batch}]}],
    }
    resp = broker.request(ApiKey.PRODUCE, body)
    return resp["responses"][0]["partition_responses"][0]["error_code"]


def test_leader_isr_shrink_reaches_every_broker(cluster_factory) -> None:
    """A leader drops a stopped follower from the ISR (its own state-znode write and an
    /isr_change_notification); the controller tells every broker. The stopped broker keeps
    its ZooKeeper session meanwhile, so the controller itself never removes it."""
    c = cluster_factory(
        3, {"replica.lag.time.max.ms": "1000", "zookeeper.session.timeout.ms": "40000"}
    )
    topic = "isr-notify"
    before = _create_and_converge(c, topic, 1)
    leader, epoch, _replicas, isr = before["topics"][topic][0]
    assert isr == (1, 2, 3)
    controller = c.controller().broker_id
    follower = next(i for i in sorted(ALL) if i not in (leader, controller))
    c[follower].kill()
    # A write the stopped follower never fetches: it stops being caught up.
    c.wait_until(lambda: _produce_one(c[leader], topic) == ErrorCode.NONE, "an acks=1 write")
    shrunk = tuple(sorted(ALL - {follower}))

    def everywhere() -> bool:
        for b in c.running():
            [t] = b.metadata([topic])["topics"]
            p = t["partitions"][0]
            if (p["leader_id"], p["leader_epoch"], tuple(sorted(p["isr_nodes"]))) != (
                leader,
                epoch,
                shrunk,
            ):
                return False
        return True

    c.wait_until(everywhere, "the shrunk ISR in every broker's metadata")
    c.wait_until(
        lambda: c.zk.get_children("/isr_change_notification") == [],
        "the notification deleted by the controller",
    )
    assert follower in c.registered()  # the ISR change came from the leader, not a failure
    state = json.loads(c.zk.get(f"/brokers/topics/{topic}/partitions/0/state")[0])
    assert (state["leader"], state["leader_epoch"], sorted(state["isr"])) == (
        leader,
        epoch,
        list(shrunk),
    )


def test_broker_restarted_right_after_kill_9_waits_for_its_old_registration(
    cluster_factory,
) -> None:
    """A pod restarted at once after a crash finds its id still registered by the dead
    process's ZooKeeper session: it waits for that session to expire, then joins."""
    # A session long enough that the restart surely comes before it expires.
    c = cluster_factory(overrides={"zookeeper.session.timeout.ms": "20000"})
    _create_and_converge(c, "comeback", 3)
    victim = next(b for b in c.brokers.values() if b.broker_id != c.controller().broker_id)
    victim.kill()
    assert victim.broker_id in c.registered()  # the dead session still holds the node
    victim.start()
    back = c.wait_until(lambda: c.converged(["comeback"]), "metadata with the broker back")
    assert back["brokers"] == [1, 2, 3]
    assert victim.running, victim.log_tail()
    assert "waiting for that session to expire" in victim.log_text()
