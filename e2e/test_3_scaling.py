"""`kubectl scale` 3 -> 4 -> 3 and a deleted broker pod, under a producer writing with acks=all.

The operator moves a fair share of the partitions onto broker 3 when it joins, and moves them all
away again before broker 3 stops (its preStop hook waits for that); a deleted pod comes back with
its data. Afterwards a consumer reads back every acknowledged record.
"""

from __future__ import annotations

import re

from conftest import BROKERS, RELEASE
from harness import Kube, wait_until
from pipeline import ProducerPod, check_nothing_lost, consume_all
from test_2_resources import admin, durable_topic

TOPIC = "e2e-stream"
STS = f"{RELEASE}-broker"


def replicas_on(kube: Kube, toolbox: str, broker: int) -> list[str]:
    """Partitions of every topic that have a replica on `broker`."""
    found = []
    for topic in admin(kube, toolbox, "topics"):
        layout = admin(kube, toolbox, "topic", topic)
        for p, part in (layout or {"partitions": {}})["partitions"].items():
            if broker in part["replicas"]:
                found.append(f"{topic}-{p}")
    return found


def settled(kube: Kube, toolbox: str) -> bool:
    """No reassignment running, and every partition of TOPIC fully in sync."""
    if admin(kube, toolbox, "reassignments") != 0:
        return False
    layout = admin(kube, toolbox, "topic", TOPIC)
    return all(sorted(p["isr"]) == sorted(p["replicas"]) for p in layout["partitions"].values())


def rebalanced(kube: Kube, what: str) -> list[str]:
    return [
        e["message"]
        for e in kube.events("StatefulSet", STS)
        if e["reason"] == "Rebalanced" and what in e["message"]
    ]


def partition_dirs(kube: Kube, claim: str) -> list[str]:
    """The partition directories in a broker's retained volume (read by a pod mounting it)."""
    out = kube.run_client(
        "e2e-volume-reader",
        [],
        command=["sh", "-c", "ls -1 /data/logs"],
        volumes=[
            (
                {"name": "data", "persistentVolumeClaim": {"claimName": claim, "readOnly": True}},
                {"name": "data", "mountPath": "/data", "readOnly": True},
            )
        ],
    )
    return [d for d in out.split() if re.fullmatch(r".+-\d+", d)]


def test_scale_up_down_and_pod_loss_lose_nothing(kube: Kube, release: str, toolbox: str) -> None:
    durable_topic(kube, TOPIC, 6)
    producer = ProducerPod(kube, "e2e-producer", TOPIC).start()

    # 3 -> 4: broker 3 registers and gets a fair share of the replicas.
    acked = producer.wait_more_acks(0)
    kube.kubectl("scale", "statefulset", STS, "--replicas=4")
    kube.wait_pods_ready(BROKERS, 4)
    wait_until(lambda: rebalanced(kube, "brokers 3 added"), 300, what="Rebalanced event (added)")
    wait_until(lambda: settled(kube, toolbox), 300, what="reassignment onto broker 3 done")
    on_new = replicas_on(kube, toolbox, 3)
    assert sum(1 for tp in on_new if tp.startswith(f"{TOPIC}-")) >= 2, on_new
    acked = producer.wait_more_acks(acked)

    # 4 -> 3: everything moves off broker 3 while it is still up; then it stops.
    kube.kubectl("scale", "statefulset", STS, "--replicas=3")
    wait_until(lambda: kube.get("pod", f"{STS}-3") is None, 600, what="broker 3 gone")
    kube.wait_pods_ready(BROKERS, 3)
    wait_until(lambda: rebalanced(kube, "brokers 3 removed"), 60, what="Rebalanced (removed)")
    assert replicas_on(kube, toolbox, 3) == []
    assert admin(kube, toolbox, "brokers") == [0, 1, 2]
    # Drained before it stopped: the broker deleted its replicas itself, so its retained volume
    # holds no partition (a broker stopped first would have kept them all).
    assert partition_dirs(kube, f"data-{STS}-3") == []
    acked = producer.wait_more_acks(acked)

    # A broker pod deleted: it restarts (no drain: the StatefulSet still wants it) with its data.
    kube.kubectl("delete", "pod", f"{STS}-1", "--wait=false")
    wait_until(
        lambda: (p := kube.get("pod", f"{STS}-1")) and not p["metadata"].get("deletionTimestamp")
        and kube.ready(p),
        600, what="broker 1 back and ready",
    )  # fmt: skip
    wait_until(lambda: settled(kube, toolbox), 300, what="broker 1 back in sync")
    producer.wait_more_acks(acked)

    acks = producer.stop()
    check_nothing_lost(acks, consume_all(kube, "e2e-consumer", TOPIC))
