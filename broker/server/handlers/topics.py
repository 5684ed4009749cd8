"""CreateTopics (19), DeleteTopics (20) and CreatePartitions (37).

The admin layer writes the znodes; the controller then creates the partitions. Like Kafka's
topic purgatories, a request waits (up to its timeout) until the change is visible in this
broker's metadata, so a client can use a topic as soon as creation succeeded.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Callable
from typing import Any

from ...cluster.metadata_cache import MetadataCache
from ...protocol.api_keys import ApiKey
from ...protocol.errors import ErrorCode, KafkaError
from ...security.acl import AclOperation as Op
from ...security.acl import AclResourceType as RT
from .. import authz
from ..throttling import MutationQuota
from .registry import RequestContext, handles


def _duplicates(names: list[str]) -> set[str]:
    return {n for n, c in Counter(names).items() if c > 1}


def _mutation_quota(ctx: RequestContext) -> MutationQuota:
    security = ctx.broker.security
    return MutationQuota(
        security.quotas if security is not None else None,
        ctx.conn.principal,
        ctx.header.client_id or "",
        ctx.header.api_key,
        ctx.version,
    )


def _not_controller(ctx: RequestContext) -> bool:
    """Topic changes go to the active controller (clients route them there via Metadata)."""
    controller = ctx.broker.controller
    return controller is None or not controller.active


def _refused_up_front(
    ctx: RequestContext, result: dict[str, Any], duplicate: bool, twice: str
) -> bool:
    """Whether a topic of a create request is refused before any work: NOT_CONTROLLER off the
    active controller, else INVALID_REQUEST (with message `twice`) if the request names it twice.
    """
    if _not_controller(ctx):
        result["error_code"] = ErrorCode.NOT_CONTROLLER
        return True
    if duplicate:
        result["error_code"] = ErrorCode.INVALID_REQUEST
        result["error_message"] = twice
        return True
    return False


async def _wait_or_time_out(
    cache: MetadataCache,
    timeout_ms: int,
    waiting: list[tuple[str, dict[str, Any]]],
    done: Callable[[str], bool],
) -> None:
    """Wait (up to the request's timeout) until `done(topic)` holds for every changed topic,
    as the metadata cache sees it; the results of the others say REQUEST_TIMED_OUT."""
    timeout = max(timeout_ms, 0) / 1000
    if not waiting or timeout <= 0:
        return
    if await cache.wait_for(lambda: all(done(name) for name, _ in waiting), timeout):
        return
    for name, result in waiting:
        if not done(name):
            result["error_code"] = ErrorCode.REQUEST_TIMED_OUT


@handles(ApiKey.CREATE_TOPICS, "0-7")
async def handle_create_topics(ctx: RequestContext, req: dict[str, Any]) -> dict[str, Any]:
    broker = ctx.broker
    admin = broker.topic_admin
    cache = broker.metadata_cache
    validate_only = req.get("validate_only", False)
    names = [t["name"] for t in req["topics"]]
    duplicates = _duplicates(names)
    # CREATE on the cluster covers every topic; else CREATE on each topic.
    if authz.cluster(ctx, Op.CREATE):
        creatable = set(names)
    else:
        creatable = authz.authorized_names(ctx, Op.CREATE, RT.TOPIC, names)
    show_configs = authz.authorized_names(ctx, Op.DESCRIBE_CONFIGS, RT.TOPIC, names)
    results = []
    created = []
    quota = _mutation_quota(ctx)
    for t in req["topics"]:
        name = t["name"]
        result: dict[str, Any] = {"name": name, "error_code": ErrorCode.NONE}
        results.append(result)
        twice = f"Create topics request from client contains {name} twice"
        if _refused_up_front(ctx, result, name in duplicates, twice):
            continue
        if name not in creatable:
            result["error_code"] = ErrorCode.TOPIC_AUTHORIZATION_FAILED
            result["error_message"] = "Authorization failed."
            continue
        assignments = {a["partition_index"]: a["broker_ids"] for a in t["assignments"]} or None
        configs = {c["name"]: c["value"] for c in t["configs"]}
        try:
            topic = await admin.create_topic(
                name, t["num_partitions"], t["replication_factor"], assignments, configs,
                validate_only, quota,
            )  # fmt: skip
        except KafkaError as e:
            result["error_code"] = e.code
            result["error_message"] = e.message
            continue
        result.update(
            topic_id=topic.topic_id,
            num_partitions=topic.num_partitions,
            replication_factor=topic.replication_factor,
            configs=[
                {"name": c.name, "value": c.value, "read_only": c.read_only,
                 "config_source": int(c.source), "is_sensitive": c.is_sensitive}
                for c in topic.configs
            ],
        )  # fmt: skip
        if name not in show_configs:
            # Created, but the client may not see the configs.
            result["configs"] = []
            result["topic_config_error_code"] = ErrorCode.TOPIC_AUTHORIZATION_FAILED
        if not validate_only:
            created.append((name, result))
    await _wait_or_time_out(cache, req.get("timeout_ms", 0), created, cache.has_leaders)
    return {"throttle_time_ms": quota.throttle_ms, "topics": results}


@handles(ApiKey.DELETE_TOPICS, "0-6")
async def handle_delete_topics(ctx: RequestContext, req: dict[str, Any]) -> dict[str, Any]:
    broker = ctx.broker
    cache = broker.metadata_cache
    if ctx.version >= 6:
        wanted = [(t["name"], t["topic_id"]) for t in req["topics"]]
    else:
        wanted = [(n, None) for n in req["topic_names"]]
    results = []
    pending = []
    quota = _mutation_quota(ctx)
    for name, topic_id in wanted:
        result: dict[str, Any] = {"name": name, "error_code": ErrorCode.NONE}
        by_id = False
        if topic_id is not None:
            result["topic_id"] = topic_id
            if topic_id.int != 0:
                by_id = True
                name = cache.topic_name(topic_id)
                result["name"] = name
                if name is None:
                    result["error_code"] = ErrorCode.UNKNOWN_TOPIC_ID
                    results.append(result)
                    continue
        results.append(result)
        if _not_controller(ctx):
            result["error_code"] = ErrorCode.NOT_CONTROLLER
            continue
        if by_id and not authz.authorized(ctx, Op.DESCRIBE, RT.TOPIC, name):
            # The id is not secret, the name behind it is.
            result["name"] = None
            result["error_code"] = ErrorCode.TOPIC_AUTHORIZATION_FAILED
            continue
        if not authz.authorized(ctx, Op.DELETE, RT.TOPIC, name):
            result["error_code"] = ErrorCode.TOPIC_AUTHORIZATION_FAILED
            continue
        try:
            await broker.topic_admin.delete_topic(name, quota)
        except KafkaError as e:
            code = e.code
            if code == ErrorCode.TOPIC_DELETION_DISABLED and ctx.version < 3:
                code = ErrorCode.INVALID_REQUEST
            result["error_code"] = code
            result["error_message"] = e.message
            continue
        pending.append((name, result))
    await _wait_or_time_out(cache, req["timeout_ms"], pending, lambda n: not cache.contains(n))
    return {"throttle_time_ms": quota.throttle_ms, "responses": results}


@handles(ApiKey.CREATE_PARTITIONS, "0-3")
async def handle_create_partitions(ctx: RequestContext, req: dict[str, Any]) -> dict[str, Any]:
    broker = ctx.broker
    cache = broker.metadata_cache
    duplicates = _duplicates([t["name"] for t in req["topics"]])
    results = []
    grown = []
    quota = _mutation_quota(ctx)
    for t in req["topics"]:
        name = t["name"]
        result: dict[str, Any] = {"name": name, "error_code": ErrorCode.NONE, "error_message": None}
        results.append(result)
        if _refused_up_front(ctx, result, name in duplicates, "Duplicate topic in request."):
            continue
        if not authz.authorized(ctx, Op.ALTER, RT.TOPIC, name):
            result["error_code"] = ErrorCode.TOPIC_AUTHORIZATION_FAILED
            result["error_message"] = "The topic authorization is failed."
            continue
        assignments = None
        if t["assignments"] is not None:
            assignments = [a["broker_ids"] for a in t["assignments"]]
        try:
            await broker.topic_admin.create_partitions(
                name, t["count"], assignments, req["validate_only"], quota
            )
        except KafkaError as e:
            result["error_code"] = e.code
            result["error_message"] = e.message
            continue
        if not req["validate_only"]:
            grown.append((name, t["count"], result))
    timeout = max(req["timeout_ms"], 0) / 1000
    if grown and timeout > 0:

        def done() -> bool:
            return all(
                (cache.partition_count(n) or 0) >= c and cache.has_leaders(n) for n, c, _ in grown
            )

        complete = await cache.wait_for(done, timeout)
        if not complete:
            for name, count, result in grown:
                if (cache.partition_count(name) or 0) < count:
                    result["error_code"] = ErrorCode.REQUEST_TIMED_OUT
    return {"throttle_time_ms": quota.throttle_ms, "results": results}
