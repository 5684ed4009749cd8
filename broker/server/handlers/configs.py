"""DescribeConfigs (32), AlterConfigs (33) and IncrementalAlterConfigs (44), topic and broker."""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from typing import Any

from ...cluster.topic_admin import AlterConfigOp, AlterOp, ResourceType
from ...protocol.acl_types import AclResourceType
from ...protocol.api_keys import ApiKey
from ...protocol.config_types import ConfigSource
from ...protocol.errors import ErrorCode, KafkaError
from ...security.acl import AclOperation as Op
from .. import authz
from .registry import RequestContext, handles


def _check(ctx: RequestContext, op: Op, rtype: int, name: str) -> None:
    """Topics need `op` on the topic, broker configs and loggers `op` on the cluster."""
    if rtype == ResourceType.TOPIC:
        if not authz.authorized(ctx, op, AclResourceType.TOPIC, name):
            raise KafkaError(ErrorCode.TOPIC_AUTHORIZATION_FAILED)
    elif rtype in (ResourceType.BROKER, ResourceType.BROKER_LOGGER):
        if not authz.cluster(ctx, op):
            raise KafkaError(ErrorCode.CLUSTER_AUTHORIZATION_FAILED)


@handles(ApiKey.DESCRIBE_CONFIGS, "0-4")
async def handle_describe_configs(ctx: RequestContext, req: dict[str, Any]) -> dict[str, Any]:
    admin = ctx.broker.topic_admin
    v = ctx.version
    results = []
    for r in req["resources"]:
        rtype, name, keys = r["resource_type"], r["resource_name"], r["configuration_keys"]
        result: dict[str, Any] = {
            "error_code": ErrorCode.NONE, "error_message": None,
            "resource_type": rtype, "resource_name": name, "configs": [],
        }  # fmt: skip
        results.append(result)
        options = {
            "include_synonyms": req.get("include_synonyms", False),
            "include_documentation": req.get("include_documentation", False),
        }
        try:
            _check(ctx, Op.DESCRIBE_CONFIGS, rtype, name)
            if rtype == ResourceType.TOPIC:
                entries = await admin.describe_topic_configs(name, keys, **options)
            elif rtype == ResourceType.BROKER:
                entries = admin.describe_broker_configs(name, keys, **options)
            else:
                raise KafkaError(ErrorCode.INVALID_REQUEST, f"Unsupported resource type {rtype}")
        except KafkaError as e:
            result["error_code"] = e.code
            result["error_message"] = e.message
            continue
        configs = []
        for entry in entries:
            d = entry.as_dict()
            if v == 0:
                # v0 has no source: is_default stands for "not overridden".
                d["is_default"] = entry.source == ConfigSource.DEFAULT_CONFIG
            configs.append(d)
        result["configs"] = configs
    return {"throttle_time_ms": 0, "results": results}


def _resource_result(rtype: int, name: str, error: KafkaError | None) -> dict[str, Any]:
    return {
        "error_code": error.code if error else ErrorCode.NONE,
        "error_message": error.message if error else None,
        "resource_type": rtype,
        "resource_name": name,
    }


async def _alter_each(
    ctx: RequestContext,
    req: dict[str, Any],
    alter: Callable[[dict[str, Any]], Awaitable[None]],
) -> dict[str, Any]:
    """AlterConfigs and IncrementalAlterConfigs: check each resource (ACL, type), apply
    `alter` to it, and answer one result per resource."""
    responses = []
    for r in req["resources"]:
        error = None
        try:
            _check(ctx, Op.ALTER_CONFIGS, r["resource_type"], r["resource_name"])
            if r["resource_type"] not in (ResourceType.TOPIC, ResourceType.BROKER):
                raise KafkaError(ErrorCode.INVALID_REQUEST, "Unsupported resource type")
            await alter(r)
        except KafkaError as e:
            error = e
        responses.append(_resource_result(r["resource_type"], r["resource_name"], error))
    return {"throttle_time_ms": 0, "responses": responses}


@handles(ApiKey.ALTER_CONFIGS, "0-2")
async def handle_alter_configs(ctx: RequestContext, req: dict[str, Any]) -> dict[str, Any]:
    admin = ctx.broker.topic_admin

    async def alter(r: dict[str, Any]) -> None:
        configs = {c["name"]: c["value"] for c in r["configs"]}
        await admin.alter_configs(
            r["resource_type"], r["resource_name"], configs, req["validate_only"]
        )

    return await _alter_each(ctx, req, alter)


@handles(ApiKey.INCREMENTAL_ALTER_CONFIGS, "0-1")
async def handle_incremental_alter_configs(
    ctx: RequestContext, req: dict[str, Any]
) -> dict[str, Any]:
    admin = ctx.broker.topic_admin

    async def alter(r: dict[str, Any]) -> None:
        try:
            ops = [
                AlterConfigOp(c["name"], AlterOp(c["config_operation"]), c["value"])
                for c in r["configs"]
            ]
        except ValueError as e:
            raise KafkaError(ErrorCode.INVALID_REQUEST, f"Unknown config operation: {e}") from e
        await admin.incremental_alter_configs(
            r["resource_type"], r["resource_name"], ops, req["validate_only"]
        )

    return await _alter_each(ctx, req, alter)
