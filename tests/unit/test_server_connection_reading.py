"""How a client connection reads its requests, on the broker's own event loop (uvloop): frames
split across packets arrive whole and in order, a request sent while the previous one is
being handled waits in the kernel (what holds back a muted, throttled client), and closing a
connection wakes the task waiting for its next request."""

from __future__ import annotations

import asyncio
import socket
from collections.abc import Awaitable, Callable

import pytest
import uvloop
from odradek.broker.server.network import Connection, ConnectionClosed, Listener


def _frame(payload: bytes) -> bytes:
    return len(payload).to_bytes(4, "big") + payload


def _run(body: Callable[[Connection, socket.socket], Awaitable[None]]) -> None:
    async def main() -> None:
        loop = asyncio.get_running_loop()
        server = socket.create_server(("127.0.0.1", 0))
        client = socket.create_connection(server.getsockname())
        accepted, _ = server.accept()
        accepted.setblocking(False)
        conn = Connection(accepted, Listener("PLAINTEXT", "127.0.0.1", 0), loop)
        try:
            await asyncio.wait_for(body(conn, client), 30)
        finally:
            conn.close()
            client.close()
            server.close()

    uvloop.run(main())


def test_frames_split_across_packets_are_read_whole_and_in_order() -> None:
    async def body(conn: Connection, client: socket.socket) -> None:
        wire = _frame(b"first") + _frame(b"x" * 300_000) + _frame(b"third")
        reading = asyncio.ensure_future(conn.read_frame(1 << 20))
        for i in range(0, len(wire), 7_001):
            client.sendall(wire[i : i + 7_001])
            await asyncio.sleep(0)
        assert bytes(await reading) == b"first"
        assert bytes(await conn.read_frame(1 << 20)) == b"x" * 300_000
        assert bytes(await conn.read_frame(1 << 20)) == b"third"

    _run(body)


def test_a_request_sent_while_the_previous_is_handled_waits_in_the_kernel() -> None:
    async def body(conn: Connection, client: socket.socket) -> None:
        client.sendall(_frame(b"one"))
        assert bytes(await conn.read_frame(1024)) == b"one"
        # The handler (or a quota's mute) holds the connection: nothing reads it meanwhile.
        client.sendall(_frame(b"two"))
        await asyncio.sleep(0.2)
        waiting = conn.sock.recv(64, socket.MSG_PEEK)
        assert waiting == _frame(b"two")
        assert bytes(await conn.read_frame(1024)) == b"two"

    _run(body)


def test_closing_a_connection_wakes_the_task_waiting_for_its_next_request() -> None:
    async def body(conn: Connection, client: socket.socket) -> None:
        reading = asyncio.ensure_future(conn.read_frame(1024))
        await asyncio.sleep(0.1)
        assert not reading.done()
        conn.close()
        with pytest.raises(ConnectionClosed):
            await reading

    _run(body)


def test_a_peer_that_goes_away_ends_the_read() -> None:
    async def body(conn: Connection, client: socket.socket) -> None:
        client.sendall(_frame(b"last")[:6])
        reading = asyncio.ensure_future(conn.read_frame(1024))
        await asyncio.sleep(0.1)
        client.close()
        with pytest.raises(ConnectionClosed):
            await reading

    _run(body)
