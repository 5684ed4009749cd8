"""Codecs: round trips, Kafka's framings, interop with client libraries, bounded output."""

import gzip
import os
import struct

import cramjam
import pytest
import zstandard
from aiokafka import codec as aiokafka_codec
from kafka import codec as kafka_codec
from odradek.broker.records.batch import CorruptRecordError, RecordTooLargeError
from odradek.broker.records.compression import (
    XERIAL_HEADER,
    Codec,
    compress,
    decompress,
    target_codec,
)

PAYLOADS = [
    b"",
    b"x",
    b"hello kafka " * 1000,
    os.urandom(5000),
    (b"abcdefgh" * 20000) + os.urandom(70000),  # spans several snappy and lz4 blocks
]


@pytest.mark.parametrize("codec", list(Codec))
@pytest.mark.parametrize("size_index", range(len(PAYLOADS)))
def test_round_trip(codec, size_index):
    data = PAYLOADS[size_index]
    assert decompress(codec, compress(codec, data)) == data


def test_memoryview_input():
    data = b"memoryview " * 500
    for codec in Codec:
        assert decompress(codec, memoryview(compress(codec, memoryview(data)))) == data


def test_snappy_uses_xerial_framing_with_32k_blocks():
    data = b"0123456789abcdef" * 5000  # 80000 bytes -> 3 blocks
    out = compress(Codec.SNAPPY, data)
    assert out[:16] == XERIAL_HEADER == b"\x82SNAPPY\x00" + struct.pack(">ii", 1, 1)
    pos, blocks = 16, []
    while pos < len(out):
        (length,) = struct.unpack_from(">i", out, pos)
        blocks.append(bytes(cramjam.snappy.decompress_raw(out[pos + 4 : pos + 4 + length])))
        pos += 4 + length
    assert [len(b) for b in blocks] == [32768, 32768, 14464]
    assert b"".join(blocks) == data


def test_snappy_raw_block_without_magic_is_accepted():
    data = b"non-java producers send a bare snappy block " * 40
    raw = bytes(cramjam.snappy.compress_raw(data))
    assert decompress(Codec.SNAPPY, raw) == data


def test_snappy_interop_with_aiokafka():
    data = b"interop " * 9000
    assert decompress(Codec.SNAPPY, aiokafka_codec.snappy_encode(data)) == data
    assert aiokafka_codec.snappy_decode(compress(Codec.SNAPPY, data)) == data


def test_lz4_frame_matches_kafkas_java_framing():
    out = compress(Codec.LZ4, b"kafka " * 100)
    # magic, FLG 0x60 (v01, independent blocks, no checksums, no size), BD 0x40 (64 KiB),
    # header checksum (xxh32(FLG, BD) >> 8) & 0xff.
    assert out[:7] == bytes.fromhex("04224d18604082")


def test_lz4_legacy_checksum_for_magic_0():
    data = b"old consumers " * 300
    out = compress(Codec.LZ4, data, legacy_lz4=True)
    # KAFKA-3160: the checksum is taken over the magic number too:
    # (xxh32(04 22 4d 18 60 40) >> 8) & 0xff = 0x1a.
    assert out[:7] == bytes.fromhex("04224d1860401a")
    assert decompress(Codec.LZ4, out) == data
    assert out[7:] == compress(Codec.LZ4, data)[7:]


def test_lz4_rejects_any_other_header_checksum():
    out = bytearray(compress(Codec.LZ4, b"data " * 100))
    out[6] ^= 0x55
    with pytest.raises(CorruptRecordError):
        decompress(Codec.LZ4, out)


def test_lz4_interop_with_client_libraries():
    data = b"lz4 interop " * 8000
    assert decompress(Codec.LZ4, kafka_codec.lz4_encode(data)) == data
    assert decompress(Codec.LZ4, aiokafka_codec.lz4_encode(data)) == data
    assert kafka_codec.lz4_decode(compress(Codec.LZ4, data)) == data
    assert aiokafka_codec.lz4_decode(compress(Codec.LZ4, data)) == data


def test_gzip_is_a_standard_stream_and_members_concatenate():
    data = b"gzip " * 1000
    assert gzip.decompress(compress(Codec.GZIP, data)) == data
    two = gzip.compress(b"first ") + gzip.compress(b"second")
    assert decompress(Codec.GZIP, two) == b"first second"
    assert decompress(Codec.GZIP, kafka_codec.gzip_encode(data)) == data


def test_zstd_frames_with_and_without_content_size():
    data = b"zstd " * 5000
    streamed = zstandard.ZstdCompressor(write_content_size=False).compress(data)
    assert decompress(Codec.ZSTD, streamed) == data
    two = zstandard.ZstdCompressor().compress(b"a" * 10) + zstandard.ZstdCompressor().compress(b"b")
    assert decompress(Codec.ZSTD, two) == b"a" * 10 + b"b"
    assert kafka_codec.zstd_decode(compress(Codec.ZSTD, data)) == data


@pytest.mark.parametrize("codec", [c for c in Codec if c != Codec.NONE])
def test_decompression_is_bounded(codec):
    bomb = compress(codec, bytes(8 * 1024 * 1024))
    assert len(bomb) < 1024 * 1024
    with pytest.raises(RecordTooLargeError):
        decompress(codec, bomb, max_size=1024 * 1024)
    exact = compress(codec, bytes(1000))
    assert decompress(codec, exact, max_size=1000) == bytes(1000)
    with pytest.raises(RecordTooLargeError):
        decompress(codec, exact, max_size=999)


def test_zstd_bomb_without_content_size_is_bounded():
    bomb = zstandard.ZstdCompressor(write_content_size=False).compress(bytes(8 << 20))
    with pytest.raises(RecordTooLargeError):
        decompress(Codec.ZSTD, bomb, max_size=1 << 20)


@pytest.mark.parametrize("codec", [c for c in Codec if c != Codec.NONE])
def test_corrupt_input(codec):
    good = compress(codec, b"some data to mangle " * 200)
    for bad in (good[: len(good) // 2], b"\x00\x01garbage" * 5):
        with pytest.raises(CorruptRecordError):
            decompress(codec, bad)


def test_unknown_codec_id():
    with pytest.raises(CorruptRecordError):
        decompress(6, b"abc")


def test_target_codec():
    assert target_codec("producer", 1) == Codec.GZIP
    assert target_codec(None, 3) == Codec.LZ4
    assert target_codec("uncompressed", 4) == Codec.NONE
    assert target_codec("zstd", 0) == Codec.ZSTD
    assert target_codec("snappy", 0) == Codec.SNAPPY
    with pytest.raises(ValueError):
        target_codec("brotli", 0)
