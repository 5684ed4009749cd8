"""From a request frame to response chunks: header, version checks, decoding, the handler.

Kafka's rules (reference §7.3): an unknown API key or an unsupported version closes the
connection without an answer, except ApiVersions, which accepts any version and answers a
too-new one with a v0 UNSUPPORTED_VERSION response listing only itself. An API Kafka 3.9 has but
this broker does not serve (ApiVersions does not list it; clients that check never send it) is
answered UNSUPPORTED_VERSION when its response has a top-level error code, so that a client says
so instead of waiting; otherwise the connection is closed. Either way a warning names the API.
On SASL listeners a connection that has not authenticated may only send ApiVersions and the SASL
requests (or, after SaslHandshake v0, bare tokens); anything else closes it.
"""

from __future__ import annotations

import asyncio
import logging
import time
from typing import TYPE_CHECKING, Any

from ..protocol import codec
from ..protocol.api_keys import ApiKey
from ..protocol.errors import ErrorCode
from ..protocol.messages import REGISTRY
from ..quotas.manager import QuotaKind
from ..wait_time import WaitMeter, metered
from .handlers import HANDLERS, RequestContext
from .handlers.registry import Deferred
from .handlers.sasl import PRE_AUTH_APIS
from .network import CloseConnection, Connection
from .throttling import apply_quotas, client_throttles, limit_fetch

if TYPE_CHECKING:
    from .services import BrokerServices

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


def _not_served(conn: Connection, header: codec.RequestHeader) -> list[Any]:
    """An API of Kafka's that this broker does not serve: UNSUPPORTED_VERSION, or a closed
    connection when the response has no top-level error code to carry it."""
    api = REGISTRY[header.api_key]
    version = header.api_version
    what = f"{api.name} (API key {header.api_key}) v{version}"
    fields = {f.name for f in api.response if version in f.versions}
    if version not in api.versions or "error_code" not in fields:
        raise CloseConnection(f"{what} is not served by this broker")
    log.warning(
        "%s from client %r on %s is not served by this broker: answered UNSUPPORTED_VERSION",
        what,
        header.client_id,
        conn.id,
    )
    body: dict[str, Any] = {"error_code": ErrorCode.UNSUPPORTED_VERSION}
    if "error_message" in fields:
        body["error_message"] = f"{api.name} is not supported by this broker (Odradek)"
    return codec.encode_response(header.api_key, version, header.correlation_id, body)


class Dispatcher:
    def __init__(self, broker: BrokerServices) -> None:
        self.broker = broker

    async def handle_frame(
        self, conn: Connection, frame: memoryview
    ) -> list[Any] | asyncio.Future[list[Any] | None] | None:
        """The response chunks (None: no response), or a future of them when the connection
        may read on while the request waits (an acks=all produce, see network.py)."""
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
            if header.api_key in REGISTRY:
                return _not_served(conn, header)
            raise CloseConnection(f"unknown API key {header.api_key}")
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
            if isinstance(response, Deferred):
                if conn.may_pipeline(len(frame)) and self._unthrottled(conn, header):
                    # Created inside metered(): the task's waits count for this request.
                    return asyncio.ensure_future(
                        self._finish_later(
                            conn, header, request, response, received, decode_ns, started, waits
                        )
                    )
                response = await response.rest
        return self._finish(conn, header, request, response, received, decode_ns, started, waits)

    async def _finish_later(
        self,
        conn: Connection,
        header: codec.RequestHeader,
        request: dict[str, Any],
        deferred: Deferred,
        received: int,
        decode_ns: int,
        started: int,
        waits: WaitMeter,
    ) -> list[Any] | None:
        response = await deferred.rest
        return self._finish(conn, header, request, response, received, decode_ns, started, waits)

    def _finish(
        self,
        conn: Connection,
        header: codec.RequestHeader,
        request: dict[str, Any],
        response: dict[str, Any] | None,
        received: int,
        decode_ns: int,
        started: int,
        waits: WaitMeter,
    ) -> list[Any] | None:
        """Quotas, metrics and encoding of a handler's response."""
        busy_ns = time.perf_counter_ns() - started - waits.ns
        self._throttle(conn, header, request, response, decode_ns + busy_ns)
        self.broker.metrics.record_request(
            header.api_key, header.api_version, (time.perf_counter_ns() - received) / 1e6
        )
        if response is None:
            return None
        return codec.encode_response(
            header.api_key, header.api_version, header.correlation_id, response
        )

    def _unthrottled(self, conn: Connection, header: codec.RequestHeader) -> bool:
        """No byte-rate or request quota bounds this client: throttling it (muting the
        connection after a response) never depends on when its next request is read.

        The answer is kept on the connection for as long as what it depends on holds: the
        quota configs (their version moves with every update), the principal (SASL
        re-authentication may change it) and the client id."""
        security = self.broker.security
        if security is None:
            return True
        quotas = security.quotas
        key = (quotas.cache.version, conn.principal, header.client_id or "")
        known = conn.unthrottled
        if known is not None and known[0] == key:
            return known[1]
        answer = all(
            quotas.quota(key[1], key[2], kind) is None
            for kind in (QuotaKind.PRODUCE, QuotaKind.REQUEST)
        )
        conn.unthrottled = (key, answer)
        return answer

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
            self.broker.fetch_sessions,
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
