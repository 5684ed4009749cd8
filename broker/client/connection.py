"""One asyncio TCP connection to a broker: framing, correlation ids, pipelining, versions.

Kafka answers the requests of one connection in the order it received them, so responses are
matched to a FIFO of outstanding requests (and the correlation id is checked, to detect a
confused peer). Any number of requests may be in flight. On connect the client asks ApiVersions
and afterwards `request()` picks, per API, the highest version both sides support.
"""

from __future__ import annotations

import asyncio
import contextlib
import itertools
import logging
import struct
from collections import deque
from dataclasses import dataclass
from typing import Any

from ..protocol.api_keys import ApiKey
from ..protocol.codec import ProtocolError, decode_response, encode_request
from ..protocol.errors import ErrorCode, KafkaError
from ..protocol.messages import REGISTRY
from .errors import BrokerConnectionError, RequestTimeoutError, UnsupportedVersionError
from .security import ClientSecurity

log = logging.getLogger(__name__)

_SIZE = struct.Struct(">i")
_CORRELATION_AND_ERROR = struct.Struct(">ih")

CLIENT_SOFTWARE_NAME = "odradek-client"
CLIENT_SOFTWARE_VERSION = "0.1.0"
DEFAULT_MAX_RESPONSE_BYTES = 256 * 1024 * 1024


def client_versions(api_key: int) -> tuple[int, int]:
    """The version range this client's schemas cover for `api_key`."""
    api = REGISTRY.get(api_key)
    if api is None:
        raise UnsupportedVersionError(f"no schema for API key {api_key}")
    return api.versions.lo, api.versions.hi


def negotiate_version(
    ours: tuple[int, int],
    theirs: tuple[int, int] | None,
    *,
    min_version: int = 0,
    max_version: int | None = None,
    name: str = "API",
) -> int:
    """Highest version in both ranges (and within the caller's bounds), else UnsupportedVersion."""
    if theirs is None:
        raise UnsupportedVersionError(f"the broker does not support {name}")
    hi = min(ours[1], theirs[1])
    if max_version is not None:
        hi = min(hi, max_version)
    lo = max(ours[0], theirs[0], min_version)
    if hi < lo:
        raise UnsupportedVersionError(
            f"{name}: client supports v{ours[0]}-{ours[1]}"
            f"{f' (v{min_version}+ needed)' if min_version else ''}, "
            f"broker supports v{theirs[0]}-{theirs[1]}"
        )
    return hi


def api_name(api_key: int) -> str:
    try:
        return ApiKey(api_key).name
    except ValueError:
        return f"API {api_key}"


@dataclass(slots=True)
class _Pending:
    correlation_id: int
    api_key: int
    version: int
    future: asyncio.Future[Any]
    raw: bool  # deliver the frame itself instead of a decoded body


class BrokerConnection:
    """A connection to one broker. Use `await BrokerConnection.open(host, port)` or `connect()`.

    `api_versions` maps each API key the broker announced to its (min, max) version.
    """

    def __init__(
        self,
        host: str,
        port: int,
        *,
        client_id: str = "odradek-client",
        request_timeout: float = 30.0,
        connect_timeout: float = 10.0,
        max_response_bytes: int = DEFAULT_MAX_RESPONSE_BYTES,
        node_id: int | None = None,
        security: ClientSecurity | None = None,
    ) -> None:
        self.host = host
        self.security = security
        self.port = port
        self.node_id = node_id
        self.client_id = client_id
        self.request_timeout = request_timeout
        self.connect_timeout = connect_timeout
        self.max_response_bytes = max_response_bytes
        self.api_versions: dict[int, tuple[int, int]] = {}
        self._reader: asyncio.StreamReader | None = None
        self._writer: asyncio.StreamWriter | None = None
        self._read_task: asyncio.Task[None] | None = None
        self._pending: deque[_Pending] = deque()
        self._correlation = itertools.count(1)
        self._closed_error: KafkaError | None = None
        self._connected = False

    def __repr__(self) -> str:
        node = f" node {self.node_id}" if self.node_id is not None else ""
        return f"<BrokerConnection{node} {self.host}:{self.port}>"

    @classmethod
    async def open(cls, host: str, port: int, **kwargs: Any) -> BrokerConnection:
        conn = cls(host, port, **kwargs)
        await conn.connect()
        return conn

    @property
    def connected(self) -> bool:
        return self._connected and self._closed_error is None

    @property
    def in_flight(self) -> int:
        return len(self._pending)

    async def connect(self) -> None:
        """Open the socket (TLS when configured), negotiate API versions, authenticate."""
        context = self.security.ssl_context() if self.security is not None else None
        try:
            self._reader, self._writer = await asyncio.wait_for(
                asyncio.open_connection(
                    self.host,
                    self.port,
                    ssl=context,
                    server_hostname=self.host if context is not None else None,
                ),
                self.connect_timeout,
            )
        except (OSError, TimeoutError) as e:
            raise BrokerConnectionError(
                f"cannot connect to {self.host}:{self.port}: {e or 'timed out'}"
            ) from None
        self._connected = True
        self._read_task = asyncio.get_running_loop().create_task(
            self._read_loop(), name=f"odradek-conn-{self.host}:{self.port}"
        )
        try:
            await self._negotiate()
            if self.security is not None and self.security.uses_sasl:
                await self.security.authenticate(
                    self.request, self.version_for(ApiKey.SASL_HANDSHAKE)
                )
        except BaseException:
            await self.close()
            raise

    async def _negotiate(self) -> None:
        """ApiVersions with our newest version; a broker that does not know it answers v0 with
        UNSUPPORTED_VERSION and its own range for ApiVersions, and we retry with that."""
        ours = client_versions(ApiKey.API_VERSIONS)
        version = ours[1]
        body = {
            "client_software_name": CLIENT_SOFTWARE_NAME,
            "client_software_version": CLIENT_SOFTWARE_VERSION,
        }
        while True:
            frame = await self._submit(ApiKey.API_VERSIONS, version, body, raw=True)
            _, error = _CORRELATION_AND_ERROR.unpack_from(frame, 0)
            if error == ErrorCode.UNSUPPORTED_VERSION and version > 0:
                _, v0 = decode_response(ApiKey.API_VERSIONS, 0, frame)
                theirs = {k["api_key"]: k["max_version"] for k in v0["api_keys"]}
                lower = min(version - 1, theirs.get(ApiKey.API_VERSIONS, version - 1))
                log.debug("%r: ApiVersions v%d unsupported, retrying v%d", self, version, lower)
                version = max(lower, 0)
                continue
            _, resp = decode_response(ApiKey.API_VERSIONS, version, frame)
            if resp["error_code"] != 0:
                raise KafkaError(resp["error_code"], f"ApiVersions v{version} refused")
            self.api_versions = {
                k["api_key"]: (k["min_version"], k["max_version"]) for k in resp["api_keys"]
            }
            return

    def version_for(
        self, api_key: int, *, min_version: int = 0, max_version: int | None = None
    ) -> int:
        """The version `request()` would use for `api_key`."""
        return negotiate_version(
            client_versions(api_key),
            self.api_versions.get(api_key),
            min_version=min_version,
            max_version=max_version,
            name=api_name(api_key),
        )

    def supports(self, api_key: int, *, min_version: int = 0) -> bool:
        try:
            self.version_for(api_key, min_version=min_version)
        except UnsupportedVersionError:
            return False
        return True

    async def request(
        self,
        api_key: int,
        body: dict,
        version: int | None = None,
        *,
        min_version: int = 0,
        max_version: int | None = None,
        timeout: float | None = None,
    ) -> dict:
        """Send one request and return the decoded response body.

        Without `version`, the negotiated one. A Produce with acks=0 gets no response from the
        broker: it returns {} as soon as the request is written.
        """
        if version is None:
            version = self.version_for(api_key, min_version=min_version, max_version=max_version)
        expect_response = not (api_key == ApiKey.PRODUCE and body.get("acks") == 0)
        return await self._submit(
            api_key, version, body, expect_response=expect_response, timeout=timeout
        )

    async def _submit(
        self,
        api_key: int,
        version: int,
        body: dict,
        *,
        raw: bool = False,
        expect_response: bool = True,
        timeout: float | None = None,
    ) -> Any:
        if self._closed_error is not None:
            raise BrokerConnectionError(f"{self!r} is closed: {self._closed_error.message}")
        if self._writer is None:
            raise BrokerConnectionError(f"{self!r} is not connected")
        correlation_id = next(self._correlation) & 0x7FFFFFFF
        frame = encode_request(api_key, version, correlation_id, self.client_id, body)
        future: asyncio.Future[Any] = asyncio.get_running_loop().create_future()
        if expect_response:
            self._pending.append(_Pending(correlation_id, api_key, version, future, raw))
        self._writer.write(_SIZE.pack(len(frame)) + frame)
        try:
            await self._writer.drain()
        except (OSError, RuntimeError) as e:
            self._fail(BrokerConnectionError(f"write to {self.host}:{self.port} failed: {e}"))
        if not expect_response:
            if self._closed_error is not None:
                raise BrokerConnectionError(self._closed_error.message or "connection closed")
            return {}
        limit = self.request_timeout if timeout is None else timeout
        try:
            # Not wait_for(shield(...)): three rounds of the loop after the response's arrival
            # before the caller runs (a follower's fetch loop is on every acks=all path).
            async with asyncio.timeout(limit):
                return await future
        except TimeoutError:
            error = RequestTimeoutError(
                f"{api_name(api_key)} v{version} to {self.host}:{self.port}: "
                f"no response within {limit:g}s"
            )
            self._fail(error)
            raise error from None

    async def _read_loop(self) -> None:
        assert self._reader is not None
        reader = self._reader
        try:
            while True:
                head = await reader.readexactly(4)
                (size,) = _SIZE.unpack(head)
                if size < 4 or size > self.max_response_bytes:
                    raise ProtocolError(f"response frame size {size} out of range")
                frame = await reader.readexactly(size)
                self._deliver(frame)
        except asyncio.CancelledError:
            raise
        except asyncio.IncompleteReadError:
            self._fail(BrokerConnectionError(f"{self.host}:{self.port} closed the connection"))
        except (OSError, ProtocolError) as e:
            self._fail(BrokerConnectionError(f"{self.host}:{self.port}: {e}"))

    def _deliver(self, frame: bytes) -> None:
        if not self._pending:
            raise ProtocolError("response received with no request outstanding")
        pending = self._pending[0]
        (correlation_id,) = _SIZE.unpack_from(frame, 0)
        if correlation_id != pending.correlation_id:
            raise ProtocolError(  # left queued: _fail() answers it with the error
                f"correlation id {correlation_id} does not match the expected "
                f"{pending.correlation_id}"
            )
        self._pending.popleft()
        if pending.future.done():
            return
        if pending.raw:
            pending.future.set_result(frame)
            return
        try:
            _, body = decode_response(pending.api_key, pending.version, frame)
        except ProtocolError as e:
            pending.future.set_exception(
                KafkaError(
                    ErrorCode.CORRUPT_MESSAGE,
                    f"undecodable {api_name(pending.api_key)} v{pending.version} response: {e}",
                )
            )
            return
        pending.future.set_result(body)

    def _fail(self, error: KafkaError) -> None:
        """Mark the connection dead and fail everything outstanding with `error`."""
        if self._closed_error is None:
            self._closed_error = error
        while self._pending:
            p = self._pending.popleft()
            if not p.future.done():
                p.future.set_exception(error)
                p.future.exception()  # a timed-out caller no longer awaits it: do not warn
        if self._writer is not None:
            self._writer.close()
        task = self._read_task
        if task is not None and task is not asyncio.current_task():
            task.cancel()

    async def close(self) -> None:
        """Close the socket; outstanding requests fail with BrokerConnectionError.

        The read loop's end is awaited without taking its outcome, so a caller cancelled
        meanwhile stays cancelled: a task that closes a broken connection on its way to a
        retry (the controller's channel to a broker) must not carry on when it is stopped.
        """
        self._fail(BrokerConnectionError(f"{self!r} closed by the client"))
        task = self._read_task
        if task is not None and task is not asyncio.current_task():
            await asyncio.wait([task])
            if not task.cancelled():
                task.exception()  # retrieved: what ended it is already in _closed_error
        if self._writer is not None:
            with contextlib.suppress(OSError, ConnectionError):
                await self._writer.wait_closed()

    async def __aenter__(self) -> BrokerConnection:
        if self._writer is None:
            await self.connect()
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self.close()
