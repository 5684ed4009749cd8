"""The produce-path checks Kafka's LogValidator makes, with Kafka's error codes.

v2 batches are checked per batch on their bytes (sizes, CRC-32C, header invariants) and
copied as they came. Records are decoded only when a check or a rewrite needs them:
recompression to the topic's `compression.type`, keys for compacted topics
(`require_keys`), or a finite `message.timestamp.*` window. v0/v1 message sets (Produce
v0-2) are always parsed and up-converted to one v2 batch.
"""

from __future__ import annotations

from typing import NamedTuple

from . import batch as b
from . import legacy
from .batch import (
    CorruptRecordError,
    InvalidRecordError,
    InvalidTimestampError,
    RecordsError,
    RecordTooLargeError,
    RecordValidationError,
    UnsupportedCompressionError,
)
from .compression import DEFAULT_MAX_DECOMPRESSED, Codec, codec_of, target_codec
from .record import Record, batch_body, build_batch, decode_records

INT64_MAX = (1 << 63) - 1
LOG_APPEND_TIME = "LogAppendTime"
CREATE_TIME = "CreateTime"
DEFAULT_MAX_MESSAGE_BYTES = 1048588  # Kafka's max.message.bytes default


def validate_for_append(
    records: bytes | bytearray | memoryview,
    *,
    produce_version: int,
    now_ms: int,
    compression_type: str | int | None = "producer",
    timestamp_type: str = CREATE_TIME,
    max_message_bytes: int = DEFAULT_MAX_MESSAGE_BYTES,
    timestamp_difference_max_ms: int = INT64_MAX,
    timestamp_before_max_ms: int | None = None,
    timestamp_after_max_ms: int | None = None,
    require_keys: bool = False,
    max_decompressed_bytes: int | None = None,
    partition_name: str = "",
) -> bytearray | memoryview:
    """Validate one partition's produce data; return the bytes to append (v2 batches).

    The result is a buffer the storage layer may patch (offsets, leader epoch): a new one, or
    the batch within `records` itself when that is writable and needs no change. Raises
    protocol KafkaError: CORRUPT_MESSAGE (framing, CRC, undecodable compression),
    INVALID_RECORD (wrong magic or batch count for Produce v3+, inconsistent header counts,
    control batches, producer id without sequence, malformed records, missing keys with
    `require_keys`), MESSAGE_TOO_LARGE (a batch above `max_message_bytes`, or
    decompressed data above `max_decompressed_bytes`), UNSUPPORTED_COMPRESSION_TYPE (zstd
    before Produce v7 or in v0/v1), INVALID_TIMESTAMP (outside the window, or a producer
    claiming LogAppendTime). `timestamp_before/after_max_ms` (KIP-937) default to
    `timestamp_difference_max_ms`. `max_decompressed_bytes` defaults to
    max(64 MiB, 16 x max_message_bytes). Missing keys and bad timestamps are reported for every
    record at fault (the KafkaError's `record_errors`, KIP-467), naming `partition_name`.
    """
    try:
        return _validate(
            _byte_view(records),
            produce_version=produce_version,
            now_ms=now_ms,
            compression_type=compression_type,
            log_append_time=timestamp_type == LOG_APPEND_TIME,
            max_message_bytes=max_message_bytes,
            before_ms=(
                timestamp_difference_max_ms
                if timestamp_before_max_ms is None
                else timestamp_before_max_ms
            ),
            after_ms=(
                timestamp_difference_max_ms
                if timestamp_after_max_ms is None
                else timestamp_after_max_ms
            ),
            require_keys=require_keys,
            partition_name=partition_name,
            max_decompressed=(
                max(DEFAULT_MAX_DECOMPRESSED, 16 * max_message_bytes)
                if max_decompressed_bytes is None
                else max_decompressed_bytes
            ),
        )
    except RecordsError as exc:
        raise exc.to_kafka_error() from exc


def _byte_view(records: bytes | bytearray | memoryview) -> memoryview:
    view = memoryview(records)
    return view if view.format == "B" and view.ndim == 1 else view.cast("B")


def _entries(view: memoryview) -> list[tuple[int, int, int]]:
    """(position, size, magic) of each entry; any partial or ill-framed entry is corrupt."""
    out = []
    pos = 0
    end = len(view)
    while pos < end:
        size = legacy.entry_size(view, pos)
        if size is None or end - pos <= b.MAGIC_OFFSET:
            raise CorruptRecordError("partial entry at the end of the records")
        if size - b.LOG_OVERHEAD < legacy.RECORD_OVERHEAD_V0:
            raise CorruptRecordError(f"record size {size - b.LOG_OVERHEAD} below the minimum")
        magic = view[pos + b.MAGIC_OFFSET]
        if magic > 2:
            raise CorruptRecordError(f"invalid magic {magic}")
        if pos + size > end:
            raise CorruptRecordError("partial entry at the end of the records")
        out.append((pos, size, magic))
        pos += size
    return out


def _validate(
    view: memoryview,
    *,
    produce_version: int,
    now_ms: int,
    compression_type: str | int | None,
    log_append_time: bool,
    max_message_bytes: int,
    before_ms: int,
    after_ms: int,
    require_keys: bool,
    partition_name: str,
    max_decompressed: int,
) -> bytearray | memoryview:
    entries = _entries(view)
    if produce_version >= 3:
        # ProduceRequest.validateRecords, in Kafka's order.
        if not entries:
            raise InvalidRecordError(
                f"Produce v{produce_version} needs at least one record batch per partition"
            )
        pos, _, magic = entries[0]
        if magic != 2:
            raise InvalidRecordError(
                f"Produce v{produce_version} only carries record batches with magic 2"
            )
        if produce_version < 7 and view[pos + b.ATTRIBUTES_OFFSET + 1] & 0x07 == Codec.ZSTD:
            raise UnsupportedCompressionError(f"Produce v{produce_version} cannot use zstd")
        if len(entries) > 1:
            raise InvalidRecordError(
                f"Produce v{produce_version} carries exactly one record batch per partition"
            )
    if not entries:
        return bytearray()
    magic = entries[0][2]
    if any(e[2] != magic for e in entries):
        raise InvalidRecordError("record batches with different magic values")
    check_ts = not log_append_time and (before_ms < INT64_MAX or after_ms < INT64_MAX)
    checks = _Checks(
        produce_version,
        now_ms,
        compression_type,
        max_message_bytes,
        before_ms,
        after_ms,
        check_ts,
        require_keys,
        partition_name,
        max_decompressed,
    )
    if magic == 2:
        out, positions = _validate_v2(view, entries, checks)
    else:
        out, positions = _validate_legacy(view, entries, checks)
    if log_append_time:
        for pos in positions:
            b.stamp_log_append_time(out, pos, now_ms)
    return out


class _Checks(NamedTuple):
    """What one produce request's batches are checked against (the v2 and legacy paths)."""

    produce_version: int
    now_ms: int
    compression_type: str | int | None
    max_message_bytes: int
    before_ms: int
    after_ms: int
    check_ts: bool  # timestamps against message.timestamp.{before,after}.max.ms
    require_keys: bool  # compacted topics
    partition_name: str
    max_decompressed: int


def _check_records(records: list[Record] | list[legacy.LegacyMessage], checks: _Checks) -> None:
    """Kafka's per-record checks; every failing record is reported, as LogValidator does."""
    now_ms, before_ms, after_ms = checks.now_ms, checks.before_ms, checks.after_ms
    check_ts, require_keys = checks.check_ts, checks.require_keys
    partition_name = checks.partition_name
    errors: list[tuple[int, str | None]] = []
    bad_timestamp = False
    for index, r in enumerate(records):
        if require_keys and r.key is None:
            errors.append(
                (index, f"Compacted topic cannot accept message without key in topic partition "
                        f"{partition_name}")
            )  # fmt: skip
            continue
        ts = r.timestamp
        if (
            check_ts
            and ts != b.NO_TIMESTAMP
            and (ts - now_ms > after_ms or now_ms - ts > before_ms)
        ):
            bad_timestamp = True
            errors.append(
                (index, f"Timestamp {ts} of message with offset {r.offset} is out of range. "
                        f"The timestamp should be within [{now_ms - before_ms}, "
                        f"{now_ms + after_ms}]")
            )  # fmt: skip
    if not errors:
        return
    if bad_timestamp:
        raise RecordValidationError(
            "One or more records have been rejected due to invalid timestamp",
            errors,
            InvalidTimestampError.error_code,
        )
    shown = ", ".join(f"RecordError(batchIndex={i}, message='{m}')" for i, m in errors[:3])
    raise RecordValidationError(
        f"One or more records have been rejected due to {len(errors)} record errors in total, "
        f"and only showing the first three errors at most: [{shown}]",
        errors,
        InvalidRecordError.error_code,
    )


def _validate_v2(
    view: memoryview,
    entries: list[tuple[int, int, int]],
    checks: _Checks,
) -> tuple[bytearray | memoryview, list[int]]:
    produce_version, max_message_bytes = checks.produce_version, checks.max_message_bytes
    compression_type, max_decompressed = checks.compression_type, checks.max_decompressed
    check_ts, require_keys = checks.check_ts, checks.require_keys
    out = bytearray()
    positions = []
    for pos, size, _ in entries:
        header = b.parse_header(view, pos)
        if header.size != size:  # cannot happen: both read the same length field
            raise CorruptRecordError("inconsistent batch length")
        if header.base_offset != 0:
            raise InvalidRecordError(
                f"the base offset of a produced record batch must be 0, not {header.base_offset}"
            )
        if size > max_message_bytes:
            raise RecordTooLargeError(
                f"record batch of {size} bytes exceeds max.message.bytes {max_message_bytes}"
            )
        if b.compute_crc(view, pos, size) != header.crc:
            raise CorruptRecordError("record batch CRC mismatch")
        codec = codec_of(header.compression)
        if codec == Codec.ZSTD and produce_version < 7:
            raise UnsupportedCompressionError(f"Produce v{produce_version} cannot use zstd")
        count = header.records_count
        if header.last_offset_delta + 1 <= 0 or count <= 0:
            raise InvalidRecordError(f"invalid record count {count} in a produced batch")
        if header.last_offset_delta + 1 != count:
            raise InvalidRecordError(
                f"last offset delta {header.last_offset_delta} disagrees with record count {count}"
            )
        if header.is_control:
            raise InvalidRecordError("clients may not write control records")
        if header.producer_id >= 0 and header.base_sequence < 0:
            raise InvalidRecordError(
                f"invalid sequence {header.base_sequence} for producer id {header.producer_id}"
            )
        if header.log_append_time:
            raise InvalidTimestampError("producers may not set the LogAppendTime timestamp type")
        target = target_codec(compression_type, codec)
        positions.append(len(out))
        if not (check_ts or require_keys or target != codec):
            if len(entries) == 1 and not view.readonly:
                # The request's own buffer: the log assigns offsets in it, with no copy.
                return view[pos : pos + size], [0]
            out += view[pos : pos + size]
            continue
        body = batch_body(view, header, pos, max_decompressed_bytes=max_decompressed)
        records = decode_records(body, count, 0, header.base_timestamp)
        _check_records(records, checks)
        if target == codec:
            out += view[pos : pos + size]
            continue
        for i, r in enumerate(records):
            r.offset = i
        rebuilt = build_batch(
            records,
            compression=target,
            producer_id=header.producer_id,
            producer_epoch=header.producer_epoch,
            base_sequence=header.base_sequence,
            transactional=header.is_transactional,
            partition_leader_epoch=header.partition_leader_epoch,
        )
        if len(rebuilt) > max_message_bytes:
            raise RecordTooLargeError(
                f"recompressed batch of {len(rebuilt)} bytes exceeds max.message.bytes "
                f"{max_message_bytes}"
            )
        out += rebuilt
    return out, positions


def _validate_legacy(
    view: memoryview,
    entries: list[tuple[int, int, int]],
    checks: _Checks,
) -> tuple[bytearray, list[int]]:
    max_message_bytes, max_decompressed = checks.max_message_bytes, checks.max_decompressed
    for _, size, _ in entries:
        if size > max_message_bytes:
            raise RecordTooLargeError(
                f"message of {size} bytes exceeds max.message.bytes {max_message_bytes}"
            )
    messages: list[legacy.LegacyMessage] = []
    source = Codec.NONE
    for _, _, m in legacy.iter_messages(view):
        if m.log_append_time:
            raise InvalidTimestampError("producers may not set the LogAppendTime timestamp type")
        if m.compression == Codec.NONE:
            messages.append(m)
        else:
            source = codec_of(m.compression)
            messages.extend(legacy.expand(m, max_decompressed_bytes=max_decompressed))
    _check_records(messages, checks)
    target = target_codec(checks.compression_type, source)
    converted = build_batch(legacy.to_records(messages), compression=target)
    if len(converted) > max_message_bytes:
        raise RecordTooLargeError(
            f"up-converted batch of {len(converted)} bytes exceeds max.message.bytes "
            f"{max_message_bytes}"
        )
    return bytearray(converted), [0]
