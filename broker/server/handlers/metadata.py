"""Metadata (key 3): brokers, controller and partition leadership, with auto-creation."""

from __future__ import annotations

import logging
from typing import Any

from ...cluster.metadata_cache import MetadataCache, TopicMetadata
from ...protocol.api_keys import ApiKey
from ...protocol.codec import FrozenArray
from ...protocol.errors import ErrorCode, KafkaError
from ...security.acl import AclOperation as Op
from ...security.acl import AclResourceType as RT
from .. import authz
from ..network import CloseConnection
from .registry import RequestContext, handles

log = logging.getLogger(__name__)

# "Authorized operations were not requested" (Kafka's Integer.MIN_VALUE sentinel).
NOT_REQUESTED = -(2**31)
AUTO_CREATE_WAIT_S = 5.0


@handles(ApiKey.METADATA, "0-12")
async def handle_metadata(ctx: RequestContext, req: dict[str, Any]) -> dict[str, Any]:
    broker = ctx.broker
    cache = broker.metadata_cache
    v = ctx.version
    requested = req["topics"]
    if requested is None or (v == 0 and not requested):
        # Listing all topics leaves out the ones the client may not describe.
        names = list(cache.topic_names())
        allowed = authz.authorized_names(ctx, Op.DESCRIBE, RT.TOPIC, names)
        wanted: list[tuple[str | None, Any]] = [(n, None) for n in names if n in allowed]
    else:
        wanted = []
        for t in requested:
            name = t.get("name")
            if name is None and v < 12:
                # Topic ids replace names from v12 only (Kafka refuses the request as invalid).
                raise CloseConnection(f"Metadata v{v} with a null topic name")
            if name is None and t.get("topic_id") is not None:
                name = cache.topic_name(t["topic_id"])
                wanted.append((name, t["topic_id"]))
            else:
                wanted.append((name, None))

    allow_auto = req.get("allow_auto_topic_creation", True) if v >= 4 else True
    describable = authz.authorized_names(ctx, Op.DESCRIBE, RT.TOPIC, (n for n, _ in wanted))
    with_ops = v >= 8 and bool(req.get("include_topic_authorized_operations"))
    topics = []
    for name, topic_id in wanted:
        if name is None:
            topics.append(
                {
                    "error_code": ErrorCode.UNKNOWN_TOPIC_ID,
                    "name": None,
                    "topic_id": topic_id,
                    "partitions": [],
                }
            )
            continue
        if name not in describable:
            # A named topic is refused without saying whether it exists; a topic id is not
            # secret, the name behind it is.
            denied: dict[str, Any] = {
                "error_code": ErrorCode.TOPIC_AUTHORIZATION_FAILED,
                "name": name,
                "partitions": [],
            }
            if topic_id is not None:
                denied.update(name=None, topic_id=topic_id)
            topics.append(denied)
            continue
        if not cache.contains(name) and requested and allow_auto and topic_id is None:
            if broker.config.get("auto.create.topics.enable") and not _may_create(ctx, name):
                topics.append(
                    {
                        "error_code": ErrorCode.TOPIC_AUTHORIZATION_FAILED,
                        "name": name,
                        "partitions": [],
                    }
                )
                continue
            error = await _auto_create(ctx, name)
            if error is not None:
                topic = {"error_code": error, "name": name, "partitions": []}
            else:
                topic = _describe_topic(ctx, name)
        else:
            topic = _describe_topic(ctx, name)
        if with_ops:
            topic["topic_authorized_operations"] = authz.authorized_operations(ctx, RT.TOPIC, name)
        topics.append(topic)

    cluster_ops = NOT_REQUESTED
    if 8 <= v <= 10 and req.get("include_cluster_authorized_operations"):
        cluster_ops = authz.cluster_authorized_operations(ctx)
    listener = ctx.conn.listener.name
    brokers = []
    for reg in cache.alive_brokers():
        ep = reg.endpoint(listener)
        if ep is not None:
            brokers.append({"node_id": reg.id, "host": ep.host, "port": ep.port, "rack": reg.rack})
    return {
        "throttle_time_ms": 0,
        "brokers": brokers,
        "cluster_id": broker.cluster_id,
        "controller_id": cache.controller_id if cache.controller_id is not None else -1,
        "topics": topics,
        "cluster_authorized_operations": cluster_ops,
    }


def _may_create(ctx: RequestContext, name: str) -> bool:
    """Auto-creation needs CREATE on the cluster or on the topic."""
    return authz.cluster(ctx, Op.CREATE) or authz.authorized(ctx, Op.CREATE, RT.TOPIC, name)


def _describe_topic(ctx: RequestContext, name: str) -> dict[str, Any]:
    cache = ctx.broker.metadata_cache
    topic = cache.get_topic(name)
    if topic is None:
        return {"error_code": ErrorCode.UNKNOWN_TOPIC_OR_PARTITION, "name": name, "partitions": []}
    result: dict[str, Any] = {
        "error_code": ErrorCode.NONE,
        "name": name,
        "is_internal": topic.is_internal,
        # Shared by every response until the cache changes, and encoded once per version.
        "partitions": cache.derived(
            ("metadata-partitions", name), lambda: FrozenArray(_partitions(cache, topic))
        ),
        "topic_authorized_operations": NOT_REQUESTED,
    }
    if topic.topic_id is not None:
        result["topic_id"] = topic.topic_id
    return result


def _partitions(cache: MetadataCache, topic: TopicMetadata) -> list[dict[str, Any]]:
    """The topic's partitions as Metadata lists them."""
    partitions = []
    for index in sorted(topic.partitions):
        p = topic.partitions[index]
        leader_alive = p.leader >= 0 and cache.is_alive(p.leader)
        partitions.append(
            {
                "error_code": ErrorCode.NONE if leader_alive else ErrorCode.LEADER_NOT_AVAILABLE,
                "partition_index": index,
                "leader_id": p.leader if leader_alive else -1,
                "leader_epoch": p.leader_epoch,
                "replica_nodes": list(p.replicas),
                "isr_nodes": list(p.isr),
                "offline_replicas": list(p.offline_replicas),
            }
        )
    return partitions


async def _auto_create(ctx: RequestContext, name: str) -> ErrorCode | None:
    """Create `name` when auto.create.topics.enable; None once it has leaders."""
    broker = ctx.broker
    if not broker.config.get("auto.create.topics.enable"):
        return ErrorCode.UNKNOWN_TOPIC_OR_PARTITION
    try:
        await broker.topic_admin.create_topic(name)
    except KafkaError as e:
        if e.code == ErrorCode.INVALID_TOPIC_EXCEPTION:
            return e.code
        if e.code != ErrorCode.TOPIC_ALREADY_EXISTS:
            log.warning("auto-creating %s failed: %s", name, e)
            return ErrorCode.LEADER_NOT_AVAILABLE
    created = await broker.metadata_cache.wait_for(
        lambda: broker.metadata_cache.has_leaders(name), AUTO_CREATE_WAIT_S
    )
    return None if created else ErrorCode.LEADER_NOT_AVAILABLE
