"""BrokerConnection against a tiny asyncio server that speaks the wire protocol through the
project's own codec: framing, ApiVersions negotiation (and its v0 fallback), pipelining,
timeouts and connection loss."""

from __future__ import annotations

import asyncio
import struct
from collections.abc import Awaitable, Callable

import pytest
from odradek.broker.client.connection import BrokerConnection, negotiate_version
from odradek.broker.client.errors import (
    BrokerConnectionError,
    RequestTimeoutError,
    UnsupportedVersionError,
)
from odradek.broker.protocol.api_keys import ApiKey
from odradek.broker.protocol.codec import decode_request, encode_response, read_request_header
from odradek.broker.protocol.errors import ErrorCode, KafkaError

Handler = Callable[[int, int, int, dict], Awaitable[dict | bytes | None]]


class TinyBroker:
    """Answers each request with what `handler(api_key, version, correlation_id, body)` returns:
    a body to encode at the request's version, raw frame bytes, or None for no answer."""

    def __init__(self, api_ranges: dict[int, tuple[int, int]], handler: Handler | None = None):
        self.api_ranges = api_ranges
        self.handler = handler
        self.seen: list[tuple[int, int]] = []
        self.server: asyncio.Server | None = None
        self.writers: list[asyncio.StreamWriter] = []
        self.tasks: set[asyncio.Task] = set()

    async def __aenter__(self) -> TinyBroker:
        self.server = await asyncio.start_server(self._serve, "127.0.0.1", 0)
        return self

    async def __aexit__(self, *exc: object) -> None:
        assert self.server is not None
        self.server.close()
        for w in self.writers:
            w.close()
        if self.tasks:
            await asyncio.wait(self.tasks, timeout=5)
        await self.server.wait_closed()

    @property
    def port(self) -> int:
        assert self.server is not None
        return self.server.sockets[0].getsockname()[1]

    def api_versions_body(self, error: int = 0) -> dict:
        return {
            "error_code": error,
            "api_keys": [
                {"api_key": k, "min_version": lo, "max_version": hi}
                for k, (lo, hi) in sorted(self.api_ranges.items())
            ],
        }

    async def _serve(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        self.writers.append(writer)
        task = asyncio.current_task()
        assert task is not None
        self.tasks.add(task)
        try:
            while True:
                (size,) = struct.unpack(">i", await reader.readexactly(4))
                frame = await reader.readexactly(size)
                header, offset = read_request_header(frame)
                self.seen.append((header.api_key, header.api_version))
                reply = await self._answer(
                    header.api_key, header.api_version, header.correlation_id, frame, offset
                )
                if reply is None:
                    continue
                writer.write(struct.pack(">i", len(reply)) + reply)
                await writer.drain()
        except (asyncio.IncompleteReadError, ConnectionError):
            pass
        finally:
            writer.close()

    async def _answer(
        self, api_key: int, version: int, correlation_id: int, frame: bytes, offset: int
    ) -> bytes | None:
        if api_key == ApiKey.API_VERSIONS:
            lo, hi = self.api_ranges[ApiKey.API_VERSIONS]
            if not lo <= version <= hi:
                # What Kafka does: a v0 body saying UNSUPPORTED_VERSION, with its ranges.
                parts = encode_response(
                    api_key,
                    0,
                    correlation_id,
                    self.api_versions_body(ErrorCode.UNSUPPORTED_VERSION),
                )
            else:
                parts = encode_response(api_key, version, correlation_id, self.api_versions_body())
            return b"".join(parts)
        body = decode_request(api_key, version, frame, offset)
        assert self.handler is not None
        out = await self.handler(api_key, version, correlation_id, body)
        if out is None or isinstance(out, bytes):
            return out
        return b"".join(encode_response(api_key, version, correlation_id, out))


def metadata_echo(delays: dict[str, float] | None = None) -> Handler:
    """Metadata handler answering with one topic named like the (first) requested one."""

    async def handler(api_key: int, version: int, correlation_id: int, body: dict) -> dict:
        name = body["topics"][0]["name"]
        if delays and name in delays:
            await asyncio.sleep(delays[name])
        return {
            "brokers": [{"node_id": 1, "host": "127.0.0.1", "port": 1}],
            "topics": [{"error_code": 3, "name": name, "partitions": []}],
        }

    return handler


FULL = {ApiKey.API_VERSIONS: (0, 4), ApiKey.METADATA: (0, 12), ApiKey.PRODUCE: (3, 11)}


def run(coro: Awaitable[None]) -> None:
    asyncio.run(asyncio.wait_for(coro, 30))


def test_negotiate_version_picks_highest_common() -> None:
    assert negotiate_version((0, 12), (0, 9)) == 9
    assert negotiate_version((0, 9), (3, 12)) == 9
    assert negotiate_version((0, 12), (0, 12), max_version=7) == 7
    assert negotiate_version((0, 12), (0, 12), min_version=4) == 12
    with pytest.raises(UnsupportedVersionError):
        negotiate_version((0, 2), (3, 5))
    with pytest.raises(UnsupportedVersionError):
        negotiate_version((0, 11), (0, 2), min_version=3)
    with pytest.raises(UnsupportedVersionError):
        negotiate_version((0, 11), None)


def test_negotiates_highest_version_per_api() -> None:
    async def main() -> None:
        ranges = {ApiKey.API_VERSIONS: (0, 4), ApiKey.METADATA: (0, 7), ApiKey.PRODUCE: (3, 20)}
        async with TinyBroker(ranges) as srv:
            conn = await BrokerConnection.open("127.0.0.1", srv.port)
            try:
                assert srv.seen == [(ApiKey.API_VERSIONS, 4)]
                assert conn.api_versions[ApiKey.METADATA] == (0, 7)
                assert conn.version_for(ApiKey.METADATA) == 7
                assert conn.version_for(ApiKey.PRODUCE) == 11  # our newest schema
                assert conn.version_for(ApiKey.METADATA, max_version=4) == 4
                assert not conn.supports(ApiKey.FETCH)
                with pytest.raises(UnsupportedVersionError):
                    conn.version_for(ApiKey.FETCH)
            finally:
                await conn.close()

    run(main())


def test_api_versions_retries_lower_after_unsupported_version() -> None:
    async def main() -> None:
        ranges = {ApiKey.API_VERSIONS: (0, 2), ApiKey.METADATA: (0, 9)}
        async with TinyBroker(ranges, metadata_echo()) as srv:
            conn = await BrokerConnection.open("127.0.0.1", srv.port)
            try:
                assert srv.seen == [(ApiKey.API_VERSIONS, 4), (ApiKey.API_VERSIONS, 2)]
                assert conn.api_versions[ApiKey.METADATA] == (0, 9)
                resp = await conn.request(ApiKey.METADATA, {"topics": [{"name": "t"}]})
                assert srv.seen[-1] == (ApiKey.METADATA, 9)
                assert resp["topics"][0]["name"] == "t"
            finally:
                await conn.close()

    run(main())


def test_api_versions_v0_only_broker() -> None:
    async def main() -> None:
        async with TinyBroker({ApiKey.API_VERSIONS: (0, 0), ApiKey.METADATA: (0, 1)}) as srv:
            conn = await BrokerConnection.open("127.0.0.1", srv.port)
            try:
                assert srv.seen == [(ApiKey.API_VERSIONS, 4), (ApiKey.API_VERSIONS, 0)]
                assert conn.version_for(ApiKey.METADATA) == 1
            finally:
                await conn.close()

    run(main())


def test_pipelined_requests_get_their_own_responses() -> None:
    async def main() -> None:
        # The server handles requests one at a time, in order; early ones answer slowest.
        delays = {f"t{i}": 0.05 * (10 - i) / 10 for i in range(10)}
        async with TinyBroker(FULL, metadata_echo(delays)) as srv:
            conn = await BrokerConnection.open("127.0.0.1", srv.port)
            try:
                names = [f"t{i}" for i in range(10)]
                tasks = [
                    asyncio.ensure_future(conn.request(ApiKey.METADATA, {"topics": [{"name": n}]}))
                    for n in names
                ]
                await asyncio.sleep(0)
                assert conn.in_flight == 10
                responses = await asyncio.gather(*tasks)
                assert [r["topics"][0]["name"] for r in responses] == names
                assert conn.in_flight == 0
            finally:
                await conn.close()

    run(main())


def test_explicit_version_is_used() -> None:
    async def main() -> None:
        async with TinyBroker(FULL, metadata_echo()) as srv:
            async with BrokerConnection("127.0.0.1", srv.port) as conn:
                await conn.request(ApiKey.METADATA, {"topics": [{"name": "x"}]}, 1)
                assert srv.seen[-1] == (ApiKey.METADATA, 1)

    run(main())


def test_request_timeout_closes_the_connection() -> None:
    async def never(api_key: int, version: int, correlation_id: int, body: dict) -> None:
        return None

    async def main() -> None:
        async with TinyBroker(FULL, never) as srv:
            conn = await BrokerConnection.open("127.0.0.1", srv.port, request_timeout=0.2)
            with pytest.raises(RequestTimeoutError) as info:
                await conn.request(ApiKey.METADATA, {"topics": [{"name": "x"}]})
            assert info.value.code == ErrorCode.REQUEST_TIMED_OUT
            assert info.value.retriable
            assert not conn.connected
            with pytest.raises(BrokerConnectionError):
                await conn.request(ApiKey.METADATA, {"topics": [{"name": "x"}]})
            await conn.close()

    run(main())


def test_connection_lost_fails_outstanding_requests() -> None:
    async def main() -> None:
        async with TinyBroker(FULL) as srv:

            async def hang_up(api_key: int, version: int, correlation_id: int, body: dict):
                for w in srv.writers:
                    w.close()
                return None

            srv.handler = hang_up
            conn = await BrokerConnection.open("127.0.0.1", srv.port)
            with pytest.raises(BrokerConnectionError) as info:
                await conn.request(ApiKey.METADATA, {"topics": [{"name": "x"}]})
            assert info.value.code == ErrorCode.NETWORK_EXCEPTION
            assert info.value.retriable
            assert not conn.connected
            await conn.close()

    run(main())


def test_wrong_correlation_id_breaks_the_connection() -> None:
    async def main() -> None:
        async def confused(api_key: int, version: int, correlation_id: int, body: dict) -> bytes:
            parts = encode_response(api_key, version, correlation_id + 1000, {"topics": []})
            return b"".join(parts)

        async with TinyBroker(FULL, confused) as srv:
            conn = await BrokerConnection.open("127.0.0.1", srv.port)
            with pytest.raises(BrokerConnectionError, match="correlation id"):
                await conn.request(ApiKey.METADATA, {"topics": [{"name": "x"}]})
            await conn.close()

    run(main())


def test_produce_with_acks_0_expects_no_response() -> None:
    async def main() -> None:
        got: list[dict] = []

        async def produce(api_key: int, version: int, correlation_id: int, body: dict) -> None:
            got.append(body)
            return None  # a broker never answers acks=0

        async with TinyBroker(FULL, produce) as srv:
            async with BrokerConnection("127.0.0.1", srv.port, request_timeout=0.5) as conn:
                body = {"acks": 0, "timeout_ms": 1000, "topic_data": []}
                assert await conn.request(ApiKey.PRODUCE, body) == {}
                for _ in range(100):
                    if got:
                        break
                    await asyncio.sleep(0.01)
                assert got and got[0]["acks"] == 0
                assert srv.seen[-1] == (ApiKey.PRODUCE, 11)

    run(main())


def test_connect_refused_is_a_connection_error() -> None:
    async def main() -> None:
        server = await asyncio.start_server(lambda r, w: None, "127.0.0.1", 0)
        port = server.sockets[0].getsockname()[1]
        server.close()
        await server.wait_closed()
        with pytest.raises(BrokerConnectionError, match="cannot connect"):
            await BrokerConnection.open("127.0.0.1", port, connect_timeout=2)

    run(main())


def test_api_versions_error_is_raised() -> None:
    async def main() -> None:
        srv = TinyBroker({ApiKey.API_VERSIONS: (0, 4)})
        original = srv.api_versions_body
        srv.api_versions_body = lambda error=0: original(error or ErrorCode.INVALID_REQUEST)
        async with srv:
            with pytest.raises(KafkaError) as info:
                await BrokerConnection.open("127.0.0.1", srv.port)
            assert info.value.code == ErrorCode.INVALID_REQUEST

    run(main())


def test_a_task_cancelled_while_closing_its_connection_stays_cancelled() -> None:
    """The controller stops a broker's channel (the broker was found dead or restarted) with a
    cancel; when that cancel landed while the channel closed its broken connection, close()
    swallowed it, so the channel went on retrying with the old broker epoch and the controller,
    waiting for it to end, handled no event again (chaos kill-all)."""

    async def main() -> None:
        async with TinyBroker(FULL) as srv:
            conn = await BrokerConnection.open("127.0.0.1", srv.port)
            closing = asyncio.create_task(conn.close())
            await asyncio.sleep(0)  # close() now waits for the read loop to end
            closing.cancel()
            with pytest.raises(asyncio.CancelledError):
                await closing
            assert closing.cancelled()
            assert not conn.connected
            await conn.close()  # closing again is harmless

    run(main())
