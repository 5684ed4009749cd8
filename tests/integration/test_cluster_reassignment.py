"""Preferred-leader election (ElectLeaders, auto.leader.rebalance.enable) and partition
reassignment (KIP-455: AlterPartitionReassignments, ListPartitionReassignments and the legacy
/admin/reassign_partitions znode) on real brokers and a real ZooKeeper ensemble."""

from __future__ import annotations

import json
import subprocess
import sys
import time

from background_producer import BackgroundProducer
from cluster import Cluster, cluster_factory_fixture  # noqa: F401  (fixture)
from confluent_kafka import ElectionType, TopicPartition
from confluent_kafka.admin import AdminClient
from odradek.broker.protocol.api_keys import ApiKey
from odradek.broker.protocol.errors import ErrorCode
from test_replication_cluster import consume_all

TOPIC = "moved"
NO_REBALANCE = {"auto.leader.rebalance.enable": "false", "replica.lag.time.max.ms": "10000"}


def state(c: Cluster, topic: str = TOPIC) -> dict:
    data, _ = c.zk.get(f"/brokers/topics/{topic}/partitions/0/state")
    return json.loads(data)


def assignment(c: Cluster, topic: str = TOPIC) -> dict:
    data, _ = c.zk.get(f"/brokers/topics/{topic}")
    return json.loads(data)


def create_on(c: Cluster, replicas: list[int], topic: str = TOPIC) -> None:
    def attempt() -> bool:
        body = {
            "topics": [
                {
                    "name": topic,
                    "num_partitions": -1,
                    "replication_factor": -1,
                    "assignments": [{"partition_index": 0, "broker_ids": replicas}],
                    "configs": [{"name": "min.insync.replicas", "value": "2"}],
                }
            ],
            "timeout_ms": 30000,
            "validate_only": False,
        }
        resp = c.controller().request(ApiKey.CREATE_TOPICS, body)
        assert resp["topics"][0]["error_code"] in (0, 36), resp
        return True

    c.wait_until(attempt, f"creation of {topic}")
    c.wait_until(lambda: sorted(state(c, topic)["isr"]) == sorted(replicas), "a full ISR")


def elect_raw(c: Cluster, broker: int, election_type: int = 0) -> tuple[int, int]:
    """(top-level error, partition error) of an ElectLeaders v2 sent to `broker`."""
    resp = c[broker].request(
        ApiKey.ELECT_LEADERS,
        {
            "election_type": election_type,
            "topic_partitions": [{"topic": TOPIC, "partitions": [0]}],
            "timeout_ms": 10000,
        },
    )
    results = resp["replica_election_results"]
    return resp["error_code"], results[0]["partition_result"][0]["error_code"]


def move_leadership_off_broker_1(c: Cluster) -> None:
    """SIGTERM broker 1 (controlled shutdown moves its leadership), then bring it back."""
    c[1].stop()
    c.wait_until(lambda: state(c)["leader"] in (2, 3), "leadership on broker 2 or 3")
    c.wait_until(lambda: 1 not in c.registered(), "broker 1's registration gone")
    c[1].start()
    c.wait_until(lambda: sorted(state(c)["isr"]) == [1, 2, 3], "broker 1 back in the ISR")


def test_elect_leaders_preferred(cluster_factory) -> None:
    c = cluster_factory(3, NO_REBALANCE)
    create_on(c, [1, 2, 3])
    controller = c.controller().broker_id
    other = next(i for i in (1, 2, 3) if i != controller)
    # Already led by the preferred replica.
    assert elect_raw(c, controller) == (0, ErrorCode.ELECTION_NOT_NEEDED)
    assert elect_raw(c, other) == (ErrorCode.NOT_CONTROLLER, ErrorCode.NOT_CONTROLLER)
    c.wait_until(lambda: c[1].produce_one(TOPIC, b"before")["error_code"] == 0, "a record")

    move_leadership_off_broker_1(c)
    controller = c.controller().broker_id
    admin = AdminClient({"bootstrap.servers": ",".join(b.bootstrap for b in c.running())})
    futures = admin.elect_leaders(ElectionType.PREFERRED, [TopicPartition(TOPIC, 0)])
    result = futures.result(30)
    assert result[TopicPartition(TOPIC, 0)] is None, result
    c.wait_until(lambda: state(c)["leader"] == 1, "broker 1 leading again")
    summary = c.wait_until(lambda: c.converged([TOPIC]), "converged metadata")
    assert summary["topics"][TOPIC][0][0] == 1
    # The replaced leader wrote nothing in its epoch: it must not keep sending that epoch as
    # its last fetched one, which the new leader answers at once as diverging, in a loop that
    # kept two brokers half busy for good. Idle brokers stay idle (about 0.01 CPU s here).
    before = sum(b.usage().cpu_seconds for b in c.running())
    time.sleep(3)
    assert sum(b.usage().cpu_seconds for b in c.running()) - before < 1.0
    # An unclean election is not needed while the leader lives.
    assert elect_raw(c, controller, 1) == (0, ErrorCode.ELECTION_NOT_NEEDED)


def test_auto_leader_rebalance(cluster_factory) -> None:
    c = cluster_factory(
        3,
        {
            "auto.leader.rebalance.enable": "true",
            "leader.imbalance.check.interval.seconds": "2",
            "replica.lag.time.max.ms": "10000",
        },
    )
    create_on(c, [1, 2, 3])
    c[1].stop()
    c.wait_until(lambda: state(c)["leader"] in (2, 3), "leadership on broker 2 or 3")
    c.wait_until(lambda: 1 not in c.registered(), "broker 1's registration gone")
    c[1].start()
    # No request: the controller's imbalance check moves leadership back to the preferred replica.
    c.wait_until(lambda: state(c)["leader"] == 1, "broker 1 leading again")


def reassign(c: Cluster, replicas: list[int] | None) -> dict:
    resp = c.controller().request(
        ApiKey.ALTER_PARTITION_REASSIGNMENTS,
        {
            "timeout_ms": 30000,
            "topics": [
                {"name": TOPIC, "partitions": [{"partition_index": 0, "replicas": replicas}]}
            ],
        },
    )
    return resp


def listed(c: Cluster) -> list:
    resp = c.controller().request(ApiKey.LIST_PARTITION_REASSIGNMENTS, {"topics": None})
    assert resp["error_code"] == 0, resp
    return resp["topics"]


def test_reassignment_while_producing(cluster_factory) -> None:
    c = cluster_factory(4, NO_REBALANCE)
    create_on(c, [1, 2, 3])
    bootstrap = ",".join(b.bootstrap for b in c.brokers.values())
    old_dir = c[1].data_dir / f"{TOPIC}-0"
    # The ISR in ZooKeeper is written at creation, before broker 1 has made its replica.
    c.wait_until(old_dir.is_dir, "the replica's directory on broker 1")
    with BackgroundProducer(bootstrap, TOPIC) as writer:
        acked = writer.acked
        c.wait_until(lambda: len(acked) > 50, "acknowledged writes")
        # Cancelling with nothing in flight is refused, as Kafka does.
        resp = reassign(c, None)
        assert resp["error_code"] == 0
        part = resp["responses"][0]["partitions"][0]
        assert part["error_code"] == ErrorCode.NO_REASSIGNMENT_IN_PROGRESS
        resp = reassign(c, [2, 3, 4])
        assert resp["error_code"] == 0
        assert resp["responses"][0]["partitions"][0]["error_code"] == 0, resp
        c.wait_until(lambda: not listed(c), "the reassignment to finish", timeout=90)
        before = len(acked)
        c.wait_until(lambda: len(acked) > before + 50, "writes after the move")
    assert not writer.thread.is_alive()
    assert not writer.no_offset, "acknowledged records without an offset"
    final = assignment(c)
    assert final["partitions"]["0"] == [2, 3, 4]
    assert not final.get("adding_replicas") and not final.get("removing_replicas")
    c.wait_until(lambda: sorted(state(c)["isr"]) == [2, 3, 4], "broker 4 in the ISR")
    c.wait_until(lambda: not old_dir.exists(), "the old replica deleted on broker 1")
    summary = c.wait_until(lambda: c.converged([TOPIC]), "converged metadata")
    assert summary["topics"][TOPIC][0][2] == (2, 3, 4)
    consumed = consume_all(",".join(c[i].bootstrap for i in (2, 3, 4)), TOPIC)
    values = dict(consumed)
    missing = [o for o, v in acked.items() if values.get(o) != v]
    assert acked and not missing, f"{len(missing)} acknowledged records lost: {missing[:5]}"

    # The legacy znode moves it back; the controller removes the znode when done.
    c.zk.create(
        "/admin/reassign_partitions",
        json.dumps(
            {"version": 1, "partitions": [{"topic": TOPIC, "partition": 0, "replicas": [1, 2, 3]}]}
        ).encode(),
        makepath=True,
    )
    c.wait_until(
        lambda: not c.zk.exists("/admin/reassign_partitions"), "the legacy reassignment done"
    )
    assert assignment(c)["partitions"]["0"] == [1, 2, 3]
    c.wait_until(lambda: sorted(state(c)["isr"]) == [1, 2, 3], "the original replicas in sync")


def wait_drained(c: Cluster, broker: int, *extra: str) -> subprocess.Popen[str]:
    cmd = [sys.executable, "-m", "odradek.broker.cli", "wait-drained"]
    cmd += ["--bootstrap-server", c[broker].bootstrap, "--broker-id", str(broker), *extra]
    return subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)


def test_wait_drained_follows_the_reassignment_moving_a_broker_away(cluster_factory) -> None:
    """`odradek wait-drained`, the chart's preStop hook: a broker being scaled away waits
    while its replicas move; a broker that is only restarting goes after the settle time."""
    c = cluster_factory(3, NO_REBALANCE)
    # The partition moves from `gone` to `new`; `new` is paused below, so not the controller.
    new = max(b for b in (1, 2, 3) if b != c.controller().broker_id)
    gone, kept = (b for b in (1, 2, 3) if b != new)
    create_on(c, [gone, kept])
    out, err = wait_drained(c, gone, "--settle", "1").communicate(timeout=60)
    assert "no drain started" in out, err

    # A move whose new replica's broker is stopped (SIGSTOP) cannot finish: the hook gives up
    # at its timeout.
    c[new].pause()
    try:
        resp = reassign(c, [kept, new])
        assert resp["responses"][0]["partitions"][0]["error_code"] == 0, resp
        hook = wait_drained(c, gone, "--settle", "1", "--timeout", "2")
        out, err = hook.communicate(timeout=60)
        assert hook.returncode == 1, (out, err)
        assert "1 partitions moving away" in out and "still has 1 partitions moving away" in err
        hook = wait_drained(c, gone, "--settle", "1", "--timeout", "120")
        assert hook.stdout is not None
        assert "1 partitions moving away" in hook.stdout.readline()
    finally:
        c[new].resume()
    # With the new broker back the move completes, and the hook reports the drain.
    out, err = hook.communicate(timeout=180)
    assert hook.returncode == 0, err
    assert out == f"broker {gone}: drained\n"
    assert assignment(c)["partitions"]["0"] == [kept, new]
