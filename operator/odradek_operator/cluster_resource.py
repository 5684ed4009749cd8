"""The lifecycle every "one Kafka object per resource" kind shares (Topic, Quota, User).

A subclass says which Kafka object a resource claims (a quota entity, a principal), how to bring
the brokers to the spec and how to remove what it manages; this base does the rest the same way
for each kind: a per-resource lock, the oldest-claim-wins rule, cluster discovery, back-off while
brokers are unreachable (in status.retry), the Ready condition with observedGeneration, events,
metrics, a resync timer that finds drift, and a deletion that never blocks forever.
"""

from __future__ import annotations

import asyncio
import contextlib
import time
from collections.abc import Awaitable, Mapping
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any, ClassVar

import kopf
from odradek.broker.client import AdminClient

from . import metrics
from .clusters import GROUP, VERSION, OwnerKey, resolve_bootstrap, winner_of
from .config import OperatorConfig
from .kafka_io import BROKER_FAILURES, Unreachable, admin_client, is_unreachable
from .status import (
    CLUSTER_NOT_FOUND,
    CLUSTER_UNREACHABLE,
    KAFKA_ERROR,
    RECONCILED,
    RESOURCE_CONFLICT,
    Outcome,
    get_condition,
    normal,
    parse_time,
    ready_changed,
    retry_record,
    set_condition,
    settled,
    warning,
)


async def until_stopped(work: Awaitable[None], stopped: Any) -> None:
    """Run `work` but abandon it at once when kopf stops the timer (deletion, exit), so a slow
    cluster never delays a deletion."""
    task = asyncio.ensure_future(work)
    stop = asyncio.ensure_future(stopped.wait())
    try:
        await asyncio.wait({task, stop}, return_when=asyncio.FIRST_COMPLETED)
    finally:
        stop.cancel()
        if not task.done():
            task.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await task  # let it close its admin client
    if not task.cancelled():
        task.result()


@dataclass(slots=True)
class Round:
    """One reconcile of one resource, as `converge` sees it."""

    body: Any
    status: Mapping[str, Any]  # the status as it was
    new: dict[str, Any]  # status fields to write: converge adds what it observed
    drift_mode: bool  # a resync after the spec was applied: a difference is drift


class ClusterResourceHandlers:
    """Base controller; subclasses set KIND/PLURAL and implement claim, converge and remove."""

    KIND: ClassVar[str]
    PLURAL: ClassVar[str]
    # Ready reasons after which the spec counts as applied: a resync then finds drift.
    SETTLED: ClassVar[tuple[str, ...]] = (RECONCILED,)
    # How events say removal: (remove, removed, removing).
    REMOVAL: ClassVar[tuple[str, str, str]] = ("remove", "removed", "removing")

    def __init__(self, cfg: OperatorConfig) -> None:
        self.cfg = cfg
        self.state = metrics.StateTracker(self.KIND)
        self.claims_index = f"{self.PLURAL}_claims"

    # -- what subclasses provide ----------------------------------------------------------

    def claim(self, name: str, spec: Mapping[str, Any]) -> str:
        """The Kafka object this resource manages, as a stable string (for conflicts)."""
        raise NotImplementedError

    async def converge(self, admin: AdminClient, r: Round) -> Outcome:
        """Bring the brokers to the spec; put observed state into `r.new` (status fields)."""
        raise NotImplementedError

    async def remove(self, admin: AdminClient, body: Any) -> str:
        """Remove what the resource manages from the brokers; returns the event message."""
        raise NotImplementedError

    # -- what subclasses may change -------------------------------------------------------

    def managed(self, status: Mapping[str, Any]) -> bool:
        """Whether status says this resource has been managing its Kafka object."""
        return bool(status.get("managed"))

    def mark_managed(self, new: dict[str, Any]) -> None:
        """Record in status (`new`) that the resource manages its Kafka object from now on."""
        new["managed"] = True

    def status_fields(self, body: Any) -> dict[str, Any]:
        """Status fields written whatever the outcome (besides observedGeneration)."""
        return {}

    def more_conditions(
        self, conditions: list[dict], new: Mapping[str, Any], generation: int | None
    ) -> list[dict]:
        """Conditions besides Ready, from the status fields converge put into `new`."""
        return conditions

    def kept(self, body: Any) -> str | None:
        """Why deletion leaves the Kafka object on the brokers (a retain policy), or None."""
        return None

    # -- wiring ---------------------------------------------------------------------------

    def register(self, registry: kopf.OperatorRegistry) -> None:
        res = (GROUP, VERSION, self.PLURAL)
        sel = self._selected
        kopf.index(*res, id=self.claims_index, registry=registry, when=sel)(self._claims)
        kopf.on.create(*res, id="create", registry=registry, when=sel)(self.on_create)
        kopf.on.update(*res, id="update", registry=registry, when=sel, field="spec")(self.on_update)
        kopf.on.resume(*res, id="resume", registry=registry, when=sel)(self.on_resume)
        kopf.on.delete(*res, id="delete", registry=registry, when=sel)(self.on_delete)
        kopf.timer(
            *res,
            id="resync",
            registry=registry,
            when=sel,
            interval=self.cfg.resync_seconds,
            initial_delay=self.cfg.resync_seconds,
        )(self.on_timer)

    def _selected(self, spec: Mapping[str, Any], **_: Any) -> bool:
        return self.cfg.selects(spec.get("cluster"))

    def _claims(
        self,
        namespace: str,
        name: str,
        meta: Mapping[str, Any],
        spec: Mapping[str, Any],
        status: Mapping[str, Any],
        **_: Any,
    ) -> dict | None:
        """(namespace, cluster, claim) -> the resources claiming that Kafka object."""
        cluster = spec.get("cluster")
        if not cluster:
            return None
        status = status or {}
        ready = get_condition(status.get("conditions"), "Ready") or {}
        managing = self.managed(status) and ready.get("reason") != RESOURCE_CONFLICT
        owner = OwnerKey(
            meta.get("creationTimestamp", ""), not managing, meta["uid"], namespace, name
        )
        return {(namespace, cluster, self.claim(name, spec)): owner}

    def _winner(self, body: Any, index: Any) -> OwnerKey | None:
        meta, spec = body["metadata"], body["spec"]
        key = (meta["namespace"], spec["cluster"], self.claim(meta["name"], spec))
        return winner_of(index, key)

    # -- create, update, resume, timer ----------------------------------------------------

    async def on_create(self, **kw: Any) -> None:
        await self._handle("create", **kw)

    async def on_update(self, **kw: Any) -> None:
        await self._handle("update", **kw)

    async def on_resume(self, **kw: Any) -> None:
        await self._handle("resume", **kw)

    async def _handle(self, trigger: str, *, retry: int, **kw: Any) -> None:
        outcome = await self._reconcile(trigger, attempt=retry, **kw)
        if outcome.retriable:
            raise kopf.TemporaryError(outcome.message, delay=self.cfg.backoff(retry))

    async def on_timer(self, body: Any, stopped: Any, **kw: Any) -> None:
        await until_stopped(self._resync(body, **kw), stopped)

    async def _resync(self, body: Any, **kw: Any) -> None:
        meta, status = body["metadata"], body.get("status") or {}
        if meta.get("deletionTimestamp"):
            return
        if status.get("observedGeneration") != meta.get("generation"):
            return  # a spec change is still with the create/update handlers
        due = parse_time((status.get("retry") or {}).get("nextAttemptTime"))
        if due is not None and due > datetime.now(UTC):
            return  # a back-off is running; its own retry will come
        # status.retry.attempt counts the attempts made: the next one's 0-based index.
        attempt = int((status.get("retry") or {}).get("attempt", 0))
        await self._reconcile("timer", body=body, attempt=attempt, **kw)

    async def _reconcile(
        self, trigger: str, *, body: Any, patch: Any, attempt: int, memo: Any, **kw: Any
    ) -> Outcome:
        lock = memo.setdefault("lock", asyncio.Lock())
        started = time.monotonic()
        async with lock:
            outcome = await self._reconcile_locked(trigger, body, patch, attempt, kw)
        metrics.RECONCILE_SECONDS.labels(self.KIND).observe(time.monotonic() - started)
        result = "ok" if outcome.ready else ("retry" if outcome.retriable else outcome.reason)
        metrics.RECONCILES.labels(self.KIND, trigger, result).inc()
        return outcome

    async def _reconcile_locked(
        self, trigger: str, body: Any, patch: Any, attempt: int, kw: Mapping[str, Any]
    ) -> Outcome:
        meta = body["metadata"]
        status = dict(body.get("status") or {})
        generation = meta.get("generation")
        new: dict[str, Any] = {"observedGeneration": generation, **self.status_fields(body)}
        winner = self._winner(body, kw.get(self.claims_index))
        if winner is not None and winner.uid != meta["uid"]:
            outcome = Outcome(
                False,
                RESOURCE_CONFLICT,
                f"{self.claim(meta['name'], body['spec'])} of cluster "
                f"{body['spec']['cluster']!r} is managed by {self.KIND} "
                f"{winner.namespace}/{winner.name}, which is older; this resource is ignored "
                "until that one is deleted",
            )
        else:
            bootstrap, why = resolve_bootstrap(
                body, kw.get("bootstrap_services") or {}, self.cfg.allow_bootstrap_annotation
            )
            if bootstrap is None:
                outcome = Outcome(False, CLUSTER_NOT_FOUND, why, retriable=True)
            else:
                drift_mode = trigger == "timer" and settled(status, generation, self.SETTLED)
                r = Round(body, status, new, drift_mode)
                outcome = await self._converge_guarded(r, bootstrap)
        self._write_status(body, patch, status, new, outcome, attempt)
        return outcome

    async def _converge_guarded(self, r: Round, bootstrap: str) -> Outcome:
        """converge, with broker failures sorted into retry (unreachable) or NotReady."""
        try:
            async with admin_client(bootstrap, self.cfg) as admin:
                self.mark_managed(r.new)
                return await self.converge(admin, r)
        except BROKER_FAILURES as e:
            if not is_unreachable(e):
                return Outcome(False, KAFKA_ERROR, str(e))
            why = str(e) if isinstance(e, Unreachable) else f"{bootstrap}: {e!r}"
            return Outcome(False, CLUSTER_UNREACHABLE, why, retriable=True)

    def _write_status(
        self,
        body: Any,
        patch: Any,
        status: Mapping[str, Any],
        new: dict[str, Any],
        outcome: Outcome,
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
        new["conditions"] = self.more_conditions(conditions, new, generation)
        delay = self.cfg.backoff(attempt)
        new["retry"] = retry_record(attempt, delay, outcome.message) if outcome.retriable else None
        for key, value in new.items():
            if status.get(key) != value:  # unchanged status is not rewritten every resync
                patch.status[key] = value
        if ready_changed(old_ready, outcome):
            if outcome.ready:
                normal(body, reason="Ready", message=outcome.message)
            else:
                warning(body, reason=outcome.reason, message=outcome.message)
        drifted = bool(new.get("drift"))  # drift still on the brokers (reported, not reverted)
        self.state.update(body["metadata"]["uid"], outcome.ready, outcome.reason, drifted)

    # -- deletion -------------------------------------------------------------------------

    async def on_delete(self, body: Any, patch: Any, retry: int, **kw: Any) -> None:
        meta, spec = body["metadata"], body["spec"]
        status = body.get("status") or {}
        what = self.claim(meta["name"], spec)
        remove, removed, removing = self.REMOVAL
        self.state.forget(meta["uid"])

        def done(action: str, reason: str, message: str, warn: bool = False) -> None:
            metrics.ACTIONS.labels(self.KIND, action).inc()
            metrics.RECONCILES.labels(self.KIND, "delete", "ok").inc()
            (warning if warn else normal)(body, reason=reason, message=message)

        if not self.managed(status):
            return done("release", "Released", f"{what} was never managed here; left alone")
        winner = self._winner(body, kw.get(self.claims_index))
        if winner is not None and winner.uid != meta["uid"]:
            return done(
                "release",
                "Released",
                f"{what} belongs to {self.KIND} {winner.namespace}/{winner.name}; left alone",
            )
        kept = self.kept(body)
        if kept is not None:
            return done("retain", "Retained", kept)
        bootstrap, why = resolve_bootstrap(
            body, kw.get("bootstrap_services") or {}, self.cfg.allow_bootstrap_annotation
        )
        if bootstrap is None:
            return done(
                "abandon",
                "ClusterGone",
                f"{what} not {removed}: {why}; the resource is released",
                warn=True,
            )
        try:
            async with admin_client(bootstrap, self.cfg) as admin:
                message = await self.remove(admin, body)
        except BROKER_FAILURES as e:
            if not is_unreachable(e):
                return done(
                    "abandon",
                    "DeleteFailed",
                    f"the brokers refused to {remove} {what}: {e}; the resource is released",
                    warn=True,
                )
            deleting_since = parse_time(meta.get("deletionTimestamp")) or datetime.now(UTC)
            waited = (datetime.now(UTC) - deleting_since).total_seconds()
            left = self.cfg.delete_timeout_seconds - waited
            if left <= 0:
                return done(
                    "abandon",
                    "DeletionAbandoned",
                    f"cluster unreachable for {waited:.0f}s ({e}); {what} was not {removed} "
                    "and the resource is released",
                    warn=True,
                )
            delay = max(0.5, min(self.cfg.backoff(retry), left))
            message = f"{removing} {what}: {e}; retry {retry + 1} in {delay:.0f}s"
            patch.status["conditions"] = set_condition(
                status.get("conditions"),
                "Ready",
                False,
                CLUSTER_UNREACHABLE,
                message,
                meta.get("generation"),
            )
            patch.status["retry"] = retry_record(retry, delay, str(e))
            metrics.RECONCILES.labels(self.KIND, "delete", "retry").inc()
            raise kopf.TemporaryError(message, delay=delay) from e
        done("delete", "Deleted", message)

    # -- for subclasses -------------------------------------------------------------------

    def acted(self, body: Any, action: str, reason: str, message: str, drift_mode: bool) -> None:
        """Count and announce a change made on the brokers; on a resync it reverts drift."""
        metrics.ACTIONS.labels(self.KIND, action).inc()
        if drift_mode:
            metrics.DRIFT.labels(self.KIND, "Revert").inc()
            normal(
                body, reason="DriftReverted", message=f"reverting a change made outside: {message}"
            )
        else:
            normal(body, reason=reason, message=message)
