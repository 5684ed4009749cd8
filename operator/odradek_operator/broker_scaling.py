"""`kubectl scale` of the broker StatefulSet moves partitions.

The chart's brokers take broker.id from the pod ordinal, so `spec.replicas: N` means brokers
0..N-1. The operator remembers in an annotation the brokers it last spread the partitions over;
when the replicas differ, and every broker of the new set has registered, it submits one
reassignment (KIP-455) that drains the brokers going away and gives new ones a fair share
(replica_plan). The brokers' controller carries it out; a running reassignment is waited for, never
overridden. The first time a StatefulSet is seen its brokers are taken as they are.

StatefulSets are watched (kopf.on.event) and checked by one loop every scaling interval, not by a
kopf timer: a timer puts kopf's finalizer on the StatefulSet, and a StatefulSet deleted together
with the operator (`helm uninstall` deletes both at once) would then never go away, its brokers
running on. A finalizer left by an operator version that used a timer is taken off.
"""

from __future__ import annotations

import asyncio
import contextlib
import copy
import logging
from collections.abc import Mapping
from typing import Any

import kopf
import kubernetes
from odradek.broker.client import AdminClient, TopicPartition

from . import metrics
from .clusters import BOOTSTRAP_INDEX, CLUSTER_LABEL, FINALIZER, GROUP, resolve_bootstrap
from .config import OperatorConfig
from .kafka_io import BROKER_FAILURES, admin_client, is_unreachable
from .replica_plan import plan_scaling
from .status import normal, warning

BALANCED_ANNOTATION = f"{GROUP}/balanced-brokers"
COMPONENT_LABEL = "app.kubernetes.io/component"
KIND = "Broker"

log = logging.getLogger(__name__)


def format_ids(ids: frozenset[int]) -> str:
    return ",".join(str(i) for i in sorted(ids))


def parse_ids(value: str | None) -> frozenset[int] | None:
    """The annotation's broker ids; None when absent or not a list of ids (then re-adopted)."""
    if value is None:
        return None
    try:
        return frozenset(int(v) for v in value.split(",") if v.strip())
    except ValueError:
        return None


def _patch_statefulset(namespace: str, name: str, patch: dict) -> None:
    kubernetes.client.AppsV1Api().patch_namespaced_stateful_set(name, namespace, patch)


class BrokerScalingHandlers:
    def __init__(self, cfg: OperatorConfig) -> None:
        self.cfg = cfg
        # (namespace, name) -> the StatefulSet as last seen; the loop works from these.
        self.statefulsets: dict[tuple[str, str], dict] = {}
        self._services: Any = {}
        self._loop: asyncio.Task[None] | None = None

    def register(self, registry: kopf.OperatorRegistry) -> None:
        kopf.on.event(
            "apps",
            "v1",
            "statefulsets",
            id="broker-scaling",
            registry=registry,
            labels={CLUSTER_LABEL: kopf.PRESENT, COMPONENT_LABEL: "broker"},
            when=lambda labels, **_: self.cfg.selects(labels.get(CLUSTER_LABEL)),
        )(self.on_event)
        kopf.on.cleanup(registry=registry)(self.on_cleanup)

    async def on_event(self, event: Mapping[str, Any], body: Mapping[str, Any], **kw: Any) -> None:
        meta = body["metadata"]
        key = (meta["namespace"], meta["name"])
        self._services = kw.get(BOOTSTRAP_INDEX, self._services)
        if event.get("type") == "DELETED" or meta.get("deletionTimestamp"):
            self.statefulsets.pop(key, None)
        else:
            self.statefulsets[key] = copy.deepcopy(dict(body))
        if self._loop is None or self._loop.done():
            # Started from a handler, so that kopf's event poster is there for the loop too.
            self._loop = asyncio.get_running_loop().create_task(
                self._run(), name="odradek-broker-scaling"
            )

    async def on_cleanup(self, **_: Any) -> None:
        if self._loop is not None:
            self._loop.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await self._loop

    async def _run(self) -> None:
        while True:
            for key, body in list(self.statefulsets.items()):
                try:
                    await self.check(body)
                except asyncio.CancelledError:
                    raise
                except Exception:  # one StatefulSet's trouble must not stop the others
                    log.exception("broker scaling of %s/%s failed", *key)
            await asyncio.sleep(self.cfg.scaling_interval_seconds)

    async def _patch(self, body: dict, patch: dict) -> None:
        meta = body["metadata"]
        await asyncio.to_thread(_patch_statefulset, meta["namespace"], meta["name"], patch)

    async def _record(self, body: dict, brokers: frozenset[int]) -> None:
        ids = format_ids(brokers)
        await self._patch(body, {"metadata": {"annotations": {BALANCED_ANNOTATION: ids}}})
        # Until the watch brings the patched object, the next round must not redo the moves.
        body["metadata"].setdefault("annotations", {})[BALANCED_ANNOTATION] = ids

    async def check(self, body: dict) -> None:
        """One round for one StatefulSet: adopt it, or rebalance when its replicas changed."""
        meta = body["metadata"]
        name = f"{meta['namespace']}/{meta['name']}"
        finalizers = meta.get("finalizers") or []
        if FINALIZER in finalizers:
            kept = [f for f in finalizers if f != FINALIZER]
            await self._patch(
                body, {"metadata": {"finalizers": kept, "resourceVersion": meta["resourceVersion"]}}
            )
            meta["finalizers"] = kept
        desired = frozenset(range(int(body["spec"].get("replicas", 1))))
        annotations = meta.get("annotations") or {}
        known = parse_ids(annotations.get(BALANCED_ANNOTATION))
        if known is None:
            await self._record(body, desired)
            return
        if known == desired:
            return
        bootstrap, why = resolve_bootstrap(
            body,
            self._services,
            self.cfg.allow_bootstrap_annotation,
            cluster=meta["labels"][CLUSTER_LABEL],
        )
        if bootstrap is None:
            log.warning("%s: brokers %s wanted, but %s", name, format_ids(desired), why)
            return
        try:
            async with admin_client(bootstrap, self.cfg) as admin:
                done = await self._rebalance(admin, known, desired, name)
        except BROKER_FAILURES as e:
            if is_unreachable(e):
                log.info("%s: cluster unreachable, retrying: %r", name, e)
                return
            warning(body, reason="RebalanceFailed", message=str(e))
            metrics.ACTIONS.labels(KIND, "reassign_failed").inc()
            return
        if done is not None:
            message, stranded = done
            await self._record(body, desired)
            if stranded:
                warning(body, reason="RebalanceIncomplete", message=message)
            else:
                normal(body, reason="Rebalanced", message=message)
            log.info("%s: %s", name, message)

    async def _rebalance(
        self, admin: AdminClient, known: frozenset[int], desired: frozenset[int], name: str
    ) -> tuple[str, bool] | None:
        """Submit the moves for going from `known` to `desired` brokers: what was done, and
        whether replicas had to stay on removed brokers; None when it has to wait (brokers not
        registered yet, a reassignment running)."""
        registered = {b.node_id for b in (await admin.describe_cluster()).brokers}
        missing = desired - registered
        if missing:
            log.info("%s: waiting for brokers %s to register", name, format_ids(frozenset(missing)))
            return None
        running = await admin.list_partition_reassignments()
        if running:
            log.info("%s: waiting for %d partition reassignments to finish", name, len(running))
            return None
        topics = await admin.describe_topics()
        current = {
            TopicPartition(t.name, p.partition): p.replicas
            for t in topics.values()
            for p in t.partitions
        }
        added = desired - known
        moves = await asyncio.to_thread(plan_scaling, current, desired, added)
        if moves:
            errors = await admin.alter_partition_reassignments(moves)
            for error in errors.values():
                if error is not None:
                    raise error
            metrics.ACTIONS.labels(KIND, "reassign").inc(len(moves))
        removed = known - desired
        what = []
        if added:
            what.append(f"brokers {format_ids(added)} added")
        if removed:
            what.append(f"brokers {format_ids(removed)} removed")
        message = f"{' and '.join(what)}: {len(moves)} partitions reassigned"
        stranded = [
            str(tp)
            for tp, replicas in current.items()
            if not set(moves.get(tp, replicas)) <= desired
        ]
        if stranded:  # more replicas than brokers left
            message += (
                f"; {len(stranded)} partitions keep replicas on removed brokers, their replication "
                f"factor being above the {len(desired)} brokers left: {', '.join(stranded[:10])}"
            )
        return message, bool(stranded)
