"""Group coordination in a three-broker cluster: __consumer_offsets is replicated, and when the
coordinator's broker dies (kill -9) the new leader of the group's partition loads the group and
its committed offsets, and the group carries on there."""

from __future__ import annotations

import time

from cluster import Cluster, cluster_factory_fixture  # noqa: F401  (fixture)
from confluent_kafka import Consumer, Producer, TopicPartition
from odradek.broker.protocol.api_keys import ApiKey
from odradek.broker.protocol.errors import ErrorCode
from resume_points import first_offsets

TOPIC = "orders"
GROUP = "failover-group"
WAIT_S = 90.0


def coordinator_of(c: Cluster, group: str) -> int | None:
    """The coordinator a live broker names for `group`, once that broker is alive too."""
    for b in c.running():
        resp = b.request(ApiKey.FIND_COORDINATOR, {"key": group, "key_type": 0}, version=3)
        if resp["error_code"] == ErrorCode.NONE and c[resp["node_id"]].running:
            return resp["node_id"]
    return None


def consumer(bootstrap: str) -> Consumer:
    return Consumer(
        {
            "bootstrap.servers": bootstrap,
            "group.id": GROUP,
            "auto.offset.reset": "earliest",
            "enable.auto.commit": False,
            "session.timeout.ms": 6000,
            "heartbeat.interval.ms": 500,
        }
    )


def test_coordinator_failover_keeps_offsets_and_group(cluster_factory) -> None:
    c = cluster_factory(3)
    c.create_topic(TOPIC, 2, 3)
    bootstrap = ",".join(b.bootstrap for b in c.brokers.values())
    producer = Producer({"bootstrap.servers": bootstrap, "acks": "all"})
    for i in range(20):
        producer.produce(TOPIC, value=f"v{i}".encode(), partition=i % 2)
    assert producer.flush(60) == 0

    first = consumer(bootstrap)
    try:
        first.subscribe([TOPIC])
        deadline = time.monotonic() + WAIT_S
        while len(first.assignment()) < 2 and time.monotonic() < deadline:
            first.poll(0.2)
        assert len(first.assignment()) == 2
        # Acknowledged once the commit is on every in-sync replica of its partition.
        first.commit(
            offsets=[TopicPartition(TOPIC, 0, 4), TopicPartition(TOPIC, 1, 7)], asynchronous=False
        )
    finally:
        first.close()

    old = c.wait_until(lambda: coordinator_of(c, GROUP), "the group's coordinator")
    c[old].kill()
    new = c.wait_until(
        lambda: (n := coordinator_of(c, GROUP)) is not None and n != old and n,
        "a new coordinator on a live broker",
    )
    assert new != old
    bootstrap = ",".join(b.bootstrap for b in c.running())

    second = consumer(bootstrap)
    try:
        deadline = time.monotonic() + WAIT_S
        committed: list[int] = []
        while time.monotonic() < deadline:
            try:
                parts = second.committed(
                    [TopicPartition(TOPIC, 0), TopicPartition(TOPIC, 1)], timeout=10
                )
            except Exception:  # noqa: BLE001 - coordinator still loading / moving
                time.sleep(0.2)
                continue
            committed = [tp.offset for tp in parts]
            break
        assert committed == [4, 7]
        # The group works on its new coordinator and resumes from the committed offsets.
        assert first_offsets(second, TOPIC, 2, WAIT_S) == {0: 4, 1: 7}
    finally:
        second.close()
    described = c[new].request(ApiKey.DESCRIBE_GROUPS, {"groups": [GROUP]}, version=5)
    assert described["groups"][0]["group_state"] in ("Empty", "Stable")
