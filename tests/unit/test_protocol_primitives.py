"""Wire primitives: varints, zigzag, classic/compact strings, bytes, arrays, tagged fields."""

from __future__ import annotations

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from odradek.broker.protocol import primitives as p
from odradek.broker.protocol.primitives import ProtocolError

FAST = settings(max_examples=200, deadline=None, database=None, derandomize=True)


@pytest.mark.parametrize(
    "value,encoded",
    [
        (0, b"\x00"),
        (1, b"\x01"),
        (127, b"\x7f"),
        (128, b"\x80\x01"),
        (300, b"\xac\x02"),
        (2**32 - 1, b"\xff\xff\xff\xff\x0f"),
    ],
)
def test_uvarint_known_encodings(value: int, encoded: bytes):
    assert p.write_uvarint(value) == encoded
    assert p.read_uvarint(encoded, 0) == (value, len(encoded))
    assert p.uvarint_size(value) == len(encoded)


@pytest.mark.parametrize("n,z", [(0, 0), (-1, 1), (1, 2), (-2, 3), (2**31 - 1, 2**32 - 2)])
def test_zigzag(n: int, z: int):
    assert p.zigzag32(n) == z
    assert p.unzigzag(z) == n


@FAST
@given(st.integers(-(2**31), 2**31 - 1))
def test_varint_round_trip(n: int):
    data = p.write_varint(n)
    assert p.read_varint(data + b"tail", 0) == (n, len(data))
    assert p.varint_size(n) == len(data)


@FAST
@given(st.integers(-(2**63), 2**63 - 1))
def test_varlong_round_trip(n: int):
    data = p.write_varlong(n)
    assert p.read_varlong(data, 0) == (n, len(data))


def test_varint_errors():
    with pytest.raises(ProtocolError):
        p.read_uvarint(b"\x80\x80", 0)
    with pytest.raises(ProtocolError):
        p.read_uvarint(b"\x80" * 5 + b"\x01", 0)
    with pytest.raises(ProtocolError):
        p.read_uvarint(b"\xff\xff\xff\xff\x7f", 0)  # 35 bits
    with pytest.raises(ProtocolError):
        p.read_varlong(b"\x80" * 10 + b"\x01", 0)
    with pytest.raises(ProtocolError):
        p.read_uvarint(b"", 0)
    with pytest.raises(ValueError):
        p.write_varint(2**31)


@FAST
@given(st.none() | st.text(max_size=40))
def test_strings_round_trip(s: str | None):
    classic = p.write_string(s)
    compact = p.write_compact_string(s)
    assert p.read_string(classic, 0, nullable=True) == (s, len(classic))
    assert p.read_compact_string(compact, 0, nullable=True) == (s, len(compact))


@FAST
@given(st.none() | st.binary(max_size=300))
def test_bytes_round_trip(b: bytes | None):
    classic = p.write_bytes(b)
    compact = p.write_compact_bytes(b)
    got, end = p.read_bytes(classic, 0, nullable=True)
    assert got == b and end == len(classic)
    got, end = p.read_compact_bytes(compact, 0, nullable=True)
    assert got == b and end == len(compact)
    if b is not None:
        assert isinstance(got, memoryview)


def test_string_and_bytes_errors():
    with pytest.raises(ProtocolError):
        p.read_string(b"\xff\xff", 0)  # null where not nullable
    with pytest.raises(ProtocolError):
        p.read_string(b"\xff\xfe", 0, nullable=True)  # -2
    with pytest.raises(ProtocolError):
        p.read_string(b"\x00\x05abc", 0)  # truncated
    with pytest.raises(ProtocolError):
        p.read_string(b"\x00", 0)
    with pytest.raises(ProtocolError):
        p.read_compact_string(b"\x00", 0)  # compact null where not nullable
    with pytest.raises(ProtocolError):
        p.read_compact_string(b"\x03\xff\xfe", 0)  # invalid UTF-8
    with pytest.raises(ProtocolError):
        p.read_bytes(b"\x7f\xff\xff\xff", 0)
    with pytest.raises(ProtocolError):
        p.read_compact_bytes(b"\xff\xff\xff\xff\x0f", 0)


def test_array_lengths():
    assert p.read_array_length(p.write_array_length(2) + b"ab", 0) == (2, 4)
    assert p.read_array_length(p.write_array_length(None), 0, nullable=True) == (-1, 4)
    assert p.read_compact_array_length(p.write_compact_array_length(None), 0, nullable=True) == (
        -1,
        1,
    )
    assert p.read_compact_array_length(p.write_compact_array_length(1) + b"x", 0) == (1, 1)
    with pytest.raises(ProtocolError):
        p.read_array_length(p.write_array_length(None), 0)
    with pytest.raises(ProtocolError, match="count"):
        p.read_array_length(p.write_array_length(2**31 - 1), 0)
    with pytest.raises(ProtocolError, match="count"):
        p.read_compact_array_length(p.write_compact_array_length(3) + b"ab", 0)


def test_tagged_fields():
    section = p.write_tagged_fields([(5, b"xyz"), (0, b"\x01")])
    assert section == b"\x02" + b"\x00\x01\x01" + b"\x05\x03xyz"
    assert p.skip_tagged_fields(section + b"after", 0) == len(section)
    fields, end = p.read_tagged_fields(section, 0)
    assert {k: bytes(v) for k, v in fields.items()} == {0: b"\x01", 5: b"xyz"}
    assert end == len(section)
    assert p.write_tagged_fields([]) == b"\x00"
    assert p.skip_tagged_fields(b"\x00", 0) == 1
    with pytest.raises(ValueError):
        p.write_tagged_fields([(1, b""), (1, b"")])
    with pytest.raises(ProtocolError):
        p.skip_tagged_fields(b"\x01\x00\x05ab", 0)
    with pytest.raises(ProtocolError):
        p.skip_tagged_fields(b"\x7f", 0)
    with pytest.raises(ProtocolError):
        p.read_tagged_fields(b"\x01\x00", 0)
