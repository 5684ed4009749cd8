"""FindCoordinator (key 10): which broker coordinates a group or a transactional id (v4+: many
keys at once).

Answered from the metadata cache: the live leader of the key's partition of __consumer_offsets
(groups) or __transaction_state (transactional ids), on the listener the client came in on. The
first lookup creates the internal topic (as Kafka's broker does); Kafka answers
COORDINATOR_NOT_AVAILABLE until the topic has leaders, we wait for them for a moment first so
the first client does not need a retry.
"""

from __future__ import annotations

import asyncio
import logging
from typing import Any

from ...coordinator.group import OFFSETS_TOPIC
from ...coordinator.transaction import TRANSACTION_STATE_TOPIC
from ...protocol.api_keys import ApiKey
from ...protocol.errors import ErrorCode, KafkaError
from ...security.acl import AclOperation as Op
from ...security.acl import AclResourceType as RT
from ...wait_time import waiting
from .. import authz
from .registry import RequestContext, handles

log = logging.getLogger(__name__)

GROUP_KEY = 0
TRANSACTION_KEY = 1
CREATE_WAIT_S = 5.0

# Per (broker object id, topic): the creation under way.
_creating: dict[tuple[int, str], asyncio.Task[None]] = {}


def _internal_topic(ctx: RequestContext, key_type: int) -> tuple[str, int, int, dict[str, str]]:
    """(name, partitions, replication factor, configs) of the key type's internal topic."""
    broker = ctx.broker
    if key_type == TRANSACTION_KEY:
        t = broker.txn_coordinator.config
        return TRANSACTION_STATE_TOPIC, t.num_partitions, t.replication_factor, t.topic_configs()
    g = broker.group_coordinator.config
    return (
        OFFSETS_TOPIC,
        g.offsets_topic_num_partitions,
        g.offsets_topic_replication_factor,
        g.offsets_topic_configs(),
    )


async def _create_topic(ctx: RequestContext, key_type: int) -> None:
    broker = ctx.broker
    name, partitions, replication, configs = _internal_topic(ctx, key_type)
    live = len(broker.metadata_cache.alive_brokers())
    # Like Kafka's auto-creation of internal topics: no more replicas than live brokers.
    rf = min(replication, live) if live else 1
    try:
        await broker.topic_admin.create_topic(name, partitions, rf, configs=configs)
        log.info("created %s with replication factor %d", name, rf)
    except KafkaError as e:
        if e.code != ErrorCode.TOPIC_ALREADY_EXISTS:
            log.warning("creating %s failed: %s", name, e)


async def _ensure_internal_topic(ctx: RequestContext, key_type: int) -> None:
    cache = ctx.broker.metadata_cache
    name = _internal_topic(ctx, key_type)[0]
    if cache.contains(name) or ctx.broker.topic_admin is None:
        return  # (no topic admin: the broker is still starting; the client will retry)
    key = (id(ctx.broker), name)
    task = _creating.get(key)
    if task is None or task.done():
        task = asyncio.get_running_loop().create_task(_create_topic(ctx, key_type))
        _creating[key] = task
        task.add_done_callback(
            lambda t: _creating.pop(key, None) if _creating.get(key) is t else None
        )
    with waiting():  # another request may be creating the topic
        await asyncio.shield(task)
        await cache.wait_for(lambda: cache.has_leaders(name), CREATE_WAIT_S)


def _lookup(ctx: RequestContext, key: str, key_type: int) -> dict[str, Any]:
    broker = ctx.broker
    none = {"node_id": -1, "host": "", "port": -1}
    if key_type == GROUP_KEY:
        topic, partition = OFFSETS_TOPIC, broker.group_coordinator.partition_for(key)
    elif key_type == TRANSACTION_KEY:
        topic, partition = TRANSACTION_STATE_TOPIC, broker.txn_coordinator.partition_for(key)
    else:
        return {
            **none,
            "error_code": ErrorCode.INVALID_REQUEST,
            "error_message": f"Unknown coordinator type: {key_type}",
        }
    if broker.zk_fenced:
        # Cut off from ZooKeeper, this broker's view of who leads may be stale (broker.py).
        return {**none, "error_code": ErrorCode.COORDINATOR_NOT_AVAILABLE}
    cache = broker.metadata_cache
    leader = cache.leader_of(topic, partition)
    if leader is None:
        return {**none, "error_code": ErrorCode.COORDINATOR_NOT_AVAILABLE}
    endpoint = cache.endpoint(leader, ctx.conn.listener.name)
    if endpoint is None:
        return {**none, "error_code": ErrorCode.COORDINATOR_NOT_AVAILABLE}
    return {
        "error_code": ErrorCode.NONE,
        "node_id": leader,
        "host": endpoint.host,
        "port": endpoint.port,
    }


def _denied(ctx: RequestContext, key: str, key_type: int) -> ErrorCode | None:
    """Finding a coordinator needs DESCRIBE on the group or transactional id."""
    if key_type == GROUP_KEY and not authz.authorized(ctx, Op.DESCRIBE, RT.GROUP, key):
        return ErrorCode.GROUP_AUTHORIZATION_FAILED
    if key_type == TRANSACTION_KEY and not authz.authorized(
        ctx, Op.DESCRIBE, RT.TRANSACTIONAL_ID, key
    ):
        return ErrorCode.TRANSACTIONAL_ID_AUTHORIZATION_FAILED
    return None


@handles(ApiKey.FIND_COORDINATOR, "0-6")
async def handle_find_coordinator(ctx: RequestContext, req: dict[str, Any]) -> dict[str, Any]:
    v = ctx.version
    key_type = req.get("key_type", GROUP_KEY) if v >= 1 else GROUP_KEY
    keys = req["coordinator_keys"] if v >= 4 else [req["key"]]
    denied = {k: e for k in keys if (e := _denied(ctx, k, key_type)) is not None}
    if key_type in (GROUP_KEY, TRANSACTION_KEY) and len(denied) < len(keys):
        await _ensure_internal_topic(ctx, key_type)
    none = {"node_id": -1, "host": "", "port": -1}
    results = [
        {"key": k, **none, "error_code": denied[k]}
        if k in denied
        else {"key": k, **_lookup(ctx, k, key_type)}
        for k in keys
    ]
    if v >= 4:
        return {"throttle_time_ms": 0, "coordinators": results}
    result = results[0]
    return {
        "throttle_time_ms": 0,
        "error_code": result["error_code"],
        "error_message": result.get("error_message"),
        "node_id": result["node_id"],
        "host": result["host"],
        "port": result["port"],
    }
