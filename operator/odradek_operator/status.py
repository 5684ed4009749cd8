"""Status conventions shared by every kind: conditions, back-off records, events, timestamps.

Kept apart from any one kind so Topic, Quota and User report the same way (Ready with a reason,
observedGeneration on each condition, status.retry while brokers are unreachable).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from typing import Any

import kopf

# Ready condition reasons used by more than one kind.
RECONCILED = "Reconciled"
CLUSTER_NOT_FOUND = "ClusterNotFound"
CLUSTER_UNREACHABLE = "ClusterUnreachable"
KAFKA_ERROR = "KafkaError"
RESOURCE_CONFLICT = "ResourceConflict"
PENDING = "Pending"


@dataclass(slots=True)
class Outcome:
    """The result of one reconcile, as the Ready condition will say it."""

    ready: bool
    reason: str
    message: str
    retriable: bool = False  # temporary: retry with back-off


def now_iso() -> str:
    return datetime.now(UTC).strftime("%Y-%m-%dT%H:%M:%SZ")


def iso_in(seconds: float) -> str:
    return (datetime.now(UTC) + timedelta(seconds=seconds)).strftime("%Y-%m-%dT%H:%M:%SZ")


def parse_time(value: str | None) -> datetime | None:
    if not value:
        return None
    try:
        return datetime.fromisoformat(value.replace("Z", "+00:00"))
    except ValueError:
        return None


def get_condition(conditions: Sequence[Mapping[str, Any]] | None, type_: str) -> dict | None:
    for c in conditions or ():
        if c.get("type") == type_:
            return dict(c)
    return None


def set_condition(
    conditions: Sequence[Mapping[str, Any]] | None,
    type_: str,
    status: bool,
    reason: str,
    message: str,
    generation: int | None,
    now: str | None = None,
) -> list[dict]:
    """Conditions with `type_` set; lastTransitionTime changes only when status changes."""
    text = "True" if status else "False"
    old = get_condition(conditions, type_)
    transition = (
        old["lastTransitionTime"]
        if old and old.get("status") == text and old.get("lastTransitionTime")
        else (now or now_iso())
    )
    new = {
        "type": type_,
        "status": text,
        "reason": reason,
        "message": message,
        "lastTransitionTime": transition,
    }
    if generation is not None:
        new["observedGeneration"] = int(generation)
    out = [dict(c) for c in conditions or () if c.get("type") != type_]
    out.append(new)
    order = {"Ready": 0, "Drifted": 1}
    return sorted(out, key=lambda c: order.get(c.get("type", ""), 9))


def retry_record(attempt: int, delay: float, error: str) -> dict[str, Any]:
    """status.retry while a back-off runs: how many attempts, when the next, and why."""
    return {"attempt": attempt + 1, "nextAttemptTime": iso_in(delay), "lastError": error}


def ready_changed(old: Mapping[str, Any] | None, outcome: Outcome) -> bool:
    """Whether the Ready condition transitions (status or reason): worth an event."""
    return (
        old is None
        or old.get("status") != ("True" if outcome.ready else "False")
        or old.get("reason") != outcome.reason
    )


def settled(
    status: Mapping[str, Any] | None, generation: int | None, reasons: Sequence[str]
) -> bool:
    """True when the last reconcile of this generation applied the spec (its Ready reason is one
    of `reasons`): any difference a resync finds now is drift, not a pending change."""
    status = status or {}
    if generation is None or status.get("observedGeneration") != generation:
        return False
    ready = get_condition(status.get("conditions"), "Ready")
    return bool(ready) and ready.get("reason") in reasons


def normal(body: Any, *, reason: str, message: str) -> None:
    """A Normal event on the resource (posted whatever kopf's own log-to-event level is)."""
    kopf.event(body, type="Normal", reason=reason, message=message[:1000])


def warning(body: Any, *, reason: str, message: str) -> None:
    kopf.event(body, type="Warning", reason=reason, message=message[:1000])
