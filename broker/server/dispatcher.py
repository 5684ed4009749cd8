"""From a request frame to response chunks: header, version checks, decoding, the handler.

Kafka's rules (reference §7.3): an unknown API key or an unsupported version closes the
connection without an answer, except ApiVersions, which accepts any version and answers a
too-new one with a v0 UNSUPPORTED_VERSION response listing only itself. On SASL listeners a
connection that has not authenticated may only send ApiVersions and the SASL requests (or, after
SaslHandshake v0, bare tokens); anything else closes it.
"""

from __future__ import annotations

import logging
import time
from typing import TYPE_CHECKING, Any

from ..protocol import codec
from ..protocol.api_keys import ApiKey
from ..protocol.errors import ErrorCode
from ..wait_time import metered
from .handlers import HANDLERS, RequestContext
from .handlers.sasl import PRE_AUTH_APIS
from .network import CloseConnection, Connection
from .throttling import apply_quotas, client_throttles, limit_fetch

if TYPE_CHECKING:
    from .broker import Broker

log = logging.getLogger(__name__)

# Answered even before the controller has told this broker about the cluster: the controller's
# own requests (which make the broker ready), ApiVersions, and SASL authentication.
_SERVED_BEFORE_READY = frozenset(
    {
        ApiKey.LEADER_AND_ISR,
        ApiKey.STOP_REPLICA,
        ApiKey.UPDATE_METADATA,
        ApiKey.CONTROLLED_SHUTDOWN,
        ApiKey.API_VERSIONS,
        ApiKey.SASL_HANDSHAKE,
        ApiKey.SASL_AUTHENTICATE,
    }
)


class Dispatcher:
    def __init__(self, broker: Broker) -> None:
        self.broker = broker

    async def handle_frame(self, conn: Connection, frame: memoryview) -> list[Any] | None:
        auth = conn.authenticator
        pre_auth = auth is not None and not auth.complete
        if pre_auth and auth.expects_raw_token:
            return auth.raw_token(frame)
        try:
            header, offset = codec.read_request_header(frame)
        except codec.ProtocolError as e:
            raise CloseConnection(f"malformed request header: {e}") from e
        if pre_auth and header.api_key not in PRE_AUTH_APIS:
            raise CloseConnection(
                f"request with API key {header.api_key} before SASL authentication completed"
            )
        spec = HANDLERS.get(header.api_key)
        if spec is None:
            raise CloseConnection(f"unknown or unsupported API key {header.api_key}")
        version = header.api_version
        if version not in spec.versions:
            if header.api_key == ApiKey.API_VERSIONS and version > spec.versions.hi:
                body = {
                    "error_code": ErrorCode.UNSUPPORTED_VERSION,
                    "api_keys": [
                        {
                            "api_key": ApiKey.API_VERSIONS,
                            "min_version": 0,
                            "max_version": spec.versions.hi,
                        }
                    ],
                }
                return codec.encode_response(ApiKey.API_VERSIONS, 0, header.correlation_id, body)
            raise CloseConnection(
                f"unsupported version {version} of API {header.api_key} "
                f"(supported {spec.versions.lo}-{spec.versions.hi})"
            )
        received = time.perf_counter_ns()
        try:
            request = codec.decode_request(header.api_key, version, frame, offset)
        except codec.ProtocolError as e:
            raise CloseConnection(f"malformed {ApiKey(header.api_key).name} v{version}: {e}") from e
        decode_ns = time.perf_counter_ns() - received
        if header.api_key not in _SERVED_BEFORE_READY and not self.broker.ready.is_set():
            await self.broker.wait_ready()
        ctx = RequestContext(self.broker, conn, header)
        if header.api_key == ApiKey.FETCH and self.broker.security is not None:
            limit_fetch(
                self.broker.security.quotas,
                conn.principal,
                header.client_id or "",
                version,
                request,
            )
        started = time.perf_counter_ns()
        with metered() as waits:
            response = await spec.fn(ctx, request)
        busy_ns = time.perf_counter_ns() - started - waits.ns
        self._throttle(conn, header, request, response, decode_ns + busy_ns)
        self.broker.metrics.record_request(
            header.api_key, version, (time.perf_counter_ns() - received) / 1e6
        )
        if response is None:
            return None
        return codec.encode_response(header.api_key, version, header.correlation_id, response)

    def _throttle(
        self,
        conn: Connection,
        header: codec.RequestHeader,
        request: dict[str, Any],
        response: dict[str, Any] | None,
        busy_ns: int,
    ) -> None:
        """Apply client quotas: set `throttle_time_ms` and tell the connection to mute."""
        security = self.broker.security
        if security is None:
            return
        throttle_ms = apply_quotas(
            security.quotas,
            self.broker,
            conn.principal,
            header.client_id or "",
            header.api_key,
            header.api_version,
            request,
            response,
            busy_ns,
            time.monotonic() * 1000.0,
        )
        if throttle_ms > 0:
            conn.throttle(
                throttle_ms / 1000.0,
                before_response=not client_throttles(header.api_key, header.api_version),
            )
