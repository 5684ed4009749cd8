"""The Topic operator's pure rules: plans, drift, conditions, conflicts, settings."""

from __future__ import annotations

from odradek.operator.clusters import OwnerKey, conflict_winner
from odradek.operator.config import load_config
from odradek.operator.status import set_condition
from odradek.operator.topic_model import ActualTopic, desired_from, in_drift_mode, plan


def actual(partitions: int = 3, replicas: int = 1, **config: str) -> ActualTopic:
    return ActualTopic("t", "id", partitions, replicas, dict(config))


def test_desired_defaults_and_topic_name() -> None:
    d = desired_from("res", {"cluster": "c", "partitions": 3})
    assert (d.name, d.partitions, d.replicas, d.config) == ("res", 3, None, {})
    assert (d.deletion_policy, d.drift_policy) == ("Retain", "Revert")
    d = desired_from("res", {"cluster": "c", "partitions": 1, "topicName": "Real_Name"})
    assert d.name == "Real_Name"


def test_plan_for_a_missing_topic_creates_it() -> None:
    p = plan(desired_from("t", {"partitions": 3}), None)
    assert p.create and p.changes


def test_plan_in_sync_has_nothing_to_do() -> None:
    d = desired_from("t", {"partitions": 3, "replicas": 1, "config": {"retention.ms": "5"}})
    p = plan(d, actual(**{"retention.ms": "5"}))
    assert not p.changes and not p.differences and not p.unsupported


def test_plan_raises_partitions_sets_and_removes_config() -> None:
    d = desired_from("t", {"partitions": 6, "config": {"retention.ms": "5", "segment.ms": "9"}})
    p = plan(d, actual(**{"retention.ms": "4", "cleanup.policy": "compact"}))
    assert p.add_partitions == 6
    assert p.set_config == {"retention.ms": "5", "segment.ms": "9"}
    assert p.delete_config == ["cleanup.policy"]
    fields = {x.field: (x.desired, x.actual) for x in p.differences}
    assert fields == {
        "partitions": ("6", "3"),
        "config.retention.ms": ("5", "4"),
        "config.segment.ms": ("9", ""),
        "config.cleanup.policy": ("", "compact"),
    }


def test_fewer_partitions_or_other_replicas_are_not_supported() -> None:
    d = desired_from("t", {"partitions": 2, "replicas": 3})
    p = plan(d, actual(partitions=4, replicas=1))
    assert not p.changes
    assert len(p.unsupported) == 2
    assert "raise spec.partitions to 4" in p.unsupported[0]


def test_condition_transition_time_moves_only_on_status_change() -> None:
    c = set_condition(None, "Ready", False, "Pending", "m", 1, now="2020-01-01T00:00:00Z")
    c = set_condition(c, "Ready", False, "KafkaError", "m2", 2, now="2021-01-01T00:00:00Z")
    assert c[0]["lastTransitionTime"] == "2020-01-01T00:00:00Z"
    assert c[0]["reason"] == "KafkaError" and c[0]["observedGeneration"] == 2
    c = set_condition(c, "Drifted", False, "InSync", "", 2, now="2021-01-01T00:00:00Z")
    c = set_condition(c, "Ready", True, "Reconciled", "ok", 2, now="2022-01-01T00:00:00Z")
    assert [x["type"] for x in c] == ["Ready", "Drifted"]
    assert c[0]["lastTransitionTime"] == "2022-01-01T00:00:00Z"


def test_drift_mode_needs_the_current_generation_applied() -> None:
    ready = set_condition(None, "Ready", True, "Reconciled", "", 3)
    assert in_drift_mode({"observedGeneration": 3, "conditions": ready}, 3)
    assert not in_drift_mode({"observedGeneration": 2, "conditions": ready}, 3)
    failing = set_condition(None, "Ready", False, "ClusterUnreachable", "", 3)
    assert not in_drift_mode({"observedGeneration": 3, "conditions": failing}, 3)
    drifted = set_condition(None, "Ready", False, "Drifted", "", 3)
    assert in_drift_mode({"observedGeneration": 3, "conditions": drifted}, 3)


def test_the_oldest_claim_wins_then_the_lowest_uid() -> None:
    a = OwnerKey("2024-01-02T00:00:00Z", False, "b", "ns", "late-managing")
    b = OwnerKey("2024-01-01T00:00:00Z", True, "z", "ns", "early")
    c = OwnerKey("2024-01-01T00:00:00Z", True, "a", "ns", "early-same-second")
    d = OwnerKey("2024-01-01T00:00:00Z", False, "y", "ns", "early-managing")
    assert conflict_winner([a, b]) is b
    assert conflict_winner([a, b, c]) is c
    assert conflict_winner([a, b, c, d]) is d
    assert conflict_winner([]) is None


def test_settings_from_environment_and_flags() -> None:
    cfg, _ = load_config(
        ["--cluster", "one", "--resync-seconds", "5"],
        {"ODRADEK_OPERATOR_NAMESPACES": "a, b", "ODRADEK_OPERATOR_RESYNC_SECONDS": "9"},
    )
    assert cfg.namespaces == ["a", "b"]
    assert cfg.clusters == ["one"] and cfg.selects("one") and not cfg.selects("two")
    assert cfg.resync_seconds == 5
    assert cfg.backoff(0) == 2 and cfg.backoff(100) == cfg.backoff_max_seconds
