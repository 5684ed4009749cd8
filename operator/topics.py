"""kopf handlers for Topic resources (kafka.odradek.io/v1alpha1).

One reconcile function serves create, update, resume and the periodic timer; it runs under a
per-resource lock so a timer tick and a spec change never act on the brokers at the same time.
The timer is also what detects drift: when the last reconcile of the current generation left the
topic in sync, any difference it finds was made behind the operator's back, and the resource's
driftPolicy decides between reverting and reporting it.

Deletion honours deletionPolicy and never blocks forever: a missing cluster releases the
resource at once, an unreachable one after delete_timeout_seconds (with a Warning event).
"""

from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import Mapping
from datetime import UTC, datetime
from typing import Any

import kopf
from odradek.broker.client import KafkaError

from . import metrics
from .cluster_resource import until_stopped
from .clusters import resolve_bootstrap, winner_of
from .config import OperatorConfig
from .kafka_io import Unreachable, admin_client, apply_plan, delete_topic, is_unreachable
from .kafka_io import read_topic as _read_topic
from .status import Outcome, normal, ready_changed, retry_record, warning
from .topic_model import (
    CLUSTER_NOT_FOUND,
    CLUSTER_UNREACHABLE,
    DRIFTED,
    GROUP,
    KAFKA_ERROR,
    NOT_SUPPORTED,
    PENDING,
    RECONCILED,
    REPORT,
    RESOURCE_CONFLICT,
    RETAIN,
    TOPICS,
    VERSION,
    ActualTopic,
    OwnerKey,
    desired_from,
    get_condition,
    in_drift_mode,
    manages,
    now_iso,
    parse_time,
    plan,
    set_condition,
    topic_name,
)

log = logging.getLogger(__name__)
KIND = "Topic"
RESOURCE = (GROUP, VERSION, TOPICS)


class TopicHandlers:
    """The Topic controller; `register` wires its methods into a kopf registry."""

    def __init__(self, cfg: OperatorConfig) -> None:
        self.cfg = cfg
        self.state = metrics.StateTracker(KIND)

    # -- wiring ---------------------------------------------------------------------------

    def register(self, registry: kopf.OperatorRegistry) -> None:
        sel = self._selected
        kopf.index(*RESOURCE, id="topic_claims", registry=registry, when=sel)(self.topic_claims)
        kopf.on.create(*RESOURCE, id="create", registry=registry, when=sel)(self.on_create)
        kopf.on.update(*RESOURCE, id="update", registry=registry, when=sel, field="spec")(
            self.on_update
        )
        kopf.on.resume(*RESOURCE, id="resume", registry=registry, when=sel)(self.on_resume)
        kopf.on.delete(*RESOURCE, id="delete", registry=registry, when=sel)(self.on_delete)
        kopf.timer(
            *RESOURCE,
            id="resync",
            registry=registry,
            when=sel,
            interval=self.cfg.resync_seconds,
            initial_delay=self.cfg.resync_seconds,
        )(self.on_timer)

    def _selected(self, spec: Mapping[str, Any], **_: Any) -> bool:
        return self.cfg.selects(spec.get("cluster"))

    # -- indexes --------------------------------------------------------------------------

    def topic_claims(
        self,
        namespace: str,
        name: str,
        meta: Mapping[str, Any],
        spec: Mapping[str, Any],
        status: Mapping[str, Any],
        **_: Any,
    ) -> dict | None:
        """(namespace, cluster, topic) -> the resources claiming that topic."""
        cluster = spec.get("cluster")
        if not cluster:
            return None
        key = (namespace, cluster, topic_name(name, spec))
        managing = manages(status)
        owner = OwnerKey(
            meta.get("creationTimestamp", ""), not managing, meta["uid"], namespace, name
        )
        return {key: owner}

    # -- handlers -------------------------------------------------------------------------

    async def on_create(self, **kw: Any) -> None:
        await self._handle("create", **kw)

    async def on_update(self, **kw: Any) -> None:
        await self._handle("update", **kw)

    async def on_resume(self, **kw: Any) -> None:
        await self._handle("resume", **kw)

    async def _handle(self, trigger: str, *, body: Any, patch: Any, retry: int, **kw: Any) -> None:
        outcome = await self._reconcile(trigger, body=body, patch=patch, attempt=retry, **kw)
        if outcome.retriable:
            raise kopf.TemporaryError(outcome.message, delay=self.cfg.backoff(retry))

    async def on_timer(self, body: Any, patch: Any, stopped: Any, **kw: Any) -> None:
        """Resync; abandoned at once when kopf stops the timer (deletion or exit)."""
        await until_stopped(self._resync(body, patch, **kw), stopped)

    async def _resync(self, body: Any, patch: Any, **kw: Any) -> None:
        meta, status = body["metadata"], body.get("status") or {}
        if meta.get("deletionTimestamp"):
            return
        if status.get("observedGeneration") != meta.get("generation"):
            return  # a spec change is still with the create/update handlers
        pending = (status.get("retry") or {}).get("nextAttemptTime")
        due = parse_time(pending)
        if due is not None and due > datetime.now(UTC):
            return  # a back-off is running; its own retry will come
        attempt = int((status.get("retry") or {}).get("attempt", -1)) + 1
        await self._reconcile("timer", body=body, patch=patch, attempt=attempt, **kw)

    # -- reconcile ------------------------------------------------------------------------

    async def _reconcile(
        self,
        trigger: str,
        *,
        body: Any,
        patch: Any,
        attempt: int,
        memo: Any,
        topic_claims: Any,
        bootstrap_services: Any,
        **_: Any,
    ) -> Outcome:
        lock = memo.setdefault("lock", asyncio.Lock())
        started = time.monotonic()
        async with lock:
            outcome = await self._reconcile_locked(
                trigger, body, patch, attempt, topic_claims, bootstrap_services
            )
        metrics.RECONCILE_SECONDS.labels(KIND).observe(time.monotonic() - started)
        result = "ok" if outcome.ready else ("retry" if outcome.retriable else outcome.reason)
        metrics.RECONCILES.labels(KIND, trigger, result).inc()
        return outcome

    async def _reconcile_locked(
        self,
        trigger: str,
        body: Any,
        patch: Any,
        attempt: int,
        claims: Any,
        services: Any,
    ) -> Outcome:
        meta, spec = body["metadata"], body["spec"]
        status = dict(body.get("status") or {})
        generation = meta.get("generation")
        namespace, name = meta["namespace"], meta["name"]
        desired = desired_from(name, spec)
        cluster = spec["cluster"]
        new: dict[str, Any] = {"observedGeneration": generation, "topicName": desired.name}
        drifted: list[dict] | None = None  # None: not compared this time

        winner = self._winner(claims, namespace, cluster, desired.name)
        outcome: Outcome
        if winner is not None and winner.uid != meta["uid"]:
            outcome = Outcome(
                False,
                RESOURCE_CONFLICT,
                f"topic {desired.name!r} of cluster {cluster!r} is managed by Topic "
                f"{winner.namespace}/{winner.name}, which is older; this resource is ignored "
                "until that one is deleted",
            )
        else:
            bootstrap, why = self._bootstrap(body, services)
            if bootstrap is None:
                outcome = Outcome(False, CLUSTER_NOT_FOUND, why, retriable=True)
            else:
                drift_mode = trigger == "timer" and in_drift_mode(status, generation)
                try:
                    outcome, drifted = await self._converge(
                        body, desired, status, new, bootstrap, drift_mode
                    )
                except Unreachable as e:
                    outcome = Outcome(False, CLUSTER_UNREACHABLE, str(e), retriable=True)
                except KafkaError as e:
                    if e.retriable:
                        outcome = Outcome(
                            False, CLUSTER_UNREACHABLE, f"{bootstrap}: {e}", retriable=True
                        )
                    else:
                        outcome = Outcome(False, KAFKA_ERROR, str(e))
                except (TimeoutError, OSError) as e:
                    outcome = Outcome(
                        False, CLUSTER_UNREACHABLE, f"{bootstrap}: {e!r}", retriable=True
                    )

        self._write_status(body, patch, status, new, outcome, drifted, attempt)
        return outcome

    async def _converge(
        self,
        body: Any,
        desired: Any,
        status: dict[str, Any],
        new: dict[str, Any],
        bootstrap: str,
        drift_mode: bool,
    ) -> tuple[Outcome, list[dict]]:
        """Read the topic, apply what differs (or report drift), read it back."""
        async with admin_client(bootstrap, self.cfg) as admin:
            actual = await _read_topic(admin, desired.name)
            if actual is not None and not status.get("topicId") and not status.get("adopted"):
                new["adopted"] = True
                metrics.ACTIONS.labels(KIND, "adopt").inc()
                normal(
                    body,
                    reason="Adopted",
                    message=f"topic {desired.name!r} already existed; it is now managed here",
                )
            p = plan(desired, actual)
            found = [d.as_dict() for d in p.differences]
            apply = True
            if drift_mode and p.differences:
                metrics.DRIFT.labels(KIND, desired.drift_policy).inc()
                text = _drift_text(found)
                if desired.drift_policy == REPORT:
                    apply = False
                    if found != status.get("drift"):
                        warning(body, reason="DriftDetected", message=text)
                    new["lastDrift"] = _last_drift(status, found, reverted=False)
                elif p.changes:
                    normal(body, reason="DriftReverted", message=f"reverting {text}")
                    new["lastDrift"] = {
                        "detectedTime": now_iso(),
                        "reverted": True,
                        "items": found,
                    }
            if apply and p.changes:
                actions = await apply_plan(admin, desired, p)
                for action in actions:
                    metrics.ACTIONS.labels(KIND, action).inc()
                normal(body, reason=_ACTION_REASON[actions[0]], message=_describe(p, desired))
                actual = await _read_topic(admin, desired.name)
        after = plan(desired, actual)
        remaining = [d.as_dict() for d in after.differences]
        if actual is not None:
            new.update(_observed(actual))
        if not apply and after.differences:
            return Outcome(
                False, DRIFTED, _drift_text(remaining) + " (driftPolicy Report)"
            ), remaining
        if after.changes:
            return (
                Outcome(
                    False,
                    PENDING,
                    "waiting for the brokers to show the change: " + _drift_text(remaining),
                    retriable=True,
                ),
                remaining,
            )
        if after.unsupported:
            return Outcome(False, NOT_SUPPORTED, "; ".join(after.unsupported)), remaining
        assert actual is not None
        return (
            Outcome(
                True,
                RECONCILED,
                f"topic {actual.name!r}: {actual.partitions} partitions, replication factor "
                f"{actual.replicas}, {len(actual.config)} config overrides",
            ),
            remaining,
        )

    def _write_status(
        self,
        body: Any,
        patch: Any,
        status: Mapping[str, Any],
        new: dict[str, Any],
        outcome: Outcome,
        drifted: list[dict] | None,
        attempt: int,
    ) -> None:
        generation = body["metadata"].get("generation")
        old_ready = get_condition(status.get("conditions"), "Ready")
        conditions = set_condition(
            status.get("conditions"),
            "Ready",
            outcome.ready,
            outcome.reason,
            outcome.message,
            generation,
        )
        if drifted is not None:
            new["drift"] = drifted
            conditions = set_condition(
                conditions,
                "Drifted",
                bool(drifted),
                "DriftFound" if drifted else "InSync",
                _drift_text(drifted) if drifted else "the brokers match spec",
                generation,
            )
        new["conditions"] = conditions
        if outcome.retriable:
            delay = self.cfg.backoff(attempt)
            new["retry"] = retry_record(attempt, delay, outcome.message)
        else:
            new["retry"] = None
        for key, value in new.items():
            if status.get(key) != value:  # unchanged status is not rewritten every resync
                patch.status[key] = value
        if ready_changed(old_ready, outcome):
            if outcome.ready:
                normal(body, reason="Ready", message=outcome.message)
            else:
                warning(body, reason=outcome.reason, message=outcome.message)
        uid = body["metadata"]["uid"]
        self.state.update(uid, outcome.ready, outcome.reason, bool(drifted))

    # -- deletion -------------------------------------------------------------------------

    async def on_delete(
        self,
        body: Any,
        patch: Any,
        retry: int,
        topic_claims: Any,
        bootstrap_services: Any,
        **_: Any,
    ) -> None:
        meta, spec = body["metadata"], body["spec"]
        status = body.get("status") or {}
        desired = desired_from(meta["name"], spec)
        cluster = spec["cluster"]
        self.state.forget(meta["uid"])

        def done(action: str, reason: str, message: str, warn: bool = False) -> None:
            metrics.ACTIONS.labels(KIND, action).inc()
            metrics.RECONCILES.labels(KIND, "delete", "ok").inc()
            (warning if warn else normal)(body, reason=reason, message=message)

        if not status.get("topicId") and not status.get("adopted"):
            return done(
                "release",
                "Released",
                f"topic {desired.name!r} was never managed by this resource; left alone",
            )
        winner = self._winner(topic_claims, meta["namespace"], cluster, desired.name)
        if winner is not None and winner.uid != meta["uid"]:
            return done(
                "release",
                "Released",
                f"topic {desired.name!r} belongs to Topic {winner.namespace}/{winner.name}; "
                "left alone",
            )
        if desired.deletion_policy == RETAIN:
            return done("retain", "Retained", f"deletionPolicy Retain: topic {desired.name!r} kept")
        bootstrap, why = self._bootstrap(body, bootstrap_services)
        if bootstrap is None:
            return done(
                "abandon",
                "ClusterGone",
                f"topic {desired.name!r} not deleted: {why}; the resource is released",
                warn=True,
            )
        try:
            async with admin_client(bootstrap, self.cfg) as admin:
                existed = await delete_topic(admin, desired.name)
        except (TimeoutError, Unreachable, KafkaError, OSError) as e:
            if isinstance(e, KafkaError) and not is_unreachable(e):
                return done(
                    "abandon",
                    "DeleteFailed",
                    f"the brokers refused to delete topic {desired.name!r}: {e}; "
                    "the resource is released",
                    warn=True,
                )
            deleting_since = parse_time(meta.get("deletionTimestamp")) or datetime.now(UTC)
            waited = (datetime.now(UTC) - deleting_since).total_seconds()
            left = self.cfg.delete_timeout_seconds - waited
            if left <= 0:
                return done(
                    "abandon",
                    "DeletionAbandoned",
                    f"cluster unreachable for {waited:.0f}s ({e}); topic {desired.name!r} was "
                    "not deleted and the resource is released",
                    warn=True,
                )
            delay = max(0.5, min(self.cfg.backoff(retry), left))
            message = f"deleting topic {desired.name!r}: {e}; retry {retry + 1} in {delay:.0f}s"
            patch.status["conditions"] = set_condition(
                status.get("conditions"),
                "Ready",
                False,
                CLUSTER_UNREACHABLE,
                message,
                meta.get("generation"),
            )
            patch.status["retry"] = retry_record(retry, delay, str(e))
            metrics.RECONCILES.labels(KIND, "delete", "retry").inc()
            raise kopf.TemporaryError(message, delay=delay) from e
        if existed:
            done("delete", "Deleted", f"deletionPolicy Delete: topic {desired.name!r} deleted")
        else:
            done("delete", "Deleted", f"topic {desired.name!r} was already gone")

    # -- helpers --------------------------------------------------------------------------

    def _winner(self, claims: Any, namespace: str, cluster: str, topic: str) -> OwnerKey | None:
        return winner_of(claims, (namespace, cluster, topic))

    def _bootstrap(self, body: Any, services: Any) -> tuple[str | None, str]:
        return resolve_bootstrap(body, services, self.cfg.allow_bootstrap_annotation)


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
