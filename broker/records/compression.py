"""Kafka's compression codecs, framed the way the Java client frames them.

Every decoder takes a `max_size`: compressed batches come from the network, and a few
kilobytes of zstd or gzip can expand to gigabytes, so output is bounded before it is built.
Corrupt input raises CorruptRecordError; output above `max_size` raises RecordTooLargeError.
"""

from __future__ import annotations

import functools
import struct
import zlib
from enum import IntEnum

import cramjam
import lz4.frame
import zstandard

from .batch import CorruptRecordError, RecordTooLargeError, UnsupportedCompressionError

# Generous default when a caller has no tighter limit of its own.
DEFAULT_MAX_DECOMPRESSED = 64 * 1024 * 1024

GZIP_LEVEL = 6  # java.util.zip.Deflater.DEFAULT_COMPRESSION
ZSTD_LEVEL = 3  # zstd's default, as zstd-jni uses

# xerial snappy-java stream: magic, then int32 version and int32 min-compatible version.
XERIAL_MAGIC = b"\x82SNAPPY\x00"
XERIAL_HEADER = XERIAL_MAGIC + struct.pack(">ii", 1, 1)
XERIAL_BLOCK_SIZE = 32 * 1024
_INT32 = struct.Struct(">i")

_ZSTD_MAX_RATIO = 32 * 1024
_ZSTD_SLACK = 8 * 1024 * 1024

LZ4_MAGIC = b"\x04\x22\x4d\x18"
_LZ4_FLG_CONTENT_SIZE = 0x08
_LZ4_FLG_DICT_ID = 0x01


class Codec(IntEnum):
    NONE = 0
    GZIP = 1
    SNAPPY = 2
    LZ4 = 3
    ZSTD = 4


# Values of the topic/broker config `compression.type` that name a codec.
CONFIG_CODECS = {
    "uncompressed": Codec.NONE,
    "none": Codec.NONE,
    "gzip": Codec.GZIP,
    "snappy": Codec.SNAPPY,
    "lz4": Codec.LZ4,
    "zstd": Codec.ZSTD,
}


def codec_of(codec_id: int) -> Codec:
    """Codec for the 3-bit attribute value; ids 5-7 are not codecs (the data is corrupt)."""
    try:
        return Codec(codec_id)
    except ValueError:
        raise CorruptRecordError(f"unknown compression codec id {codec_id}") from None


def target_codec(compression_type: str | int | None, source: int) -> Codec:
    """The codec a topic stores: its `compression.type`, or the producer's for "producer"."""
    if compression_type is None or compression_type == "producer":
        return codec_of(source)
    if isinstance(compression_type, int):
        return Codec(compression_type)
    try:
        return CONFIG_CODECS[compression_type.lower()]
    except KeyError:
        raise ValueError(f"unknown compression.type {compression_type!r}") from None


def compress(
    codec: int, data: bytes | bytearray | memoryview, *, legacy_lz4: bool = False
) -> bytes:
    """Compress `data`; `legacy_lz4` writes the header checksum magic-0 messages need."""
    if codec == Codec.NONE:
        return bytes(data)
    if codec == Codec.GZIP:
        c = zlib.compressobj(GZIP_LEVEL, zlib.DEFLATED, 16 + zlib.MAX_WBITS)
        return c.compress(data) + c.flush()
    if codec == Codec.SNAPPY:
        return _xerial_compress(data)
    if codec == Codec.LZ4:
        return _lz4_compress(data, legacy_lz4)
    if codec == Codec.ZSTD:
        return zstandard.ZstdCompressor(level=ZSTD_LEVEL).compress(data)
    raise UnsupportedCompressionError(f"unknown compression codec {codec}")


def decompress(
    codec: int, data: bytes | bytearray | memoryview, *, max_size: int = DEFAULT_MAX_DECOMPRESSED
) -> bytes:
    """Decompress `data`, refusing to produce more than `max_size` bytes."""
    if codec == Codec.NONE:
        return bytes(data)
    try:
        if codec == Codec.GZIP:
            return _gzip_decompress(data, max_size)
        if codec == Codec.SNAPPY:
            return _snappy_decompress(data, max_size)
        if codec == Codec.LZ4:
            return _lz4_decompress(data, max_size)
        if codec == Codec.ZSTD:
            return _zstd_decompress(data, max_size)
    except (CorruptRecordError, RecordTooLargeError):
        raise
    except Exception as exc:  # each library has its own error types
        raise CorruptRecordError(f"cannot decompress {Codec(codec).name}: {exc}") from exc
    raise CorruptRecordError(f"unknown compression codec id {codec}")


def _too_large(max_size: int) -> RecordTooLargeError:
    return RecordTooLargeError(f"decompressed records exceed the limit of {max_size} bytes")


def _gzip_decompress(data: bytes | bytearray | memoryview, max_size: int) -> bytes:
    # Concatenated gzip members are legal (java.util.zip.GZIPInputStream reads them all).
    out = bytearray()
    rest = bytes(data)
    while True:
        d = zlib.decompressobj(16 + zlib.MAX_WBITS)
        out += d.decompress(rest, max_size + 1 - len(out))
        if len(out) > max_size:
            raise _too_large(max_size)
        if not d.eof:
            raise CorruptRecordError("truncated gzip stream")
        rest = d.unused_data
        if not rest:
            return bytes(out)


def _xerial_compress(data: bytes | bytearray | memoryview) -> bytes:
    view = memoryview(data)
    parts = [XERIAL_HEADER]
    for start in range(0, len(view), XERIAL_BLOCK_SIZE):
        block = bytes(cramjam.snappy.compress_raw(view[start : start + XERIAL_BLOCK_SIZE]))
        parts.append(_INT32.pack(len(block)))
        parts.append(block)
    return b"".join(parts)


def _snappy_decompress(data: bytes | bytearray | memoryview, max_size: int) -> bytes:
    view = memoryview(data)
    if len(view) < len(XERIAL_HEADER) or view[: len(XERIAL_MAGIC)] != XERIAL_MAGIC:
        # No xerial magic: the whole payload is one raw snappy block (non-Java producers).
        if cramjam.snappy.decompress_raw_len(view) > max_size:
            raise _too_large(max_size)
        return bytes(cramjam.snappy.decompress_raw(view))
    # The version fields are not checked: some producers write them in the wrong byte order.
    blocks = []
    total = 0
    pos = len(XERIAL_HEADER)
    end = len(view)
    while pos < end:
        if end - pos < 4:
            raise CorruptRecordError("truncated xerial snappy block length")
        (length,) = _INT32.unpack_from(view, pos)
        pos += 4
        if length < 0 or pos + length > end:
            raise CorruptRecordError("truncated xerial snappy block")
        block = view[pos : pos + length]
        pos += length
        total += cramjam.snappy.decompress_raw_len(block)
        if total > max_size:
            raise _too_large(max_size)
        blocks.append(bytes(cramjam.snappy.decompress_raw(block)))
    return b"".join(blocks)


@functools.lru_cache(maxsize=64)
def _xxh32(data: bytes) -> int:
    """xxHash32 (seed 0) of a few header bytes, read from an LZ4 frame's content checksum.

    LZ4 frames end with xxh32 of their content; lz4.frame computes it for us, so the
    header checksums below come from the real library rather than a hand-written hash.
    """
    frame = lz4.frame.compress(data, content_checksum=True, store_size=False)
    return int.from_bytes(frame[-4:], "little")


def _lz4_header_end(view: memoryview) -> int:
    """Index of the header-checksum byte of the LZ4 frame in `view`."""
    if len(view) < 7 or view[:4] != LZ4_MAGIC:
        raise CorruptRecordError("not an LZ4 frame")
    flg = view[4]
    end = 6
    if flg & _LZ4_FLG_CONTENT_SIZE:
        end += 8
    if flg & _LZ4_FLG_DICT_ID:
        end += 4
    if len(view) <= end:
        raise CorruptRecordError("truncated LZ4 frame header")
    return end


def _lz4_compress(data: bytes | bytearray | memoryview, legacy: bool) -> bytes:
    # As Kafka's Lz4BlockOutputStream: independent 64 KiB blocks, no checksums, no size.
    frame = lz4.frame.compress(
        data,
        block_size=lz4.frame.BLOCKSIZE_MAX64KB,
        block_linked=False,
        content_checksum=False,
        store_size=False,
    )
    if not legacy:
        return frame
    # KAFKA-3160: magic-0 messages carry a checksum computed over the magic number too.
    hc = _lz4_header_end(memoryview(frame))
    broken = (_xxh32(frame[:hc]) >> 8) & 0xFF
    return frame[:hc] + bytes([broken]) + frame[hc + 1 :]


def _lz4_decompress(data: bytes | bytearray | memoryview, max_size: int) -> bytes:
    view = memoryview(data)
    hc = _lz4_header_end(view)
    header = bytes(view[: hc + 1])
    if header[hc] != (_xxh32(header[4:hc]) >> 8) & 0xFF:
        legacy = (_xxh32(header[:hc]) >> 8) & 0xFF
        if header[hc] != legacy:
            raise CorruptRecordError("LZ4 frame header checksum mismatch")
        # A magic-0 style checksum: feed the decoder the standard one instead.
        header = header[:hc] + bytes([(_xxh32(header[4:hc]) >> 8) & 0xFF])
    d = lz4.frame.LZ4FrameDecompressor()
    out = d.decompress(header, max_length=max_size + 1)
    out += d.decompress(view[hc + 1 :], max_length=max_size + 1 - len(out))
    if len(out) > max_size:
        raise _too_large(max_size)
    if not d.eof:
        raise CorruptRecordError("truncated LZ4 frame")
    return out


def _zstd_decompress(data: bytes | bytearray | memoryview, max_size: int) -> bytes:
    view = memoryview(data)
    if zstandard.frame_content_size(view) > max_size:
        raise _too_large(max_size)
    # decompressobj has no output limit, so input goes in slices small enough that even the
    # densest zstd encoding (a 4-byte RLE block yields 128 KiB) cannot overshoot the limit by
    # more than _ZSTD_SLACK. Concatenated frames are read one after another.
    out = bytearray()
    pos = 0
    end = len(view)
    d = zstandard.ZstdDecompressor().decompressobj()
    in_frame = False
    while pos < end:
        step = 16 + (max(0, max_size - len(out)) + _ZSTD_SLACK) // _ZSTD_MAX_RATIO
        out += d.decompress(view[pos : pos + step])
        pos = min(pos + step, end)
        in_frame = True
        if len(out) > max_size:
            raise _too_large(max_size)
        if d.eof:
            pos -= len(d.unused_data)
            d = zstandard.ZstdDecompressor().decompressobj()
            in_frame = False
    if in_frame:
        raise CorruptRecordError("truncated zstd frame")
    return bytes(out)
