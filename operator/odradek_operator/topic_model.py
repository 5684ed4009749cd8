"""Pure Topic logic: desired vs actual state, the changes to make, drift, and status conditions.

Nothing here does I/O, so the rules (what counts as drift, what cannot be changed, how conditions
transition) are unit-testable without Kubernetes or brokers.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from .status import RECONCILED, settled

TOPICS = "topics"

RETAIN, DELETE = "Retain", "Delete"
REVERT, REPORT = "Revert", "Report"

# Ready condition reasons of Topics only (shared ones are in status).
DRIFTED = "Drifted"
NOT_SUPPORTED = "NotSupported"


@dataclass(slots=True)
class DesiredTopic:
    name: str
    partitions: int
    replicas: int | None
    config: dict[str, str]
    deletion_policy: str = RETAIN
    drift_policy: str = REVERT


@dataclass(slots=True)
class ActualTopic:
    name: str
    topic_id: str | None
    partitions: int
    replicas: int
    config: dict[str, str]  # the topic's own overrides (dynamic topic config)


@dataclass(slots=True)
class DriftItem:
    field: str
    desired: str
    actual: str

    def as_dict(self) -> dict[str, str]:
        return {"field": self.field, "desired": self.desired, "actual": self.actual}


@dataclass(slots=True)
class Plan:
    """What to do to bring a topic to its spec, and what cannot be done."""

    create: bool = False
    add_partitions: int | None = None  # new total
    set_config: dict[str, str] = field(default_factory=dict)
    delete_config: list[str] = field(default_factory=list)
    unsupported: list[str] = field(default_factory=list)  # messages for NotSupported
    differences: list[DriftItem] = field(default_factory=list)

    @property
    def changes(self) -> bool:
        return bool(self.create or self.add_partitions or self.set_config or self.delete_config)


def topic_name(name: str, spec: Mapping[str, Any]) -> str:
    return spec.get("topicName") or name


def desired_from(name: str, spec: Mapping[str, Any]) -> DesiredTopic:
    replicas = spec.get("replicas")
    return DesiredTopic(
        name=topic_name(name, spec),
        partitions=int(spec["partitions"]),
        replicas=None if replicas is None else int(replicas),
        config={str(k): str(v) for k, v in (spec.get("config") or {}).items()},
        deletion_policy=spec.get("deletionPolicy") or RETAIN,
        drift_policy=spec.get("driftPolicy") or REVERT,
    )


def plan(desired: DesiredTopic, actual: ActualTopic | None) -> Plan:
    """The changes that make `actual` match `desired`; differences listed as drift items."""
    p = Plan()
    if actual is None:
        p.create = True
        p.differences.append(DriftItem("topic", desired.name, ""))
        return p
    if desired.partitions > actual.partitions:
        p.add_partitions = desired.partitions
        p.differences.append(
            DriftItem("partitions", str(desired.partitions), str(actual.partitions))
        )
    elif desired.partitions < actual.partitions:
        p.differences.append(
            DriftItem("partitions", str(desired.partitions), str(actual.partitions))
        )
        p.unsupported.append(
            f"the topic has {actual.partitions} partitions, more than spec.partitions "
            f"({desired.partitions}); Kafka cannot remove partitions, so raise "
            f"spec.partitions to {actual.partitions}"
        )
    if desired.replicas is not None and desired.replicas != actual.replicas:
        p.differences.append(DriftItem("replicas", str(desired.replicas), str(actual.replicas)))
        p.unsupported.append(
            f"the topic has replication factor {actual.replicas}, spec.replicas is "
            f"{desired.replicas}; changing the replication factor of an existing topic is not "
            "supported yet"
        )
    for key, value in sorted(desired.config.items()):
        if actual.config.get(key) != value:
            p.set_config[key] = value
            p.differences.append(DriftItem(f"config.{key}", value, actual.config.get(key, "")))
    for key in sorted(set(actual.config) - set(desired.config)):
        p.delete_config.append(key)
        p.differences.append(DriftItem(f"config.{key}", "", actual.config[key]))
    return p


# Ready reasons after which the spec counts as applied (a difference found then is drift).
SETTLED = (RECONCILED, DRIFTED, NOT_SUPPORTED)


def in_drift_mode(status: Mapping[str, Any] | None, generation: int | None) -> bool:
    """True when the last reconcile of this generation applied the spec (Ready, or stopped at
    drift or at what cannot be changed): any difference now is drift, not a pending change."""
    return settled(status, generation, SETTLED)
