"""kill -9 of every broker at once, five times in quick succession (the chaos suite's `kill-all`
schedule, which once left the cluster without its replicas for good).

Each round kills all three brokers and starts them again before their ZooKeeper sessions have
expired, so the new processes wait for their predecessors' registrations to go, the sessions
end at different moments, and the controller elected meanwhile knows some brokers by a
registration that is about to be replaced. Its channels to those brokers fail, are retried and
are stopped when the broker change is handled. Once, a channel stopped while closing its broken
connection swallowed the cancellation: it went on sending its LeaderAndIsr with the old broker
epoch (refused as STALE_BROKER_EPOCH) and the controller, waiting for it to end, handled no
event again. Afterwards every partition must have a leader and its whole ISR, and an acks=all
producer write what a consumer then reads back with everything acknowledged before.
"""

from __future__ import annotations

import json
import random
import time

from cluster import Cluster, cluster_factory_fixture  # noqa: F401  (fixture)
from confluent_kafka import Consumer, KafkaException, Producer, TopicPartition

ALL = [1, 2, 3]
TOPIC = "kill-all"
PARTITIONS = 3
ROUNDS = 5
RECOVERY_TIMEOUT = 180.0


def states(c: Cluster) -> dict[int, dict]:
    out = {}
    for p in range(PARTITIONS):
        found = c.zk.exists(f"/brokers/topics/{TOPIC}/partitions/{p}/state")
        if found:
            out[p] = json.loads(c.zk.get(f"/brokers/topics/{TOPIC}/partitions/{p}/state")[0])
    return out


def fully_recovered(c: Cluster) -> bool:
    """Every broker registered, every partition led with the whole ISR, and every broker's
    metadata agreeing on it."""
    if c.registered() != set(ALL):
        return False
    st = states(c)
    if len(st) != PARTITIONS or any(
        s["leader"] not in ALL or sorted(s["isr"]) != ALL for s in st.values()
    ):
        return False
    view = c.converged([TOPIC])
    if view is None:
        return False
    parts = view["topics"].get(TOPIC, {})
    return len(parts) == PARTITIONS and all(
        leader in ALL and list(isr) == ALL for leader, _, _, isr in parts.values()
    )


def produce(bootstrap: str, tag: str) -> dict[int, list[bytes]]:
    """One acks=all record per partition, each acknowledged; returns what was written."""
    producer = Producer({"bootstrap.servers": bootstrap, "acks": "all", "enable.idempotence": True})
    written: dict[int, list[bytes]] = {p: [] for p in range(PARTITIONS)}
    errors: list[str] = []

    def done(err, msg) -> None:  # noqa: ANN001 - librdkafka's callback
        if err is not None:
            errors.append(str(err))
        else:
            written[msg.partition()].append(msg.value())

    for p in range(PARTITIONS):
        for i in range(10):
            producer.produce(TOPIC, f"{tag}-{p}-{i}".encode(), partition=p, on_delivery=done)
    assert producer.flush(60) == 0, "records still unacknowledged after 60 s"
    assert not errors, errors
    return written


def consume(bootstrap: str) -> dict[int, list[bytes]]:
    consumer = Consumer(
        {"bootstrap.servers": bootstrap, "group.id": f"kill-all-{time.time()}",
         "enable.auto.commit": False}
    )  # fmt: skip
    try:
        ends = {}
        for p in range(PARTITIONS):
            _, ends[p] = consumer.get_watermark_offsets(TopicPartition(TOPIC, p), timeout=30)
        consumer.assign([TopicPartition(TOPIC, p, 0) for p in range(PARTITIONS)])
        out: dict[int, list[bytes]] = {p: [] for p in range(PARTITIONS)}
        last = {p: -1 for p in range(PARTITIONS)}
        deadline = time.monotonic() + 120
        while any(last[p] < ends[p] - 1 for p in ends) and time.monotonic() < deadline:
            msg = consumer.poll(1.0)
            if msg is None or msg.error():
                continue
            out[msg.partition()].append(msg.value())
            last[msg.partition()] = msg.offset()
        return out
    finally:
        consumer.close()


def test_every_broker_killed_five_times_in_a_row_all_partitions_come_back(
    cluster_factory,
) -> None:
    c = cluster_factory(overrides={"min.insync.replicas": "2"})
    bootstrap = ",".join(f"{b.host}:{b.port}" for b in c.brokers.values())
    c.create_topic(TOPIC, PARTITIONS, 3)
    c.wait_until(lambda: fully_recovered(c), "the full ISR of every partition")
    before = produce(bootstrap, "before")
    rng = random.Random(2026)
    for _ in range(ROUNDS):
        for b in c.brokers.values():
            b.kill()
        time.sleep(rng.uniform(0.0, 3.0))  # shorter than the session: old registrations live
        for b in c.brokers.values():
            b.launch()
        time.sleep(rng.uniform(3.0, 8.0))
    c.wait_until(
        lambda: fully_recovered(c), "every partition led with its whole ISR", RECOVERY_TIMEOUT
    )
    after: dict[int, list[bytes]] = {}
    for attempt in range(3):
        try:
            after = produce(bootstrap, "after")
            break
        except (AssertionError, KafkaException):
            if attempt == 2:
                raise
            time.sleep(2.0)
    read = consume(bootstrap)
    for p in range(PARTITIONS):
        for value in before[p] + after[p]:
            assert value in read[p], f"partition {p} lost the acknowledged {value!r}"
