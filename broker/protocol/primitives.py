"""Kafka wire primitives: fixed-width integers, varints, classic and compact strings/bytes/arrays,
and tagged-field sections.

These are the building blocks the compiled codec calls for its slower paths and that other layers
(records, tests) use directly. Every reader takes `(buf, pos)` and returns `(value, new_pos)`;
malformed input raises `ProtocolError`, never IndexError or MemoryError, so a connection handler
needs to catch exactly one exception type.
"""

from __future__ import annotations

import struct
from collections.abc import Iterable

__all__ = [
    "ProtocolError",
    "BOOL",
    "INT8",
    "INT16",
    "INT32",
    "INT64",
    "UINT16",
    "UINT32",
    "FLOAT64",
    "zigzag32",
    "zigzag64",
    "unzigzag",
    "read_uvarint",
    "write_uvarint",
    "uvarint_size",
    "read_varint",
    "write_varint",
    "read_varlong",
    "write_varlong",
    "varint_size",
    "read_string",
    "write_string",
    "read_compact_string",
    "write_compact_string",
    "read_bytes",
    "write_bytes",
    "read_compact_bytes",
    "write_compact_bytes",
    "read_array_length",
    "write_array_length",
    "read_compact_array_length",
    "write_compact_array_length",
    "skip_tagged_fields",
    "read_tagged_fields",
    "write_tagged_fields",
]


class ProtocolError(Exception):
    """Bytes that cannot be a valid Kafka message (truncated, garbage, unknown key or version).

    The broker closes the connection on it, as Kafka does for unparsable requests.
    """


BOOL = struct.Struct(">?")
INT8 = struct.Struct(">b")
INT16 = struct.Struct(">h")
INT32 = struct.Struct(">i")
INT64 = struct.Struct(">q")
UINT16 = struct.Struct(">H")
UINT32 = struct.Struct(">I")
FLOAT64 = struct.Struct(">d")

# Kafka's uvarints carry 32-bit values (5 bytes max); varlongs 64-bit (10 bytes max).
_MAX_UVARINT_BYTES = 5
_MAX_UVARLONG_BYTES = 10


# --- zigzag and varints -------------------------------------------------------------------


def zigzag32(n: int) -> int:
    """Signed 32-bit -> unsigned zigzag (small magnitudes stay small)."""
    return ((n << 1) ^ (n >> 31)) & 0xFFFFFFFF


def zigzag64(n: int) -> int:
    return ((n << 1) ^ (n >> 63)) & 0xFFFFFFFFFFFFFFFF


def unzigzag(n: int) -> int:
    return (n >> 1) ^ -(n & 1)


def _read_unsigned(buf, pos: int, max_bytes: int) -> tuple[int, int]:
    result = 0
    shift = 0
    end = len(buf)
    for _ in range(max_bytes):
        if pos >= end:
            raise ProtocolError("truncated varint")
        b = buf[pos]
        pos += 1
        result |= (b & 0x7F) << shift
        if b < 0x80:
            return result, pos
        shift += 7
    raise ProtocolError("varint too long")


def read_uvarint(buf, pos: int) -> tuple[int, int]:
    """An unsigned varint of at most 32 bits (Kafka's UNSIGNED_VARINT, used by compact types)."""
    # Unrolled: lengths of records and large strings take 2-3 bytes on the hot path.
    try:
        b = buf[pos]
        if b < 0x80:
            return b, pos + 1
        value = b & 0x7F
        b = buf[pos + 1]
        if b < 0x80:
            return value | (b << 7), pos + 2
        value |= (b & 0x7F) << 7
        b = buf[pos + 2]
        if b < 0x80:
            return value | (b << 14), pos + 3
        value |= (b & 0x7F) << 14
        b = buf[pos + 3]
        if b < 0x80:
            return value | (b << 21), pos + 4
        value |= (b & 0x7F) << 21
        b = buf[pos + 4]
    except IndexError:
        raise ProtocolError("truncated varint") from None
    if b > 0x0F:
        raise ProtocolError("uvarint longer than 5 bytes or above 32 bits")
    return value | (b << 28), pos + 5


def write_uvarint(n: int) -> bytes:
    if n < 0x80:
        if n < 0:
            raise ValueError(f"negative uvarint {n}")
        return bytes((n,))
    if n < 0x4000:
        return bytes(((n & 0x7F) | 0x80, n >> 7))
    out = bytearray()
    while n >= 0x80:
        out.append((n & 0x7F) | 0x80)
        n >>= 7
    out.append(n)
    return bytes(out)


def uvarint_size(n: int) -> int:
    size = 1
    while n >= 0x80:
        n >>= 7
        size += 1
    return size


def read_varint(buf, pos: int) -> tuple[int, int]:
    """A zigzag-encoded signed 32-bit varint (the record format's VARINT)."""
    value, pos = _read_unsigned(buf, pos, _MAX_UVARINT_BYTES)
    if value > 0xFFFFFFFF:
        raise ProtocolError("varint out of 32-bit range")
    return unzigzag(value), pos


def read_varlong(buf, pos: int) -> tuple[int, int]:
    """A zigzag-encoded signed 64-bit varint (the record format's VARLONG)."""
    value, pos = _read_unsigned(buf, pos, _MAX_UVARLONG_BYTES)
    if value > 0xFFFFFFFFFFFFFFFF:
        raise ProtocolError("varlong out of 64-bit range")
    return unzigzag(value), pos


def write_varint(n: int) -> bytes:
    if not -0x80000000 <= n <= 0x7FFFFFFF:
        raise ValueError(f"varint out of range: {n}")
    return write_uvarint(zigzag32(n))


def write_varlong(n: int) -> bytes:
    if not -0x8000000000000000 <= n <= 0x7FFFFFFFFFFFFFFF:
        raise ValueError(f"varlong out of range: {n}")
    return write_uvarint(zigzag64(n))


def varint_size(n: int) -> int:
    """Encoded size of a zigzag varint/varlong."""
    return uvarint_size(zigzag64(n))


# --- strings and bytes ----------------------------------------------------------------------


def _take(buf, pos: int, n: int) -> tuple[memoryview, int]:
    end = pos + n
    if end > len(buf):
        raise ProtocolError(f"length {n} exceeds the {len(buf) - pos} bytes left")
    return memoryview(buf)[pos:end], end


def _utf8(data: memoryview) -> str:
    try:
        return str(data, "utf-8")
    except UnicodeDecodeError as e:
        raise ProtocolError(f"invalid UTF-8 in string: {e}") from None


def _classic_length(buf, pos: int, fmt: struct.Struct, nullable: bool) -> tuple[int, int]:
    try:
        (n,) = fmt.unpack_from(buf, pos)
    except struct.error:
        raise ProtocolError("truncated length") from None
    pos += fmt.size
    if n < 0 and not (nullable and n == -1):
        raise ProtocolError(f"invalid length {n}")
    return n, pos


def _compact_length(buf, pos: int, nullable: bool) -> tuple[int, int]:
    n, pos = read_uvarint(buf, pos)
    if n == 0 and not nullable:
        raise ProtocolError("null value in a non-nullable field")
    return n - 1, pos


def read_string(buf, pos: int, nullable: bool = False) -> tuple[str | None, int]:
    """int16 length + UTF-8; -1 means null."""
    n, pos = _classic_length(buf, pos, INT16, nullable)
    if n < 0:
        return None, pos
    data, pos = _take(buf, pos, n)
    return _utf8(data), pos


def read_compact_string(buf, pos: int, nullable: bool = False) -> tuple[str | None, int]:
    """uvarint (length + 1) + UTF-8; 0 means null."""
    n, pos = _compact_length(buf, pos, nullable)
    if n < 0:
        return None, pos
    data, pos = _take(buf, pos, n)
    return _utf8(data), pos


def read_bytes(buf, pos: int, nullable: bool = False) -> tuple[memoryview | None, int]:
    """int32 length + data (a view, not a copy); -1 means null."""
    n, pos = _classic_length(buf, pos, INT32, nullable)
    if n < 0:
        return None, pos
    return _take(buf, pos, n)


def read_compact_bytes(buf, pos: int, nullable: bool = False) -> tuple[memoryview | None, int]:
    n, pos = _compact_length(buf, pos, nullable)
    if n < 0:
        return None, pos
    return _take(buf, pos, n)


def write_string(s: str | None) -> bytes:
    if s is None:
        return b"\xff\xff"
    data = s.encode()
    return INT16.pack(len(data)) + data


def write_compact_string(s: str | None) -> bytes:
    if s is None:
        return b"\x00"
    data = s.encode()
    return write_uvarint(len(data) + 1) + data


def write_bytes(b: bytes | bytearray | memoryview | None) -> bytes:
    if b is None:
        return b"\xff\xff\xff\xff"
    return INT32.pack(len(b)) + bytes(b)


def write_compact_bytes(b: bytes | bytearray | memoryview | None) -> bytes:
    if b is None:
        return b"\x00"
    return write_uvarint(len(b) + 1) + bytes(b)


# --- arrays ----------------------------------------------------------------------------------


def _check_count(buf, pos: int, n: int) -> None:
    # Every element takes at least one byte, so a larger count is garbage; checking here keeps a
    # hostile count from making the decoder allocate or loop for nothing.
    if n > len(buf) - pos:
        raise ProtocolError(f"array count {n} exceeds the {len(buf) - pos} bytes left")


def read_array_length(buf, pos: int, nullable: bool = False) -> tuple[int, int]:
    """int32 element count; returns -1 for a null array."""
    n, pos = _classic_length(buf, pos, INT32, nullable)
    _check_count(buf, pos, n)
    return n, pos


def read_compact_array_length(buf, pos: int, nullable: bool = False) -> tuple[int, int]:
    """uvarint (count + 1); returns -1 for a null array."""
    n, pos = _compact_length(buf, pos, nullable)
    _check_count(buf, pos, n)
    return n, pos


def write_array_length(n: int | None) -> bytes:
    return INT32.pack(-1 if n is None else n)


def write_compact_array_length(n: int | None) -> bytes:
    return b"\x00" if n is None else write_uvarint(n + 1)


# --- tagged fields -----------------------------------------------------------------------------


def read_tagged_fields(buf, pos: int) -> tuple[dict[int, memoryview], int]:
    """All tagged fields of a section as {tag: raw value view}, for callers that decode known tags."""
    count, pos = read_uvarint(buf, pos)
    _check_count(buf, pos, count)
    fields: dict[int, memoryview] = {}
    for _ in range(count):
        tag, pos = read_uvarint(buf, pos)
        size, pos = read_uvarint(buf, pos)
        fields[tag], pos = _take(buf, pos, size)
    return fields, pos


def skip_tagged_fields(buf, pos: int) -> int:
    """Skip a tagged-field section (readers ignore tags they do not know)."""
    if pos < len(buf) and buf[pos] == 0:
        return pos + 1
    count, pos = read_uvarint(buf, pos)
    _check_count(buf, pos, count)
    for _ in range(count):
        _tag, pos = read_uvarint(buf, pos)
        size, pos = read_uvarint(buf, pos)
        if pos + size > len(buf):
            raise ProtocolError("truncated tagged field")
        pos += size
    return pos


def write_tagged_fields(fields: Iterable[tuple[int, bytes]]) -> bytes:
    """A tagged-field section from (tag, encoded value) pairs, written in ascending tag order."""
    items = sorted(fields, key=lambda kv: kv[0])
    out = bytearray(write_uvarint(len(items)))
    last = -1
    for tag, value in items:
        if tag == last:
            raise ValueError(f"duplicate tag {tag}")
        last = tag
        out += write_uvarint(tag)
        out += write_uvarint(len(value))
        out += value
    return bytes(out)
