"""v2 records: decode client-built batches, build batches clients can read, round trips."""

import struct

import pytest
from aiokafka.record.default_records import (
    DefaultRecordBatch as AioBatch,
)
from aiokafka.record.default_records import (
    DefaultRecordBatchBuilder as AioBuilder,
)
from hypothesis import given, settings
from hypothesis import strategies as st
from kafka.record.default_records import DefaultRecordBatch as KpBatch
from kafka.record.default_records import DefaultRecordBatchBuilder as KpBuilder
from odradek.broker.records import batch as b
from odradek.broker.records.compression import Codec
from odradek.broker.records.record import (
    ControlType,
    Record,
    build_batch,
    build_control_batch,
    control_type,
    decode_all,
    decode_batch,
    marker_coordinator_epoch,
    read_varint,
    varint_size,
    write_varint,
)

SAMPLE = [
    Record(0, 1_700_000_000_000, None, b"first value " * 20, []),
    Record(1, 1_700_000_000_005, b"key-1", b"", [("trace", b"abc"), ("empty", None)]),
    Record(2, 1_699_999_999_990, b"key-2", None, []),
    Record(3, 1_700_000_000_100, b"", b"\x00\xff" * 300, [("h\u00e9", b"\x01")]),
]


def client_batch(builder_cls, codec, records=SAMPLE, *, pid=-1, epoch=-1, seq=-1, txn=False):
    builder = builder_cls(2, codec, txn, pid, epoch, seq, 1 << 20)
    for r in records:
        assert builder.append(r.offset, r.timestamp, r.key, r.value, r.headers) is not None
    return bytes(builder.build())


def as_tuples(records):
    return [(r.offset, r.timestamp, r.key, r.value, list(r.headers)) for r in records]


@pytest.mark.parametrize("codec", [Codec.NONE, Codec.GZIP, Codec.LZ4, Codec.ZSTD])
def test_decode_kafka_python_batches(codec):
    data = client_batch(KpBuilder, codec, pid=7, epoch=2, seq=40, txn=True)
    assert data[22] & 0x07 == codec  # the client really compressed it
    header, records = decode_batch(data)
    assert as_tuples(records) == as_tuples(SAMPLE)
    assert (header.producer_id, header.producer_epoch, header.base_sequence) == (7, 2, 40)
    assert header.is_transactional and not header.is_control
    assert header.records_count == 4 and header.last_offset_delta == 3
    assert header.max_timestamp == 1_700_000_000_100
    assert header.base_timestamp == 1_700_000_000_000


@pytest.mark.parametrize("codec", [Codec.SNAPPY, Codec.LZ4, Codec.ZSTD, Codec.GZIP])
def test_decode_aiokafka_batches(codec):
    data = client_batch(AioBuilder, codec)
    assert data[22] & 0x07 == codec
    _, records = decode_batch(data)
    assert as_tuples(records) == as_tuples(SAMPLE)


def client_view(reader_cls, data):
    batch = reader_cls(data)
    assert batch.validate_crc()
    return batch, [(r.offset, r.timestamp, r.key, r.value, list(r.headers)) for r in batch]


@pytest.mark.parametrize("codec", [Codec.NONE, Codec.GZIP, Codec.LZ4, Codec.ZSTD])
def test_kafka_python_reads_our_batches(codec):
    data = build_batch(
        SAMPLE,
        base_offset=1000,
        compression=codec,
        producer_id=9,
        producer_epoch=1,
        base_sequence=5,
        transactional=True,
        partition_leader_epoch=3,
    )
    batch, records = client_view(KpBatch, data)
    assert records == [(1000 + o, t, k, v, h) for o, t, k, v, h in as_tuples(SAMPLE)]
    assert batch.compression_type == codec and batch.is_transactional
    assert (batch.producer_id, batch.producer_epoch, batch.base_sequence) == (9, 1, 5)
    assert batch.leader_epoch == 3 and batch.max_timestamp == 1_700_000_000_100


@pytest.mark.parametrize("codec", list(Codec))
def test_aiokafka_reads_our_batches(codec):
    _, records = client_view(AioBatch, build_batch(SAMPLE, compression=codec))
    assert records == as_tuples(SAMPLE)


def test_uncompressed_bytes_identical_to_kafka_python():
    ours = build_batch(SAMPLE, partition_leader_epoch=0)
    assert ours == client_batch(KpBuilder, Codec.NONE)


def test_log_append_time_batches_report_the_append_time():
    records = [Record(i, 5_000, b"k", b"v") for i in range(3)]
    data = build_batch(records, log_append_time=True)
    header, decoded = decode_batch(data)
    assert header.log_append_time and header.max_timestamp == 5_000
    assert [r.timestamp for r in decoded] == [5_000] * 3


def test_crc_mismatch_is_detected():
    data = bytearray(build_batch(SAMPLE))
    data[-3] ^= 0x01
    with pytest.raises(b.CorruptRecordError):
        decode_batch(data)
    decode_batch(data, check_crc=False)  # the body is still well-formed


def test_leader_epoch_and_base_offset_are_outside_the_crc():
    data = bytearray(build_batch(SAMPLE))
    b.set_base_offset(data, 0, 12345)
    b.set_partition_leader_epoch(data, 0, 77)
    header, records = decode_batch(data)
    assert header.partition_leader_epoch == 77
    assert [r.offset for r in records] == [12345, 12346, 12347, 12348]


def reframe(body: bytes, count: int, last_delta: int) -> bytearray:
    """A valid-CRC batch around an arbitrary records section."""
    data = bytearray(build_batch([Record(0, 0, None, b"x")]))
    data[b.HEADER_SIZE :] = body
    struct.pack_into(">i", data, 8, len(data) - b.LOG_OVERHEAD)
    struct.pack_into(">i", data, b.LAST_OFFSET_DELTA_OFFSET, last_delta)
    struct.pack_into(">i", data, b.RECORDS_COUNT_OFFSET, count)
    b.set_crc(data, 0, len(data))
    return data


def test_record_count_must_match_the_records_section():
    body = build_batch([Record(i, 0, None, b"v") for i in range(2)])[b.HEADER_SIZE :]
    with pytest.raises(b.InvalidRecordError):
        decode_batch(reframe(body, 3, 2))  # claims three records, holds two
    with pytest.raises(b.InvalidRecordError):
        decode_batch(reframe(body, 1, 0))  # claims one, holds two
    assert len(decode_batch(reframe(body, 2, 1))[1]) == 2


def test_malformed_record_is_invalid():
    body = bytearray(build_batch([Record(0, 0, b"key", b"value")])[b.HEADER_SIZE :])
    body[0] += 4  # record length larger than its contents
    with pytest.raises(b.InvalidRecordError):
        decode_batch(reframe(bytes(body), 1, 0))
    with pytest.raises(b.InvalidRecordError):
        decode_batch(reframe(b"\x80\x80", 1, 0))  # truncated varint


def test_truncated_batch_is_corrupt():
    data = build_batch(SAMPLE)
    with pytest.raises(b.CorruptRecordError):
        decode_batch(data[:-1])
    with pytest.raises(b.CorruptRecordError):
        decode_batch(data[:30])


def test_decode_all_ignores_a_cut_off_tail_only_when_asked():
    one = build_batch(SAMPLE[:2])
    two = build_batch(SAMPLE[2:], base_offset=2)
    buf = one + two + two[:20]
    assert [len(r) for _, r in decode_all(buf, allow_partial_tail=True)] == [2, 2]
    with pytest.raises(b.CorruptRecordError):
        decode_all(buf)


def test_control_batch_is_a_transaction_marker_clients_understand():
    data = build_control_batch(
        ControlType.COMMIT, producer_id=42, producer_epoch=3, coordinator_epoch=9, timestamp=1234
    )
    header, (record,) = decode_batch(data)
    assert header.is_control and header.is_transactional and header.base_sequence == -1
    assert control_type(record) == ControlType.COMMIT
    assert marker_coordinator_epoch(record) == 9
    batch = KpBatch(data)
    assert batch.is_control_batch
    (marker,) = list(batch)
    assert marker.commit and not marker.abort


def test_empty_batch_and_kept_last_offset_delta():
    data = build_batch(
        [], base_offset=50, producer_id=3, producer_epoch=0, base_sequence=10, last_offset_delta=4
    )
    header, records = decode_batch(data)
    assert records == [] and header.records_count == 0
    assert header.last_offset == 54 and header.max_timestamp == -1


def test_delete_horizon_keeps_record_timestamps():
    records = [Record(0, 1000, b"k", None), Record(3, 1500, b"j", None)]
    data = build_batch(records, delete_horizon_ms=9_000)
    header, decoded = decode_batch(data)
    assert header.attributes & b.DELETE_HORIZON_FLAG and header.base_timestamp == 9_000
    assert [(r.offset, r.timestamp) for r in decoded] == [(0, 1000), (3, 1500)]
    assert header.last_offset_delta == 3


@pytest.mark.parametrize(
    ("value", "encoded"),
    [
        (0, "00"),
        (-1, "01"),
        (1, "02"),
        (63, "7e"),
        (-64, "7f"),
        (64, "8001"),
        (300, "d804"),
        (-(1 << 31), "ffffffff0f"),
        ((1 << 63) - 1, "feffffffffffffffff01"),
    ],
)
def test_zigzag_varints(value, encoded):
    out = bytearray()
    write_varint(out, value)
    assert out.hex() == encoded
    assert varint_size(value) == len(out)
    assert read_varint(bytes(out), 0) == (value, len(out))


blobs = st.none() | st.binary(max_size=300)
records_strategy = st.lists(
    st.tuples(
        st.integers(0, 1000),  # offset gap
        st.integers(-(10**12), 10**12),  # timestamp
        blobs,
        blobs,
        st.lists(st.tuples(st.text(max_size=10), blobs), max_size=3),
    ),
    min_size=1,
    max_size=20,
)


@settings(max_examples=150, deadline=None)
@given(
    items=records_strategy,
    codec=st.sampled_from(list(Codec)),
    base=st.integers(0, 1 << 50),
    producer=st.tuples(st.integers(-1, 1 << 40), st.integers(-1, 1000), st.integers(-1, 1 << 30)),
)
def test_build_decode_round_trip(items, codec, base, producer):
    offset = 0
    records = []
    for gap, ts, key, value, headers in items:
        offset += gap
        records.append(Record(offset, ts, key, value, headers))
    first = records[0].offset
    data = build_batch(
        records,
        base_offset=base,
        compression=codec,
        producer_id=producer[0],
        producer_epoch=producer[1],
        base_sequence=producer[2],
    )
    header, decoded = decode_batch(data)
    assert header.size == len(data)
    assert header.last_offset == base + records[-1].offset - first
    assert header.max_timestamp == max(r.timestamp for r in records)
    assert (header.producer_id, header.producer_epoch, header.base_sequence) == producer
    assert as_tuples(decoded) == [
        (base + r.offset - first, r.timestamp, r.key, r.value, r.headers) for r in records
    ]
    # A third-party reader agrees.
    kp = [(r.offset, r.timestamp, r.key, r.value, list(r.headers)) for r in AioBatch(data)]
    assert kp == as_tuples(decoded)
