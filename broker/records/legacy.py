"""Legacy message sets (magic 0 and 1): parse, build, and convert to and from v2 batches.

Old producers (Produce v0-2) may send these; the broker stores only v2, so they are
up-converted on append. Old consumers (Fetch v0-3) cannot read v2, so log bytes are
down-converted for them. Entry layout: offset int64 | size int32 | crc uint32 (CRC-32 of
magic..end) | magic int8 | attributes int8 | [timestamp int64, magic 1] | key | value.
"""

from __future__ import annotations

import struct
import zlib
from collections.abc import Iterator, Sequence
from dataclasses import dataclass

from . import batch as b
from .batch import CorruptRecordError, InvalidRecordError, UnsupportedCompressionError
from .compression import DEFAULT_MAX_DECOMPRESSED, Codec, codec_of, compress, decompress
from .record import Record, build_batch, decode_batch

# crc + magic + attributes + key length + value length; magic 1 adds an int64 timestamp.
RECORD_OVERHEAD_V0 = 14
RECORD_OVERHEAD_V1 = 22
_PREFIX = struct.Struct(">qiIbb")  # offset, size, crc, magic, attributes
_INT64 = struct.Struct(">q")
_INT32 = struct.Struct(">i")
_CRC_START = 16  # magic's position in an entry: the CRC covers from here to the end


@dataclass(slots=True)
class LegacyMessage:
    """One message. For inner messages of a wrapper, `offset` is already absolute."""

    offset: int
    timestamp: int = b.NO_TIMESTAMP
    key: bytes | None = None
    value: bytes | None = None
    magic: int = 1
    attributes: int = 0

    @property
    def compression(self) -> int:
        return self.attributes & b.COMPRESSION_MASK

    @property
    def log_append_time(self) -> bool:
        return self.magic > 0 and bool(self.attributes & b.TIMESTAMP_TYPE_MASK)


def entry_size(buf: bytes | bytearray | memoryview, pos: int) -> int | None:
    """Total bytes of the entry (v0, v1 or v2) at `pos`, or None if its size is cut off."""
    if len(buf) - pos < b.LOG_OVERHEAD:
        return None
    return b.LOG_OVERHEAD + _INT32.unpack_from(buf, pos + 8)[0]


def _read_bytes(buf: memoryview, pos: int, end: int) -> tuple[bytes | None, int]:
    if pos + 4 > end:
        raise CorruptRecordError("truncated message")
    (length,) = _INT32.unpack_from(buf, pos)
    pos += 4
    if length < 0:
        return None, pos
    if pos + length > end:
        raise CorruptRecordError("message field past the end of the message")
    return bytes(buf[pos : pos + length]), pos + length


def iter_messages(
    buf: bytes | bytearray | memoryview,
    *,
    check_crc: bool = True,
    allow_partial_tail: bool = False,
) -> Iterator[tuple[int, int, LegacyMessage]]:
    """Shallow walk: (position, entry size, message) for each top-level message."""
    view = memoryview(buf)
    pos = 0
    end = len(view)
    while pos < end:
        size = entry_size(view, pos)
        if size is None or pos + size > end or end - pos < _PREFIX.size:
            if allow_partial_tail:
                return
            raise CorruptRecordError("partial message at the end of the message set")
        offset, msg_size, crc, magic, attributes = _PREFIX.unpack_from(view, pos)
        if magic not in (0, 1):
            raise CorruptRecordError(f"unexpected magic {magic} in a message set")
        if msg_size < (RECORD_OVERHEAD_V0 if magic == 0 else RECORD_OVERHEAD_V1):
            raise CorruptRecordError(f"message size {msg_size} below the minimum")
        stop = pos + size
        if check_crc and zlib.crc32(view[pos + _CRC_START : stop]) != crc:
            raise CorruptRecordError("message CRC mismatch")
        p = pos + _PREFIX.size
        timestamp = b.NO_TIMESTAMP
        if magic == 1:
            (timestamp,) = _INT64.unpack_from(view, p)
            p += 8
        key, p = _read_bytes(view, p, stop)
        value, p = _read_bytes(view, p, stop)
        if p != stop:
            raise CorruptRecordError("message size does not match its contents")
        yield pos, size, LegacyMessage(offset, timestamp, key, value, magic, attributes)
        pos = stop


def expand(
    wrapper: LegacyMessage, *, max_decompressed_bytes: int = DEFAULT_MAX_DECOMPRESSED
) -> list[LegacyMessage]:
    """The inner messages of a compressed wrapper, with absolute offsets."""
    codec = codec_of(wrapper.compression)
    if codec == Codec.ZSTD:
        raise UnsupportedCompressionError("zstd is not allowed in message format v0/v1")
    if wrapper.value is None:
        raise InvalidRecordError("compressed message set with a null value")
    data = decompress(codec, wrapper.value, max_size=max_decompressed_bytes)
    inner = [m for _, _, m in iter_messages(data)]
    if not inner:
        raise InvalidRecordError("compressed message set with no inner messages")
    # Magic 1 inner offsets are relative: the wrapper carries the last message's offset.
    shift = wrapper.offset - inner[-1].offset if wrapper.magic > 0 else 0
    lat = wrapper.log_append_time
    for m in inner:
        if m.compression != Codec.NONE:
            raise InvalidRecordError("nested compressed messages")
        if m.magic != wrapper.magic:
            raise InvalidRecordError("inner message magic differs from its wrapper's")
        m.offset += shift
        if lat:
            m.timestamp = wrapper.timestamp
            m.attributes |= b.TIMESTAMP_TYPE_MASK
    return inner


def parse_message_set(
    buf: bytes | bytearray | memoryview,
    *,
    check_crc: bool = True,
    allow_partial_tail: bool = False,
    max_decompressed_bytes: int = DEFAULT_MAX_DECOMPRESSED,
) -> list[LegacyMessage]:
    """Every message in the set, compressed wrappers expanded (deep iteration)."""
    out: list[LegacyMessage] = []
    for _, _, m in iter_messages(buf, check_crc=check_crc, allow_partial_tail=allow_partial_tail):
        if m.compression == Codec.NONE:
            out.append(m)
        else:
            out.extend(expand(m, max_decompressed_bytes=max_decompressed_bytes))
    return out


def encode_message(
    out: bytearray,
    offset: int,
    magic: int,
    attributes: int,
    timestamp: int,
    key: bytes | None,
    value: bytes | None,
) -> None:
    """Append one entry (offset, size, CRC-32 and message) to `out`."""
    start = len(out)
    out += _PREFIX.pack(offset, 0, 0, magic, attributes)
    if magic > 0:
        out += _INT64.pack(timestamp)
    for data in (key, value):
        if data is None:
            out += b"\xff\xff\xff\xff"
        else:
            out += _INT32.pack(len(data))
            out += data
    _INT32.pack_into(out, start + 8, len(out) - start - b.LOG_OVERHEAD)
    struct.pack_into(">I", out, start + 12, zlib.crc32(memoryview(out)[start + _CRC_START :]))


def build_message_set(
    messages: Sequence[Record | LegacyMessage],
    *,
    magic: int,
    compression: int = Codec.NONE,
    log_append_time: bool = False,
) -> bytes:
    """Encode messages (their own offsets) as a v0/v1 set; compressed ones in one wrapper.

    Wrapper offset = the last message's; inner offsets are relative for magic 1 and absolute
    for magic 0. Magic 0 has no timestamps; lz4 under magic 0 gets Kafka's legacy checksum.
    """
    if magic not in (0, 1):
        raise ValueError(f"message format magic {magic} is not legacy")
    codec = Codec(compression)
    if codec == Codec.ZSTD:
        raise UnsupportedCompressionError("zstd cannot be written in message format v0/v1")
    lat = b.TIMESTAMP_TYPE_MASK if log_append_time and magic > 0 else 0
    out = bytearray()
    if not messages:
        return b""
    if codec == Codec.NONE:
        for m in messages:
            encode_message(out, m.offset, magic, lat, m.timestamp, m.key, m.value)
        return bytes(out)
    first = messages[0].offset if magic > 0 else 0
    inner = bytearray()
    for m in messages:
        encode_message(inner, m.offset - first, magic, lat, m.timestamp, m.key, m.value)
    value = compress(codec, inner, legacy_lz4=magic == 0)
    timestamp = max(m.timestamp for m in messages) if magic > 0 else b.NO_TIMESTAMP
    encode_message(out, messages[-1].offset, magic, int(codec) | lat, timestamp, None, value)
    return bytes(out)


def source_codec(buf: bytes | bytearray | memoryview) -> Codec:
    """The codec of the last compressed wrapper in a set (Kafka's "source compression")."""
    codec = Codec.NONE
    for _, _, m in iter_messages(buf, check_crc=False):
        if m.compression != Codec.NONE:
            codec = codec_of(m.compression)
    return codec


def to_records(messages: Sequence[LegacyMessage]) -> list[Record]:
    """v2 records with fresh consecutive offsets; magic 0 messages get NO_TIMESTAMP."""
    return [
        Record(i, m.timestamp if m.magic > 0 else b.NO_TIMESTAMP, m.key, m.value)
        for i, m in enumerate(messages)
    ]


def upconvert(
    message_set: bytes | bytearray | memoryview,
    *,
    compression: int | None = None,
    max_decompressed_bytes: int = DEFAULT_MAX_DECOMPRESSED,
) -> bytes:
    """One v2 batch (base offset 0) holding every message of a v0/v1 set, b"" if empty.

    Keys, values and timestamps are kept; offsets become 0..n-1, as the broker assigns
    them anyway. The codec defaults to the set's own (zstd is refused).
    """
    messages = parse_message_set(message_set, max_decompressed_bytes=max_decompressed_bytes)
    if not messages:
        return b""
    codec = source_codec(message_set) if compression is None else Codec(compression)
    return build_batch(to_records(messages), compression=codec)


def downconvert(
    records: bytes | bytearray | memoryview,
    magic: int,
    *,
    first_offset: int = 0,
    check_crc: bool = False,
    max_decompressed_bytes: int = DEFAULT_MAX_DECOMPRESSED,
) -> bytes:
    """Log bytes rewritten as a v0/v1 message set for Fetch v0-3 (Kafka's RecordsUtil).

    Each v2 batch becomes plain messages, or one wrapper with the batch's codec; headers
    and producer state are dropped; control batches are skipped; transactional batches are
    converted like any other (old consumers read uncommitted). Records below `first_offset`
    are left out. A cut-off last batch (fetch byte limit) is ignored. Entries already at or
    below `magic` are copied unchanged. zstd batches raise UnsupportedCompressionError.
    """
    view = memoryview(records)
    out = bytearray()
    pos = 0
    end = len(view)
    while pos < end:
        size = entry_size(view, pos)
        if size is None or pos + size > end or end - pos < b.MAGIC_OFFSET + 1:
            break
        entry_magic = view[pos + b.MAGIC_OFFSET]
        if entry_magic <= magic:
            out += view[pos : pos + size]
        elif entry_magic == 2:
            header, recs = decode_batch(
                view, pos, check_crc=check_crc, max_decompressed_bytes=max_decompressed_bytes
            )
            if not header.is_control:
                recs = [r for r in recs if r.offset >= first_offset]
                if recs:
                    if header.compression == Codec.ZSTD:
                        raise UnsupportedCompressionError(
                            "zstd-compressed records cannot be down-converted"
                        )
                    out += build_message_set(
                        recs,
                        magic=magic,
                        compression=header.compression,
                        log_append_time=header.log_append_time,
                    )
        else:  # magic 1 entry for a magic 0 reader
            entry = view[pos : pos + size]
            msgs = parse_message_set(
                entry, check_crc=check_crc, max_decompressed_bytes=max_decompressed_bytes
            )
            codec = source_codec(entry)
            out += build_message_set(
                [m for m in msgs if m.offset >= first_offset], magic=magic, compression=codec
            )
        pos += size
    return bytes(out)
