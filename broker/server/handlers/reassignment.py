"""ElectLeaders (43), AlterPartitionReassignments (45), ListPartitionReassignments (46).

All three run on the active controller's event queue; another broker answers NOT_CONTROLLER
(so the client looks the controller up in Metadata and retries there). Electing and moving need
ALTER on the cluster, listing DESCRIBE, as in Kafka.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from typing import Any, TypeVar

from ...cluster.controller import Controller
from ...cluster.controller_context import NotControllerError
from ...protocol.api_keys import ApiKey
from ...protocol.errors import ErrorCode
from ...security.acl import AclOperation as Op
from .. import authz
from .registry import RequestContext, handles

_T = TypeVar("_T")

PREFERRED = 0
UNCLEAN = 1


async def _on_controller(
    ctx: RequestContext, fn: Callable[[Controller], Awaitable[_T]]
) -> _T | None:
    """`fn(controller)`, or None when this broker is not the active controller."""
    controller = ctx.broker.controller
    if controller is None or not controller.active:
        return None
    try:
        return await fn(controller)
    except NotControllerError:
        return None


@handles(ApiKey.ELECT_LEADERS, "0-2")
async def handle_elect_leaders(ctx: RequestContext, req: dict[str, Any]) -> dict[str, Any]:
    election_type = req.get("election_type", PREFERRED) if ctx.version >= 1 else PREFERRED
    asked = req.get("topic_partitions")
    wanted = (
        None
        if asked is None
        else [(t["topic"], p) for t in asked for p in sorted(set(t["partitions"]))]
    )

    def body(top: ErrorCode, results: dict[tuple[str, int], ErrorCode]) -> dict[str, Any]:
        by_topic: dict[str, list[dict[str, Any]]] = {}
        for (topic, p), code in sorted(results.items()):
            by_topic.setdefault(topic, []).append(
                {"partition_id": p, "error_code": code, "error_message": None}
            )
        return {
            "throttle_time_ms": 0,
            "error_code": top,
            "replica_election_results": [
                {"topic": t, "partition_result": parts} for t, parts in by_topic.items()
            ],
        }

    if not authz.cluster(ctx, Op.ALTER):
        code = ErrorCode.CLUSTER_AUTHORIZATION_FAILED
        return body(code, dict.fromkeys(wanted or [], code))
    if election_type not in (PREFERRED, UNCLEAN):
        return body(ErrorCode.INVALID_REQUEST, {})
    results = await _on_controller(ctx, lambda c: c.elect_leaders(election_type, wanted))
    if results is None:
        code = ErrorCode.NOT_CONTROLLER
        return body(code, dict.fromkeys(wanted or [], code))
    return body(ErrorCode.NONE, results)


@handles(ApiKey.ALTER_PARTITION_REASSIGNMENTS, "0")
async def handle_alter_reassignments(ctx: RequestContext, req: dict[str, Any]) -> dict[str, Any]:
    targets: dict[tuple[str, int], tuple[int, ...] | None] = {}
    for t in req["topics"]:
        for p in t["partitions"]:
            replicas = p.get("replicas")
            targets[(t["name"], p["partition_index"])] = (
                None if replicas is None else tuple(replicas)
            )

    def body(
        top: ErrorCode, results: dict[tuple[str, int], tuple[ErrorCode, str | None]]
    ) -> dict[str, Any]:
        by_topic: dict[str, list[dict[str, Any]]] = {}
        for (topic, p), (code, message) in sorted(results.items()):
            by_topic.setdefault(topic, []).append(
                {"partition_index": p, "error_code": code, "error_message": message}
            )
        return {
            "throttle_time_ms": 0,
            "error_code": top,
            "error_message": None,
            "responses": [{"name": t, "partitions": parts} for t, parts in by_topic.items()],
        }

    if not authz.cluster(ctx, Op.ALTER):
        code = ErrorCode.CLUSTER_AUTHORIZATION_FAILED
        return body(code, dict.fromkeys(targets, (code, None)))
    results = await _on_controller(ctx, lambda c: c.alter_reassignments(targets))
    if results is None:
        return body(ErrorCode.NOT_CONTROLLER, {})
    return body(ErrorCode.NONE, results)


@handles(ApiKey.LIST_PARTITION_REASSIGNMENTS, "0")
async def handle_list_reassignments(ctx: RequestContext, req: dict[str, Any]) -> dict[str, Any]:
    asked = req.get("topics")
    wanted = (
        None if asked is None else [(t["name"], p) for t in asked for p in t["partition_indexes"]]
    )
    base = {"throttle_time_ms": 0, "error_message": None, "topics": []}
    if not authz.cluster(ctx, Op.DESCRIBE):
        return {**base, "error_code": ErrorCode.CLUSTER_AUTHORIZATION_FAILED}
    found = await _on_controller(ctx, lambda c: c.list_reassignments(wanted))
    if found is None:
        return {**base, "error_code": ErrorCode.NOT_CONTROLLER}
    by_topic: dict[str, list[dict[str, Any]]] = {}
    for (topic, p), a in sorted(found.items()):
        by_topic.setdefault(topic, []).append(
            {
                "partition_index": p,
                "replicas": list(a.replicas),
                "adding_replicas": list(a.adding),
                "removing_replicas": list(a.removing),
            }
        )
    return {
        **base,
        "error_code": ErrorCode.NONE,
        "topics": [{"name": t, "partitions": parts} for t, parts in by_topic.items()],
    }
