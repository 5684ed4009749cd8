"""kopf handlers for Topic resources (kafka.odradek.io/v1alpha1): one Kafka topic each.

The lifecycle (per-resource lock, oldest claim wins, cluster discovery, back-off, status, events,
metrics, the resync timer, a deletion that never blocks forever) is ClusterResourceHandlers'.
What is the Topic's own: a topic that already exists is adopted; the resync timer's differences
are drift, which the resource's driftPolicy reverts or reports (status.drift and the Drifted
condition); the status shows the topic's partitions, replicas and config; deletion honours
deletionPolicy (Retain keeps the topic).
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from odradek.broker.client import AdminClient

from . import metrics, topic_model
from .cluster_resource import ClusterResourceHandlers, Round
from .kafka_io import apply_plan, delete_topic, read_topic
from .status import PENDING, RECONCILED, Outcome, normal, now_iso, set_condition, warning
from .topic_model import (
    DRIFTED,
    NOT_SUPPORTED,
    REPORT,
    RETAIN,
    TOPICS,
    ActualTopic,
    desired_from,
    plan,
    topic_name,
)


class TopicHandlers(ClusterResourceHandlers):
    KIND = "Topic"
    PLURAL = TOPICS
    SETTLED = topic_model.SETTLED
    REMOVAL = ("delete", "deleted", "deleting")

    def claim(self, name: str, spec: Mapping[str, Any]) -> str:
        return f"topic {topic_name(name, spec)!r}"

    def managed(self, status: Mapping[str, Any]) -> bool:
        return bool(status.get("topicId") or status.get("adopted"))

    def mark_managed(self, new: dict[str, Any]) -> None:
        pass  # status.topicId (or adopted) says it

    def status_fields(self, body: Any) -> dict[str, Any]:
        return {"topicName": topic_name(body["metadata"]["name"], body["spec"])}

    def more_conditions(
        self, conditions: list[dict], new: Mapping[str, Any], generation: int | None
    ) -> list[dict]:
        if "drift" not in new:  # not compared this time
            return conditions
        drifted = new["drift"]
        return set_condition(
            conditions,
            "Drifted",
            bool(drifted),
            "DriftFound" if drifted else "InSync",
            _drift_text(drifted) if drifted else "the brokers match spec",
            generation,
        )

    def kept(self, body: Any) -> str | None:
        desired = desired_from(body["metadata"]["name"], body["spec"])
        if desired.deletion_policy == RETAIN:
            return f"deletionPolicy Retain: topic {desired.name!r} kept"
        return None

    async def converge(self, admin: AdminClient, r: Round) -> Outcome:
        """Read the topic, apply what differs (or report drift), read it back."""
        body, status, new = r.body, r.status, r.new
        desired = desired_from(body["metadata"]["name"], body["spec"])
        actual = await read_topic(admin, desired.name)
        if actual is not None and not self.managed(status):
            new["adopted"] = True
            metrics.ACTIONS.labels(self.KIND, "adopt").inc()
            normal(
                body,
                reason="Adopted",
                message=f"topic {desired.name!r} already existed; it is now managed here",
            )
        p = plan(desired, actual)
        found = [d.as_dict() for d in p.differences]
        apply = True
        if r.drift_mode and p.differences:
            metrics.DRIFT.labels(self.KIND, desired.drift_policy).inc()
            text = _drift_text(found)
            if desired.drift_policy == REPORT:
                apply = False
                if found != status.get("drift"):
                    warning(body, reason="DriftDetected", message=text)
                new["lastDrift"] = _last_drift(status, found, reverted=False)
            elif p.changes:
                normal(body, reason="DriftReverted", message=f"reverting {text}")
                new["lastDrift"] = {"detectedTime": now_iso(), "reverted": True, "items": found}
        if apply and p.changes:
            actions = await apply_plan(admin, desired, p)
            for action in actions:
                metrics.ACTIONS.labels(self.KIND, action).inc()
            normal(body, reason=_ACTION_REASON[actions[0]], message=_describe(p, desired))
            actual = await read_topic(admin, desired.name)
        after = plan(desired, actual)
        remaining = [d.as_dict() for d in after.differences]
        new["drift"] = remaining
        if actual is not None:
            new.update(_observed(actual))
        if not apply and after.differences:
            return Outcome(False, DRIFTED, _drift_text(remaining) + " (driftPolicy Report)")
        if after.changes:
            return Outcome(
                False,
                PENDING,
                "waiting for the brokers to show the change: " + _drift_text(remaining),
                retriable=True,
            )
        if after.unsupported:
            return Outcome(False, NOT_SUPPORTED, "; ".join(after.unsupported))
        assert actual is not None
        return Outcome(
            True,
            RECONCILED,
            f"topic {actual.name!r}: {actual.partitions} partitions, replication factor "
            f"{actual.replicas}, {len(actual.config)} config overrides",
        )

    async def remove(self, admin: AdminClient, body: Any) -> str:
        name = topic_name(body["metadata"]["name"], body["spec"])
        if await delete_topic(admin, name):
            return f"deletionPolicy Delete: topic {name!r} deleted"
        return f"topic {name!r} was already gone"


_ACTION_REASON = {
    "create": "Created",
    "add_partitions": "PartitionsAdded",
    "alter_config": "ConfigUpdated",
}


def _observed(actual: ActualTopic) -> dict[str, Any]:
    return {
        "topicId": actual.topic_id,
        "partitions": actual.partitions,
        "replicas": actual.replicas,
        "config": dict(sorted(actual.config.items())),
    }


def _describe(p: Any, desired: Any) -> str:
    if p.create:
        return (
            f"created topic {desired.name!r} with {desired.partitions} partitions"
            + (f", replication factor {desired.replicas}" if desired.replicas else "")
            + (f", config {dict(sorted(desired.config.items()))}" if desired.config else "")
        )
    parts = []
    if p.add_partitions:
        parts.append(f"partitions raised to {p.add_partitions}")
    if p.set_config:
        parts.append(f"config set {p.set_config}")
    if p.delete_config:
        parts.append(f"config removed {p.delete_config}")
    return f"topic {desired.name!r}: " + ", ".join(parts)


def _drift_text(items: list[dict]) -> str:
    shown = [
        f"{d['field']}: spec {d['desired'] or '(unset)'}, brokers {d['actual'] or '(unset)'}"
        for d in items[:10]
    ]
    more = f" and {len(items) - 10} more" if len(items) > 10 else ""
    return "drift: " + "; ".join(shown) + more


def _last_drift(status: Mapping[str, Any], found: list[dict], *, reverted: bool) -> dict:
    last = status.get("lastDrift") or {}
    if last.get("items") == found and last.get("reverted") == reverted:
        return dict(last)  # the same drift: keep when it was first seen
    return {"detectedTime": now_iso(), "reverted": reverted, "items": found}
