"""SASL authentication of connections on SASL_PLAINTEXT and SASL_SSL listeners: SaslHandshake
(17) v0-1 and SaslAuthenticate (36) v0-2, with Kafka's per-connection states.

Before authentication completes only ApiVersions, SaslHandshake and SaslAuthenticate are
served (the dispatcher closes the connection on anything else). SaslHandshake v0 starts
Kafka's original flow, where the following frames are bare SASL tokens answered with bare
tokens; v1 means the tokens travel in SaslAuthenticate requests. A failed authentication is
answered (SASL_AUTHENTICATION_FAILED with a message, v1 flow) and the connection closed.

On other listeners, and after a completed authentication without re-authentication enabled,
both APIs answer ILLEGAL_SASL_STATE, as Kafka's request handlers do.
"""

from __future__ import annotations

import logging
from typing import TYPE_CHECKING, Any

from ...protocol.api_keys import ApiKey
from ...protocol.errors import ErrorCode
from ...security.errors import SaslAuthenticationError, UnsupportedSaslMechanismError
from ..network import CloseConnection
from .registry import RequestContext, handles

if TYPE_CHECKING:
    from ...security.sasl import SaslServer
    from ..network import Connection
    from ..services import BrokerServices

log = logging.getLogger(__name__)

# Requests a connection may send before it has authenticated.
PRE_AUTH_APIS = frozenset({ApiKey.API_VERSIONS, ApiKey.SASL_HANDSHAKE, ApiKey.SASL_AUTHENTICATE})

HANDSHAKE = "handshake"
AUTHENTICATE = "authenticate"
COMPLETE = "complete"
FAILED = "failed"


class SaslAuthenticator:
    """The SASL exchange of one connection."""

    def __init__(self, broker: BrokerServices, conn: Connection) -> None:
        self.broker = broker
        self.conn = conn
        self.state = HANDSHAKE
        self.mechanism: str | None = None
        self.server: SaslServer | None = None
        # SaslHandshake v0: the next frames are bare tokens (no request header).
        self.raw_tokens = False
        self.reauthenticating = False

    @property
    def complete(self) -> bool:
        return self.state == COMPLETE

    @property
    def expects_raw_token(self) -> bool:
        return self.state == AUTHENTICATE and self.raw_tokens

    def _reauth_ms(self) -> int:
        return int(self.broker.config.get("connections.max.reauth.ms") or 0)

    def _fail(self) -> None:
        self.state = FAILED
        self.conn.close_after_send = True

    # --- SaslHandshake -----------------------------------------------------------------------

    def handshake(self, version: int, mechanism: str) -> dict[str, Any]:
        security = self.broker.security
        listener = self.conn.listener.name
        enabled = security.sasl_mechanisms(listener)
        if self.state == COMPLETE:
            # KIP-368 re-authentication: v1+, same mechanism, only when enabled.
            if self._reauth_ms() <= 0 or version < 1:
                return {"error_code": ErrorCode.ILLEGAL_SASL_STATE, "mechanisms": []}
            if mechanism != self.mechanism:
                self._fail()
                return {"error_code": ErrorCode.ILLEGAL_SASL_STATE, "mechanisms": enabled}
            self.reauthenticating = True
        elif self.state != HANDSHAKE:
            self._fail()
            return {"error_code": ErrorCode.ILLEGAL_SASL_STATE, "mechanisms": enabled}
        try:
            self.server = security.new_sasl_server(listener, mechanism)
        except UnsupportedSaslMechanismError:
            log.info("connection %s: unsupported SASL mechanism %s", self.conn.id, mechanism)
            self._fail()
            return {"error_code": ErrorCode.UNSUPPORTED_SASL_MECHANISM, "mechanisms": enabled}
        self.mechanism = mechanism
        self.raw_tokens = version == 0
        self.state = AUTHENTICATE
        return {"error_code": ErrorCode.NONE, "mechanisms": enabled}

    # --- tokens ------------------------------------------------------------------------------

    def _evaluate(self, token: bytes) -> bytes:
        """One token through the SASL server; on completion the connection's principal is set.
        Raises SaslAuthenticationError with the message for the client."""
        assert self.server is not None
        try:
            reply = self.server.evaluate(token)
        except SaslAuthenticationError as e:
            log.info("connection %s: %s authentication failed: %s", self.conn.id, self.mechanism, e)
            if self.mechanism and self.mechanism.startswith("SCRAM-"):
                raise SaslAuthenticationError(
                    "Authentication failed during authentication due to invalid credentials "
                    f"with SASL mechanism {self.mechanism}"
                ) from e
            raise
        except Exception as e:  # noqa: BLE001 - a malformed token must not crash the broker
            log.info("connection %s: malformed SASL token: %s", self.conn.id, e)
            raise SaslAuthenticationError(
                f"Authentication failed: malformed {self.mechanism} message"
            ) from e
        if self.server.complete:
            principal = f"User:{self.server.authorization_id}"
            if self.reauthenticating and principal != self.conn.principal:
                raise SaslAuthenticationError(
                    f"Cannot change principals during re-authentication from "
                    f"{self.conn.principal}: {principal}"
                )
            self.conn.principal = principal
            self.state = COMPLETE
            self.reauthenticating = False
            log.debug("connection %s authenticated as %s", self.conn.id, principal)
        return reply

    def raw_token(self, frame: memoryview) -> list[Any]:
        """SaslHandshake v0 flow: a bare token in, a bare token out; failure just closes."""
        try:
            return [self._evaluate(bytes(frame))]
        except SaslAuthenticationError as e:
            self.state = FAILED
            raise CloseConnection(f"SASL authentication failed: {e}") from e

    def authenticate(self, token: bytes) -> dict[str, Any]:
        if self.state != AUTHENTICATE or self.raw_tokens:
            self._fail()
            return _illegal_state("Unexpected SaslAuthenticate request: no SASL handshake")
        try:
            reply = self._evaluate(token)
        except SaslAuthenticationError as e:
            self._fail()
            return {
                "error_code": ErrorCode.SASL_AUTHENTICATION_FAILED,
                "error_message": str(e),
                "auth_bytes": b"",
                "session_lifetime_ms": 0,
            }
        return {
            "error_code": ErrorCode.NONE,
            "error_message": None,
            "auth_bytes": reply,
            "session_lifetime_ms": max(0, self._reauth_ms()) if self.complete else 0,
        }


def _illegal_state(message: str) -> dict[str, Any]:
    return {
        "error_code": ErrorCode.ILLEGAL_SASL_STATE,
        "error_message": message,
        "auth_bytes": b"",
        "session_lifetime_ms": 0,
    }


@handles(ApiKey.SASL_HANDSHAKE, "0-1")
async def handle_sasl_handshake(ctx: RequestContext, req: dict[str, Any]) -> dict[str, Any]:
    auth: SaslAuthenticator | None = ctx.conn.authenticator
    if auth is None:
        return {"error_code": ErrorCode.ILLEGAL_SASL_STATE, "mechanisms": []}
    return auth.handshake(ctx.version, req["mechanism"])


@handles(ApiKey.SASL_AUTHENTICATE, "0-2")
async def handle_sasl_authenticate(ctx: RequestContext, req: dict[str, Any]) -> dict[str, Any]:
    auth: SaslAuthenticator | None = ctx.conn.authenticator
    if auth is None:
        return _illegal_state("SaslAuthenticate request received on a listener without SASL")
    if auth.complete:
        return _illegal_state("SaslAuthenticate request received after successful authentication")
    return auth.authenticate(bytes(req["auth_bytes"] or b""))
