"""A blocking connection that speaks one request at a time, without an event loop.

For process supervisors (tests, benchmarks) that must know when a freshly started broker, ours
or Apache Kafka, accepts requests, and for tests that need exact control of the frames a client
sends (versions, field values) rather than the asyncio client's negotiation.
"""

from __future__ import annotations

import socket
import struct
from typing import Any

from ..protocol.api_keys import ApiKey
from ..protocol.codec import ProtocolError, decode_response, encode_request

_SIZE = struct.Struct(">i")


def recv_exact(sock: socket.socket, n: int) -> bytes:
    buf = bytearray()
    while len(buf) < n:
        chunk = sock.recv(n - len(buf))
        if not chunk:
            raise ConnectionError("connection closed by the broker")
        buf += chunk
    return bytes(buf)


class BlockingConnection:
    """Requests at the version given, encoded by the project's codec; raises OSError on I/O
    failure and ProtocolError on a response that does not decode or match."""

    def __init__(
        self, host: str, port: int, *, timeout: float = 30.0, client_id: str = "odradek-blocking"
    ) -> None:
        self.sock = socket.create_connection((host, port), timeout=timeout)
        self.client_id = client_id
        self.correlation_id = 0

    def call(self, api_key: int, version: int, body: dict[str, Any]) -> dict[str, Any]:
        self.correlation_id += 1
        frame = encode_request(api_key, version, self.correlation_id, self.client_id, body)
        self.sock.sendall(_SIZE.pack(len(frame)) + frame)
        (size,) = _SIZE.unpack(recv_exact(self.sock, 4))
        got, response = decode_response(api_key, version, recv_exact(self.sock, size))
        if got != self.correlation_id:
            raise ProtocolError(f"correlation id {got}, expected {self.correlation_id}")
        return response

    def close(self) -> None:
        self.sock.close()

    def __enter__(self) -> BlockingConnection:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


def api_versions_probe(host: str, port: int, timeout: float = 2.0) -> bool:
    """True when host:port answers an ApiVersions v0 request with error code 0 (the one
    request every Kafka broker answers before authentication)."""
    try:
        with BlockingConnection(host, port, timeout=timeout, client_id="odradek-probe") as conn:
            body = conn.call(ApiKey.API_VERSIONS, 0, {})
    except (OSError, ProtocolError, struct.error):
        return False
    return body.get("error_code") == 0
