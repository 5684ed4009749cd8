"""DescribeUserScramCredentials (50) and AlterUserScramCredentials (51).

Credentials live in `/config/users/<user>` next to the user's quotas. Any broker answers (Kafka
in ZooKeeper mode sends alterations to the controller; the store write is the same, so we
accept them everywhere). Brokers pick changes up through /config/changes.
"""

from __future__ import annotations

from typing import Any

from ...cluster import zk_data as zk
from ...cluster.kafka_zk import KafkaZk
from ...protocol.api_keys import ApiKey
from ...protocol.errors import ErrorCode
from ...security.acl import AclOperation as Op
from ...security.entity_config import update_entity_config
from ...security.scram import (
    MAX_ITERATIONS,
    MIN_ITERATIONS,
    ScramMechanism,
    credential_from_salted_password,
    credentials_from_config,
)
from .. import authz
from .registry import RequestContext, handles


def _describe(zkc: KafkaZk, users: list[str] | None) -> list[dict[str, Any]]:
    if users is None:
        users = sorted(zk.desanitize(u) for u in zkc.children(zk.entity_type_path(zk.USERS)))
        users = [u for u in users if u != zk.DEFAULT_ENTITY]
        explicit = False
    else:
        explicit = True
    counts: dict[str, int] = {}
    for u in users:
        counts[u] = counts.get(u, 0) + 1
    out = []
    for user in dict.fromkeys(users):
        result: dict[str, Any] = {"user": user, "error_code": 0, "error_message": None,
                                  "credential_infos": []}  # fmt: skip
        if counts[user] > 1:
            result["error_code"] = ErrorCode.DUPLICATE_RESOURCE
            result["error_message"] = (
                f"Cannot describe SCRAM credentials for the same user twice in a single request: {user}"  # noqa: E501
            )
            out.append(result)
            continue
        creds = credentials_from_config(zkc.get_entity_config(zk.USERS, zk.sanitize(user)))
        if not creds:
            if explicit:
                result["error_code"] = ErrorCode.RESOURCE_NOT_FOUND
                result["error_message"] = (
                    f"Attempt to describe a user credential that does not exist: {user}"  # noqa: E501
                )
                out.append(result)
            continue
        result["credential_infos"] = [
            {"mechanism": m, "iterations": c.iterations} for m, c in sorted(creds.items())
        ]
        out.append(result)
    return out


@handles(ApiKey.DESCRIBE_USER_SCRAM_CREDENTIALS, "0")
async def handle_describe(ctx: RequestContext, req: dict[str, Any]) -> dict[str, Any]:
    if not authz.cluster(ctx, Op.DESCRIBE):
        return {"throttle_time_ms": 0, "error_code": ErrorCode.CLUSTER_AUTHORIZATION_FAILED,
                "error_message": None, "results": []}  # fmt: skip
    users = req["users"]
    names = None if not users else [u["name"] for u in users]
    results = await ctx.broker.run_io(_describe, ctx.broker.zk, names)
    return {"throttle_time_ms": 0, "error_code": 0, "error_message": None, "results": results}


def _alter(zkc: KafkaZk, req: dict[str, Any]) -> list[dict[str, Any]]:
    errors: dict[str, tuple[int, str]] = {}
    order: list[str] = []
    seen: dict[tuple[str, int], int] = {}
    for op in [*req["deletions"], *req["upsertions"]]:
        user = op["name"]
        if user not in order:
            order.append(user)
        key = (user, op["mechanism"])
        seen[key] = seen.get(key, 0) + 1
    for (user, _), n in seen.items():
        if n > 1 and user not in errors:
            errors[user] = (ErrorCode.DUPLICATE_RESOURCE,
                            "A user credential cannot be altered twice in the same request")  # fmt: skip
    for op in [*req["deletions"], *req["upsertions"]]:
        user = op["name"]
        if user in errors:
            continue
        if not user:
            errors[user] = (ErrorCode.UNACCEPTABLE_CREDENTIAL, "Username must not be empty")
        elif op["mechanism"] not in (ScramMechanism.SCRAM_SHA_256, ScramMechanism.SCRAM_SHA_512):
            errors[user] = (ErrorCode.UNSUPPORTED_SASL_MECHANISM, "Unknown SCRAM mechanism")
    for op in req["upsertions"]:
        user = op["name"]
        if user in errors:
            continue
        if not MIN_ITERATIONS <= op["iterations"] <= MAX_ITERATIONS:
            errors[user] = (ErrorCode.UNACCEPTABLE_CREDENTIAL,
                            f"Iterations must be between {MIN_ITERATIONS} and {MAX_ITERATIONS}")  # fmt: skip
        elif not op["salt"] or not op["salted_password"]:
            errors[user] = (ErrorCode.UNACCEPTABLE_CREDENTIAL, "Salt and password must be set")
    for user in order:
        if user in errors:
            continue
        deletions = [ScramMechanism(d["mechanism"]) for d in req["deletions"] if d["name"] == user]
        upserts = [u for u in req["upsertions"] if u["name"] == user]
        name = zk.sanitize(user)
        current = credentials_from_config(zkc.get_entity_config(zk.USERS, name))
        missing = [m for m in deletions if m not in current]
        if missing:
            errors[user] = (ErrorCode.RESOURCE_NOT_FOUND,
                            "Attempt to delete a user credential that does not exist")  # fmt: skip
            continue
        new_values: dict[str, str] = {}
        for u in upserts:
            mech = ScramMechanism(u["mechanism"])
            cred = credential_from_salted_password(
                mech, bytes(u["salt"]), bytes(u["salted_password"]), u["iterations"]
            )
            new_values[mech.mechanism_name] = cred.to_config_value()

        def change(config: dict[str, str], dels=deletions, vals=new_values) -> dict[str, str]:
            for m in dels:
                config.pop(m.mechanism_name, None)
            config.update(vals)
            return config

        update_entity_config(zkc, zk.USERS, name, change)
    return [
        {"user": u, "error_code": errors.get(u, (0, None))[0],
         "error_message": errors.get(u, (0, None))[1]}
        for u in order
    ]  # fmt: skip


@handles(ApiKey.ALTER_USER_SCRAM_CREDENTIALS, "0")
async def handle_alter(ctx: RequestContext, req: dict[str, Any]) -> dict[str, Any]:
    if not authz.cluster(ctx, Op.ALTER):
        users = dict.fromkeys(op["name"] for op in [*req["deletions"], *req["upsertions"]])
        return {
            "throttle_time_ms": 0,
            "results": [
                {"user": u, "error_code": ErrorCode.CLUSTER_AUTHORIZATION_FAILED,
                 "error_message": None}
                for u in users
            ],
        }  # fmt: skip
    results = await ctx.broker.run_io(_alter, ctx.broker.zk, req)
    return {"throttle_time_ms": 0, "results": results}
