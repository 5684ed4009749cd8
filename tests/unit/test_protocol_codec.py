"""Round trips for every schema in messages.REGISTRY at every version, and malformed input.

Values are generated from the schemas themselves, so a newly added schema module is covered
without touching this file.
"""

from __future__ import annotations

import struct

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from odradek.broker.protocol import codec
from odradek.broker.protocol.api_keys import FIRST_FLEXIBLE_VERSION, ApiKey
from odradek.broker.protocol.codec import (
    FrozenArray,
    ProtocolError,
    decode_request,
    decode_response,
    encode_request,
    encode_response,
    read_request_header,
)
from odradek.broker.protocol.messages import REGISTRY
from schema_strategies import body_strategy, default_body

SETTINGS = settings(
    max_examples=10,
    deadline=None,
    database=None,
    derandomize=True,
    suppress_health_check=list(HealthCheck),
)

# --- frames ------------------------------------------------------------------------------------


def request_frame(key: int, version: int, body: dict, client_id: str = "c") -> bytes:
    return encode_request(key, version, 7, client_id, body)


def response_frame(key: int, version: int, body: dict) -> bytes:
    return b"".join(encode_response(key, version, 7, body))


def decode_frame(key: int, version: int, frame: bytes, response: bool) -> dict:
    if response:
        return decode_response(key, version, frame)[1]
    header, offset = read_request_header(frame)
    return decode_request(key, version, frame, offset)


CASES = [
    pytest.param(
        key, version, response, id=f"{api.name}-v{version}-{'resp' if response else 'req'}"
    )
    for key, api in REGISTRY.items()
    for version in range(api.versions.lo, api.versions.hi + 1)
    for response in (False, True)
]


def test_registry_is_populated():
    assert REGISTRY, "no schema modules found"
    for key, api in REGISTRY.items():
        assert key == api.key and not api.versions.empty
        assert key in ApiKey.__members__.values()


@pytest.mark.parametrize("key,version,response", CASES)
def test_round_trip(key: int, version: int, response: bool):
    api = REGISTRY[key]

    @SETTINGS
    @given(body=body_strategy(api, version, response), client_id=st.text(max_size=5))
    def check(body: dict, client_id: str) -> None:
        if response:
            frame = response_frame(key, version, body)
            correlation_id, decoded = decode_response(key, version, frame)
            assert correlation_id == 7
        else:
            frame = request_frame(key, version, body, client_id)
            header, offset = read_request_header(frame)
            expected_client = "" if codec.request_header_version(key, version) == 0 else client_id
            assert header == (key, version, 7, expected_client)
            decoded = decode_request(key, version, frame, offset)
        assert decoded == body
        again = (
            response_frame(key, version, decoded)
            if response
            else request_frame(key, version, decoded, client_id)
        )
        assert again == frame
        # Struct arrays given as FrozenArray (encoded once, then copied) encode alike, twice.
        frozen = _frozen(decoded)
        for _ in range(2):
            assert (
                response_frame(key, version, frozen)
                if response
                else request_frame(key, version, frozen, client_id)
            ) == frame

    check()


def _frozen(value):
    """`value` with every list of structs turned into a FrozenArray."""
    if isinstance(value, dict):
        return {k: _frozen(v) for k, v in value.items()}
    if isinstance(value, list) and value and all(isinstance(x, dict) for x in value):
        return FrozenArray(_frozen(x) for x in value)
    return value


@pytest.mark.parametrize("key,version,response", CASES)
def test_empty_body_takes_defaults(key: int, version: int, response: bool):
    """Encoding {} must work (every default fits its field) and decode to the defaults."""
    api = REGISTRY[key]
    frame = response_frame(key, version, {}) if response else request_frame(key, version, {})
    assert decode_frame(key, version, frame, response) == default_body(api, version, response)


# --- malformed input ----------------------------------------------------------------------


FUZZ_CASES = [
    pytest.param(key, response, id=f"{api.name}-{'resp' if response else 'req'}")
    for key, api in REGISTRY.items()
    for response in (False, True)
]


@pytest.mark.parametrize("key,response", FUZZ_CASES)
def test_truncated_and_mutated_frames_raise_only_protocol_error(key: int, response: bool):
    api = REGISTRY[key]
    versions = st.integers(api.versions.lo, api.versions.hi)

    @settings(SETTINGS, max_examples=6)
    @given(st.data(), versions)
    def check(data: st.DataObject, version: int) -> None:
        body = data.draw(body_strategy(api, version, response))
        frame = (
            response_frame(key, version, body) if response else request_frame(key, version, body)
        )
        # Every strict prefix is missing bytes the decoder needs.
        cuts = data.draw(st.lists(st.integers(0, len(frame) - 1), min_size=1, max_size=8))
        for cut in cuts:
            with pytest.raises(ProtocolError):
                decode_frame(key, version, frame[:cut], response)
        # Mutations may still decode; they must never raise anything else.
        for _ in range(8):
            mutated = bytearray(frame)
            for _ in range(data.draw(st.integers(1, 4))):
                i = data.draw(st.integers(0, len(mutated) - 1))
                mutated[i] = data.draw(st.sampled_from([0x00, 0x7F, 0x80, 0xFF, mutated[i] ^ 1]))
            try:
                decode_frame(key, version, bytes(mutated), response)
            except ProtocolError:
                pass

    check()


@settings(max_examples=300, deadline=None, database=None, derandomize=True)
@given(st.binary(max_size=64), st.sampled_from(sorted(REGISTRY)), st.booleans())
def test_random_bytes_raise_only_protocol_error(garbage: bytes, key: int, response: bool):
    api = REGISTRY[key]
    for version in (api.versions.lo, api.versions.hi):
        try:
            if response:
                decode_response(key, version, garbage)
            else:
                header, offset = read_request_header(garbage)
                decode_request(key, version, garbage, offset)
        except ProtocolError:
            pass


def _metadata_v1_frame(topics_count: int, tail: bytes = b"") -> bytes:
    header = struct.pack(">hhih", 3, 1, 1, 1) + b"c"
    return header + struct.pack(">i", topics_count) + tail


def test_huge_array_count_is_rejected_without_allocating():
    frame = _metadata_v1_frame(0x7FFFFFFF, b"\x00\x01a")
    header, offset = read_request_header(frame)
    with pytest.raises(ProtocolError, match="count"):
        decode_request(3, 1, frame, offset)


def test_negative_lengths_are_rejected():
    # topics = [ {name: length -2} ]
    frame = _metadata_v1_frame(1, struct.pack(">h", -2))
    with pytest.raises(ProtocolError):
        decode_request(3, 1, frame, read_request_header(frame)[1])
    # a non-nullable string sent as null
    frame = _metadata_v1_frame(1, struct.pack(">h", -1))
    with pytest.raises(ProtocolError):
        decode_request(3, 1, frame, read_request_header(frame)[1])
    # a non-nullable array sent as null (Metadata v0 topics are not nullable)
    frame = struct.pack(">hhih", 3, 0, 1, 1) + b"c" + struct.pack(">i", -1)
    with pytest.raises(ProtocolError):
        decode_request(3, 0, frame, read_request_header(frame)[1])
    # a huge compact length
    frame = encode_request(18, 3, 1, "c", {"client_software_name": "a"})
    header, offset = read_request_header(frame)
    bad = frame[:offset] + b"\xff\xff\xff\xff\x0f" + frame[offset + 2 :]
    with pytest.raises(ProtocolError):
        decode_request(18, 3, bad, offset)


def test_overlong_varint_is_rejected():
    frame = encode_request(18, 3, 1, "c", {})
    header, offset = read_request_header(frame)
    with pytest.raises(ProtocolError):
        decode_request(18, 3, frame[:offset] + b"\x80" * 6 + b"\x01", offset)


def test_invalid_utf8_is_a_protocol_error():
    frame = encode_request(18, 3, 1, "c", {"client_software_name": "ab"})
    offset = read_request_header(frame)[1]
    bad = frame[: offset + 1] + b"\xff\xfe" + frame[offset + 3 :]
    with pytest.raises(ProtocolError):
        decode_request(18, 3, bad, offset)


def test_unknown_key_and_unsupported_version_are_protocol_errors():
    with pytest.raises(ProtocolError, match="unknown api key"):
        decode_request(32000, 0, b"", 0)
    api = REGISTRY[ApiKey.API_VERSIONS]
    with pytest.raises(ProtocolError, match="version"):
        decode_request(18, api.versions.hi + 1, b"\x00", 0)
    with pytest.raises(ProtocolError):
        encode_response(18, -1, 1, {})


def test_encoding_a_value_that_does_not_fit_is_a_protocol_error():
    with pytest.raises(ProtocolError):
        encode_response(18, 0, 1, {"error_code": 1 << 20})
    with pytest.raises(ProtocolError):
        encode_request(18, 3, 1, "c", {"client_software_name": None})


# --- headers ------------------------------------------------------------------------------


def test_first_flexible_table_agrees_with_schemas():
    for key, api in REGISTRY.items():
        expected = None if api.flexible.empty else api.flexible.lo
        assert FIRST_FLEXIBLE_VERSION.get(key) == expected, api.name


def test_request_header_versions():
    assert codec.request_header_version(ApiKey.CONTROLLED_SHUTDOWN, 0) == 0
    assert codec.request_header_version(ApiKey.CONTROLLED_SHUTDOWN, 1) == 1
    assert codec.request_header_version(ApiKey.PRODUCE, 8) == 1
    assert codec.request_header_version(ApiKey.PRODUCE, 9) == 2
    # A version newer than any known is still flexible (ApiVersions probing).
    assert codec.request_header_version(ApiKey.API_VERSIONS, 99) == 2
    assert codec.request_header_version(ApiKey.SASL_HANDSHAKE, 1) == 1
    assert codec.request_header_version(30000, 5) == 1


def test_response_header_versions():
    assert codec.response_header_version(ApiKey.API_VERSIONS, 3) == 0
    assert codec.response_header_version(ApiKey.METADATA, 8) == 0
    assert codec.response_header_version(ApiKey.METADATA, 9) == 1


def test_controlled_shutdown_v0_header_has_no_client_id():
    frame = struct.pack(">hhi", 7, 0, 42) + struct.pack(">i", 3)
    header, offset = read_request_header(frame)
    assert header == (7, 0, 42, "") and offset == 8
    assert encode_request(7, 0, 42, "ignored", {"broker_id": 3}) == frame


def test_flexible_request_header_keeps_int16_client_id_and_skips_tags():
    body = encode_request(
        18, 3, 9, "me", {"client_software_name": "x", "client_software_version": "1"}
    )
    assert body[:8] == struct.pack(">hhi", 18, 3, 9)
    assert body[8:12] == b"\x00\x02me"
    assert body[12] == 0  # empty tagged section
    # A header carrying an unknown tagged field is still read.
    tagged = body[:12] + b"\x01\x05\x02hi" + body[13:]
    header, offset = read_request_header(tagged)
    assert header.client_id == "me"
    assert decode_request(18, 3, tagged, offset)["client_software_name"] == "x"


def test_null_client_id_reads_as_empty():
    frame = struct.pack(">hhih", 18, 0, 1, -1)
    assert read_request_header(frame) == ((18, 0, 1, ""), 10)


def test_unknown_api_key_header_parses_as_v1():
    frame = struct.pack(">hhih", 999, 0, 5, 2) + b"ab" + b"rest"
    assert read_request_header(frame) == ((999, 0, 5, "ab"), 12)


def test_truncated_headers():
    for frame in (b"", b"\x00\x12\x00", struct.pack(">hhih", 18, 0, 1, 5) + b"ab"):
        with pytest.raises(ProtocolError):
            read_request_header(frame)
    with pytest.raises(ProtocolError):
        decode_response(18, 0, b"\x00\x00")


def test_api_versions_response_uses_header_v0_at_every_version():
    for version in range(REGISTRY[18].versions.hi + 1):
        frame = response_frame(18, version, {"error_code": 35, "api_keys": []})
        assert frame[:4] == struct.pack(">i", 7)
        assert frame[4:6] == struct.pack(">h", 35)


# --- tagged fields and records ----------------------------------------------------------------


def test_tagged_fields_written_only_when_not_default_in_tag_order():
    base = response_frame(18, 3, {"api_keys": []})
    # error_code, api_keys (compact, empty), throttle_time_ms, tagged section (empty)
    assert base[4:] == b"\x00\x00" + b"\x01" + b"\x00\x00\x00\x00" + b"\x00"
    frame = response_frame(
        18, 3, {"api_keys": [], "zk_migration_ready": True, "finalized_features_epoch": 5}
    )
    section = frame[4 + 7 :]
    assert section == b"\x02" + b"\x01\x08" + struct.pack(">q", 5) + b"\x03\x01\x01"
    body = decode_response(18, 3, frame)[1]
    assert body["finalized_features_epoch"] == 5 and body["zk_migration_ready"] is True
    assert body["supported_features"] == []


def test_unknown_tagged_fields_are_skipped():
    frame = response_frame(18, 3, {"api_keys": []})
    with_unknown = frame[:-1] + b"\x01" + b"\x63\x03abc"
    assert decode_response(18, 3, with_unknown)[1] == decode_response(18, 3, frame)[1]


def test_fixed_width_struct_array_with_a_tagged_field_in_one_element():
    """ListOffsets v7's partitions decode in one call when no element has tagged fields; an
    element carrying one (unknown to us) still decodes, the array element by element."""
    parts = [
        {"partition_index": p, "current_leader_epoch": p % 3 - 1, "timestamp": -1 - p % 2,
         "max_num_offsets": 1} for p in range(40)
    ]  # fmt: skip
    body = {"replica_id": -1, "isolation_level": 1, "topics": [{"name": "t", "partitions": parts}]}
    frame = request_frame(2, 7, body)
    header, offset = read_request_header(frame)
    assert decode_request(2, 7, frame, offset) == body
    # Element 5 ends after replica_id, isolation_level, the topics count, the name, the
    # partitions count and six elements of 17 bytes.
    element_end = offset + 4 + 1 + 1 + 2 + 1 + 17 * 6
    assert frame[element_end - 1] == 0  # its empty tagged section
    tagged = frame[: element_end - 1] + b"\x01\x63\x02hi" + frame[element_end:]
    assert decode_request(2, 7, tagged, offset) == body
    with pytest.raises(ProtocolError):
        decode_request(2, 7, frame[: element_end + 3], offset)


def test_tagged_field_size_mismatch_is_rejected():
    frame = response_frame(18, 3, {"api_keys": []})
    bad = frame[:-1] + b"\x01" + b"\x01\x02" + b"\x00" * 8  # epoch is 8 bytes, size says 2
    with pytest.raises(ProtocolError):
        decode_response(18, 3, bad)


def test_missing_keys_and_absent_fields_take_defaults():
    body = decode_response(0, 0, response_frame(0, 0, {"responses": [{"name": "t"}]}))[1]
    part = body["responses"][0]
    assert body["throttle_time_ms"] == 0
    assert part == {"name": "t", "partition_responses": []}


class _Slice:
    """A minimal RecordsSource (what storage's FileSlice provides): a size and a read()."""

    def __init__(self, data: bytes) -> None:
        self.data = data
        self.size = len(data)

    def read(self) -> bytes:
        return self.data


def _produce_request_body(records) -> dict:
    return {
        "transactional_id": None,
        "acks": -1,
        "timeout_ms": 30000,
        "topic_data": [{"name": "t", "partition_data": [{"index": 0, "records": records}]}],
    }


def test_records_decode_as_views_of_the_frame():
    payload = bytes(range(200)) * 10
    for version in (3, 9, 11):
        frame = bytearray(request_frame(0, version, _produce_request_body(payload)))
        offset = read_request_header(frame)[1]
        body = decode_request(0, version, memoryview(frame), offset)
        records = body["topic_data"][0]["partition_data"][0]["records"]
        assert isinstance(records, memoryview) and records == payload
        records_start = bytes(frame).index(payload)
        frame[records_start] ^= 0xFF  # the view shares the frame's memory
        assert records[0] == payload[0] ^ 0xFF


def _fetch_response_body(records) -> dict:
    partition = {"partition_index": 0, "high_watermark": 10, "records": records}
    return {"responses": [{"topic": "t", "partitions": [partition, dict(partition)]}]}


@pytest.mark.parametrize("version", [4, 11, 12, 16])
def test_records_sources_become_their_own_parts(version: int):
    one, two = _Slice(b"A" * 100), _Slice(b"B" * 300)
    body = _fetch_response_body(one)
    body["responses"][0]["partitions"][1]["records"] = two
    parts = encode_response(1, version, 3, body)
    # Nothing follows the last records in non-flexible versions: no empty trailing part.
    kinds = [bytes, _Slice, bytes, _Slice] + ([bytes] if version >= 12 else [])
    assert [type(p) for p in parts] == kinds
    assert parts[1] is one and parts[3] is two and all(len(p) for p in parts if type(p) is bytes)
    flat = b"".join(p if isinstance(p, bytes) else p.read() for p in parts)
    plain = _fetch_response_body(b"A" * 100)
    plain["responses"][0]["partitions"][1]["records"] = b"B" * 300
    assert flat == b"".join(encode_response(1, version, 3, plain))
    assert encode_response(1, version, 3, plain)[0] == flat


def test_encode_request_reads_records_sources():
    body = _produce_request_body(_Slice(b"xyz"))
    assert encode_request(0, 9, 1, "c", body) == encode_request(
        0, 9, 1, "c", _produce_request_body(b"xyz")
    )


def test_body_level_codec():
    api = REGISTRY[ApiKey.API_VERSIONS]
    raw = codec.encode_body(api, 3, api.request, {"client_software_name": "n"})
    assert raw == b"\x02n\x01\x00"
    assert codec.decode_body(api, 3, "request", raw) == (
        {"client_software_name": "n", "client_software_version": ""},
        len(raw),
    )


def test_large_bytes_records_are_not_copied_into_responses():
    big = bytes(range(256)) * 64
    parts = encode_response(1, 12, 3, _fetch_response_body(big))
    assert sum(p is big for p in parts) == 2
    body = decode_response(1, 12, b"".join(parts))[1]
    assert [p["records"] for p in body["responses"][0]["partitions"]] == [big, big]
