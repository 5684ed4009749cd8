"""Header-level batch operations: validation, iteration, in-place patches, error mapping."""

import pytest
from kafka.record.default_records import DefaultRecordBatch as KpBatch
from odradek.broker.protocol.errors import ErrorCode, KafkaError
from odradek.broker.records import batch as b
from odradek.broker.records.record import Record, build_batch


def sample(base_offset=0, n=3):
    return build_batch([Record(i, 100 + i, b"k", b"v") for i in range(n)], base_offset=base_offset)


def test_iter_batches_positions_and_headers():
    one, two = sample(0, 3), sample(3, 2)
    found = list(b.iter_batches(one + two))
    assert [(pos, h.base_offset, h.last_offset) for pos, h in found] == [
        (0, 0, 2),
        (len(one), 3, 4),
    ]
    with pytest.raises(b.CorruptRecordError):
        list(b.iter_batches(one + two[:-1]))


def test_stamp_log_append_time_in_place():
    buf = bytearray(sample() * 2)
    size = len(buf) // 2
    b.stamp_log_append_time(buf, size, 555)
    first, second = (h for _, h in b.iter_batches(buf))
    assert not first.log_append_time and first.max_timestamp == 102
    assert second.log_append_time and second.max_timestamp == 555
    assert KpBatch(bytes(buf[size:])).validate_crc()
    before = bytes(buf)
    b.stamp_log_append_time(buf, size, 555)  # already stamped: nothing changes
    assert bytes(buf) == before


def test_peek_magic_and_bad_headers():
    data = sample()
    assert b.peek_magic(data) == 2
    with pytest.raises(b.CorruptRecordError):
        b.parse_header(data[:40])
    with pytest.raises(b.CorruptRecordError):
        b.validate(data[:-1])


@pytest.mark.parametrize(
    ("exc", "code"),
    [
        (b.CorruptRecordError, ErrorCode.CORRUPT_MESSAGE),
        (b.InvalidRecordError, ErrorCode.INVALID_RECORD),
        (b.RecordTooLargeError, ErrorCode.MESSAGE_TOO_LARGE),
        (b.InvalidTimestampError, ErrorCode.INVALID_TIMESTAMP),
        (b.UnsupportedCompressionError, ErrorCode.UNSUPPORTED_COMPRESSION_TYPE),
    ],
)
def test_records_errors_map_to_kafka_errors(exc, code):
    err = exc("reason").to_kafka_error()
    assert isinstance(err, KafkaError) and err.code == code and "reason" in str(err)
    assert issubclass(exc, ValueError)
