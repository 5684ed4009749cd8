"""Kafka requests over a bare socket, for tests that need the frames under their control: a
SASL exchange step by step, a request at a version a client would never pick, bytes after a
handshake. Encoding is the project's codec; nothing here negotiates or retries."""

from __future__ import annotations

import socket
import struct

from odradek.broker.client.blocking import recv_exact
from odradek.broker.protocol import codec

CLIENT_ID = "odradek-raw-tests"


def frame(
    api_key: int, version: int, body: dict, correlation_id: int = 1, client_id: str = CLIENT_ID
) -> bytes:
    """One size-prefixed request."""
    payload = codec.encode_request(api_key, version, correlation_id, client_id, body)
    return struct.pack(">i", len(payload)) + payload


def send_frame(sock: socket.socket, payload: bytes) -> None:
    sock.sendall(struct.pack(">i", len(payload)) + payload)


def recv_frame(sock: socket.socket) -> bytes:
    """The next response frame without its size prefix."""
    (size,) = struct.unpack(">i", recv_exact(sock, 4))
    assert 0 <= size <= 64 << 20, f"implausible response size {size}"
    return recv_exact(sock, size)


def call(
    sock: socket.socket, api_key: int, version: int, body: dict, correlation_id: int = 1
) -> dict:
    """Send one request and decode its response, checking the correlation id."""
    sock.sendall(frame(api_key, version, body, correlation_id))
    got, response = codec.decode_response(api_key, version, recv_frame(sock))
    assert got == correlation_id
    return response
