"""`helm install` on kind: every pod ready, volumes bound, `helm test` passes."""

from __future__ import annotations

from conftest import BROKERS, OPERATOR, RELEASE, ZOOKEEPER
from harness import Kube


def test_install_brings_every_pod_ready_and_helm_test_passes(kube: Kube, release: str) -> None:
    brokers = kube.wait_pods_ready(BROKERS, 3)
    assert sorted(p["metadata"]["name"] for p in brokers) == [
        f"{RELEASE}-broker-{i}" for i in range(3)
    ]
    kube.wait_pods_ready(ZOOKEEPER, 1)
    kube.wait_pods_ready(OPERATOR, 1)

    # Each broker and the ZooKeeper server on a volume the node's provisioner made.
    claims = {c["metadata"]["name"]: c for c in kube.items("pvc")}
    for i in range(3):
        claim = claims[f"data-{RELEASE}-broker-{i}"]
        assert claim["status"]["phase"] == "Bound"
        assert claim["spec"]["storageClassName"] == "standard"
    assert any(name.startswith(f"data-{RELEASE}-zookeeper-") for name in claims)

    # A broker reaches another by the stable name it advertises (cluster DNS, pod network).
    kube.kubectl(
        "exec", f"{RELEASE}-broker-0", "--", "odradek", "ready", "--bootstrap-server",
        f"{RELEASE}-broker-2.{RELEASE}-broker-headless.kafka.svc.cluster.local:9092",
        "--broker-id", "2",
    )  # fmt: skip

    # The test pod is deleted once it succeeded (nothing left behind), so no --logs.
    test = kube.helm("test", RELEASE, "--timeout", "5m")
    assert "Phase:          Succeeded" in test.stdout, test.stdout
