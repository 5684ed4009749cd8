"""socket.send.buffer.bytes and socket.receive.buffer.bytes reach the sockets of client
connections (a fixed 100 KiB send buffer made large fetches faster than the autotuned one)."""

from __future__ import annotations

import asyncio
import socket

from odradek.broker.server.network import Listener, SocketServer


async def _accepted_buffers(send: int, receive: int) -> tuple[int, int]:
    """(SO_SNDBUF, SO_RCVBUF) of the server side of one client connection."""

    async def never_answers(conn, frame):
        return None

    server = SocketServer(
        [Listener("PLAINTEXT", "127.0.0.1", 0)],
        never_answers,
        1 << 20,
        send_buffer_bytes=send,
        receive_buffer_bytes=receive,
    )
    await server.start()
    client = socket.create_connection(server.bound["PLAINTEXT"])
    try:
        for _ in range(500):
            if server.connections:
                break
            await asyncio.sleep(0.01)
        (conn,) = server.connections
        return (
            conn.sock.getsockopt(socket.SOL_SOCKET, socket.SO_SNDBUF),
            conn.sock.getsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF),
        )
    finally:
        client.close()
        await server.stop()


def test_configured_buffers_are_set_and_minus_one_leaves_the_os_default():
    # Linux reports twice the size asked for (the kernel's bookkeeping share).
    assert asyncio.run(_accepted_buffers(65536, 98304)) == (2 * 65536, 2 * 98304)
    send, receive = asyncio.run(_accepted_buffers(-1, -1))
    assert send != 2 * 65536 and receive != 2 * 98304
