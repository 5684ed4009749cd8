"""The Quota operator against a real API server and a real broker: quotas applied, changed,
reverted when altered behind its back, removed on deletion; invalid specs refused at apply time."""

from __future__ import annotations

from typing import Any

import pytest
from kube_harness import (
    Broker,
    ControlPlane,
    Operator,
    admin_call,
    condition,
    event_reasons,
    rejected,
    resource,
    wait_ready,
    wait_reason,
    wait_until,
)

pytestmark = pytest.mark.timeout(600)

Entity = tuple[tuple[str, str | None], ...]


def quota(name: str, *, bootstrap: str | None, cluster: str = "main", **spec: Any) -> dict:
    return resource("Quota", name, bootstrap=bootstrap, cluster=cluster, **spec)


def user_quota(name: str, bootstrap: str, user: str, **rates: int) -> dict:
    """A Quota resource `name` for the user `user` on the brokers at `bootstrap`."""
    return quota(name, bootstrap=bootstrap, user={"name": user}, **rates)


def broker_quotas(bootstrap: str) -> dict[Entity, dict[str, float]]:
    return admin_call(bootstrap, lambda a: a.describe_client_quotas())


def alter_on_broker(bootstrap: str, entity: Entity, ops: dict[str, float | None]) -> None:
    admin_call(bootstrap, lambda a: a.alter_client_quotas({entity: ops}))


ALICE: Entity = (("user", "alice"),)


def test_quota_applied_changed_and_deleted(
    kube: ControlPlane, broker: Broker, operator: Operator, namespace: str
) -> None:
    kube.apply(
        user_quota(
            "alice",
            broker.bootstrap,
            "alice",
            producerByteRate=1048576,
            consumerByteRate=2097152,
            requestPercentage=50,
        ),
        namespace,
    )
    obj = wait_ready(kube, "quota", namespace, "alice")
    assert broker_quotas(broker.bootstrap)[ALICE] == {
        "producer_byte_rate": 1048576.0,
        "consumer_byte_rate": 2097152.0,
        "request_percentage": 50.0,
    }
    assert obj["status"]["entity"] == "user=alice"
    assert obj["status"]["quotas"] == {
        "consumerByteRate": 2097152,
        "producerByteRate": 1048576,
        "requestPercentage": 50,
    }
    assert condition(obj)["reason"] == "Reconciled"
    assert "kafka.odradek.io/finalizer" in obj["metadata"]["finalizers"]
    assert {"QuotasSet", "Ready"} <= event_reasons(kube, namespace, "alice")
    table = kube.kubectl("get", "quotas", "-n", namespace).stdout.splitlines()
    assert table[0].split() == [
        "NAME",
        "CLUSTER",
        "ENTITY",
        "PRODUCE",
        "CONSUME",
        "REQUEST%",
        "READY",
        "REASON",
        "AGE",
    ]
    assert table[1].split()[:6] == ["alice", "main", "user=alice", "1048576", "2097152", "50"]

    # a key dropped from spec is removed from the entity; a changed one is set
    kube.apply(
        user_quota("alice", broker.bootstrap, "alice", producerByteRate=4096, requestPercentage=50),
        namespace,
    )
    obj = wait_ready(kube, "quota", namespace, "alice")
    assert obj["metadata"]["generation"] == 2
    assert broker_quotas(broker.bootstrap)[ALICE] == {
        "producer_byte_rate": 4096.0,
        "request_percentage": 50.0,
    }

    kube.kubectl("delete", "quota", "alice", "-n", namespace, "--timeout=60s")
    assert ALICE not in broker_quotas(broker.bootstrap)
    assert "Deleted" in event_reasons(kube, namespace, "alice")
    assert operator.metric("odradek_operator_actions_total", kind="Quota", action="delete") >= 1


def test_default_and_client_id_entities(
    kube: ControlPlane, broker: Broker, operator: Operator, namespace: str
) -> None:
    specs = {
        "every-client": ({"clientId": {"default": True}}, (("client-id", None),)),
        "every-user": ({"user": {"default": True}}, (("user", None),)),
        "bob-batch": (
            {"user": {"name": "bob"}, "clientId": {"name": "batch"}},
            (("client-id", "batch"), ("user", "bob")),
        ),
        "bob-others": (
            {"user": {"name": "bob"}, "clientId": {"default": True}},
            (("client-id", None), ("user", "bob")),
        ),
    }
    for i, (name, (entity, _)) in enumerate(specs.items()):
        kube.apply(
            quota(name, bootstrap=broker.bootstrap, consumerByteRate=1000 + i, **entity),
            namespace,
        )
    for name in specs:
        wait_ready(kube, "quota", namespace, name)
    found = broker_quotas(broker.bootstrap)
    for i, (_, key) in enumerate(specs.values()):
        assert found[key] == {"consumer_byte_rate": 1000.0 + i}
    obj = kube.get("quota", "bob-others", namespace)
    assert obj["status"]["entity"] == "client-id=<default>,user=bob"
    for name in specs:
        kube.kubectl("delete", "quota", name, "-n", namespace, "--timeout=60s")
    found = broker_quotas(broker.bootstrap)
    assert not any(key in found for _, key in specs.values())


def test_quota_changed_on_the_broker_is_reverted(
    kube: ControlPlane, broker: Broker, operator: Operator, namespace: str
) -> None:
    carol: Entity = (("user", "carol"),)
    kube.apply(user_quota("carol", broker.bootstrap, "carol", producerByteRate=5000), namespace)
    wait_ready(kube, "quota", namespace, "carol")
    alter_on_broker(
        broker.bootstrap, carol, {"producer_byte_rate": 9999, "consumer_byte_rate": 7777}
    )
    wait_until(
        lambda: broker_quotas(broker.bootstrap).get(carol) == {"producer_byte_rate": 5000.0},
        60,
        what="quota reverted",
    )
    assert "DriftReverted" in event_reasons(kube, namespace, "carol")
    assert operator.metric("odradek_operator_drift_detected_total", kind="Quota") >= 1


def test_invalid_quotas_are_rejected_at_apply_time(kube: ControlPlane, namespace: str) -> None:
    x = {"name": "x"}
    invalid: list[tuple[str, dict[str, Any], str]] = [
        ("neg", {"user": x, "requestPercentage": -5}, "requestPercentage"),
        ("zero", {"user": x, "producerByteRate": 0}, "producerByteRate"),
        ("nobody", {"producerByteRate": 1}, "needs an entity"),
        ("nothing", {"user": x}, "at least one"),
        ("both", {"user": {**x, "default": True}, "producerByteRate": 1}, "either name or default"),
        ("false", {"user": {"default": False}, "producerByteRate": 1}, "default"),
    ]
    kube.apply(quota("fixed", bootstrap=None, user=x, producerByteRate=1), namespace)
    invalid += [
        ("fixed", {"user": {"name": "y"}, "producerByteRate": 1}, "spec.user cannot be changed"),
        (
            "fixed",
            {"user": x, "clientId": {"name": "c"}, "producerByteRate": 1},
            "spec.clientId cannot be changed",
        ),
    ]
    for name, spec, message in invalid:
        assert message in rejected(kube, namespace, quota(name, bootstrap=None, **spec))
    text = kube.kubectl("explain", "quotas.spec.user").stdout
    assert "default" in text and "principal" in text


def test_two_quotas_for_one_entity_the_older_wins(
    kube: ControlPlane, broker: Broker, operator: Operator, namespace: str
) -> None:
    dave: Entity = (("user", "dave"),)
    kube.apply(user_quota("first", broker.bootstrap, "dave", producerByteRate=1111), namespace)
    wait_ready(kube, "quota", namespace, "first")
    kube.apply(user_quota("second", broker.bootstrap, "dave", producerByteRate=2222), namespace)
    obj = wait_reason(kube, "quota", namespace, "second", "ResourceConflict")
    assert f"{namespace}/first" in condition(obj)["message"]
    assert broker_quotas(broker.bootstrap)[dave] == {"producer_byte_rate": 1111.0}
    # the loser's deletion leaves the entity alone
    kube.kubectl("delete", "quota", "second", "-n", namespace, "--timeout=60s")
    assert broker_quotas(broker.bootstrap)[dave] == {"producer_byte_rate": 1111.0}
    kube.kubectl("delete", "quota", "first", "-n", namespace, "--timeout=60s")
    assert dave not in broker_quotas(broker.bootstrap)


def test_unreachable_brokers_are_retried_and_deletion_does_not_hang(
    kube: ControlPlane, broker_factory: Any, operator: Operator, namespace: str
) -> None:
    lonely = broker_factory()
    spec = {"user": {"name": "erin"}, "producerByteRate": 1000}
    kube.apply(quota("erin", bootstrap=lonely.bootstrap, **spec), namespace)
    wait_ready(kube, "quota", namespace, "erin")
    lonely.stop()
    kube.apply(
        quota("erin", bootstrap=lonely.bootstrap, **{**spec, "producerByteRate": 2000}), namespace
    )

    def retried() -> dict | None:
        obj = kube.get("quota", "erin", namespace)
        retry = (obj.get("status") or {}).get("retry") or {}
        return obj if retry.get("attempt", 0) >= 2 and retry.get("nextAttemptTime") else None

    obj = wait_until(retried, 60, what="retries counted in status")
    assert condition(obj)["reason"] == "ClusterUnreachable"
    assert condition(obj)["observedGeneration"] == 2
    assert lonely.bootstrap in obj["status"]["retry"]["lastError"]
    # the finalizer gives up after the bound (15 s in these tests) instead of blocking forever
    kube.kubectl("delete", "quota", "erin", "-n", namespace, "--wait=false")
    wait_until(lambda: kube.get("quota", "erin", namespace) is None, 120, what="resource released")
    assert "DeletionAbandoned" in event_reasons(kube, namespace, "erin")
