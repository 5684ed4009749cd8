"""How a client connection reads its requests and answers them, on the broker's own event
loop (uvloop): frames split across packets arrive whole and in order, a request sent while the
previous one is being handled waits in the kernel (what holds back a muted, throttled client),
closing a connection wakes the task waiting for its next request, and the answers to a
pipelining client's small requests are held to leave together, in order, and never longer than
until the connection's task waits."""

from __future__ import annotations

import asyncio
import socket
from collections.abc import Awaitable, Callable

import pytest
import uvloop
from odradek.broker.server.network import Connection, ConnectionClosed, Listener


def _frame(payload: bytes) -> bytes:
    return len(payload).to_bytes(4, "big") + payload


def _run(body: Callable[[Connection, socket.socket], Awaitable[None]], buffers: int = 0) -> None:
    """`buffers`: the client's receive and the broker side's send buffer (0: the defaults)."""

    async def main() -> None:
        loop = asyncio.get_running_loop()
        server = socket.create_server(("127.0.0.1", 0))
        client = socket.socket()
        if buffers:
            client.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, buffers)
        client.connect(server.getsockname())
        accepted, _ = server.accept()
        accepted.setblocking(False)
        if buffers:
            accepted.setsockopt(socket.SOL_SOCKET, socket.SO_SNDBUF, buffers)
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


def _read_frames(client: socket.socket, count: int) -> list[bytes]:
    client.settimeout(20)
    out = []
    for _ in range(count):
        size = int.from_bytes(_recv_exactly(client, 4), "big")
        out.append(_recv_exactly(client, size))
    return out


def _recv_exactly(client: socket.socket, n: int) -> bytes:
    data = b""
    while len(data) < n:
        chunk = client.recv(n - len(data))
        assert chunk, "connection closed"
        data += chunk
    return data


def test_answers_to_pipelined_small_requests_leave_together_and_in_order() -> None:
    async def body(conn: Connection, client: socket.socket) -> None:
        client.sendall(b"".join(_frame(b"request %d" % i) for i in range(5)))
        held = []
        for i in range(5):
            assert bytes(await conn.read_frame(1024)) == b"request %d" % i
            answer = [b"answer ", b"%d" % i]
            # Held while the next request is in the buffer; the last one goes with the others.
            held.append(conn.hold(answer))
            if not held[-1]:
                await conn.send(answer)
        assert held == [True, True, True, True, False]
        assert _read_frames(client, 5) == [b"answer %d" % i for i in range(5)]

    _run(body)


def test_a_held_answer_leaves_once_the_connection_waits() -> None:
    async def body(conn: Connection, client: socket.socket) -> None:
        client.sendall(_frame(b"one") + _frame(b"two: a long poll"))
        await conn.read_frame(1024)
        assert conn.hold([b"answer one"])
        await conn.read_frame(1024)
        await asyncio.sleep(0.2)  # the second request waits, and with it the task
        client.setblocking(False)
        assert _recv_exactly(client, 14) == _frame(b"answer one")

    _run(body)


def test_answers_a_full_socket_takes_in_parts_keep_their_order() -> None:
    async def body(conn: Connection, client: socket.socket) -> None:
        client.sendall(b"".join(_frame(b"request %d" % i) for i in range(4)))
        answers = [bytes([65 + i]) * 60_000 for i in range(3)]
        for answer in answers[:2]:
            await conn.read_frame(1024)
            assert conn.hold([answer])
            await asyncio.sleep(0.05)  # the flush: the socket takes part, a task the rest
        await conn.read_frame(1024)
        loop = asyncio.get_running_loop()
        reading = loop.run_in_executor(None, _read_frames, client, 3)
        await conn.send([answers[2]])
        assert await reading == answers

    _run(body, buffers=4096)
