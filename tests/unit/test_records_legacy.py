"""Message sets v0/v1: parse client-built sets, build sets clients read, conversions."""

import struct
import zlib

import pytest
from aiokafka.record.legacy_records import LegacyRecordBatchBuilder as AioLegacyBuilder
from aiokafka.record.memory_records import MemoryRecords as AioMemoryRecords
from hypothesis import given, settings
from hypothesis import strategies as st
from kafka.record.legacy_records import LegacyRecordBatchBuilder as KpLegacyBuilder
from kafka.record.memory_records import MemoryRecords as KpMemoryRecords
from odradek.broker.records import batch as b
from odradek.broker.records import legacy
from odradek.broker.records.compression import Codec, compress
from odradek.broker.records.record import Record, build_batch, build_control_batch, decode_batch

ITEMS = [(None, b"v0"), (b"k1", b"v1" * 50), (b"k2", None), (b"", b"value three " * 20)]


def client_set(builder_cls, magic, codec, items=ITEMS, ts=1_600_000_000_000):
    builder = builder_cls(magic, codec, 1 << 20)
    for i, (k, v) in enumerate(items):
        assert builder.append(i, ts + i, k, v) is not None
    return bytes(builder.build())


def read_with(memory_records_cls, data):
    """(offset, timestamp, timestamp_type, key, value) as a client library sees them."""
    out = []
    records = memory_records_cls(data)
    while (batch := records.next_batch()) is not None:
        for r in batch:
            out.append((r.offset, r.timestamp, r.timestamp_type, r.key, r.value))
    return out


CASES = [(0, Codec.NONE), (0, Codec.GZIP), (1, Codec.NONE), (1, Codec.GZIP), (1, Codec.LZ4)]


@pytest.mark.parametrize(("magic", "codec"), CASES)
def test_parse_kafka_python_sets(magic, codec):
    data = client_set(KpLegacyBuilder, magic, codec)
    entries = list(legacy.iter_messages(data))
    assert len(entries) == (1 if codec else len(ITEMS))
    assert entries[0][2].compression == codec
    messages = legacy.parse_message_set(data)
    assert [(m.key, m.value) for m in messages] == ITEMS
    expected_ts = [-1] * 4 if magic == 0 else [1_600_000_000_000 + i for i in range(4)]
    assert [m.timestamp for m in messages] == expected_ts
    assert all(m.magic == magic for m in messages)


@pytest.mark.parametrize(("magic", "codec"), [(0, Codec.SNAPPY), (1, Codec.SNAPPY), (1, Codec.LZ4)])
def test_parse_aiokafka_sets(magic, codec):
    data = client_set(AioLegacyBuilder, magic, codec)
    assert [(m.key, m.value) for m in legacy.parse_message_set(data)] == ITEMS


def our_set(magic, codec, first_offset=100, lat=False):
    messages = [
        legacy.LegacyMessage(first_offset + i, 1_600_000_000_000 + i, k, v)
        for i, (k, v) in enumerate(ITEMS)
    ]
    return legacy.build_message_set(messages, magic=magic, compression=codec, log_append_time=lat)


@pytest.mark.parametrize(("magic", "codec"), CASES)
def test_kafka_python_reads_our_sets(magic, codec):
    seen = read_with(KpMemoryRecords, our_set(magic, codec))
    assert [(o, k, v) for o, _, _, k, v in seen] == [
        (100 + i, k, v) for i, (k, v) in enumerate(ITEMS)
    ]
    if magic == 1:
        assert [t for _, t, _, _, _ in seen] == [1_600_000_000_000 + i for i in range(4)]


@pytest.mark.parametrize(("magic", "codec"), [*CASES, (0, Codec.SNAPPY), (1, Codec.SNAPPY)])
def test_aiokafka_reads_our_sets(magic, codec):
    seen = read_with(AioMemoryRecords, our_set(magic, codec))
    assert [(o, k, v) for o, _, _, k, v in seen] == [
        (100 + i, k, v) for i, (k, v) in enumerate(ITEMS)
    ]


def test_wrapper_offsets_relative_in_v1_absolute_in_v0():
    for magic, inner_first in ((1, 0), (0, 100)):
        ((_, _, wrapper),) = legacy.iter_messages(our_set(magic, Codec.GZIP))
        assert wrapper.offset == 103 and wrapper.key is None
        inner = list(legacy.iter_messages(zlib.decompress(wrapper.value, 31)))
        assert [m.offset for _, _, m in inner] == [inner_first + i for i in range(4)]
    # A v1 wrapper's timestamp is the largest inner one.
    ((_, _, wrapper),) = legacy.iter_messages(our_set(1, Codec.GZIP))
    assert wrapper.timestamp == 1_600_000_000_003


def test_magic_0_lz4_uses_kafkas_legacy_checksum():
    data = our_set(0, Codec.LZ4)
    ((_, _, wrapper),) = legacy.iter_messages(data)
    assert wrapper.value[:7] == bytes.fromhex("04224d1860401a")
    assert [(m.key, m.value) for m in legacy.parse_message_set(data)] == ITEMS


def test_log_append_time_wrapper_overrides_inner_timestamps():
    data = our_set(1, Codec.GZIP, lat=True)
    messages = legacy.parse_message_set(data)
    assert {m.timestamp for m in messages} == {1_600_000_000_003}
    assert all(m.log_append_time for m in messages)
    seen = read_with(KpMemoryRecords, data)
    assert {(t, tt) for _, t, tt, _, _ in seen} == {(1_600_000_000_003, 1)}


def test_crc_mismatch_outer_and_inner():
    data = bytearray(our_set(1, Codec.NONE))
    data[-1] ^= 0x01
    with pytest.raises(b.CorruptRecordError):
        legacy.parse_message_set(data)
    # A wrapper whose own CRC is right but whose inner message is damaged.
    inner = bytearray(legacy.build_message_set([legacy.LegacyMessage(0, 5, b"k", b"v")], magic=1))
    inner[-1] ^= 0x01
    wrapper = bytearray()
    legacy.encode_message(wrapper, 0, 1, Codec.GZIP, 5, None, compress(Codec.GZIP, inner))
    with pytest.raises(b.CorruptRecordError):
        legacy.parse_message_set(wrapper)


def test_partial_tail():
    data = our_set(1, Codec.NONE)
    cut = data[:-5]
    with pytest.raises(b.CorruptRecordError):
        legacy.parse_message_set(cut)
    assert len(legacy.parse_message_set(cut, allow_partial_tail=True)) == 3


def test_bad_wrappers():
    empty = bytearray()
    legacy.encode_message(empty, 0, 1, Codec.GZIP, 5, None, compress(Codec.GZIP, b""))
    with pytest.raises(b.InvalidRecordError):
        legacy.parse_message_set(empty)
    null = bytearray()
    legacy.encode_message(null, 0, 1, Codec.GZIP, 5, None, None)
    with pytest.raises(b.InvalidRecordError):
        legacy.parse_message_set(null)
    zstd = bytearray()
    legacy.encode_message(zstd, 0, 1, Codec.ZSTD, 5, None, compress(Codec.ZSTD, b"x"))
    with pytest.raises(b.UnsupportedCompressionError):
        legacy.parse_message_set(zstd)
    with pytest.raises(b.UnsupportedCompressionError):
        legacy.build_message_set([legacy.LegacyMessage(0)], magic=1, compression=Codec.ZSTD)


@pytest.mark.parametrize(("magic", "codec"), CASES)
def test_upconvert_keeps_keys_values_timestamps_and_codec(magic, codec):
    data = client_set(KpLegacyBuilder, magic, codec)
    v2 = legacy.upconvert(data)
    header, records = decode_batch(v2)
    assert header.compression == codec and header.base_offset == 0
    assert [(r.offset, r.key, r.value) for r in records] == [
        (i, k, v) for i, (k, v) in enumerate(ITEMS)
    ]
    expected_ts = [-1] * 4 if magic == 0 else [1_600_000_000_000 + i for i in range(4)]
    assert [r.timestamp for r in records] == expected_ts
    assert header.records_count == 4 and header.last_offset_delta == 3


def test_upconvert_to_another_codec_and_empty():
    v2 = legacy.upconvert(client_set(KpLegacyBuilder, 1, Codec.NONE), compression=Codec.ZSTD)
    assert decode_batch(v2)[0].compression == Codec.ZSTD
    assert legacy.upconvert(b"") == b""


def v2_log():
    """Log bytes: plain, gzip+headers, control marker, transactional lz4, zstd-free."""
    plain = build_batch([Record(i, 1000 + i, b"k%d" % i, b"v%d" % i) for i in range(3)])
    gz = bytearray(
        build_batch(
            [Record(i, 2000 + i, None, b"g" * 100, [("h", b"x")]) for i in range(3)],
            base_offset=3,
            compression=Codec.GZIP,
        )
    )
    marker = build_control_batch(
        0, producer_id=5, producer_epoch=0, coordinator_epoch=1, timestamp=1, base_offset=6
    )
    txn = build_batch(
        [Record(0, 3000, b"t", b"txn"), Record(1, 3001, b"t", b"txn2")],
        base_offset=7,
        compression=Codec.LZ4,
        producer_id=5,
        producer_epoch=0,
        base_sequence=0,
        transactional=True,
    )
    return bytes(plain + gz + marker + txn)


@pytest.mark.parametrize("magic", [0, 1])
def test_downconvert_for_old_consumers(magic):
    data = legacy.downconvert(v2_log(), magic)
    seen = read_with(KpMemoryRecords, data)
    assert [(o, k, v) for o, _, _, k, v in seen] == [
        (0, b"k0", b"v0"), (1, b"k1", b"v1"), (2, b"k2", b"v2"),
        (3, None, b"g" * 100), (4, None, b"g" * 100), (5, None, b"g" * 100),
        (7, b"t", b"txn"), (8, b"t", b"txn2"),
    ]  # fmt: skip
    if magic == 1:
        assert [t for _, t, _, _, _ in seen] == [1000, 1001, 1002, 2000, 2001, 2002, 3000, 3001]
    # Compressed batches stay compressed, one wrapper each; plain ones are plain messages.
    codecs = [m.compression for _, _, m in legacy.iter_messages(data)]
    assert codecs == [0, 0, 0, Codec.GZIP, Codec.LZ4]
    assert all(m.magic == magic for _, _, m in legacy.iter_messages(data))


def test_downconvert_filters_offsets_and_ignores_a_cut_off_tail():
    log = v2_log()
    data = legacy.downconvert(log[:-10], 1, first_offset=4)
    assert [m.offset for m in legacy.parse_message_set(data)] == [4, 5]


def test_downconvert_log_append_time():
    batch = bytearray(build_batch([Record(i, 10 + i, None, b"x") for i in range(3)]))
    b.stamp_log_append_time(batch, 0, 99_999)
    seen = read_with(KpMemoryRecords, legacy.downconvert(batch, 1))
    assert {(t, tt) for _, t, tt, _, _ in seen} == {(99_999, 1)}


def test_downconvert_refuses_zstd():
    data = build_batch([Record(0, 1, None, b"z")], compression=Codec.ZSTD)
    with pytest.raises(b.UnsupportedCompressionError):
        legacy.downconvert(data, 1)


def test_downconvert_v1_entries_for_magic_0_and_keeps_lower_magic():
    v1 = our_set(1, Codec.GZIP, first_offset=10)
    v0 = legacy.downconvert(v1, 0)
    messages = legacy.parse_message_set(v0)
    assert [(m.offset, m.magic, m.timestamp) for m in messages] == [
        (10 + i, 0, -1) for i in range(4)
    ]
    assert legacy.downconvert(v0, 1) == v0


def test_message_sizes():
    out = bytearray()
    legacy.encode_message(out, 7, 0, 0, -1, None, None)
    assert len(out) == 12 + legacy.RECORD_OVERHEAD_V0
    assert struct.unpack_from(">qi", out) == (7, legacy.RECORD_OVERHEAD_V0)
    out = bytearray()
    legacy.encode_message(out, 7, 1, 0, 5, b"ab", b"c")
    assert len(out) == 12 + legacy.RECORD_OVERHEAD_V1 + 3


blobs = st.none() | st.binary(max_size=200)


@settings(max_examples=100, deadline=None)
@given(
    items=st.lists(st.tuples(blobs, blobs, st.integers(0, 1 << 42)), min_size=1, max_size=15),
    magic=st.sampled_from([0, 1]),
    codec=st.sampled_from([Codec.NONE, Codec.GZIP, Codec.SNAPPY, Codec.LZ4]),
    base=st.integers(0, 1 << 40),
)
def test_message_set_round_trip(items, magic, codec, base):
    messages = [legacy.LegacyMessage(base + i, ts, k, v) for i, (k, v, ts) in enumerate(items)]
    data = legacy.build_message_set(messages, magic=magic, compression=codec)
    parsed = legacy.parse_message_set(data)
    expected = [(base + i, ts if magic else -1, k, v, magic) for i, (k, v, ts) in enumerate(items)]
    assert [(m.offset, m.timestamp, m.key, m.value, m.magic) for m in parsed] == expected
    v2 = legacy.upconvert(data)
    _, records = decode_batch(v2)
    assert [(r.key, r.value) for r in records] == [(k, v) for k, v, _ in items]
