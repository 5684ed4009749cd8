"""`helm uninstall` leaves nothing behind but the volumes (and the CRDs, which Helm never deletes);
what the deletion policy retained is still there when the chart is installed again on them."""

from __future__ import annotations

import json

from conftest import BROKERS, NAMESPACE, RELEASE, chart_args
from harness import Kube, wait_until
from pipeline import consume_all
from test_2_resources import admin, ready, resource

KEPT = "e2e-retained"
GONE = "e2e-removed"


def namespaced_objects(kube: Kube) -> set[tuple[str, str]]:
    """(kind, name) of everything in the namespace that a user would call a leftover."""
    kinds = kube.kubectl(
        "api-resources", "--verbs=list", "--namespaced", "-o", "name", namespaced=False
    ).stdout.split()
    skip = {"events", "events.events.k8s.io"}  # history, not objects
    found = set()
    out = kube.kubectl("get", ",".join(k for k in kinds if k not in skip), "-o", "json")
    for item in json.loads(out.stdout)["items"]:
        found.add((item["kind"], item["metadata"]["name"]))
    # What every namespace has.
    return found - {("ServiceAccount", "default"), ("ConfigMap", "kube-root-ca.crt")}


def test_uninstall_leaves_only_volumes_and_what_the_policy_retains(
    kube: Kube, release: str, toolbox: str
) -> None:
    kube.apply(
        resource("Topic", KEPT, partitions=2, replicas=3, deletionPolicy="Retain"),
        resource("Topic", GONE, partitions=1, replicas=3, deletionPolicy="Delete"),
    )
    ready(kube, "topic", KEPT)
    ready(kube, "topic", GONE)
    kube.run_client(
        "e2e-retained-writer",
        [],
        command=[
            "odradek", "produce", "--bootstrap-server",
            f"{RELEASE}-bootstrap.{NAMESPACE}.svc.cluster.local:9092", "--topic", KEPT,
            "--value", "one", "--value", "two", "--value", "three",
        ],
    )  # fmt: skip

    # The user removes their resources while the operator runs, then the release.
    kube.kubectl("delete", "topics,quotas,users", "--all", "--wait=true", "--timeout=180s")
    wait_until(lambda: admin(kube, toolbox, "topic", GONE) is None, 120, what=f"{GONE} deleted")
    kube.kubectl("delete", "pods", "-l", "app.kubernetes.io/part-of=odradek-e2e", "--wait=true")
    kube.kubectl("delete", "configmap", "e2e-clients")
    kube.helm("uninstall", RELEASE, "--wait", "--timeout", "10m")

    def leftovers() -> set[tuple[str, str]]:
        return {(k, n) for k, n in namespaced_objects(kube) if k != "PersistentVolumeClaim"}

    wait_until(lambda: not leftovers(), 300, what="nothing but volumes left")
    claims = {n for k, n in namespaced_objects(kube) if k == "PersistentVolumeClaim"}
    assert {f"data-{RELEASE}-broker-{i}" for i in range(3)} <= claims
    assert f"data-{RELEASE}-zookeeper-0" in claims
    cluster_wide = kube.kubectl(
        "get", "clusterroles,clusterrolebindings", "-o", "name", namespaced=False
    ).stdout
    assert f"{RELEASE}-operator" not in cluster_wide
    crds = kube.kubectl("get", "crd", "-o", "name", namespaced=False).stdout
    assert "topics.kafka.odradek.io" in crds  # Helm leaves CRDs (and so resources) alone

    # Installed again on the same volumes: the retained topic is there with its records.
    kube.install_clients()
    kube.helm("install", *chart_args("--wait", "--timeout", "10m"))
    kube.wait_pods_ready(BROKERS, 3)
    records = consume_all(kube, "e2e-retained-reader", KEPT)
    assert sorted(v for by_offset in records.values() for v in by_offset.values()) == [
        "one",
        "three",
        "two",
    ]
    assert admin_after_reinstall(kube, GONE) is None


def admin_after_reinstall(kube: Kube, topic: str) -> object:
    out = kube.run_client(
        "e2e-topic-check", ["/clients/e2e_client.py", "admin", "topic", topic]
    ).strip()
    return json.loads(out.splitlines()[-1])
