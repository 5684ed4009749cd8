"""`kubectl scale` of the broker StatefulSet moves partitions.

The chart's brokers take broker.id from the pod ordinal, so `spec.replicas: N` means brokers
0..N-1. The operator remembers in an annotation the brokers it last spread the partitions over;
when the replicas differ, and every broker of the new set has registered, it submits one
reassignment (KIP-455) that drains the brokers going away and gives new ones a fair share
(replica_plan). The brokers' controller carries it out; a running reassignment is waited for, never
overridden. The first time a StatefulSet is seen its brokers are taken as they are.
"""

from __future__ import annotations

import asyncio
from collections.abc import Mapping
from typing import Any

import kopf
from odradek.broker.client import AdminClient, TopicPartition

from . import metrics
from .clusters import CLUSTER_LABEL, GROUP, resolve_bootstrap
from .config import OperatorConfig
from .kafka_io import BROKER_FAILURES, admin_client, is_unreachable
from .replica_plan import plan_scaling
from .status import normal, warning

BALANCED_ANNOTATION = f"{GROUP}/balanced-brokers"
COMPONENT_LABEL = "app.kubernetes.io/component"
KIND = "Broker"


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


class BrokerScalingHandlers:
    def __init__(self, cfg: OperatorConfig) -> None:
        self.cfg = cfg

    def register(self, registry: kopf.OperatorRegistry) -> None:
        kopf.timer(
            "apps",
            "v1",
            "statefulsets",
            id="broker-scaling",
            registry=registry,
            labels={CLUSTER_LABEL: kopf.PRESENT, COMPONENT_LABEL: "broker"},
            when=lambda labels, **_: self.cfg.selects(labels.get(CLUSTER_LABEL)),
            interval=self.cfg.scaling_interval_seconds,
        )(self.on_timer)

    async def on_timer(
        self,
        body: Mapping[str, Any],
        spec: Mapping[str, Any],
        labels: Mapping[str, str],
        annotations: Mapping[str, str],
        patch: kopf.Patch,
        logger: Any,
        **kw: Any,
    ) -> None:
        desired = frozenset(range(int(spec.get("replicas", 1))))
        known = parse_ids(annotations.get(BALANCED_ANNOTATION))
        if known is None:
            patch.metadata.annotations[BALANCED_ANNOTATION] = format_ids(desired)
            return
        if known == desired:
            return
        bootstrap, why = resolve_bootstrap(
            body,
            kw.get("bootstrap_services") or {},
            self.cfg.allow_bootstrap_annotation,
            cluster=labels[CLUSTER_LABEL],
        )
        if bootstrap is None:
            logger.warning(f"brokers {format_ids(desired)} wanted, but {why}")
            return
        try:
            async with admin_client(bootstrap, self.cfg) as admin:
                done = await self._rebalance(admin, known, desired, logger)
        except BROKER_FAILURES as e:
            if is_unreachable(e):
                logger.info(f"cluster unreachable, retrying: {e!r}")
                return
            warning(body, reason="RebalanceFailed", message=str(e))
            metrics.ACTIONS.labels(KIND, "reassign_failed").inc()
            return
        if done is not None:
            message, stranded = done
            patch.metadata.annotations[BALANCED_ANNOTATION] = format_ids(desired)
            if stranded:
                warning(body, reason="RebalanceIncomplete", message=message)
            else:
                normal(body, reason="Rebalanced", message=message)
            logger.info(message)

    async def _rebalance(
        self, admin: AdminClient, known: frozenset[int], desired: frozenset[int], logger: Any
    ) -> tuple[str, bool] | None:
        """Submit the moves for going from `known` to `desired` brokers: what was done, and
        whether replicas had to stay on removed brokers; None when it has to wait (brokers not
        registered yet, a reassignment running)."""
        registered = {b.node_id for b in (await admin.describe_cluster()).brokers}
        missing = desired - registered
        if missing:
            logger.info(f"waiting for brokers {format_ids(frozenset(missing))} to register")
            return None
        running = await admin.list_partition_reassignments()
        if running:
            logger.info(f"waiting for {len(running)} partition reassignments to finish")
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
