"""Record batch v2 at the header level: parse, validate and patch without decoding records.

The produce and fetch hot paths only ever need this module: a batch is validated (sizes,
magic, CRC-32C over attributes..end) and its base offset and partition leader epoch are patched
in place; neither is covered by the CRC, so the client's CRC stays valid.

Layout (big-endian): baseOffset int64 | batchLength int32 | partitionLeaderEpoch int32 |
magic int8 | crc uint32 | attributes int16 | lastOffsetDelta int32 | baseTimestamp int64 |
maxTimestamp int64 | producerId int64 | producerEpoch int16 | baseSequence int32 |
recordsCount int32 | records...
"""

from __future__ import annotations

import struct
from collections.abc import Iterator
from typing import NamedTuple

import crc32c

HEADER_SIZE = 61
# baseOffset + batchLength: the part of the header not counted in batchLength.
LOG_OVERHEAD = 12
MAGIC_OFFSET = 16
CRC_OFFSET = 17
ATTRIBUTES_OFFSET = 21
LAST_OFFSET_DELTA_OFFSET = 23
BASE_TIMESTAMP_OFFSET = 27
MAX_TIMESTAMP_OFFSET = 35
PRODUCER_ID_OFFSET = 43
RECORDS_COUNT_OFFSET = 57
PARTITION_LEADER_EPOCH_OFFSET = 12
MAGIC = 2

COMPRESSION_MASK = 0x07
TIMESTAMP_TYPE_MASK = 0x08
TRANSACTIONAL_FLAG = 0x10
CONTROL_FLAG = 0x20
DELETE_HORIZON_FLAG = 0x40

NO_PRODUCER_ID = -1
NO_SEQUENCE = -1
NO_PARTITION_LEADER_EPOCH = -1
NO_TIMESTAMP = -1

HEADER_STRUCT = _HEADER = struct.Struct(">qiibIhiqqqhii")
_INT64 = struct.Struct(">q")
_INT32 = struct.Struct(">i")
_UINT32 = struct.Struct(">I")
_INT16 = struct.Struct(">h")
_LENGTH_AND_MAGIC = struct.Struct(">qiib")


class RecordsError(ValueError):
    """Record data the broker must refuse; `error_code` is the Kafka error code to answer with.

    The records layer stays below the protocol layer's error types: callers at the request
    boundary (validation, down-conversion) turn these into protocol KafkaErrors.
    """

    error_code = 2  # CORRUPT_MESSAGE

    record_errors: list[tuple[int, str | None]] = []

    def to_kafka_error(self) -> Exception:
        """The protocol layer's KafkaError carrying this error's code and message."""
        from odradek.broker.protocol.errors import KafkaError

        return KafkaError(self.error_code, str(self), record_errors=self.record_errors)


class CorruptRecordError(RecordsError):
    """The bytes are not a well-formed batch (Kafka's CORRUPT_MESSAGE)."""

    error_code = 2


class InvalidRecordError(RecordsError):
    """Well-framed but unacceptable records (Kafka's INVALID_RECORD)."""

    error_code = 87


class RecordTooLargeError(RecordsError):
    """A batch, or its decompressed contents, exceeds a size limit (MESSAGE_TOO_LARGE)."""

    error_code = 10


class InvalidTimestampError(RecordsError):
    """A record timestamp outside the topic's accepted range (INVALID_TIMESTAMP)."""

    error_code = 32


class RecordValidationError(RecordsError):
    """Some records of a batch are refused (KIP-467): `record_errors` holds the index in the
    batch and the reason of each; the error code is INVALID_TIMESTAMP when any is a timestamp,
    else INVALID_RECORD."""

    def __init__(self, message: str, record_errors: list[tuple[int, str | None]], code: int):
        super().__init__(message)
        self.record_errors = record_errors
        self.error_code = code


class UnsupportedCompressionError(RecordsError):
    """A codec the request version or message format cannot carry (UNSUPPORTED_COMPRESSION_TYPE)."""

    error_code = 76


class BatchHeader(NamedTuple):
    base_offset: int
    batch_length: int
    partition_leader_epoch: int
    magic: int
    crc: int
    attributes: int
    last_offset_delta: int
    base_timestamp: int
    max_timestamp: int
    producer_id: int
    producer_epoch: int
    base_sequence: int
    records_count: int

    @property
    def size(self) -> int:
        """Bytes the whole batch occupies, header included."""
        return self.batch_length + LOG_OVERHEAD

    @property
    def last_offset(self) -> int:
        return self.base_offset + self.last_offset_delta

    @property
    def compression(self) -> int:
        return self.attributes & COMPRESSION_MASK

    @property
    def is_transactional(self) -> bool:
        return bool(self.attributes & TRANSACTIONAL_FLAG)

    @property
    def is_control(self) -> bool:
        return bool(self.attributes & CONTROL_FLAG)

    @property
    def log_append_time(self) -> bool:
        return bool(self.attributes & TIMESTAMP_TYPE_MASK)


def parse_header(buf: bytes | bytearray | memoryview, pos: int = 0) -> BatchHeader:
    """Parse the 61-byte v2 header at `pos`; raises CorruptRecordError when it cannot be one."""
    if len(buf) - pos < HEADER_SIZE:
        raise CorruptRecordError("truncated record batch header")
    header = BatchHeader(*_HEADER.unpack_from(buf, pos))
    if header.magic != 2:
        raise CorruptRecordError(f"unexpected magic {header.magic}")
    if header.batch_length < HEADER_SIZE - LOG_OVERHEAD:
        raise CorruptRecordError(f"batch length {header.batch_length} below the header size")
    return header


def peek_magic(buf: bytes | bytearray | memoryview, pos: int = 0) -> int:
    """Magic byte of the entry at `pos` (message sets v0/v1 and batches v2 share its position)."""
    if len(buf) - pos < MAGIC_OFFSET + 1:
        raise CorruptRecordError("truncated entry header")
    return buf[pos + MAGIC_OFFSET]


def compute_crc(buf: bytes | bytearray | memoryview, pos: int, size: int) -> int:
    return crc32c.crc32c(memoryview(buf)[pos + ATTRIBUTES_OFFSET : pos + size])


def validate(buf: bytes | bytearray | memoryview, pos: int = 0) -> BatchHeader:
    """Header, size and CRC checks for the batch at `pos` (the batch must be complete)."""
    header = parse_header(buf, pos)
    if pos + header.size > len(buf):
        raise CorruptRecordError("record batch extends past the end of the data")
    if compute_crc(buf, pos, header.size) != header.crc:
        raise CorruptRecordError("record batch CRC mismatch")
    if header.last_offset_delta < 0 or header.records_count < 0:
        raise CorruptRecordError("negative record count")
    return header


def iter_batches(
    buf: bytes | bytearray | memoryview, *, check_crc: bool = True
) -> Iterator[tuple[int, BatchHeader]]:
    """Yield (position, header) for each whole v2 batch; raises on any malformed or partial one."""
    pos = 0
    end = len(buf)
    while pos < end:
        header = validate(buf, pos) if check_crc else parse_header(buf, pos)
        if pos + header.size > end:
            raise CorruptRecordError("partial record batch")
        yield pos, header
        pos += header.size


def set_base_offset(buf: bytearray | memoryview, pos: int, base_offset: int) -> None:
    _INT64.pack_into(buf, pos, base_offset)


def set_partition_leader_epoch(buf: bytearray | memoryview, pos: int, epoch: int) -> None:
    _INT32.pack_into(buf, pos + PARTITION_LEADER_EPOCH_OFFSET, epoch)


def set_crc(buf: bytearray | memoryview, pos: int, size: int) -> None:
    """Recompute the CRC-32C of the batch at `pos` after changing covered fields."""
    _UINT32.pack_into(buf, pos + CRC_OFFSET, compute_crc(buf, pos, size))


def stamp_log_append_time(buf: bytearray | memoryview, pos: int, now_ms: int) -> None:
    """Mark the batch at `pos` LogAppendTime with `now_ms` as its max timestamp (Kafka's way).

    Readers take every record's timestamp from maxTimestamp when the type bit is set, so
    records are left alone; only attributes, maxTimestamp and the CRC change.
    """
    header = parse_header(buf, pos)
    attributes = header.attributes | TIMESTAMP_TYPE_MASK
    if attributes == header.attributes and header.max_timestamp == now_ms:
        return
    _INT16.pack_into(buf, pos + ATTRIBUTES_OFFSET, attributes)
    _INT64.pack_into(buf, pos + MAX_TIMESTAMP_OFFSET, now_ms)
    set_crc(buf, pos, header.size)
