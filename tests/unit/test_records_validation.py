"""Produce-path validation: Kafka's checks and error codes, per batch unless records are needed."""

import struct

import pytest
from kafka.record.default_records import DefaultRecordBatch as KpBatch
from kafka.record.default_records import DefaultRecordBatchBuilder as KpBuilder
from kafka.record.legacy_records import LegacyRecordBatchBuilder as KpLegacyBuilder
from odradek.broker.protocol.errors import ErrorCode, KafkaError
from odradek.broker.records import batch as b
from odradek.broker.records import legacy
from odradek.broker.records.compression import Codec, compress
from odradek.broker.records.record import Record, build_batch, build_control_batch, decode_batch
from odradek.broker.records.validation import validate_for_append

NOW = 1_700_000_000_000


def records(n=3, ts=NOW, keys=True):
    return [
        Record(i, ts + i, b"k%d" % i if keys else None, b"value %d " % i * 20) for i in range(n)
    ]


def validate(data, **kw):
    kw.setdefault("produce_version", 9)
    kw.setdefault("now_ms", NOW)
    return validate_for_append(data, **kw)


def error_of(data, **kw) -> ErrorCode:
    with pytest.raises(KafkaError) as info:
        validate(data, **kw)
    return info.value.code


def patch(data, offset, fmt, value, *, fix_crc=True) -> bytes:
    buf = bytearray(data)
    struct.pack_into(fmt, buf, offset, value)
    if fix_crc:
        b.set_crc(buf, 0, len(buf))
    return bytes(buf)


def test_valid_batch_is_passed_through_as_a_copy():
    data = build_batch(records(), compression=Codec.GZIP)
    out = validate(memoryview(data))
    assert isinstance(out, bytearray) and out == data


def test_valid_batch_in_a_writable_request_is_passed_on_in_place():
    """The broker reads requests into writable buffers: the log assigns offsets right there."""
    frame = bytearray(b"head" + build_batch(records()))
    out = validate(memoryview(frame)[4:])
    assert isinstance(out, memoryview) and out == frame[4:]
    b.set_base_offset(out, 0, 42)
    assert b.parse_header(frame, 4).base_offset == 42


def test_kafka_python_batch_is_accepted():
    builder = KpBuilder(2, Codec.LZ4, False, 1000, 0, 0, 1 << 20)
    for r in records(5):
        builder.append(r.offset, r.timestamp, r.key, r.value, [])
    data = bytes(builder.build())
    assert validate(data, require_keys=True) == data


def test_crc_mismatch_is_corrupt_message():
    data = bytearray(build_batch(records()))
    data[-1] ^= 0xFF
    assert error_of(data) == ErrorCode.CORRUPT_MESSAGE


@pytest.mark.parametrize("cut", [1, 30, 70])
def test_truncated_or_trailing_partial_is_corrupt_message(cut):
    data = build_batch(records())
    assert error_of(data[:-cut]) == ErrorCode.CORRUPT_MESSAGE
    assert error_of(data + data[:cut], produce_version=2) == ErrorCode.CORRUPT_MESSAGE


def test_batch_length_below_header_is_corrupt_message():
    data = patch(build_batch(records()), 8, ">i", 20, fix_crc=False)
    assert error_of(data + bytes(100)) == ErrorCode.CORRUPT_MESSAGE


def test_produce_v3_plus_needs_exactly_one_magic_2_batch():
    one = build_batch(records())
    assert error_of(b"", produce_version=3) == ErrorCode.INVALID_RECORD
    assert error_of(one + one, produce_version=3) == ErrorCode.INVALID_RECORD
    v1 = legacy.build_message_set(records(), magic=1)
    assert error_of(v1, produce_version=3) == ErrorCode.INVALID_RECORD
    # Older versions take several batches, or none.
    assert validate(one + one, produce_version=2) == one + one
    assert validate(b"", produce_version=2) == bytearray()


def test_zstd_needs_produce_v7():
    data = build_batch(records(), compression=Codec.ZSTD)
    assert error_of(data, produce_version=6) == ErrorCode.UNSUPPORTED_COMPRESSION_TYPE
    assert error_of(data, produce_version=2) == ErrorCode.UNSUPPORTED_COMPRESSION_TYPE
    assert validate(data, produce_version=7) == data


def test_batch_above_max_message_bytes_is_message_too_large():
    data = build_batch(records(10))
    assert error_of(data, max_message_bytes=len(data) - 1) == ErrorCode.MESSAGE_TOO_LARGE
    assert validate(data, max_message_bytes=len(data)) == data


def test_header_count_and_offset_delta_must_agree():
    data = build_batch(records(3))
    bad_delta = patch(data, b.LAST_OFFSET_DELTA_OFFSET, ">i", 5)
    assert error_of(bad_delta) == ErrorCode.INVALID_RECORD
    zero = patch(patch(data, b.RECORDS_COUNT_OFFSET, ">i", 0), b.LAST_OFFSET_DELTA_OFFSET, ">i", -1)
    assert error_of(zero) == ErrorCode.INVALID_RECORD


def test_records_disagreeing_with_the_count_are_invalid_when_decoded():
    # Header says 2 records (consistent with lastOffsetDelta) but the body holds 3.
    data = patch(patch(build_batch(records(3)), b.RECORDS_COUNT_OFFSET, ">i", 2),
                 b.LAST_OFFSET_DELTA_OFFSET, ">i", 1)  # fmt: skip
    assert validate(data) == data  # per-batch checks cannot see it
    assert error_of(data, require_keys=True) == ErrorCode.INVALID_RECORD
    assert error_of(data, compression_type="gzip") == ErrorCode.INVALID_RECORD


def test_nonzero_base_offset_control_batches_and_missing_sequence_are_invalid():
    assert error_of(build_batch(records(), base_offset=5)) == ErrorCode.INVALID_RECORD
    marker = build_control_batch(1, producer_id=1, producer_epoch=0, coordinator_epoch=0,
                                 timestamp=NOW)  # fmt: skip
    assert error_of(marker) == ErrorCode.INVALID_RECORD
    no_seq = build_batch(records(), producer_id=7, producer_epoch=0, base_sequence=-1)
    assert error_of(no_seq) == ErrorCode.INVALID_RECORD


def test_producer_may_not_claim_log_append_time():
    data = build_batch(records(), log_append_time=True)
    assert error_of(data) == ErrorCode.INVALID_TIMESTAMP


def test_timestamp_window():
    old = build_batch(records(ts=NOW - 10_000))
    assert error_of(old, timestamp_difference_max_ms=5_000) == ErrorCode.INVALID_TIMESTAMP
    assert validate(old, timestamp_difference_max_ms=20_000) == old
    future = build_batch(records(ts=NOW + 10_000))
    assert error_of(future, timestamp_after_max_ms=5_000) == ErrorCode.INVALID_TIMESTAMP
    assert validate(future, timestamp_before_max_ms=5_000) == future
    # Only the first record is old; baseTimestamp of a later-first batch would not show it.
    mixed = build_batch([Record(0, NOW, b"a", b"1"), Record(1, NOW - 60_000, b"b", b"2")])
    assert error_of(mixed, timestamp_before_max_ms=30_000) == ErrorCode.INVALID_TIMESTAMP
    # LogAppendTime topics ignore producer timestamps.
    assert validate(old, timestamp_difference_max_ms=5_000, timestamp_type="LogAppendTime")


def test_log_append_time_stamping_keeps_a_valid_crc():
    for codec in (Codec.NONE, Codec.GZIP):
        data = build_batch(records(4, ts=1), compression=codec)
        out = validate(data, timestamp_type="LogAppendTime")
        header = b.validate(out)  # CRC recomputed
        assert header.log_append_time and header.max_timestamp == NOW
        assert out[b.HEADER_SIZE :] == data[b.HEADER_SIZE :]  # records untouched
        batch = KpBatch(bytes(out))
        assert batch.validate_crc()
        assert {(r.timestamp, r.timestamp_type) for r in batch} == {(NOW, 1)}


def test_require_keys_for_compacted_topics():
    data = build_batch(records(keys=False), compression=Codec.SNAPPY)
    assert error_of(data, require_keys=True) == ErrorCode.INVALID_RECORD
    keyed = build_batch(records(), compression=Codec.SNAPPY)
    assert validate(keyed, require_keys=True) == keyed


def test_each_keyless_record_is_reported_with_its_batch_index():
    """KIP-467: every record at fault is listed, so a client fails only those."""
    mixed = [Record(i, NOW, None if i in (1, 3) else b"k", b"v") for i in range(5)]
    with pytest.raises(KafkaError) as info:
        validate(build_batch(mixed), require_keys=True, partition_name="t-0")
    error = info.value
    assert error.code == ErrorCode.INVALID_RECORD
    why = "Compacted topic cannot accept message without key in topic partition t-0"
    assert error.record_errors == [(1, why), (3, why)]
    assert error.message == (
        "One or more records have been rejected due to 2 record errors in total, and only "
        f"showing the first three errors at most: [RecordError(batchIndex=1, message='{why}'), "
        f"RecordError(batchIndex=3, message='{why}')]"
    )
    bad_ts = [Record(0, NOW, b"a", b"1"), Record(1, NOW - 60_000, b"b", b"2")]
    with pytest.raises(KafkaError) as info:
        validate(build_batch(bad_ts), timestamp_before_max_ms=30_000)
    assert info.value.code == ErrorCode.INVALID_TIMESTAMP
    assert [i for i, _ in info.value.record_errors] == [1]


def test_broker_side_recompression_keeps_records_and_producer_state():
    data = build_batch(
        records(5), compression=Codec.GZIP, producer_id=11, producer_epoch=2, base_sequence=30
    )
    out = validate(data, compression_type="lz4")
    header, decoded = decode_batch(out)
    assert header.compression == Codec.LZ4
    assert (header.producer_id, header.producer_epoch, header.base_sequence) == (11, 2, 30)
    assert [(r.offset, r.timestamp, r.key, r.value) for r in decoded] == [
        (r.offset, r.timestamp, r.key, r.value) for r in records(5)
    ]
    plain = validate(data, compression_type="uncompressed")
    assert decode_batch(plain)[0].compression == Codec.NONE
    assert validate(data, compression_type="gzip") == data  # same codec: bytes kept


def test_recompressed_batch_above_the_limit_is_message_too_large():
    data = build_batch([Record(0, NOW, b"k", bytes(200_000))], compression=Codec.ZSTD)
    assert len(data) < 1000
    code = error_of(data, compression_type="uncompressed", max_message_bytes=100_000)
    assert code == ErrorCode.MESSAGE_TOO_LARGE


def test_records_are_decoded_only_when_needed():
    # A well-framed batch whose compressed section is garbage (but CRC-valid).
    junk = bytearray(build_batch(records(3), compression=Codec.GZIP))
    junk[b.HEADER_SIZE :] = b"\x1f\x8b" + bytes(len(junk) - b.HEADER_SIZE - 2)
    b.set_crc(junk, 0, len(junk))
    assert validate(junk) == junk  # per batch: header, size, CRC only
    assert error_of(junk, require_keys=True) == ErrorCode.CORRUPT_MESSAGE
    assert error_of(junk, compression_type="lz4") == ErrorCode.CORRUPT_MESSAGE


def test_decompression_bomb_is_refused():
    bomb = build_batch([Record(0, NOW, b"k", bytes(8 << 20))], compression=Codec.GZIP)
    assert len(bomb) < 64 * 1024
    code = error_of(bomb, compression_type="lz4", max_decompressed_bytes=1 << 20)
    assert code == ErrorCode.MESSAGE_TOO_LARGE


# --- legacy input (Produce v0-2) ---


def kp_legacy(magic, codec, keys=True, ts=NOW):
    builder = KpLegacyBuilder(magic, codec, 1 << 20)
    for i in range(3):
        builder.append(i, ts + i, b"k%d" % i if keys else None, b"legacy %d" % i)
    return bytes(builder.build())


@pytest.mark.parametrize(("magic", "codec"), [(0, 0), (0, 1), (1, 0), (1, 1), (1, 3)])
def test_legacy_sets_are_upconverted(magic, codec):
    out = validate(kp_legacy(magic, codec), produce_version=2)
    header, decoded = decode_batch(out)
    assert header.compression == codec and header.records_count == 3
    assert [(r.offset, r.key, r.value) for r in decoded] == [
        (i, b"k%d" % i, b"legacy %d" % i) for i in range(3)
    ]
    assert [r.timestamp for r in decoded] == ([-1] * 3 if magic == 0 else [NOW, NOW + 1, NOW + 2])


def test_legacy_upconversion_with_topic_codec_and_log_append_time():
    out = validate(
        kp_legacy(1, Codec.NONE),
        produce_version=1,
        compression_type="zstd",
        timestamp_type="LogAppendTime",
    )
    header, decoded = decode_batch(out)
    assert header.compression == Codec.ZSTD and header.log_append_time
    assert {r.timestamp for r in decoded} == {NOW}


def test_legacy_errors():
    bad = bytearray(kp_legacy(1, Codec.NONE))
    bad[-1] ^= 1
    assert error_of(bad, produce_version=2) == ErrorCode.CORRUPT_MESSAGE
    data = kp_legacy(1, Codec.GZIP)
    assert error_of(data, produce_version=2, max_message_bytes=20) == ErrorCode.MESSAGE_TOO_LARGE
    no_keys = kp_legacy(0, Codec.GZIP, keys=False)
    assert error_of(no_keys, produce_version=0, require_keys=True) == ErrorCode.INVALID_RECORD
    old = kp_legacy(1, Codec.NONE, ts=NOW - 100_000)
    code = error_of(old, produce_version=2, timestamp_difference_max_ms=1_000)
    assert code == ErrorCode.INVALID_TIMESTAMP
    lat = legacy.build_message_set([legacy.LegacyMessage(0, NOW, b"k", b"v")], magic=1,
                                   log_append_time=True)  # fmt: skip
    assert error_of(lat, produce_version=2) == ErrorCode.INVALID_TIMESTAMP
    zstd = bytearray()
    inner = legacy.build_message_set([legacy.LegacyMessage(0, NOW, b"k", b"v")], magic=1)
    legacy.encode_message(zstd, 0, 1, Codec.ZSTD, NOW, None, compress(Codec.ZSTD, inner))
    assert error_of(zstd, produce_version=2) == ErrorCode.UNSUPPORTED_COMPRESSION_TYPE


def test_mixed_magic_is_invalid():
    mixed = kp_legacy(1, Codec.NONE) + build_batch(records())
    assert error_of(mixed, produce_version=2) == ErrorCode.INVALID_RECORD


def test_unknown_magic_is_corrupt():
    data = patch(build_batch(records()), b.MAGIC_OFFSET, ">b", 3, fix_crc=False)
    assert error_of(data) == ErrorCode.CORRUPT_MESSAGE
