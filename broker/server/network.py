"""The socket layer: listeners, size-prefixed frames, ordered responses, sendfile.

Each connection handles one request at a time, like Kafka's muted channels: the next frame is
read only after the previous response is queued, so responses leave in request order and a
connection never holds more than one request (bounded by socket.request.max.bytes) in memory.
Pipelining clients still work: their further requests wait in the kernel's socket buffer.

One exception, for acks=all produce: once a request's records are appended and it only waits
for the followers (the handler returns a future of its response), the next frame is read at
once. Otherwise a pipelining producer (librdkafka sends a request every linger.ms) gets one
replication round trip per request, and when that round trip is longer than linger.ms its
requests queue without bound in the socket. Appends still happen in request order and the
responses still leave in request order (a writer task sends the owed ones; any other response
waits for them). A connection owes at most `_PIPELINE_DEPTH` responses and holds at most
`_PIPELINE_BYTES` of their requests (socket.request.max.bytes if lower): a request is kept until
its response leaves, and with socket.request.max.bytes as the bound eight fast producers took a
broker to 270 MiB. Beyond that, and on TLS connections or for clients under a produce or
request quota, requests are served one at a time as before.

Small responses to a pipelining client whose next request, a small one, is already in the
buffer (librdkafka's one ListOffsets per partition when a consumer starts) are held and leave
together, up to 16 of them or 64 KiB, with the next response sent, or as soon as the
connection's task waits for anything: one send() took about half of such a request's CPU time.
A response is never held behind a request that waits (a long-poll fetch, a rebalance), nor
behind a large one (a produce request): a producer with few requests in flight waits for it.

Plain sockets (not asyncio transports) are used so that fetch responses can hand log bytes to
the kernel with os.sendfile; uvloop has no sendfile and transports own their file descriptors.
On SSL and SASL_SSL listeners the bytes go through a TLS session (tls.py) instead, and file
regions are read and encrypted: the kernel cannot encrypt what sendfile sends.
"""

from __future__ import annotations

import asyncio
import errno
import logging
import os
import socket
import ssl
from collections import deque
from collections.abc import Awaitable, Callable, Sequence
from dataclasses import dataclass, field
from typing import Any, Protocol
from urllib.parse import urlsplit

from .tls import TlsClosed, TlsSession

log = logging.getLogger(__name__)

_RECV_CHUNK = 256 * 1024
# What a large request's buffer takes at first, and then grows by doubling (see read_frame).
_FRAME_STEP = 1024 * 1024
# Small pieces are joined into one send; larger ones are sent as they are.
_COALESCE_LIMIT = 64 * 1024
# Responses held for one send at most (see Connection.hold), and the largest next request
# they may wait for.
_HOLD_RESPONSES = 16
_HOLD_BEFORE = 16 * 1024
# Responses a connection may owe while reading on (acks=all produce requests in flight).
_PIPELINE_DEPTH = 32
# ...and the bytes of their requests it may hold meanwhile: a few replication round trips' worth
# of a fast producer, which keeps a broker's memory bounded by its connections.
_PIPELINE_BYTES = 4 * 1024 * 1024


class FileRegion(Protocol):
    """A run of bytes in an open file (storage's FileSlice): sent with os.sendfile."""

    size: int
    position: int

    def fileno(self) -> int: ...


class ConnectionClosed(Exception):
    """The peer went away or the connection was closed on purpose."""


def _coalesced(head: bytes, chunks: Sequence[Any]) -> list[memoryview | FileRegion]:
    """`head` and `chunks` as a response goes out: file regions and large pieces as they are,
    the small pieces between them joined into one."""
    parts: list[memoryview | FileRegion] = []
    pending: list[Any] = [head]
    for c in chunks:
        if hasattr(c, "fileno") or len(c) > _COALESCE_LIMIT:
            if pending:
                parts.append(memoryview(b"".join(pending) if len(pending) > 1 else pending[0]))
                pending = []
            parts.append(c if hasattr(c, "fileno") else memoryview(c))
        else:
            pending.append(c)
    if pending:
        parts.append(memoryview(b"".join(pending) if len(pending) > 1 else pending[0]))
    return parts


def _read_region(region: FileRegion, skip: int, size: int) -> bytes:
    """`size` bytes of a region from `skip` on, read from its file: where sendfile cannot go
    (TLS, a file system without it)."""
    data = os.pread(region.fileno(), size, region.position + skip)
    if len(data) != size:
        raise ConnectionClosed("log file ended before the region did")
    return data


class ListenError(RuntimeError):
    """A listener cannot bind its address; the message names the listener and says why."""


_BIND_HINTS = {
    errno.EADDRINUSE: "another process listens there, another broker or Kafka perhaps: stop it, "
    "or choose another port in listeners",
    errno.EADDRNOTAVAIL: "no network interface of this machine has that address: check the host "
    "in listeners",
    errno.EACCES: "ports below 1024 need privileges: choose a higher port in listeners",
}


def _bind_failure(listener: Listener, e: OSError) -> str:
    hint = _BIND_HINTS.get(e.errno or 0)
    where = f"{listener.name}://{listener.host}:{listener.port}"
    return f"cannot listen on {where}: {e.strerror or e}" + (f" ({hint})" if hint else "")


class CloseConnection(ValueError):
    """A request that gets no answer: the connection is closed and the reason logged."""


@dataclass(frozen=True)
class Listener:
    name: str
    host: str
    port: int
    security_protocol: str = "PLAINTEXT"
    # Server context of SSL and SASL_SSL listeners.
    ssl_context: ssl.SSLContext | None = field(default=None, compare=False, repr=False)

    @property
    def uses_sasl(self) -> bool:
        return self.security_protocol in ("SASL_PLAINTEXT", "SASL_SSL")

    @classmethod
    def parse_list(cls, spec: str) -> list[Listener]:
        """Parse Kafka's `NAME://host:port,...` list (an empty host means every interface)."""
        listeners = []
        for item in (s.strip() for s in spec.split(",")):
            if not item:
                continue
            parts = urlsplit(item)
            if not parts.scheme or parts.port is None:
                raise ValueError(f"listener {item!r} is not NAME://host:port")
            listeners.append(cls(parts.scheme.upper(), parts.hostname or "", parts.port))
        return listeners


class Connection:
    """One client connection: frame reading, response writing, and its identity for handlers."""

    def __init__(
        self, sock: socket.socket, listener: Listener, loop: asyncio.AbstractEventLoop
    ) -> None:
        self.sock = sock
        self.listener = listener
        self.loop = loop
        peer = sock.getpeername()
        self.peer_host: str = peer[0]
        self.peer_port: int = peer[1]
        self.id = (
            f"{sock.getsockname()[0]}:{sock.getsockname()[1]}-{self.peer_host}:{self.peer_port}"
        )
        self.principal = "User:ANONYMOUS"
        self.closed = False
        self.tls: TlsSession | None = None
        # The SASL exchange of a SASL listener (handlers/sasl.py), set by the server.
        self.authenticator: Any = None
        # Set by a handler whose answer is the last one (a failed authentication).
        self.close_after_send = False
        # Client quotas (throttling.py): no request is read before `muted_until` (loop time);
        # old clients also get their response only then.
        self.muted_until = 0.0
        self.delay_response = False
        # Warnings already logged about this connection's requests (RequestContext.warn_once).
        self.warned: set[str] = set()
        # Whether quotas leave this connection's requests unthrottled, with what the answer
        # depends on (quota configs' version, principal, client id): the dispatcher's to keep.
        self.unthrottled: tuple[tuple[int, str, str], bool] | None = None
        self._fd = sock.fileno()
        # The readable callback (plaintext only; see _readable) and the task it wakes.
        self._reading = False
        self._waiter: asyncio.Future[None] | None = None
        self._buf = bytearray()
        self._chunk = bytearray(_RECV_CHUNK)
        self._chunk_view = memoryview(self._chunk)
        # Pipelined requests (see the module's docstring): their futures of response chunks in
        # request order, with their sizes, and the task sending them.
        self.pipeline_bytes = 0  # the server sets it (0: never)
        self.owed: deque[tuple[asyncio.Future[Any], int]] = deque()
        self.owed_bytes = 0
        self.writer: asyncio.Future[None] | None = None
        # Responses held for one send (see hold): their bytes, and the callback or the task
        # that sends them when the connection's task waits for something.
        self._held: list[bytes] = []
        self._held_bytes = 0
        self._flush_handle: asyncio.Handle | None = None
        self._flushing: asyncio.Future[None] | None = None

    def may_pipeline(self, size: int) -> bool:
        """May a request of `size` bytes that now only waits let the next one be read?"""
        return (
            self.tls is None
            and not self.closed
            and len(self.owed) < _PIPELINE_DEPTH
            and self.owed_bytes + size <= self.pipeline_bytes
        )

    def throttle(self, seconds: float, *, before_response: bool) -> None:
        """Mute the channel for `seconds` from now (Kafka's throttled channel)."""
        self.muted_until = max(self.muted_until, self.loop.time() + seconds)
        self.delay_response = before_response

    async def wait_unmuted(self) -> None:
        delay = self.muted_until - self.loop.time()
        if delay > 0:
            await asyncio.sleep(delay)

    async def start_tls(self, ctx: ssl.SSLContext) -> None:
        """Run the server handshake; a verified client certificate names the principal."""
        self.tls = TlsSession(ctx, self.sock, self.loop)
        try:
            await self.tls.handshake()
        except TlsClosed as e:
            raise ConnectionClosed(str(e)) from e
        self.principal = self.tls.principal() or "User:ANONYMOUS"

    async def _recv_into(self, view: memoryview) -> int:
        if self.tls is not None:
            try:
                return await self.tls.recv_into(view)
            except TlsClosed as e:
                raise ConnectionClosed(str(e)) from e
        sock = self.sock
        while True:
            try:
                return sock.recv_into(view)
            except (BlockingIOError, InterruptedError):
                pass
            if self.closed:
                raise ConnectionClosed("connection closed")
            await self._readable()

    def _readable(self) -> asyncio.Future[None]:
        """A future done once the socket has bytes to read. The reader stays registered while
        the connection waits for request after request: uvloop makes and closes a poll handle
        with five or six epoll_ctl calls for every reader added and removed, which
        sock_recv_into did once per request. It is removed when it fires with no one waiting
        (a request arrived while the previous one is handled, or the channel is muted): the
        bytes then wait in the kernel's buffer, which holds back the client."""
        waiter = self.loop.create_future()
        self._waiter = waiter
        if not self._reading:
            self.loop.add_reader(self._fd, self._on_readable)
            self._reading = True
        return waiter

    def _on_readable(self) -> None:
        waiter, self._waiter = self._waiter, None
        if waiter is None or waiter.done():
            self._stop_reading()
        else:
            waiter.set_result(None)

    def _stop_reading(self) -> None:
        if self._reading:
            self._reading = False
            self.loop.remove_reader(self._fd)

    async def _sendall(self, data: bytes | bytearray | memoryview) -> None:
        if self.tls is not None:
            try:
                await self.tls.sendall(data)
            except TlsClosed as e:
                raise ConnectionClosed(str(e)) from e
        else:
            await self.loop.sock_sendall(self.sock, data)

    async def _recv_some(self) -> None:
        n = await self._recv_into(self._chunk_view)
        if n == 0:
            raise ConnectionClosed("peer closed the connection")
        self._buf += self._chunk_view[:n]

    async def read_frame(self, max_size: int) -> memoryview:
        """Read one size-prefixed frame; oversize or negative sizes raise ValueError."""
        while len(self._buf) < 4:
            await self._recv_some()
        size = int.from_bytes(self._buf[:4], "big", signed=True)
        if size < 0 or size > max_size:
            raise ValueError(
                f"request size {size} is outside 0..{max_size} (socket.request.max.bytes)"
            )
        have = len(self._buf) - 4
        if have >= size:
            with memoryview(self._buf) as held:
                # Writable, like a large frame's: produce validation passes batches on in place.
                frame = bytearray(held[4 : 4 + size])
            del self._buf[: 4 + size]
            return memoryview(frame)
        # A large frame is received straight into a buffer of its own, which grows with the
        # bytes that arrive, not with the size its prefix announces: a peer that announces
        # socket.request.max.bytes and sends nothing more holds at most _FRAME_STEP more
        # than it sent. A producer's request (up to 1 MB from librdkafka) fits the first step.
        frame_buf = bytearray(min(size, have + _FRAME_STEP))
        frame_buf[:have] = memoryview(self._buf)[4:]
        self._buf.clear()
        filled = have
        while filled < size:
            if filled == len(frame_buf):
                grown = bytearray(min(size, 2 * filled))
                grown[:filled] = frame_buf
                frame_buf = grown
            n = await self._recv_into(memoryview(frame_buf)[filled:])
            if n == 0:
                raise ConnectionClosed("peer closed the connection mid-request")
            filled += n
        return memoryview(frame_buf)

    def hold(self, chunks: Sequence[Any]) -> bool:
        """Keep a small response to leave with the next ones, when the next request, a small
        one, is in the buffer already; False: send it now. What is held leaves with the next
        send(), or from a callback once the connection's task waits for anything."""
        if self.tls is not None or len(self._held) >= _HOLD_RESPONSES:
            return False
        if not self._small_frame_buffered():
            return False
        if any(hasattr(c, "fileno") for c in chunks):
            return False
        size = sum(len(c) for c in chunks)
        if self._held_bytes + 4 + size > _COALESCE_LIMIT:
            return False
        # A copy: a chunk may be a view of a buffer that changes once the handler is done.
        self._held.append(b"".join([size.to_bytes(4, "big"), *chunks]))
        self._held_bytes += 4 + size
        if self._flush_handle is None:
            self._flush_handle = self.loop.call_soon(self._flush_held)
        return True

    def _small_frame_buffered(self) -> bool:
        buf = self._buf
        if len(buf) < 4:
            return False
        size = int.from_bytes(buf[:4], "big", signed=True)
        return 0 <= size <= _HOLD_BEFORE and size <= len(buf) - 4

    def _take_held(self) -> bytes:
        if self._flush_handle is not None:
            self._flush_handle.cancel()
            self._flush_handle = None
        data = b"".join(self._held)
        self._held.clear()
        self._held_bytes = 0
        return data

    def _flush_held(self) -> None:
        """The connection's task waits: what it held leaves now, the rest from a task."""
        self._flush_handle = None
        if self.closed or not self._held or self._flushing is not None:
            return  # a flush still sending sends these after its own
        data = self._take_held()
        try:
            sent = self.sock.send(data)
        except (BlockingIOError, InterruptedError):
            sent = 0
        except OSError:
            self.close()  # the connection's task finds it closed
            return
        if sent < len(data):
            self._flushing = asyncio.ensure_future(self._send_rest(memoryview(data)[sent:]))

    async def _send_rest(self, rest: memoryview) -> None:
        try:
            await self._sendall(rest)
            while self._held and not self.closed:  # held meanwhile
                await self._sendall(self._take_held())
        except (OSError, ConnectionClosed):
            self.close()
        finally:
            if self._flushing is asyncio.current_task():
                self._flushing = None

    async def _after_pending_flush(self) -> None:
        """Wait for a flush the socket took only in part: its bytes go before anything else."""
        if self._flushing is not None:
            flushing, self._flushing = self._flushing, None
            await flushing

    async def flush(self) -> None:
        """Send what is held, after what an earlier flush still sends."""
        await self._after_pending_flush()
        if self._held:
            await self._sendall(self._take_held())

    async def send(self, chunks: Sequence[Any]) -> None:
        """Send a response: a 4-byte size, then bytes-like chunks and file regions in order;
        held responses first."""
        await self._after_pending_flush()
        total = 0
        for c in chunks:
            total += c.size if hasattr(c, "fileno") else len(c)
        head = total.to_bytes(4, "big")
        if self._held:
            head = self._take_held() + head
        parts = _coalesced(head, chunks)
        if self.tls is None and len(parts) > 1:
            await self._send_parts(parts)
            return
        for part in parts:
            if isinstance(part, memoryview):
                await self._sendall(part)
            else:
                await self._send_by_reading(part)

    async def _send_parts(self, parts: list[memoryview | FileRegion]) -> None:
        """Plaintext: bytes with send() and file regions with sendfile(), in order, as far as
        the socket takes them; the rest from one writable callback for the whole response.
        Registering a writer costs uvloop five or six epoll_ctl calls (it makes a poll handle
        for the socket and closes it again): once per response, not once per region."""
        sock = self.sock
        out_fd = self._fd
        index = pos = 0

        def push() -> bool:
            """Send what the socket takes now; True once everything is sent."""
            nonlocal index, pos
            while index < len(parts):
                part = parts[index]
                if isinstance(part, memoryview):
                    try:
                        pos += sock.send(part[pos:])
                    except BlockingIOError:
                        return False
                    if pos < len(part):
                        return False
                else:
                    try:
                        sent = os.sendfile(
                            out_fd, part.fileno(), part.position + pos, part.size - pos
                        )
                    except BlockingIOError:
                        return False
                    except OSError as e:
                        if e.errno not in (errno.EINVAL, errno.ENOSYS):
                            raise
                        # A file system without sendfile: read the rest of the region.
                        parts[index] = memoryview(_read_region(part, pos, part.size - pos))
                        pos = 0
                        continue
                    if sent == 0:
                        raise ConnectionClosed("log file ended before the region did")
                    pos += sent
                    if pos < part.size:
                        return False
                index += 1
                pos = 0
            return True

        if push():
            return
        done = self.loop.create_future()

        def on_writable() -> None:
            if done.done():
                return
            try:
                if push():
                    done.set_result(None)
            except Exception as e:  # noqa: BLE001 - raised where the response is awaited
                done.set_exception(e)

        self.loop.add_writer(out_fd, on_writable)
        try:
            await done
        finally:
            self.loop.remove_writer(out_fd)

    async def _send_by_reading(self, region: FileRegion) -> None:
        """A region read and sent 1 MiB at a time (TLS: the kernel cannot encrypt sendfile)."""
        done = 0
        while done < region.size:
            data = _read_region(region, done, min(region.size - done, 1 << 20))
            await self._sendall(data)
            done += len(data)

    def close(self) -> None:
        if not self.closed:
            self.closed = True
            if self._flush_handle is not None:
                self._flush_handle.cancel()
                self._flush_handle = None
            try:
                self._stop_reading()
            except RuntimeError:  # the loop is closed already
                pass
            waiter, self._waiter = self._waiter, None
            if waiter is not None and not waiter.done():
                waiter.set_exception(ConnectionClosed("connection closed"))
            try:
                self.sock.close()
            except OSError:
                pass


async def _flush_before_closing(conn: Connection) -> None:
    if not conn.closed:
        try:
            await conn.flush()
        except (OSError, ConnectionClosed):
            pass


# Returns the response chunks, or None when no response is due (Produce with acks=0), or a
# future of them for a request that lets the connection read on (see the module's docstring).
FrameHandler = Callable[
    [Connection, memoryview], Awaitable[list[Any] | asyncio.Future[list[Any] | None] | None]
]


class SocketServer:
    """Accepts connections on every listener and runs one serving task per connection."""

    def __init__(
        self,
        listeners: list[Listener],
        handle_frame: FrameHandler,
        max_request_bytes: int,
        *,
        send_buffer_bytes: int = -1,
        receive_buffer_bytes: int = -1,
    ) -> None:
        self.listeners = listeners
        self.handle_frame = handle_frame
        self.max_request_bytes = max_request_bytes
        # SO_SNDBUF of every connection, SO_RCVBUF of the listeners (their connections inherit
        # it, and the TCP window is sized by it at the handshake); -1 leaves the OS default.
        self.send_buffer_bytes = send_buffer_bytes
        self.receive_buffer_bytes = receive_buffer_bytes
        # Makes the SASL exchange of a connection on a SASL listener (set by the broker).
        self.new_authenticator: Callable[[Connection], Any] | None = None
        # A new connection's throttle ms from its IP's connection-rate quota (0: serve it).
        self.connection_throttle: Callable[[Connection], int] | None = None
        self.connections: set[Connection] = set()
        self.bound: dict[str, tuple[str, int]] = {}
        self._sockets: list[socket.socket] = []
        self._tasks: set[asyncio.Task[None]] = set()

    async def start(self) -> None:
        loop = asyncio.get_running_loop()
        for listener in self.listeners:
            family = socket.AF_INET6 if ":" in listener.host else socket.AF_INET
            sock = socket.socket(family, socket.SOCK_STREAM)
            sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
            if self.receive_buffer_bytes > 0:
                sock.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, self.receive_buffer_bytes)
            try:
                sock.bind((listener.host, listener.port))
            except OSError as e:
                sock.close()
                raise ListenError(_bind_failure(listener, e)) from e
            sock.listen(512)
            sock.setblocking(False)
            self._sockets.append(sock)
            self.bound[listener.name] = sock.getsockname()[:2]
            self._spawn(self._accept_loop(sock, listener, loop))
            log.info("listening on %s://%s:%d", listener.name, *self.bound[listener.name])

    def _spawn(self, coro: Awaitable[None]) -> None:
        task = asyncio.ensure_future(coro)
        self._tasks.add(task)
        task.add_done_callback(self._tasks.discard)

    async def _accept_loop(
        self, server_sock: socket.socket, listener: Listener, loop: asyncio.AbstractEventLoop
    ) -> None:
        while True:
            try:
                sock, _ = await loop.sock_accept(server_sock)
            except OSError as e:
                if server_sock.fileno() < 0:
                    return
                log.warning("accept failed on %s: %s", listener.name, e)
                await asyncio.sleep(0.1)
                continue
            sock.setblocking(False)
            sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
            if self.send_buffer_bytes > 0:
                sock.setsockopt(socket.SOL_SOCKET, socket.SO_SNDBUF, self.send_buffer_bytes)
            try:
                conn = Connection(sock, listener, loop)
            except OSError:
                sock.close()
                continue
            conn.pipeline_bytes = min(self.max_request_bytes, _PIPELINE_BYTES)
            self.connections.add(conn)
            throttle = self.connection_throttle(conn) if self.connection_throttle else 0
            if throttle > 0:
                # Kafka's answer to a connection over its IP's rate: closed unread, after the
                # throttle time, so the client backs off instead of reconnecting at once.
                log.info("connection %s over its IP's connection rate quota", conn.id)
                self._spawn(self._close_later(conn, throttle / 1000))
                continue
            self._spawn(self._serve(conn))

    async def _close_later(self, conn: Connection, delay_s: float) -> None:
        try:
            await asyncio.sleep(delay_s)
        finally:
            self.connections.discard(conn)
            conn.close()

    async def _serve(self, conn: Connection) -> None:
        try:
            if conn.listener.ssl_context is not None:
                await conn.start_tls(conn.listener.ssl_context)
            if conn.listener.uses_sasl and self.new_authenticator is not None:
                conn.authenticator = self.new_authenticator(conn)
            while True:
                frame = await conn.read_frame(self.max_request_bytes)
                chunks = await self.handle_frame(conn, frame)
                if isinstance(chunks, asyncio.Future):
                    self._owe(conn, chunks, len(frame))
                    continue
                if conn.writer is not None:
                    # Responses owed to earlier requests leave first.
                    await asyncio.wait([conn.writer])
                if conn.delay_response:
                    conn.delay_response = False
                    await conn.wait_unmuted()
                if chunks is not None and (conn.close_after_send or not conn.hold(chunks)):
                    await conn.send(chunks)
                if conn.close_after_send:
                    break
                await conn.wait_unmuted()
        except (ConnectionClosed, ConnectionError, BrokenPipeError):
            # The peer may only have stopped sending: it still gets the held and owed responses.
            await _flush_before_closing(conn)
            if conn.writer is not None and not conn.closed:
                await asyncio.wait([conn.writer])
        except ValueError as e:
            log.warning("closing connection %s: %s", conn.id, e)
            await _flush_before_closing(conn)  # the requests before the bad one are answered
        except asyncio.CancelledError:
            raise
        except OSError as e:
            log.info("connection %s failed: %s", conn.id, e)
        except Exception:
            log.exception("closing connection %s after an unexpected error", conn.id)
            await _flush_before_closing(conn)
        finally:
            conn.close()
            self.connections.discard(conn)
            for fut, _ in conn.owed:
                fut.cancel()

    def _owe(self, conn: Connection, fut: asyncio.Future[Any], size: int) -> None:
        """Queue the future response of a pipelined request behind those owed already."""
        conn.owed.append((fut, size))
        conn.owed_bytes += size
        if conn.writer is None:
            reader = asyncio.current_task()
            conn.writer = asyncio.ensure_future(self._write_owed(conn, reader))
            self._tasks.add(conn.writer)
            conn.writer.add_done_callback(self._tasks.discard)

    async def _write_owed(self, conn: Connection, reader: asyncio.Task[Any] | None) -> None:
        """Send the owed responses in request order; a failure closes the connection."""
        try:
            while conn.owed:
                fut, size = conn.owed[0]
                chunks = await fut
                if chunks is not None:
                    await conn.send(chunks)
                conn.owed.popleft()
                conn.owed_bytes -= size
        except asyncio.CancelledError:
            raise
        except Exception as e:  # logged as _serve would, then the reader stops too
            if isinstance(e, ValueError):
                log.warning("closing connection %s: %s", conn.id, e)
            elif isinstance(e, OSError) and not isinstance(e, (ConnectionError, ConnectionClosed)):
                log.info("connection %s failed: %s", conn.id, e)
            elif not isinstance(e, (ConnectionError, ConnectionClosed, OSError)):
                log.exception("closing connection %s after an unexpected error", conn.id)
            conn.close()
            if reader is not None:
                reader.cancel()
        finally:
            conn.writer = None

    async def stop(self) -> None:
        for sock in self._sockets:
            sock.close()
        for conn in list(self.connections):
            conn.close()
        for task in list(self._tasks):
            task.cancel()
        await asyncio.gather(*self._tasks, return_exceptions=True)
