"""Classic group membership and admin views: JoinGroup (11), Heartbeat (12), LeaveGroup (13),
SyncGroup (14), DescribeGroups (15), ListGroups (16) and DeleteGroups (42).

The handlers translate between request versions and the group coordinator's calls.
"""

from __future__ import annotations

from typing import Any

from ...coordinator.group.metadata import JoinRequest
from ...protocol.api_keys import ApiKey
from ...protocol.errors import ErrorCode
from ...security.acl import AclOperation as Op
from ...security.acl import AclResourceType as RT
from .. import authz
from .registry import RequestContext, handles

NOT_REQUESTED = -(2**31)
CLASSIC_GROUP_TYPE = "classic"
DENIED = ErrorCode.GROUP_AUTHORIZATION_FAILED


def _may(ctx: RequestContext, op: Op, group_id: str) -> bool:
    return authz.authorized(ctx, op, RT.GROUP, group_id)


def _bytes(value: Any) -> bytes:
    return b"" if value is None else bytes(value)


@handles(ApiKey.JOIN_GROUP, "0-9")
async def handle_join_group(ctx: RequestContext, req: dict[str, Any]) -> dict[str, Any]:
    v = ctx.version
    if not _may(ctx, Op.READ, req["group_id"]):
        return {
            "throttle_time_ms": 0,
            "error_code": DENIED,
            "generation_id": -1,
            "protocol_type": None,
            "protocol_name": None if v >= 7 else "",
            "leader": "",
            "member_id": "",
            "members": [],
        }
    session_timeout = req["session_timeout_ms"]
    reason = req.get("reason") if v >= 8 else None
    join = JoinRequest(
        group_id=req["group_id"],
        member_id=req["member_id"],
        instance_id=req.get("group_instance_id") if v >= 5 else None,
        client_id=ctx.header.client_id or "",
        client_host="/" + ctx.conn.peer_host,
        rebalance_timeout_ms=req["rebalance_timeout_ms"] if v >= 1 else session_timeout,
        session_timeout_ms=session_timeout,
        protocol_type=req["protocol_type"],
        protocols=[(p["name"], _bytes(p["metadata"])) for p in req["protocols"]],
        require_known_member_id=v >= 4,
        supports_skip_assignment=v >= 9,
        **({"reason": reason} if reason else {}),  # else JoinRequest's "not provided"
    )
    result = await ctx.broker.group_coordinator.join_group(join)
    protocol_name = result.protocol_name
    if protocol_name is None and v < 7:
        protocol_name = ""
    return {
        "throttle_time_ms": 0,
        "error_code": result.error,
        "generation_id": result.generation_id,
        "protocol_type": result.protocol_type,
        "protocol_name": protocol_name,
        "leader": result.leader_id,
        "skip_assignment": result.skip_assignment,
        "member_id": result.member_id,
        "members": [
            {"member_id": m, "group_instance_id": instance, "metadata": metadata}
            for m, instance, metadata in result.members
        ],
    }


@handles(ApiKey.SYNC_GROUP, "0-5")
async def handle_sync_group(ctx: RequestContext, req: dict[str, Any]) -> dict[str, Any]:
    v = ctx.version
    if not _may(ctx, Op.READ, req["group_id"]):
        return {"throttle_time_ms": 0, "error_code": DENIED, "assignment": b""}
    protocol_type = req.get("protocol_type") if v >= 5 else None
    protocol_name = req.get("protocol_name") if v >= 5 else None
    if v >= 5 and (protocol_type is None or protocol_name is None):
        return {"throttle_time_ms": 0, "error_code": ErrorCode.INCONSISTENT_GROUP_PROTOCOL}
    result = await ctx.broker.group_coordinator.sync_group(
        req["group_id"],
        req["generation_id"],
        req["member_id"],
        req.get("group_instance_id") if v >= 3 else None,
        protocol_type,
        protocol_name,
        {a["member_id"]: _bytes(a["assignment"]) for a in req["assignments"]},
    )
    return {
        "throttle_time_ms": 0,
        "error_code": result.error,
        "protocol_type": result.protocol_type,
        "protocol_name": result.protocol_name,
        "assignment": result.assignment,
    }


@handles(ApiKey.HEARTBEAT, "0-4")
async def handle_heartbeat(ctx: RequestContext, req: dict[str, Any]) -> dict[str, Any]:
    if not _may(ctx, Op.READ, req["group_id"]):
        return {"throttle_time_ms": 0, "error_code": DENIED}
    error = ctx.broker.group_coordinator.heartbeat(
        req["group_id"],
        req["member_id"],
        req.get("group_instance_id") if ctx.version >= 3 else None,
        req["generation_id"],
    )
    return {"throttle_time_ms": 0, "error_code": error}


@handles(ApiKey.LEAVE_GROUP, "0-5")
async def handle_leave_group(ctx: RequestContext, req: dict[str, Any]) -> dict[str, Any]:
    v = ctx.version
    if not _may(ctx, Op.READ, req["group_id"]):
        return {"throttle_time_ms": 0, "error_code": DENIED, "members": []}
    if v >= 3:
        members = [(m["member_id"], m.get("group_instance_id")) for m in req["members"]]
    else:
        members = [(req["member_id"], None)]
    error, errors = ctx.broker.group_coordinator.leave_group(req["group_id"], members)
    if v < 3:
        if error == ErrorCode.NONE:
            error = next((e for e in errors if e != ErrorCode.NONE), ErrorCode.NONE)
        return {"throttle_time_ms": 0, "error_code": error}
    return {
        "throttle_time_ms": 0,
        "error_code": error,
        "members": [
            {"member_id": m, "group_instance_id": instance, "error_code": e}
            for (m, instance), e in zip(members, errors, strict=False)
        ],
    }


@handles(ApiKey.DESCRIBE_GROUPS, "0-5")
async def handle_describe_groups(ctx: RequestContext, req: dict[str, Any]) -> dict[str, Any]:
    coordinator = ctx.broker.group_coordinator
    with_ops = bool(req.get("include_authorized_operations"))
    groups = []
    for group_id in req["groups"]:
        if not _may(ctx, Op.DESCRIBE, group_id):
            groups.append(
                {
                    "error_code": DENIED,
                    "group_id": group_id,
                    "group_state": "",
                    "protocol_type": "",
                    "protocol_data": "",
                    "members": [],
                }
            )
            continue
        error, summary = coordinator.describe_group(group_id)
        groups.append(
            {
                "error_code": error,
                "group_id": group_id,
                "group_state": summary.state,
                "protocol_type": summary.protocol_type,
                "protocol_data": summary.protocol,
                "members": [
                    {
                        "member_id": m.member_id,
                        "group_instance_id": m.group_instance_id,
                        "client_id": m.client_id,
                        "client_host": m.client_host,
                        "member_metadata": m.metadata,
                        "member_assignment": m.assignment,
                    }
                    for m in summary.members
                ],
                "authorized_operations": authz.authorized_operations(ctx, RT.GROUP, group_id)
                if with_ops and error == ErrorCode.NONE
                else NOT_REQUESTED,
            }
        )
    return {"throttle_time_ms": 0, "groups": groups}


@handles(ApiKey.LIST_GROUPS, "0-5")
async def handle_list_groups(ctx: RequestContext, req: dict[str, Any]) -> dict[str, Any]:
    v = ctx.version
    states = set(req.get("states_filter") or []) if v >= 4 else set()
    types = {t.lower() for t in req.get("types_filter") or []} if v >= 5 else set()
    error, groups = ctx.broker.group_coordinator.list_groups(states)
    if types and CLASSIC_GROUP_TYPE not in types:
        groups = []
    if not authz.cluster(ctx, Op.DESCRIBE):
        # Without DESCRIBE on the cluster, only the groups the client may describe.
        groups = [g for g in groups if _may(ctx, Op.DESCRIBE, g[0])]
    return {
        "throttle_time_ms": 0,
        "error_code": error,
        "groups": [
            {
                "group_id": group_id,
                "protocol_type": protocol_type,
                "group_state": state,
                "group_type": CLASSIC_GROUP_TYPE,
            }
            for group_id, protocol_type, state in groups
        ],
    }


@handles(ApiKey.DELETE_GROUPS, "0-2")
async def handle_delete_groups(ctx: RequestContext, req: dict[str, Any]) -> dict[str, Any]:
    names = list(dict.fromkeys(req["groups_names"]))
    allowed = [g for g in names if _may(ctx, Op.DELETE, g)]
    errors = dict.fromkeys(names, DENIED)
    if allowed:
        errors.update(await ctx.broker.group_coordinator.delete_groups(allowed))
    return {
        "throttle_time_ms": 0,
        "results": [{"group_id": g, "error_code": errors[g]} for g in names],
    }
