"""`kubectl scale` of the broker StatefulSet moves partitions: onto a broker that joins, off a
broker that goes away, and nothing acknowledged is lost. A real API server (the StatefulSet is
only an object there: no kubelet runs pods), a real ZooKeeper, real brokers and the operator."""

from __future__ import annotations

import json
from collections import Counter
from collections.abc import Iterator
from pathlib import Path

import pytest
from confluent_kafka import Consumer, Producer
from confluent_kafka.admin import AdminClient, NewTopic
from kube_harness import ANNOTATION, Broker, ControlPlane, Operator, event_reasons, wait_until
from odradek.broker.testing.zookeeper import ZkEnsemble
from zookeeper import zookeeper_libs

CLUSTER = "scaled"
TOPIC = "spread"
PARTITIONS = 6
RECORDS = 120


@pytest.fixture
def zk(tmp_path: Path) -> Iterator[ZkEnsemble]:
    (tmp_path / "zk").mkdir()
    ensemble = ZkEnsemble(tmp_path / "zk", zookeeper_libs(), size=1)
    ensemble.start()
    try:
        yield ensemble
    finally:
        ensemble.stop()


def statefulset(name: str, replicas: int, bootstrap: str) -> dict:
    selector = {"app.kubernetes.io/name": "odradek", "app.kubernetes.io/component": "broker"}
    return {
        "apiVersion": "apps/v1",
        "kind": "StatefulSet",
        "metadata": {
            "name": name,
            "labels": {**selector, "kafka.odradek.io/cluster": CLUSTER},
            "annotations": {ANNOTATION: bootstrap},
        },
        "spec": {
            "replicas": replicas,
            "serviceName": f"{name}-headless",
            "selector": {"matchLabels": selector},
            "template": {
                "metadata": {"labels": selector},
                "spec": {"containers": [{"name": "broker", "image": "odradek:dev"}]},
            },
        },
    }


def replicas_by_partition(bootstrap: str) -> dict[int, list[int]]:
    md = AdminClient({"bootstrap.servers": bootstrap}).list_topics(TOPIC, timeout=10)
    return {p: list(m.replicas) for p, m in md.topics[TOPIC].partitions.items()}


def spread(bootstrap: str, brokers: range) -> Counter | None:
    """Replicas per broker once every partition has 2 replicas, all on `brokers`."""
    layout = replicas_by_partition(bootstrap)
    if any(len(r) != 2 or not set(r) <= set(brokers) for r in layout.values()):
        return None
    return Counter(b for r in layout.values() for b in r)


def balanced_annotation(kube: ControlPlane, ns: str, name: str) -> str | None:
    obj = json.loads(kube.kubectl("get", "statefulset", name, "-n", ns, "-o", "json").stdout)
    return (obj["metadata"].get("annotations") or {}).get("kafka.odradek.io/balanced-brokers")


def test_scaling_the_broker_statefulset_moves_partitions(
    kube: ControlPlane, operator: Operator, namespace: str, zk: ZkEnsemble, tmp_path: Path
) -> None:
    connect = zk.connect_string("/odradek")
    brokers = {
        i: Broker(tmp_path / f"broker{i}", zookeeper=connect, broker_id=i).start() for i in range(3)
    }
    try:
        bootstrap = ",".join(b.bootstrap for b in brokers.values())
        admin = AdminClient({"bootstrap.servers": bootstrap})
        admin.create_topics([NewTopic(TOPIC, PARTITIONS, 2)])[TOPIC].result(30)
        producer = Producer({"bootstrap.servers": bootstrap, "acks": "all"})
        for n in range(RECORDS):
            producer.produce(TOPIC, f"r{n}".encode(), partition=n % PARTITIONS)
        assert producer.flush(60) == 0

        name = "odradek-broker"
        kube.apply(statefulset(name, 3, bootstrap), namespace)
        # First sight: the brokers as they are become the baseline; nothing moves.
        wait_until(
            lambda: balanced_annotation(kube, namespace, name) == "0,1,2",
            what="the operator adopting brokers 0,1,2",
        )
        before = replicas_by_partition(bootstrap)

        brokers[3] = Broker(tmp_path / "broker3", zookeeper=connect, broker_id=3).start()
        kube.kubectl("scale", "statefulset", name, "-n", namespace, "--replicas=4")
        counts = wait_until(
            lambda: (c := spread(bootstrap, range(4))) and c[3] == 3 and c,
            timeout=90,
            what="broker 3 holding its share",
        )
        assert sorted(counts.values()) == [3, 3, 3, 3]
        after = replicas_by_partition(bootstrap)
        moved = [p for p in after if after[p] != before[p]]
        assert all(3 in after[p] for p in moved), (before, after)
        assert balanced_annotation(kube, namespace, name) == "0,1,2,3"
        wait_until(lambda: "Rebalanced" in event_reasons(kube, namespace, name), what="the event")
        # A topic on all four brokers cannot leave broker 3: it stays, and the event says so.
        admin.create_topics([NewTopic("wide", 1, 4)])["wide"].result(30)

        kube.kubectl("scale", "statefulset", name, "-n", namespace, "--replicas=3")
        counts = wait_until(
            lambda: spread(bootstrap, range(3)), timeout=90, what="broker 3 drained"
        )
        assert sorted(counts.values()) == [4, 4, 4]
        wait_until(
            lambda: "RebalanceIncomplete" in event_reasons(kube, namespace, name),
            what="the warning about topic wide",
        )
        wide = admin.list_topics("wide", timeout=10).topics["wide"].partitions[0]
        assert sorted(wide.replicas) == [0, 1, 2, 3]
        brokers.pop(3).stop()

        consumer = Consumer(
            {
                "bootstrap.servers": ",".join(brokers[i].bootstrap for i in range(3)),
                "group.id": "scaled-reader",
                "auto.offset.reset": "earliest",
            }
        )
        consumer.subscribe([TOPIC])
        seen: set[bytes] = set()

        def read_all() -> bool:
            m = consumer.poll(0.5)
            if m is not None and m.error() is None:
                seen.add(m.value())
            return len(seen) == RECORDS

        wait_until(read_all, timeout=60, interval=0, what="every record read back")
        consumer.close()
        assert seen == {f"r{n}".encode() for n in range(RECORDS)}
    finally:
        for b in brokers.values():
            b.stop()


def test_statefulset_gets_no_finalizer(
    kube: ControlPlane, operator: Operator, namespace: str
) -> None:
    """`helm uninstall` deletes the operator and the broker StatefulSet at once: a finalizer of
    the operator's on the StatefulSet would keep it, and its brokers, running forever. The operator
    watches StatefulSets without one, and takes off the one an older version put there."""
    name = "odradek-broker"
    sts = statefulset(name, 1, "127.0.0.1:1")
    sts["metadata"]["finalizers"] = ["kafka.odradek.io/finalizer"]
    kube.apply(sts, namespace)

    def meta() -> dict:
        got = kube.kubectl("get", "statefulset", name, "-n", namespace, "-o", "json").stdout
        return json.loads(got)["metadata"]

    wait_until(
        lambda: (
            (m := meta())["annotations"].get("kafka.odradek.io/balanced-brokers") == "0"
            and not m.get("finalizers")
        ),
        what="the StatefulSet adopted, without a finalizer",
    )
    kube.kubectl("delete", "statefulset", name, "-n", namespace, "--wait=true", "--timeout=30s")
