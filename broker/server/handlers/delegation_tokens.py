"""CreateDelegationToken (38), RenewDelegationToken (39), ExpireDelegationToken (40) and
DescribeDelegationToken (41).

As in Kafka, token requests are refused on connections whose identity is weak or itself a
token: PLAINTEXT, SSL without a client certificate, and token-authenticated SASL sessions
(DELEGATION_TOKEN_REQUEST_NOT_ALLOWED). Any broker answers; the token manager writes the store
and its change notifications tell the other brokers. With an authorizer, creating a token for
another owner needs CREATE_TOKENS on that user, and Describe shows a token to its owner,
requester and renewers, or with DESCRIBE on the token or DESCRIBE_TOKENS on its owner.
"""

from __future__ import annotations

from typing import Any

from ...protocol.api_keys import ApiKey
from ...protocol.errors import ErrorCode, KafkaError
from ...security.acl import AclOperation, AclResourceType
from ...security.tokens import TokenInfo
from ..authz import authorized
from .registry import RequestContext, handles

USER_TYPE = "User"


def token_requests_allowed(ctx: RequestContext) -> bool:
    conn = ctx.conn
    protocol = conn.listener.security_protocol
    if protocol == "PLAINTEXT":
        return False
    if protocol == "SSL" and conn.principal == "User:ANONYMOUS":
        return False
    server = getattr(conn.authenticator, "server", None)
    return not getattr(server, "token_authenticated", False)


def _split(principal: str) -> tuple[str, str]:
    kind, _, name = principal.partition(":")
    return kind, name


def _create_response(
    code: int, owner: str, requester: str, info: TokenInfo | None = None, hmac: bytes = b""
) -> dict[str, Any]:
    owner_type, owner_name = _split(owner)
    req_type, req_name = _split(requester)
    return {
        "error_code": code,
        "principal_type": owner_type,
        "principal_name": owner_name,
        "token_requester_principal_type": req_type,
        "token_requester_principal_name": req_name,
        "issue_timestamp_ms": info.issue_ms if info else -1,
        "expiry_timestamp_ms": info.expiry_ms if info else -1,
        "max_timestamp_ms": info.max_ms if info else -1,
        "token_id": info.token_id if info else "",
        "hmac": hmac,
        "throttle_time_ms": 0,
    }


@handles(ApiKey.CREATE_DELEGATION_TOKEN, "0-3")
async def handle_create(ctx: RequestContext, req: dict[str, Any]) -> dict[str, Any]:
    requester = ctx.conn.principal
    owner = requester
    if req.get("owner_principal_name"):
        owner = f"{req.get('owner_principal_type') or ''}:{req['owner_principal_name']}"
    if not token_requests_allowed(ctx):
        return _create_response(ErrorCode.DELEGATION_TOKEN_REQUEST_NOT_ALLOWED, owner, requester)
    renewers = [f"{r['principal_type']}:{r['principal_name']}" for r in req["renewers"]]
    if any(_split(p)[0] != USER_TYPE for p in [owner, *renewers]):
        return _create_response(ErrorCode.INVALID_PRINCIPAL_TYPE, owner, requester)
    if owner != requester and not authorized(
        ctx, AclOperation.CREATE_TOKENS, AclResourceType.USER, owner
    ):
        return _create_response(ErrorCode.DELEGATION_TOKEN_AUTHORIZATION_FAILED, owner, requester)
    security = ctx.broker.security
    assert security is not None
    try:
        info, hmac = await ctx.broker.run_io(
            security.tokens.create_token, owner, requester, renewers, req["max_lifetime_ms"]
        )
    except KafkaError as e:
        return _create_response(e.code, owner, requester)
    return _create_response(ErrorCode.NONE, owner, requester, info, hmac)


async def _change(ctx: RequestContext, fn_name: str, hmac: bytes, period: int) -> dict[str, Any]:
    if not token_requests_allowed(ctx):
        code, expiry = ErrorCode.DELEGATION_TOKEN_REQUEST_NOT_ALLOWED, -1
    else:
        security = ctx.broker.security
        assert security is not None
        fn = getattr(security.tokens, fn_name)
        try:
            code = ErrorCode.NONE
            expiry = await ctx.broker.run_io(fn, ctx.conn.principal, bytes(hmac or b""), period)
        except KafkaError as e:
            code, expiry = e.code, -1
    return {"error_code": code, "expiry_timestamp_ms": expiry, "throttle_time_ms": 0}


@handles(ApiKey.RENEW_DELEGATION_TOKEN, "0-2")
async def handle_renew(ctx: RequestContext, req: dict[str, Any]) -> dict[str, Any]:
    return await _change(ctx, "renew_token", req["hmac"], req["renew_period_ms"])


@handles(ApiKey.EXPIRE_DELEGATION_TOKEN, "0-2")
async def handle_expire(ctx: RequestContext, req: dict[str, Any]) -> dict[str, Any]:
    return await _change(ctx, "expire_token", req["hmac"], req["expiry_time_period_ms"])


def _describe_entry(info: TokenInfo, hmac: bytes) -> dict[str, Any]:
    owner_type, owner_name = _split(info.owner)
    req_type, req_name = _split(info.requester)
    return {
        "principal_type": owner_type,
        "principal_name": owner_name,
        "token_requester_principal_type": req_type,
        "token_requester_principal_name": req_name,
        "issue_timestamp": info.issue_ms,
        "expiry_timestamp": info.expiry_ms,
        "max_timestamp": info.max_ms,
        "token_id": info.token_id,
        "hmac": hmac,
        "renewers": [
            {"principal_type": t, "principal_name": n} for t, n in map(_split, info.renewers)
        ],
    }


@handles(ApiKey.DESCRIBE_DELEGATION_TOKEN, "0-3")
async def handle_describe(ctx: RequestContext, req: dict[str, Any]) -> dict[str, Any]:
    def answer(code: int, tokens: list[dict[str, Any]]) -> dict[str, Any]:
        return {"error_code": code, "tokens": tokens, "throttle_time_ms": 0}

    if not token_requests_allowed(ctx):
        return answer(ErrorCode.DELEGATION_TOKEN_REQUEST_NOT_ALLOWED, [])
    security = ctx.broker.security
    assert security is not None
    manager = security.tokens
    if not manager.settings.enabled:
        return answer(ErrorCode.DELEGATION_TOKEN_AUTH_DISABLED, [])
    owners = req.get("owners")
    wanted = None if owners is None else {f"{o['principal_type']}:{o['principal_name']}"
                                          for o in owners}  # fmt: skip
    principal = ctx.conn.principal
    out = []
    for info in manager.tokens():
        if wanted is not None and info.owner not in wanted:
            continue
        visible = (
            info.owner_or_renewer(principal)
            or authorized(
                ctx, AclOperation.DESCRIBE, AclResourceType.DELEGATION_TOKEN, info.token_id
            )
            or authorized(ctx, AclOperation.DESCRIBE_TOKENS, AclResourceType.USER, info.owner)
        )
        if visible:
            out.append(_describe_entry(info, manager.hmac_of(info)))
    return answer(ErrorCode.NONE, out)
