"""Prometheus metrics of the operator, served on --metrics-port at /metrics.

Counters say what the operator did (actions, reconciles by outcome, drift found); gauges say how
many resources are not Ready or drifted right now, so an alert needs no log parsing.
"""

from __future__ import annotations

from prometheus_client import Counter, Gauge, Histogram, start_http_server

RECONCILES = Counter(
    "odradek_operator_reconciles_total",
    "Reconcile runs by resource kind, trigger (create, update, resume, timer, delete) and result.",
    ["kind", "trigger", "result"],
)
ACTIONS = Counter(
    "odradek_operator_actions_total",
    "Changes made on the brokers or decisions taken (create, adopt, add_partitions, "
    "alter_config, delete, retain, abandon).",
    ["kind", "action"],
)
DRIFT = Counter(
    "odradek_operator_drift_detected_total",
    "Times a difference between a resource's spec and the brokers was found, by policy.",
    ["kind", "policy"],
)
RECONCILE_SECONDS = Histogram(
    "odradek_operator_reconcile_seconds",
    "Duration of one reconcile, including the admin calls.",
    ["kind"],
)
NOT_READY = Gauge(
    "odradek_operator_resources_not_ready",
    "Resources whose Ready condition is False, by kind and reason.",
    ["kind", "reason"],
)
DRIFTED = Gauge(
    "odradek_operator_resources_drifted",
    "Resources with drift still present on the brokers (Report policy or failing revert).",
    ["kind"],
)


class StateTracker:
    """Per-resource Ready reason and drift, folded into the gauges above."""

    def __init__(self, kind: str) -> None:
        self.kind = kind
        self._reasons: dict[str, str | None] = {}
        self._drifted: set[str] = set()
        self._seen_reasons: set[str] = set()

    def update(self, uid: str, ready: bool, reason: str, drifted: bool) -> None:
        self._reasons[uid] = None if ready else reason
        if drifted:
            self._drifted.add(uid)
        else:
            self._drifted.discard(uid)
        self._publish()

    def forget(self, uid: str) -> None:
        self._reasons.pop(uid, None)
        self._drifted.discard(uid)
        self._publish()

    def _publish(self) -> None:
        counts: dict[str, int] = {}
        for reason in self._reasons.values():
            if reason is not None:
                counts[reason] = counts.get(reason, 0) + 1
        self._seen_reasons.update(counts)
        for reason in self._seen_reasons:  # reasons that dropped to zero read 0, not stale
            NOT_READY.labels(self.kind, reason).set(counts.get(reason, 0))
        DRIFTED.labels(self.kind).set(len(self._drifted))


def serve(port: int, address: str) -> None:
    if port:
        start_http_server(port, addr=address)
