"""The Topic operator against a real API server (etcd + kube-apiserver) and a real broker.

Each test works in a namespace of its own; the operator process is shared by the session and
reaches the broker through the kafka.odradek.io/bootstrap-servers annotation (allowed by its
test settings), or through a labelled Service where discovery itself is under test.
"""

from __future__ import annotations

from typing import Any

import kube_harness
import pytest
from kube_harness import (
    Broker,
    ControlPlane,
    Operator,
    admin_call,
    condition,
    event_reasons,
    events,
    rejected,
    resource,
    wait_ready,
    wait_reason,
    wait_until,
)
from odradek.broker.client import AdminClient, AlterConfigOp, ConfigResource
from odradek.operator.kafka_io import read_topic

pytestmark = pytest.mark.timeout(600)


def topic(
    name: str,
    *,
    bootstrap: str | None,
    partitions: int = 3,
    cluster: str = "main",
    **spec: Any,
) -> dict:
    return resource(
        "Topic", name, bootstrap=bootstrap, cluster=cluster, partitions=partitions, **spec
    )


def broker_topic(bootstrap: str, name: str) -> tuple[int, int, dict[str, str]] | None:
    """(partitions, replication factor, config overrides) on the broker, or None."""

    async def go(admin: AdminClient) -> tuple[int, int, dict[str, str]] | None:
        actual = await read_topic(admin, name)
        return None if actual is None else (actual.partitions, actual.replicas, actual.config)

    return admin_call(bootstrap, go)


def alter_on_broker(bootstrap: str, name: str, ops: list[AlterConfigOp]) -> None:
    admin_call(bootstrap, lambda a: a.incremental_alter_configs({ConfigResource.topic(name): ops}))


def create_on_broker(bootstrap: str, name: str, partitions: int, config: dict[str, str]) -> None:
    admin_call(bootstrap, lambda a: a.create_topic(name, partitions, 1, config))


# -- tests ---------------------------------------------------------------------------------


def test_topic_applied_creates_the_topic(
    kube: ControlPlane, broker: Broker, operator: Operator, namespace: str
) -> None:
    kube.apply(
        topic(
            "orders",
            bootstrap=broker.bootstrap,
            partitions=3,
            replicas=1,
            config={"retention.ms": "3600000", "cleanup.policy": "compact"},
        ),
        namespace,
    )
    obj = wait_ready(kube, "topic", namespace, "orders")
    assert broker_topic(broker.bootstrap, "orders") == (
        3,
        1,
        {"retention.ms": "3600000", "cleanup.policy": "compact"},
    )
    status = obj["status"]
    assert status["observedGeneration"] == obj["metadata"]["generation"] == 1
    assert status["topicName"] == "orders"
    assert status["partitions"] == 3 and status["replicas"] == 1
    assert status["config"] == {"cleanup.policy": "compact", "retention.ms": "3600000"}
    assert status["topicId"]
    assert not status.get("adopted")
    assert condition(obj)["reason"] == "Reconciled"
    assert "kafka.odradek.io/finalizer" in obj["metadata"]["finalizers"]
    # defaults filled in by the schema
    assert obj["spec"]["deletionPolicy"] == "Retain"
    assert obj["spec"]["driftPolicy"] == "Revert"
    assert {"Created", "Ready"} <= event_reasons(kube, namespace, "orders")
    table = kube.kubectl("get", "topics", "-n", namespace).stdout
    assert table.split("\n")[0].split() == [
        "NAME",
        "CLUSTER",
        "TOPIC",
        "PARTITIONS",
        "REPLICAS",
        "READY",
        "REASON",
        "AGE",
    ]
    assert "orders" in table and "Reconciled" in table
    assert operator.metric("odradek_operator_actions_total", kind="Topic", action="create") >= 1


def test_explain_describes_the_fields(kube: ControlPlane) -> None:
    text = kube.kubectl("explain", "topics.spec.partitions").stdout
    assert "never" in text and "lowered" in text
    text = kube.kubectl("explain", "topics.spec.deletionPolicy").stdout
    assert "Retain" in text and "Delete" in text


def test_example_manifests_are_accepted(kube: ControlPlane, namespace: str) -> None:
    examples = str(kube_harness.ROOT / "manifests" / "examples")
    out = kube.kubectl("apply", "--dry-run=server", "-n", namespace, "-f", examples).stdout
    assert "orders" in out and "legacy-events" in out
    for kind, name in [
        ("quota", "orders-service"),
        ("quota", "default-clients"),
        ("quota", "orders-service-batch"),
        ("user", "orders-service"),
        ("user", "analytics"),
    ]:
        assert f"{kind}.kafka.odradek.io/{name}" in out, out


def test_partitions_raised_from_3_to_6(
    kube: ControlPlane, broker: Broker, operator: Operator, namespace: str
) -> None:
    kube.apply(topic("grow", bootstrap=broker.bootstrap, partitions=3), namespace)
    wait_ready(kube, "topic", namespace, "grow")
    assert broker_topic(broker.bootstrap, "grow")[0] == 3
    kube.apply(topic("grow", bootstrap=broker.bootstrap, partitions=6), namespace)
    obj = wait_ready(kube, "topic", namespace, "grow")
    assert obj["metadata"]["generation"] == 2
    assert obj["status"]["partitions"] == 6
    assert broker_topic(broker.bootstrap, "grow")[0] == 6
    assert "PartitionsAdded" in event_reasons(kube, namespace, "grow")


def test_invalid_changes_are_rejected_at_apply_time(
    kube: ControlPlane, broker: Broker, operator: Operator, namespace: str
) -> None:
    kube.apply(topic("fixed", bootstrap=broker.bootstrap, partitions=3), namespace)
    wait_ready(kube, "topic", namespace, "fixed")

    fixed = {"bootstrap": broker.bootstrap, "partitions": 3}
    invalid: list[tuple[str, dict[str, Any], str]] = [
        ("fixed", {**fixed, "partitions": 2}, "partitions cannot be decreased"),
        ("fixed", {**fixed, "cluster": "other"}, "spec.cluster cannot be changed"),
        ("fixed", {**fixed, "topicName": "renamed"}, "topicName cannot be added"),
        ("bad-config", {"bootstrap": None, "config": {"Retention MS": "1"}}, "config keys"),
        ("bad-replicas", {"bootstrap": None, "replicas": 0}, "replicas"),
        ("bad-name", {"bootstrap": None, "topicName": "has space"}, "topicName"),
        ("internal", {"bootstrap": None, "topicName": "__consumer_offsets"}, "reserved"),
    ]
    for name, spec, message in invalid:
        assert message in rejected(kube, namespace, topic(name, **spec))
    # nothing changed on the broker
    assert broker_topic(broker.bootstrap, "fixed")[0] == 3
    assert kube.get("topic", "fixed", namespace)["spec"]["partitions"] == 3


def test_drift_is_reverted_under_revert(
    kube: ControlPlane, broker: Broker, operator: Operator, namespace: str
) -> None:
    kube.apply(
        topic("drifty", bootstrap=broker.bootstrap, config={"retention.ms": "100000"}),
        namespace,
    )
    wait_ready(kube, "topic", namespace, "drifty")
    alter_on_broker(
        broker.bootstrap,
        "drifty",
        [AlterConfigOp.set("retention.ms", "5000"), AlterConfigOp.set("segment.ms", "60000")],
    )
    assert broker_topic(broker.bootstrap, "drifty")[2] == {
        "retention.ms": "5000",
        "segment.ms": "60000",
    }

    def reverted() -> dict | None:
        obj = kube.get("topic", "drifty", namespace)
        last = obj["status"].get("lastDrift") or {}
        return obj if last.get("reverted") else None

    obj = wait_until(reverted, 60, what="drift reverted")
    fields = {d["field"]: d for d in obj["status"]["lastDrift"]["items"]}
    assert fields["config.retention.ms"] == {
        "field": "config.retention.ms",
        "desired": "100000",
        "actual": "5000",
    }
    assert fields["config.segment.ms"]["actual"] == "60000"
    assert fields["config.segment.ms"]["desired"] == ""
    obj = wait_ready(kube, "topic", namespace, "drifty")
    assert broker_topic(broker.bootstrap, "drifty")[2] == {"retention.ms": "100000"}
    assert obj["status"]["drift"] == []
    assert condition(obj, "Drifted")["status"] == "False"
    assert "DriftReverted" in event_reasons(kube, namespace, "drifty")
    assert operator.metric("odradek_operator_drift_detected_total", policy="Revert") >= 1


def test_drift_is_reported_under_report(
    kube: ControlPlane, broker: Broker, operator: Operator, namespace: str
) -> None:
    def watched(retention_ms: str) -> dict:
        """The Topic under test: drift is reported, not reverted."""
        config = {"retention.ms": retention_ms}
        return topic("watched", bootstrap=broker.bootstrap, config=config, driftPolicy="Report")

    kube.apply(watched("100000"), namespace)
    wait_ready(kube, "topic", namespace, "watched")
    alter_on_broker(broker.bootstrap, "watched", [AlterConfigOp.set("retention.ms", "7000")])
    obj = wait_reason(kube, "topic", namespace, "watched", "Drifted")
    assert obj["status"]["drift"] == [
        {"field": "config.retention.ms", "desired": "100000", "actual": "7000"}
    ]
    assert condition(obj, "Drifted")["status"] == "True"
    assert condition(obj)["status"] == "False"
    assert obj["status"]["lastDrift"]["reverted"] is False
    # reported, not reverted
    assert broker_topic(broker.bootstrap, "watched")[2] == {"retention.ms": "7000"}
    assert "DriftDetected" in event_reasons(kube, namespace, "watched")
    # accepting the brokers' value in spec ends the drift
    kube.apply(watched("7000"), namespace)
    obj = wait_ready(kube, "topic", namespace, "watched")
    assert obj["status"]["drift"] == []


def test_delete_with_retain_keeps_the_topic(
    kube: ControlPlane, broker: Broker, operator: Operator, namespace: str
) -> None:
    kube.apply(topic("kept", bootstrap=broker.bootstrap), namespace)
    wait_ready(kube, "topic", namespace, "kept")
    kube.kubectl("delete", "topic", "kept", "-n", namespace, "--timeout=60s")
    assert kube.get("topic", "kept", namespace) is None
    assert broker_topic(broker.bootstrap, "kept") is not None
    assert "Retained" in event_reasons(kube, namespace, "kept")


def test_delete_with_delete_removes_the_topic(
    kube: ControlPlane, broker: Broker, operator: Operator, namespace: str
) -> None:
    kube.apply(topic("gone", bootstrap=broker.bootstrap, deletionPolicy="Delete"), namespace)
    wait_ready(kube, "topic", namespace, "gone")
    kube.kubectl("delete", "topic", "gone", "-n", namespace, "--timeout=60s")
    assert kube.get("topic", "gone", namespace) is None
    wait_until(lambda: broker_topic(broker.bootstrap, "gone") is None, 30, what="topic deleted")
    assert "Deleted" in event_reasons(kube, namespace, "gone")


def test_delete_while_the_broker_is_gone_does_not_hang(
    kube: ControlPlane, broker_factory: Any, operator: Operator, namespace: str
) -> None:
    lonely = broker_factory()
    kube.apply(topic("orphan", bootstrap=lonely.bootstrap, deletionPolicy="Delete"), namespace)
    wait_ready(kube, "topic", namespace, "orphan")
    lonely.stop()
    kube.kubectl("delete", "topic", "orphan", "-n", namespace, "--wait=false")

    # retried with back-off, reported in status, then released after the bound (15 s here)
    def retrying() -> dict | None:
        obj = kube.get("topic", "orphan", namespace)
        return obj if obj is None or (obj.get("status") or {}).get("retry") else None

    obj = wait_until(retrying, 60, what="a retry reported in status")
    if obj is not None:
        assert condition(obj)["reason"] == "ClusterUnreachable"
    wait_until(
        lambda: kube.get("topic", "orphan", namespace) is None, 120, what="resource released"
    )
    assert "DeletionAbandoned" in event_reasons(kube, namespace, "orphan")


def test_cluster_found_through_its_service_and_retries_reported(
    kube: ControlPlane, operator: Operator, namespace: str
) -> None:
    # No bootstrap annotation: the operator looks for the cluster's labelled Service.
    kube.apply(topic("lost", bootstrap=None, cluster="ghost"), namespace)
    obj = wait_reason(kube, "topic", namespace, "lost", "ClusterNotFound")
    assert "kafka.odradek.io/cluster=ghost" in condition(obj)["message"]
    kube.apply(
        {
            "apiVersion": "v1",
            "kind": "Service",
            "metadata": {
                "name": "ghost-bootstrap",
                "labels": {
                    "kafka.odradek.io/cluster": "ghost",
                    "kafka.odradek.io/bootstrap": "true",
                },
            },
            "spec": {"clusterIP": "None", "ports": [{"name": "kafka", "port": 9092}]},
        },
        namespace,
    )
    # The Service's DNS name only resolves inside a cluster: unreachable from here, retried.
    obj = wait_reason(kube, "topic", namespace, "lost", "ClusterUnreachable")
    assert f"ghost-bootstrap.{namespace}.svc:9092" in condition(obj)["message"]

    def retried() -> dict | None:
        o = kube.get("topic", "lost", namespace)
        retry = (o.get("status") or {}).get("retry") or {}
        return o if retry.get("attempt", 0) >= 2 and retry.get("nextAttemptTime") else None

    obj = wait_until(retried, 60, what="retry attempts counted in status")
    assert f"ghost-bootstrap.{namespace}.svc:9092" in obj["status"]["retry"]["lastError"]
    # never managed a topic: deleting it is immediate
    kube.kubectl("delete", "topic", "lost", "-n", namespace, "--timeout=60s")
    assert "Released" in event_reasons(kube, namespace, "lost")


def test_existing_topic_is_adopted(
    kube: ControlPlane, broker: Broker, operator: Operator, namespace: str
) -> None:
    create_on_broker(broker.bootstrap, "legacy", 4, {"retention.ms": "1000", "segment.ms": "9000"})
    kube.apply(
        topic("legacy", bootstrap=broker.bootstrap, partitions=4, config={"retention.ms": "2000"}),
        namespace,
    )
    obj = wait_ready(kube, "topic", namespace, "legacy")
    assert obj["status"]["adopted"] is True
    assert broker_topic(broker.bootstrap, "legacy") == (4, 1, {"retention.ms": "2000"})
    assert "Adopted" in event_reasons(kube, namespace, "legacy")


def test_two_resources_for_one_topic_the_older_wins(
    kube: ControlPlane, broker: Broker, operator: Operator, namespace: str
) -> None:
    def claim(name: str, retention_ms: str) -> dict:
        """A Topic resource for the broker topic Shared_Topic."""
        config = {"retention.ms": retention_ms}
        return topic(name, bootstrap=broker.bootstrap, topicName="Shared_Topic", config=config)

    kube.apply(claim("first", "1111"), namespace)
    wait_ready(kube, "topic", namespace, "first")
    kube.apply(claim("second", "2222"), namespace)
    obj = wait_reason(kube, "topic", namespace, "second", "ResourceConflict")
    assert f"{namespace}/first" in condition(obj)["message"]
    assert broker_topic(broker.bootstrap, "Shared_Topic")[2] == {"retention.ms": "1111"}
    assert wait_ready(kube, "topic", namespace, "first")
    # the older one goes (Retain): the younger takes the topic over
    kube.kubectl("delete", "topic", "first", "-n", namespace, "--timeout=60s")
    obj = wait_ready(kube, "topic", namespace, "second")
    assert obj["status"]["adopted"] is True
    assert broker_topic(broker.bootstrap, "Shared_Topic")[2] == {"retention.ms": "2222"}


def test_invalid_topics_are_not_ready_and_others_still_served(
    kube: ControlPlane, broker: Broker, operator: Operator, namespace: str
) -> None:
    kube.apply(
        topic("bad-key", bootstrap=broker.bootstrap, config={"no.such.config": "1"}), namespace
    )
    kube.apply(topic("too-many-replicas", bootstrap=broker.bootstrap, replicas=3), namespace)
    kube.apply(topic("fine", bootstrap=broker.bootstrap), namespace)
    obj = wait_reason(kube, "topic", namespace, "bad-key", "KafkaError")
    assert "no.such.config" in condition(obj)["message"]
    obj = wait_reason(kube, "topic", namespace, "too-many-replicas", "KafkaError")
    assert "INVALID_REPLICATION_FACTOR" in condition(obj)["message"]
    wait_ready(kube, "topic", namespace, "fine")
    assert broker_topic(broker.bootstrap, "bad-key") is None
    assert broker_topic(broker.bootstrap, "too-many-replicas") is None


def test_create_delete_recreate_ten_times_ends_consistent(
    kube: ControlPlane, broker: Broker, operator: Operator, namespace: str
) -> None:
    name = "churn"
    for i in range(10):
        kube.apply(
            topic(
                name,
                bootstrap=broker.bootstrap,
                partitions=2,
                deletionPolicy="Delete",
                config={"retention.ms": str(60000 + i)},
            ),
            namespace,
        )
        wait_ready(kube, "topic", namespace, name)
        assert broker_topic(broker.bootstrap, name) == (2, 1, {"retention.ms": str(60000 + i)})
        kube.kubectl("delete", "topic", name, "-n", namespace, "--timeout=60s")
        wait_until(
            lambda: broker_topic(broker.bootstrap, name) is None, 30, what=f"round {i}: deleted"
        )
    kube.apply(topic(name, bootstrap=broker.bootstrap, partitions=5), namespace)
    obj = wait_ready(kube, "topic", namespace, name)
    assert not obj["status"].get("adopted")
    assert broker_topic(broker.bootstrap, name) == (5, 1, {})
    reasons = [e["reason"] for e in events(kube, namespace, name)]
    assert "DeletionAbandoned" not in reasons and "DeleteFailed" not in reasons


def test_changes_made_while_the_operator_is_down_are_applied_after_restart(
    kube: ControlPlane, broker: Broker, operator: Operator, namespace: str
) -> None:
    kube.apply(topic("resumed", bootstrap=broker.bootstrap, partitions=2), namespace)
    kube.apply(topic("doomed", bootstrap=broker.bootstrap, deletionPolicy="Delete"), namespace)
    wait_ready(kube, "topic", namespace, "resumed")
    wait_ready(kube, "topic", namespace, "doomed")
    operator.stop()
    try:
        kube.apply(
            topic(
                "resumed",
                bootstrap=broker.bootstrap,
                partitions=4,
                config={"retention.ms": "4444"},
            ),
            namespace,
        )
        kube.kubectl("delete", "topic", "doomed", "-n", namespace, "--wait=false")
        # the finalizer holds the resource until the operator has dealt with the topic
        assert kube.get("topic", "doomed", namespace)["metadata"]["deletionTimestamp"]
    finally:
        operator.start()
    obj = wait_ready(kube, "topic", namespace, "resumed")
    assert obj["metadata"]["generation"] == 2
    assert broker_topic(broker.bootstrap, "resumed") == (4, 1, {"retention.ms": "4444"})
    wait_until(lambda: kube.get("topic", "doomed", namespace) is None, 60, what="deletion")
    assert broker_topic(broker.bootstrap, "doomed") is None


def test_owned_objects_are_garbage_collected(
    kube_gc: ControlPlane, broker: Broker, operator: Operator, namespace: str
) -> None:
    """kube-controller-manager runs: an object owned by a Topic goes with it (what generated
    Secrets of User resources will rely on)."""
    kube = kube_gc
    kube.apply(topic("owner", bootstrap=broker.bootstrap), namespace)
    obj = wait_ready(kube, "topic", namespace, "owner")
    kube.apply(
        {
            "apiVersion": "v1",
            "kind": "ConfigMap",
            "metadata": {
                "name": "owned",
                "ownerReferences": [
                    {
                        "apiVersion": "kafka.odradek.io/v1alpha1",
                        "kind": "Topic",
                        "name": "owner",
                        "uid": obj["metadata"]["uid"],
                    }
                ],
            },
            "data": {"k": "v"},
        },
        namespace,
    )
    kube.kubectl("delete", "topic", "owner", "-n", namespace, "--timeout=60s")
    wait_until(
        lambda: kube.get("configmap", "owned", namespace) is None, 120, what="garbage collection"
    )
