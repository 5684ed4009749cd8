"""The operator's only path to the brokers: Odradek's AdminClient, wrapped for Topic work.

Errors are sorted into two kinds the handlers act on: `Unreachable` (connection failures and
retriable Kafka errors: retry with back-off) and `KafkaError` that is not retriable (the spec is
refused: report it, do not hammer the cluster).
"""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager

from odradek.broker.client import (
    AdminClient,
    AlterConfigOp,
    ConfigResource,
    ConfigSource,
    ErrorCode,
    KafkaError,
)

from .config import OperatorConfig
from .topic_model import ActualTopic, DesiredTopic, Plan

ZERO_ID = "00000000-0000-0000-0000-000000000000"


class Unreachable(Exception):
    """The cluster could not be asked (down, partitioned, or answering with retriable errors)."""


# What a reconcile catches from the brokers (TimeoutError is an OSError); is_unreachable sorts it.
BROKER_FAILURES = (Unreachable, KafkaError, OSError)


def is_unreachable(exc: BaseException) -> bool:
    """Retry later (True) or report the refusal (False, a non-retriable Kafka error)."""
    if isinstance(exc, KafkaError):
        return exc.retriable
    return isinstance(exc, (Unreachable, OSError))


@asynccontextmanager
async def admin_client(bootstrap: str, cfg: OperatorConfig) -> AsyncIterator[AdminClient]:
    """An AdminClient bounded by the Kafka timeout for every operation, logged in as the
    client config says; failures to connect become `Unreachable`."""
    timeout = cfg.kafka_timeout_seconds
    admin = AdminClient(
        bootstrap,
        client_id="odradek-operator",
        request_timeout=timeout,
        operation_timeout=timeout,
        retry_timeout=timeout,
        security=cfg.client_security(),
    )
    try:
        try:
            await asyncio.wait_for(admin.start(), timeout * 2)
        except BROKER_FAILURES as e:
            if not is_unreachable(e):
                raise
            raise Unreachable(f"cannot reach {bootstrap}: {e}") from e
        yield admin
    finally:
        await admin.close()


async def read_topic(admin: AdminClient, name: str) -> ActualTopic | None:
    """The topic as the brokers have it, or None when it does not exist."""
    try:
        desc = await admin.describe_topic(name)
    except KafkaError as e:
        if e.code == ErrorCode.UNKNOWN_TOPIC_OR_PARTITION:
            return None
        raise
    entries = await admin.describe_topic_configs(name)
    overrides = {
        k: e.value
        for k, e in entries.items()
        if e.source == ConfigSource.DYNAMIC_TOPIC_CONFIG and e.value is not None
    }
    topic_id = str(desc.topic_id)
    return ActualTopic(
        name=name,
        topic_id=None if topic_id == ZERO_ID else topic_id,
        partitions=len(desc.partitions),
        replicas=desc.replication_factor,
        config=overrides,
    )


async def apply_plan(admin: AdminClient, desired: DesiredTopic, plan: Plan) -> list[str]:
    """Carry out `plan`; returns the actions taken (for events and metrics)."""
    done: list[str] = []
    if plan.create:
        await admin.create_topic(
            desired.name,
            desired.partitions,
            -1 if desired.replicas is None else desired.replicas,
            desired.config,
        )
        return ["create"]
    if plan.add_partitions:
        await admin.create_partitions({desired.name: plan.add_partitions})
        done.append("add_partitions")
    ops = [AlterConfigOp.set(k, v) for k, v in plan.set_config.items()]
    ops += [AlterConfigOp.delete(k) for k in plan.delete_config]
    if ops:
        await admin.incremental_alter_configs({ConfigResource.topic(desired.name): ops})
        done.append("alter_config")
    return done


async def delete_topic(admin: AdminClient, name: str) -> bool:
    """Delete the topic; False when it was already gone."""
    try:
        await admin.delete_topics([name])
    except KafkaError as e:
        if e.code == ErrorCode.UNKNOWN_TOPIC_OR_PARTITION:
            return False
        raise
    return True
