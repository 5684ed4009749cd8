"""DescribeClientQuotas (48) and AlterClientQuotas (49): quotas in /config/users, /config/clients
and /config/ips, announced through /config/changes so every broker applies them."""

from __future__ import annotations

from typing import Any

from ...protocol.api_keys import ApiKey
from ...protocol.errors import ErrorCode
from ...quotas import config as qc
from ...security.acl import AclOperation as Op
from .. import authz
from .registry import RequestContext, handles


@handles(ApiKey.DESCRIBE_CLIENT_QUOTAS, "0-1")
async def handle_describe(ctx: RequestContext, req: dict[str, Any]) -> dict[str, Any]:
    if not authz.cluster(ctx, Op.DESCRIBE_CONFIGS):
        return {"throttle_time_ms": 0, "error_code": ErrorCode.CLUSTER_AUTHORIZATION_FAILED,
                "error_message": None, "entries": None}  # fmt: skip
    try:
        comps = [
            qc.Component(c["entity_type"], qc.MatchType(c["match_type"]), c["match"])
            for c in req["components"]
        ]
        qc.validate_filter(comps)
    except (ValueError, qc.InvalidQuotaError) as e:
        return {"throttle_time_ms": 0, "error_code": ErrorCode.INVALID_REQUEST,
                "error_message": str(e), "entries": None}  # fmt: skip
    found = await ctx.broker.run_io(qc.describe_quotas, ctx.broker.zk, comps, req["strict"])
    entries = [
        {
            "entity": [{"entity_type": t, "entity_name": n} for t, n in entity],
            "values": [{"key": k, "value": v} for k, v in sorted(values.items())],
        }
        for entity, values in sorted(found.items(), key=lambda kv: repr(kv[0]))
    ]
    return {"throttle_time_ms": 0, "error_code": 0, "error_message": None, "entries": entries}


@handles(ApiKey.ALTER_CLIENT_QUOTAS, "0-1")
async def handle_alter(ctx: RequestContext, req: dict[str, Any]) -> dict[str, Any]:
    out = []
    allowed = authz.cluster(ctx, Op.ALTER_CONFIGS)
    for e in req["entries"]:
        result: dict[str, Any] = {"error_code": 0, "error_message": None, "entity": e["entity"]}
        out.append(result)
        if not allowed:
            result["error_code"] = ErrorCode.CLUSTER_AUTHORIZATION_FAILED
            continue
        try:
            entity = qc.make_entity((c["entity_type"], c["entity_name"]) for c in e["entity"])
            ops = [(op["key"], None if op["remove"] else op["value"]) for op in e["ops"]]
            qc.validate_ops(entity, ops)
        except qc.InvalidQuotaError as err:
            result["error_code"] = ErrorCode.INVALID_REQUEST
            result["error_message"] = str(err)
            continue
        if not req["validate_only"] and ops:
            await ctx.broker.run_io(qc.alter_quotas, ctx.broker.zk, entity, dict(ops))
            security = ctx.broker.security
            if security is not None:
                # In force here at once; other brokers follow the change notification.
                entity_type, name = qc.entity_path(entity)
                await ctx.broker.run_io(
                    security.quotas.cache.reload_entity, ctx.broker.zk, entity_type, name
                )
    return {"throttle_time_ms": 0, "entries": out}
