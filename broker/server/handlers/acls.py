"""DescribeAcls (29), CreateAcls (30), DeleteAcls (31): ACLs in the metadata store.

Handlers read and write the store directly (any broker can answer); brokers' authorizer caches
follow through the ACL change notifications the writes leave behind.
"""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

from ...protocol.api_keys import ApiKey
from ...protocol.errors import ErrorCode
from ...security import acl_store
from ...security.acl import (
    AccessControlEntry,
    AclBinding,
    AclBindingFilter,
    AclOperation,
    AclPatternType,
    AclPermissionType,
    AclResourceType,
    InvalidAclError,
    ResourcePattern,
    validate_binding,
)
from .. import authz
from .registry import RequestContext, handles


@contextmanager
def _invalid_as(what: str) -> Iterator[None]:
    """A code outside its enum in the request makes an invalid ACL (or filter), as in Kafka."""
    try:
        yield
    except ValueError as e:
        raise InvalidAclError(f"Invalid {what}: {e}") from None


def _filter(d: dict[str, Any]) -> AclBindingFilter:
    with _invalid_as("ACL filter"):
        f = AclBindingFilter(
            AclResourceType(d["resource_type_filter"]),
            d["resource_name_filter"],
            AclPatternType(d.get("pattern_type_filter", AclPatternType.LITERAL)),
            d["principal_filter"],
            d["host_filter"],
            AclOperation(d["operation"]),
            AclPermissionType(d["permission_type"]),
        )
    f.validate()
    return f


def _binding(d: dict[str, Any]) -> AclBinding:
    with _invalid_as("ACL"):
        b = AclBinding(
            ResourcePattern(
                AclResourceType(d["resource_type"]),
                d["resource_name"],
                AclPatternType(d.get("resource_pattern_type", AclPatternType.LITERAL)),
            ),
            AccessControlEntry(
                d["principal"],
                d["host"],
                AclOperation(d["operation"]),
                AclPermissionType(d["permission_type"]),
            ),
        )
    validate_binding(b)
    return b


@handles(ApiKey.DESCRIBE_ACLS, "0-3")
async def handle_describe_acls(ctx: RequestContext, req: dict[str, Any]) -> dict[str, Any]:
    if not authz.cluster(ctx, AclOperation.DESCRIBE):
        return {
            "throttle_time_ms": 0, "error_code": ErrorCode.CLUSTER_AUTHORIZATION_FAILED,
            "error_message": None, "resources": [],
        }  # fmt: skip
    try:
        f = _filter(req)
    except InvalidAclError as e:
        return {
            "throttle_time_ms": 0, "error_code": ErrorCode.INVALID_REQUEST,
            "error_message": str(e), "resources": [],
        }  # fmt: skip
    bindings = await ctx.broker.run_io(acl_store.describe_acls, ctx.broker.zk, f)
    grouped: dict[ResourcePattern, list[AccessControlEntry]] = {}
    for b in bindings:
        if ctx.version == 0 and b.pattern.pattern_type != AclPatternType.LITERAL:
            continue  # v0 cannot express prefixed patterns
        grouped.setdefault(b.pattern, []).append(b.entry)
    resources = [
        {
            "resource_type": p.resource_type,
            "resource_name": p.name,
            "pattern_type": p.pattern_type,
            "acls": [
                {
                    "principal": e.principal,
                    "host": e.host,
                    "operation": e.operation,
                    "permission_type": e.permission,
                }
                for e in entries
            ],
        }
        for p, entries in grouped.items()
    ]
    return {"throttle_time_ms": 0, "error_code": 0, "error_message": None, "resources": resources}


@handles(ApiKey.CREATE_ACLS, "0-3")
async def handle_create_acls(ctx: RequestContext, req: dict[str, Any]) -> dict[str, Any]:
    if not authz.cluster(ctx, AclOperation.ALTER):
        denied = {"error_code": ErrorCode.CLUSTER_AUTHORIZATION_FAILED, "error_message": None}
        return {"throttle_time_ms": 0, "results": [dict(denied) for _ in req["creations"]]}
    results: list[dict[str, Any]] = []
    valid: list[AclBinding] = []
    for c in req["creations"]:
        try:
            valid.append(_binding(c))
            results.append({"error_code": 0, "error_message": None})
        except InvalidAclError as e:
            results.append({"error_code": ErrorCode.INVALID_REQUEST, "error_message": str(e)})
    if valid:
        await _cache(ctx, await ctx.broker.run_io(acl_store.create_acls, ctx.broker.zk, valid))
    return {"throttle_time_ms": 0, "results": results}


async def _cache(ctx: RequestContext, written: list[ResourcePattern]) -> None:
    """The writing broker sees its own change before it answers, as Kafka's does: a client
    that created an ACL here and uses it at once is not refused while the change notification
    is on its way (the other brokers still learn it from the notification). The patterns are
    read again rather than set from what this broker wrote: another broker may have written
    them since (see AclChangeListener)."""
    if ctx.broker.security is not None:
        await ctx.broker.security.refresh_acls(written)


@handles(ApiKey.DELETE_ACLS, "0-3")
async def handle_delete_acls(ctx: RequestContext, req: dict[str, Any]) -> dict[str, Any]:
    if not authz.cluster(ctx, AclOperation.ALTER):
        return {
            "throttle_time_ms": 0,
            "filter_results": [
                {"error_code": ErrorCode.CLUSTER_AUTHORIZATION_FAILED, "error_message": None,
                 "matching_acls": []}
                for _ in req["filters"]
            ],
        }  # fmt: skip
    filters: list[AclBindingFilter | None] = []
    errors: list[str | None] = []
    for d in req["filters"]:
        try:
            filters.append(_filter(d))
            errors.append(None)
        except InvalidAclError as e:
            filters.append(None)
            errors.append(str(e))
    valid = [f for f in filters if f is not None]
    matched: list[list[AclBinding]] = []
    if valid:
        matched, written = await ctx.broker.run_io(acl_store.delete_acls, ctx.broker.zk, valid)
        await _cache(ctx, written)
    it = iter(matched)
    out = []
    for f, err in zip(filters, errors, strict=True):
        if f is None:
            out.append({"error_code": ErrorCode.INVALID_REQUEST, "error_message": err,
                        "matching_acls": []})  # fmt: skip
            continue
        out.append(
            {
                "error_code": 0,
                "error_message": None,
                "matching_acls": [
                    {
                        "error_code": 0,
                        "error_message": None,
                        "resource_type": b.pattern.resource_type,
                        "resource_name": b.pattern.name,
                        "pattern_type": b.pattern.pattern_type,
                        "principal": b.entry.principal,
                        "host": b.entry.host,
                        "operation": b.entry.operation,
                        "permission_type": b.entry.permission,
                    }
                    for b in next(it)
                ],
            }
        )
    return {"throttle_time_ms": 0, "filter_results": out}
