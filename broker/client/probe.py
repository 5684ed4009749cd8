"""A blocking one-request check that something Kafka-like listens at host:port.

For process supervisors (tests, benchmarks) that must know when a freshly started broker, ours
or Apache Kafka, accepts requests, without an event loop. ApiVersions v0 is the one request
every Kafka broker answers before authentication.
"""

from __future__ import annotations

import socket
import struct

from ..protocol.api_keys import ApiKey
from ..protocol.codec import ProtocolError, decode_response, encode_request

_SIZE = struct.Struct(">i")
_CORRELATION_ID = 1


def _recv_exact(sock: socket.socket, n: int) -> bytes:
    buf = bytearray()
    while len(buf) < n:
        chunk = sock.recv(n - len(buf))
        if not chunk:
            raise ConnectionError("connection closed by the broker")
        buf += chunk
    return bytes(buf)


def api_versions_probe(host: str, port: int, timeout: float = 2.0) -> bool:
    """True when host:port answers an ApiVersions v0 request with error code 0."""
    request = encode_request(ApiKey.API_VERSIONS, 0, _CORRELATION_ID, "odradek-probe", {})
    try:
        with socket.create_connection((host, port), timeout=timeout) as sock:
            sock.sendall(_SIZE.pack(len(request)) + request)
            (size,) = _SIZE.unpack(_recv_exact(sock, 4))
            correlation_id, body = decode_response(ApiKey.API_VERSIONS, 0, _recv_exact(sock, size))
    except (OSError, ProtocolError, struct.error):
        return False
    return correlation_id == _CORRELATION_ID and body.get("error_code") == 0
