"""Encode and decode Kafka requests and responses from the declarative schemas.

Each (api, version, direction) is compiled once, on first use, into a pair of specialised Python
functions generated from the schema (see `codegen`) and cached here. Decoding works on a
memoryview; `records` fields come back as views of the frame (no copy).

Decoded dicts carry every field the schema declares: fields absent from the version (or tagged
fields not on the wire) take their defaults, so handlers never need version checks to read. When
encoding, a missing key takes the field default; fields absent from the version are ignored.

Value types: ints, bool, float, str, `bytes` for bytes fields (copied: they are small), a
memoryview for `records` (always nullable here, whatever the schema says), `uuid.UUID`, lists and
dicts. On encode, records may also be a RecordsSource; responses keep such objects, and `bytes`
records of 8 KiB or more, as separate parts so they are never copied.

Any malformed input raises `ProtocolError` (never IndexError, struct.error or MemoryError), as does
a value that does not fit its field when encoding.
"""

from __future__ import annotations

import struct
from collections.abc import Callable
from typing import Any, NamedTuple, Protocol

from . import primitives as _p
from .api_keys import FIRST_FLEXIBLE_VERSION, ApiKey
from .codegen import FrozenArray, compile_decoder, compile_encoder, records_bytes
from .messages import REGISTRY
from .primitives import ProtocolError
from .schema import Api

__all__ = [
    "FrozenArray",
    "ProtocolError",
    "RecordsSource",
    "RequestHeader",
    "read_request_header",
    "request_header_version",
    "response_header_version",
    "decode_request",
    "encode_request",
    "decode_response",
    "encode_response",
    "decode_body",
    "encode_body",
    "get_api",
]


class RecordsSource(Protocol):
    """Records the encoder does not copy (e.g. storage's FileSlice): only `size` is needed here."""

    size: int


class RequestHeader(NamedTuple):
    api_key: int
    api_version: int
    correlation_id: int
    client_id: str


# Exceptions that bytes which are not a valid message can provoke inside generated decoders.
_DECODE_ERRORS = (struct.error, IndexError, ValueError, OverflowError, MemoryError)
# ... and that values which do not fit their fields provoke inside generated encoders.
_ENCODE_ERRORS = (struct.error, ValueError, OverflowError, TypeError, AttributeError)

_HEADER_FIXED = struct.Struct(">hhi")
_CORRELATION = _p.INT32


# --- compiled-function caches ----------------------------------------------------------------

# (api key, version, is_response) -> function; filled lazily.
_DECODERS: dict[tuple[int, int, bool], Callable[..., Any]] = {}
_ENCODERS: dict[tuple[int, int, bool], Callable[..., Any]] = {}
# Custom field lists (encode_body/decode_body with fields not from the registry); the key holds
# ids, the value keeps the objects alive so an id is never reused while cached.
_CUSTOM: dict[tuple[int, int, int, str], tuple[Any, Any, Callable[..., Any]]] = {}


def get_api(api_key: int) -> Api:
    api = REGISTRY.get(api_key)
    if api is None:
        raise ProtocolError(f"unknown api key {api_key}")
    return api


def _check_version(api: Api, version: int) -> None:
    if version not in api.versions:
        raise ProtocolError(f"{api.name} does not support version {version}")


def _compiled(
    cache: dict[tuple[int, int, bool], Callable[..., Any]],
    compile_: Callable[..., Callable[..., Any]],
    api_key: int,
    version: int,
    response: bool,
) -> Callable[..., Any]:
    """The cached function for (api_key, version, response), compiled on first use."""
    fn = cache.get((api_key, version, response))
    if fn is None:
        api = get_api(api_key)
        _check_version(api, version)
        fields = api.response if response else api.request
        label = f"{api.name} v{version} {'response' if response else 'request'}"
        fn = compile_(fields, version, api.is_flexible(version), label)
        cache[(api_key, version, response)] = fn
    return fn


def _decoder(api_key: int, version: int, response: bool) -> Callable[..., Any]:
    return _compiled(_DECODERS, compile_decoder, api_key, version, response)


def _encoder(api_key: int, version: int, response: bool) -> Callable[..., Any]:
    return _compiled(_ENCODERS, compile_encoder, api_key, version, response)


def _as_view(frame: bytes | bytearray | memoryview) -> memoryview:
    if type(frame) is memoryview:
        return frame if frame.format == "B" and frame.ndim == 1 else frame.cast("B")
    return memoryview(frame)


def _run_decoder(fn: Callable[..., Any], buf: memoryview, pos: int, what: str) -> tuple[dict, int]:
    try:
        return fn(buf, pos)
    except ProtocolError:
        raise
    except _DECODE_ERRORS as e:
        raise ProtocolError(f"malformed {what}: {type(e).__name__}: {e}") from None


def _run_encoder(
    fn: Callable[..., Any], out: bytearray, body: dict, parts: list, what: str
) -> bytearray:
    try:
        return fn(out, body, parts)
    except _ENCODE_ERRORS as e:
        raise ProtocolError(f"cannot encode {what}: {type(e).__name__}: {e}") from None


# --- headers -----------------------------------------------------------------------------------


def _first_flexible(api_key: int) -> int | None:
    """The first flexible version of an API (from the registry, else Kafka's table); None if none."""
    api = REGISTRY.get(api_key)
    if api is None:
        return FIRST_FLEXIBLE_VERSION.get(api_key)
    return None if api.flexible.empty else api.flexible.lo


def request_header_version(api_key: int, api_version: int) -> int:
    """0 for ControlledShutdown v0, 2 for flexible request versions, else 1 (unknown keys: 1).

    Flexibility is `version >= first flexible version`, so a version newer than any we know is
    still read with header v2 (clients probe ApiVersions that way).
    """
    if api_key == ApiKey.CONTROLLED_SHUTDOWN and api_version == 0:
        return 0
    first = _first_flexible(api_key)
    return 2 if first is not None and api_version >= first else 1


def response_header_version(api_key: int, api_version: int) -> int:
    """1 for flexible response versions, else 0; ApiVersions responses always use 0."""
    if api_key == ApiKey.API_VERSIONS:
        return 0
    first = _first_flexible(api_key)
    return 1 if first is not None and api_version >= first else 0


def read_request_header(frame: bytes | bytearray | memoryview) -> tuple[RequestHeader, int]:
    """Parse the request header of a frame (without its size prefix); returns the body offset."""
    buf = frame if type(frame) is memoryview else _as_view(frame)
    try:
        api_key, api_version, correlation_id = _HEADER_FIXED.unpack_from(buf, 0)
    except struct.error:
        raise ProtocolError("truncated request header") from None
    hv = _HEADER_VERSIONS.get((api_key, api_version))
    if hv is None:
        hv = request_header_version(api_key, api_version)
        if len(_HEADER_VERSIONS) < 4096:  # bounded: versions come from the network
            _HEADER_VERSIONS[(api_key, api_version)] = hv
    if hv == 0:
        return RequestHeader(api_key, api_version, correlation_id, ""), 8
    try:
        (n,) = _p.INT16.unpack_from(buf, 8)
    except struct.error:
        raise ProtocolError("truncated request header") from None
    if n < 0:
        if n != -1:
            raise ProtocolError(f"invalid client id length {n}")
        client_id, pos = "", 10
    else:
        pos = 10 + n
        if pos > len(buf):
            raise ProtocolError("truncated client id")
        try:
            client_id = str(buf[10:pos], "utf-8")
        except UnicodeDecodeError:
            raise ProtocolError("client id is not UTF-8") from None
    if hv == 2:
        if pos < len(buf) and buf[pos] == 0:
            pos += 1
        else:
            pos = _p.skip_tagged_fields(buf, pos)
    return RequestHeader(api_key, api_version, correlation_id, client_id), pos


_HEADER_VERSIONS: dict[tuple[int, int], int] = {}


def _request_header_bytes(
    api_key: int, version: int, correlation_id: int, client_id: str | None
) -> bytearray:
    try:
        out = bytearray(_HEADER_FIXED.pack(api_key, version, correlation_id))
    except struct.error as e:
        raise ProtocolError(f"cannot encode request header: {e}") from None
    hv = request_header_version(api_key, version)
    if hv >= 1:
        out += _p.write_string(client_id)
    if hv == 2:
        out.append(0)
    return out


# --- public API ----------------------------------------------------------------------------------


def decode_request(
    api_key: int, version: int, frame: bytes | bytearray | memoryview, offset: int = 0
) -> dict:
    """Decode a request body starting at `offset` (as returned by read_request_header).

    Trailing bytes after the body are ignored, as Kafka does.
    """
    fn = _DECODERS.get((api_key, version, False)) or _decoder(api_key, version, False)
    try:
        return fn(frame if type(frame) is memoryview else _as_view(frame), offset)[0]
    except ProtocolError:
        raise
    except _DECODE_ERRORS as e:
        raise ProtocolError(f"malformed request: {type(e).__name__}: {e}") from None


def encode_request(
    api_key: int, version: int, correlation_id: int, client_id: str | None, body: dict
) -> bytes:
    """Header + body of a request, without the size prefix."""
    fn = _ENCODERS.get((api_key, version, False)) or _encoder(api_key, version, False)
    parts: list = []
    out = _request_header_bytes(api_key, version, correlation_id, client_id)
    last = _run_encoder(fn, out, body, parts, "request")
    if not parts:
        return bytes(last)
    parts.append(last)
    return b"".join(records_bytes(p) for p in parts)


def decode_response(
    api_key: int, version: int, frame: bytes | bytearray | memoryview
) -> tuple[int, dict]:
    """(correlation_id, body) of a response frame (without its size prefix)."""
    fn = _DECODERS.get((api_key, version, True)) or _decoder(api_key, version, True)
    buf = _as_view(frame)
    try:
        (correlation_id,) = _CORRELATION.unpack_from(buf, 0)
    except struct.error:
        raise ProtocolError("truncated response header") from None
    pos = 4
    if response_header_version(api_key, version) == 1:
        pos = _p.skip_tagged_fields(buf, pos)
    return correlation_id, _run_decoder(fn, buf, pos, "response")[0]


def encode_response(
    api_key: int, version: int, correlation_id: int, body: dict
) -> list[bytes | RecordsSource]:
    """Header + body of a response, without the size prefix, as parts to write in order.

    Records given as a RecordsSource (anything with `size` that is not bytes-like) are not
    copied: each becomes its own element after the bytes holding its length prefix.
    """
    fn = _ENCODERS.get((api_key, version, True)) or _encoder(api_key, version, True)
    try:
        out = bytearray(_CORRELATION.pack(correlation_id))
    except struct.error as e:
        raise ProtocolError(f"cannot encode response header: {e}") from None
    if response_header_version(api_key, version) == 1:
        out.append(0)
    parts: list = []
    last = _run_encoder(fn, out, body, parts, "response")
    if not parts:
        return [bytes(last)]
    parts.append(last)
    return [
        bytes(p) if type(p) is bytearray else p
        for p in parts
        if not (type(p) is bytearray and not p)
    ]


def _body_codec(api: Api, version: int, fields: Any, decode: bool) -> Callable[..., Any]:
    if fields == "request":
        fields = api.request
    elif fields == "response":
        fields = api.response
    if REGISTRY.get(api.key) is api and (fields is api.request or fields is api.response):
        response = fields is api.response
        return (
            _decoder(api.key, version, response) if decode else _encoder(api.key, version, response)
        )
    key = (id(api), version, id(fields), "d" if decode else "e")
    hit = _CUSTOM.get(key)
    if hit is None:
        flex = api.is_flexible(version)
        compile_ = compile_decoder if decode else compile_encoder
        hit = (api, fields, compile_(tuple(fields), version, flex, f"{api.name} v{version}"))
        _CUSTOM[key] = hit
    return hit[2]


def encode_body(api: Api, version: int, fields: Any, body: dict) -> bytes:
    """Encode just a body. `fields` is api.request, api.response (or "request"/"response")."""
    _check_version(api, version)
    fn = _body_codec(api, version, fields, decode=False)
    parts: list = []
    last = _run_encoder(fn, bytearray(), body, parts, f"{api.name} v{version}")
    parts.append(last)
    return b"".join(records_bytes(p) for p in parts)


def decode_body(
    api: Api, version: int, fields: Any, buf: bytes | bytearray | memoryview, offset: int = 0
) -> tuple[dict, int]:
    """Decode just a body at `offset`; returns (body, end offset)."""
    _check_version(api, version)
    fn = _body_codec(api, version, fields, decode=True)
    return _run_decoder(fn, _as_view(buf), offset, f"{api.name} v{version}")
