"""Wire-level behaviour of a running broker, spoken over raw sockets with the project's own codec.

These are the socket-layer rules every Kafka client relies on (reference §7): ApiVersions is
answered at any version, anything else the broker does not serve closes the connection without a
response, responses come back in request order, and an oversized frame is refused by closing the
connection. Each check uses its own connection, so one closed connection never hides another.
"""

from __future__ import annotations

import socket
import struct

import pytest
from odradek.broker.protocol import codec
from odradek.broker.protocol.api_keys import ApiKey
from odradek.broker.protocol.errors import ErrorCode
from odradek.broker.protocol.messages import REGISTRY
from raw_wire import CLIENT_ID, call, recv_frame, send_frame

IO_TIMEOUT = 30.0  # generous: a slow broker is not what these tests measure


# --- raw socket helpers ---------------------------------------------------------------------------


def connect(host: str, port: int) -> socket.socket:
    sock = socket.create_connection((host, port), timeout=IO_TIMEOUT)
    sock.settimeout(IO_TIMEOUT)
    return sock


def raw_header(
    api_key: int, version: int, correlation_id: int, client_id: str = CLIENT_ID
) -> bytes:
    """A request header built by hand, for versions the codec (rightly) refuses to encode."""
    header = struct.pack(">hhi", api_key, version, correlation_id)
    if codec.request_header_version(api_key, version) >= 1:
        raw_id = client_id.encode()
        header += struct.pack(">h", len(raw_id)) + raw_id
    if codec.request_header_version(api_key, version) == 2:
        header += b"\x00"  # empty tagged-field section
    return header


def assert_closed_without_response(sock: socket.socket, what: str) -> None:
    """The broker must close the connection and send nothing at all first."""
    try:
        data = sock.recv(65536)
    except ConnectionResetError:
        return
    except TimeoutError:
        pytest.fail(f"{what}: connection still open and silent after {IO_TIMEOUT}s")
    assert data == b"", f"{what}: expected the connection to be closed, got bytes {data[:64]!r}"


def api_versions(host: str, port: int, version: int = 0) -> dict:
    body = {"client_software_name": "odradek-tests", "client_software_version": "1.0"}
    with connect(host, port) as sock:
        return call(sock, ApiKey.API_VERSIONS, version, body)


def advertised(host: str, port: int) -> dict[int, tuple[int, int]]:
    response = api_versions(host, port)
    assert response["error_code"] == ErrorCode.NONE
    return {e["api_key"]: (e["min_version"], e["max_version"]) for e in response["api_keys"]}


def is_odradek(broker) -> bool:
    """False when the tests run against an external broker (ODRADEK_TEST_BOOTSTRAP)."""
    return hasattr(broker, "proc")


def assert_still_serving(broker) -> None:
    assert api_versions(broker.host, broker.port)["error_code"] == ErrorCode.NONE


# --- ApiVersions ----------------------------------------------------------------------------------


@pytest.mark.parametrize("version", [0, 1, 2, 3, 4])
def test_api_versions_lists_what_the_broker_handles(broker, version: int) -> None:
    response = api_versions(broker.host, broker.port, version)
    assert response["error_code"] == ErrorCode.NONE
    entries = response["api_keys"]
    keys = [e["api_key"] for e in entries]
    assert len(keys) == len(set(keys)), f"duplicate API keys advertised: {keys}"
    ranges = {e["api_key"]: (e["min_version"], e["max_version"]) for e in entries}
    # Every client needs these; ApiVersions itself must cover exactly the versions tested here.
    for key in (ApiKey.PRODUCE, ApiKey.FETCH, ApiKey.LIST_OFFSETS, ApiKey.METADATA):
        assert key in ranges, f"{ApiKey(key).name} is not advertised"
    assert ranges[ApiKey.API_VERSIONS] == (0, 4)
    for key, (lo, hi) in ranges.items():
        assert 0 <= lo <= hi, f"API {key}: bad range {lo}-{hi}"
        api = REGISTRY.get(key)
        if api is not None:
            # Kafka 3.9's own version ranges bound what any 3.9-compatible broker may claim.
            assert lo >= api.versions.lo and hi <= api.versions.hi, (
                f"{api.name}: advertised {lo}-{hi} outside Kafka 3.9's {api.versions}"
            )
        elif is_odradek(broker):
            pytest.fail(f"API key {key} is advertised but has no schema in this project")
    if version >= 1:
        assert response["throttle_time_ms"] == 0


def test_api_versions_same_list_at_every_version(broker) -> None:
    """One connection, five versions: the same list every time, and the connection stays open."""
    body = {"client_software_name": "odradek-tests", "client_software_version": "1.0"}
    with connect(broker.host, broker.port) as sock:
        lists = []
        for version in range(5):
            response = call(sock, ApiKey.API_VERSIONS, version, body, correlation_id=100 + version)
            assert response["error_code"] == ErrorCode.NONE
            lists.append(
                sorted(
                    (e["api_key"], e["min_version"], e["max_version"]) for e in response["api_keys"]
                )
            )
    assert all(lst == lists[0] for lst in lists)


def test_advertised_ranges_are_the_accepted_ranges(broker) -> None:
    """A version just outside any advertised range closes the connection without a response."""
    for key, (lo, hi) in sorted(advertised(broker.host, broker.port).items()):
        if key == ApiKey.API_VERSIONS:
            continue  # accepted at every version, tested below
        for version in [hi + 1] + ([lo - 1] if lo > 0 else []):
            with connect(broker.host, broker.port) as sock:
                send_frame(sock, raw_header(key, version, 77))
                assert_closed_without_response(sock, f"API {key} v{version} (advertised {lo}-{hi})")
    assert_still_serving(broker)


@pytest.mark.parametrize("too_new", [5, 127])
def test_api_versions_too_new_gets_v0_unsupported_version(broker, too_new: int) -> None:
    api = REGISTRY[ApiKey.API_VERSIONS]
    max_version = advertised(broker.host, broker.port)[ApiKey.API_VERSIONS][1]
    assert too_new > max_version
    # Header v2 (ApiVersions is flexible from v3, so any newer version is too); the body is
    # whatever a newer client might send and must not be parsed.
    body = codec.encode_body(
        api,
        3,
        "request",
        {"client_software_name": "future-client", "client_software_version": "9.9"},
    )
    with connect(broker.host, broker.port) as sock:
        send_frame(sock, raw_header(ApiKey.API_VERSIONS, too_new, 4242) + body)
        frame = recv_frame(sock)
        (correlation_id,) = struct.unpack_from(">i", frame)
        assert correlation_id == 4242
        # Serialized as v0 (response header v0 + v0 body): decoding as v0 consumes every byte.
        response, end = codec.decode_body(api, 0, "response", frame, 4)
        assert end == len(frame), "the UNSUPPORTED_VERSION response is not v0-encoded"
        assert response["error_code"] == ErrorCode.UNSUPPORTED_VERSION == 35
        assert response["api_keys"] == [
            {"api_key": ApiKey.API_VERSIONS, "min_version": 0, "max_version": max_version}
        ]
        # The client retries at a version the broker knows, on the same connection.
        again = call(
            sock,
            ApiKey.API_VERSIONS,
            max_version,
            {"client_software_name": "future-client", "client_software_version": "9.9"},
            correlation_id=4243,
        )
        assert again["error_code"] == ErrorCode.NONE


@pytest.mark.parametrize(
    ("name", "version"),
    [
        ("bad name", "1.0"),
        ("-leading-dash", "1.0"),
        ("trailing.", "1.0"),
        ("", "1.0"),
        ("odradek-tests", "1.0 beta"),
        ("odradek-tests", "v1/2"),
    ],
)
def test_api_versions_invalid_client_software_is_invalid_request(
    broker, name: str, version: str
) -> None:
    with connect(broker.host, broker.port) as sock:
        bad = {"client_software_name": name, "client_software_version": version}
        response = call(sock, ApiKey.API_VERSIONS, 3, bad, correlation_id=9)
        assert response["error_code"] == ErrorCode.INVALID_REQUEST == 42
        # An error response, not a closed connection: the client can try again.
        good = {"client_software_name": "odradek-tests", "client_software_version": "1.0"}
        assert call(sock, ApiKey.API_VERSIONS, 3, good, correlation_id=10)["error_code"] == 0


# --- requests that get no response ----------------------------------------------------------------


@pytest.mark.parametrize("api_key", [200, 32767, -1])
def test_unknown_api_key_closes_connection(broker, api_key: int) -> None:
    with connect(broker.host, broker.port) as sock:
        send_frame(sock, raw_header(api_key, 0, 5) + b"\x00\x00\x00\x00")
        assert_closed_without_response(sock, f"unknown API key {api_key}")
    assert_still_serving(broker)


def test_unsupported_metadata_version_closes_connection(broker) -> None:
    with connect(broker.host, broker.port) as sock:
        # A valid request first: the connection is healthy until the bad one arrives.
        ok = call(sock, ApiKey.METADATA, 1, {"topics": []}, correlation_id=1)
        assert ok["brokers"], "Metadata v1 lists no brokers"
        send_frame(sock, raw_header(ApiKey.METADATA, 99, 2) + b"\x01\x00")
        assert_closed_without_response(sock, "Metadata v99")
    assert_still_serving(broker)


# --- pipelining -----------------------------------------------------------------------------------


def test_pipelined_requests_are_answered_in_order(broker) -> None:
    ranges = advertised(broker.host, broker.port)
    md_lo, md_hi = ranges[ApiKey.METADATA]
    md_versions = list(range(max(md_lo, 1), md_hi + 1))  # v1+: an empty list means no topics
    requests: list[tuple[int, int, int]] = []  # (api key, version, correlation id)
    payload = bytearray()
    for i in range(20):
        correlation_id = 0x10000 + i * 7919  # not consecutive: the order must come from requests
        if i % 2 == 0:
            key, version = ApiKey.API_VERSIONS, (i // 2) % 4
            body = {"client_software_name": "pipeline", "client_software_version": "1"}
        else:
            key, version = ApiKey.METADATA, md_versions[(i // 2) % len(md_versions)]
            body = {"topics": [], "allow_auto_topic_creation": False}
        frame = codec.encode_request(key, version, correlation_id, CLIENT_ID, body)
        payload += struct.pack(">i", len(frame)) + frame
        requests.append((key, version, correlation_id))
    with connect(broker.host, broker.port) as sock:
        sock.sendall(payload)  # all twenty in one write
        for key, version, correlation_id in requests:
            got, response = codec.decode_response(key, version, recv_frame(sock))
            assert got == correlation_id, f"response out of order: {got:#x} != {correlation_id:#x}"
            if key == ApiKey.API_VERSIONS:
                assert response["error_code"] == ErrorCode.NONE
            else:
                ports = {b["port"] for b in response["brokers"]}
                assert broker.port in ports, f"Metadata v{version} brokers: {response['brokers']}"
                assert response["topics"] == []


def _pipelined(requests: list[tuple[int, int, int, dict]]) -> bytes:
    """(api key, version, correlation id, body) as one write."""
    payload = bytearray()
    for key, version, correlation_id, body in requests:
        frame = codec.encode_request(key, version, correlation_id, CLIENT_ID, body)
        payload += struct.pack(">i", len(frame)) + frame
    return bytes(payload)


def test_pipelined_answers_are_not_held_behind_a_waiting_fetch(broker, new_topic) -> None:
    """Small answers to a pipelining client leave together, but never wait for a later request
    of the pipeline that waits: here a fetch at the end of an empty partition, held by the
    broker for its max_wait_ms (20 s), behind ten Metadata requests."""
    topic = new_topic()
    fetch = {
        "replica_id": -1,
        "max_wait_ms": 20_000,
        "min_bytes": 1,
        "max_bytes": 65536,
        "topics": [
            {
                "topic": topic,
                "partitions": [{"partition": 0, "fetch_offset": 0, "partition_max_bytes": 65536}],
            }
        ],
    }
    metadata = {"topics": [{"name": topic}], "allow_auto_topic_creation": False}
    requests = [(ApiKey.METADATA, 1, i, metadata) for i in range(10)]
    requests.append((ApiKey.FETCH, 4, 10, fetch))
    with connect(broker.host, broker.port) as sock:
        sock.sendall(_pipelined(requests))
        sock.settimeout(10.0)  # half the fetch's wait: answers held behind it would miss this
        for i in range(10):
            got, response = codec.decode_response(ApiKey.METADATA, 1, recv_frame(sock))
            assert got == i
            assert response["topics"][0]["name"] == topic
        sock.settimeout(0.5)
        with pytest.raises(TimeoutError):
            sock.recv(1)  # the fetch is still waiting at the broker


def test_pipelined_answers_before_a_malformed_request_are_sent(broker) -> None:
    """A bad frame closes the connection; the requests before it in the pipeline are still
    answered, as when each was read only after the previous answer left."""
    body = {"client_software_name": "pipeline", "client_software_version": "1"}
    requests = [(ApiKey.API_VERSIONS, 3, i, body) for i in range(5)]
    with connect(broker.host, broker.port) as sock:
        bad = raw_header(9999, 0, 99)
        sock.sendall(_pipelined(requests) + struct.pack(">i", len(bad)) + bad)
        for i in range(5):
            got, response = codec.decode_response(ApiKey.API_VERSIONS, 3, recv_frame(sock))
            assert (got, response["error_code"]) == (i, ErrorCode.NONE)
        assert_closed_without_response(sock, "unknown API key 9999 after five good requests")
    assert_still_serving(broker)


# --- socket.request.max.bytes ---------------------------------------------------------------------


def api_versions_frame_of_size(size: int, correlation_id: int) -> bytes:
    """A valid ApiVersions v0 request of exactly `size` bytes (padded through its client id)."""
    frame = raw_header(ApiKey.API_VERSIONS, 0, correlation_id, client_id="c" * (size - 10))
    assert len(frame) == size
    return frame


def test_frame_larger_than_socket_request_max_bytes_closes_connection(broker_factory) -> None:
    limit = 2048
    b = broker_factory(overrides={"socket.request.max.bytes": str(limit)})
    with connect(b.host, b.port) as bystander:
        # Exactly the limit is accepted.
        with connect(b.host, b.port) as sock:
            send_frame(sock, api_versions_frame_of_size(limit, 1))
            got, response = codec.decode_response(ApiKey.API_VERSIONS, 0, recv_frame(sock))
            assert (got, response["error_code"]) == (1, ErrorCode.NONE)
        # One byte more is refused by closing that connection.
        with connect(b.host, b.port) as sock:
            send_frame(sock, api_versions_frame_of_size(limit + 1, 2))
            assert_closed_without_response(sock, f"a {limit + 1}-byte frame")
        # So is a size the broker must not even try to allocate; no body follows.
        with connect(b.host, b.port) as sock:
            sock.sendall(struct.pack(">i", 0x7FFFFFFF))
            assert_closed_without_response(sock, "a frame announcing 2 GiB")
        # A connection opened before is unaffected.
        body = {"client_software_name": "bystander", "client_software_version": "1"}
        assert call(bystander, ApiKey.API_VERSIONS, 3, body, correlation_id=3)["error_code"] == 0
    assert b.running
