"""Records inside a v2 batch: decode a whole batch to Records, build one from Records.

This is the slow path (per record, in Python). The broker only comes here when it must look
at records: recompression, compacted topics, down-conversion, coordinators reading their own
logs, and the client.
"""

from __future__ import annotations

import struct
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from enum import IntEnum

from . import batch as b
from .batch import BatchHeader, InvalidRecordError
from .compression import DEFAULT_MAX_DECOMPRESSED, Codec, codec_of, compress, decompress

INT32_MIN, INT32_MAX = -(1 << 31), (1 << 31) - 1
INT64_MIN, INT64_MAX = -(1 << 63), (1 << 63) - 1


@dataclass(slots=True)
class Record:
    """One record. `offset` and `timestamp` are absolute; headers keep their order."""

    offset: int = 0
    timestamp: int = b.NO_TIMESTAMP
    key: bytes | None = None
    value: bytes | None = None
    headers: list[tuple[str, bytes | None]] = field(default_factory=list)


# --- zigzag varints (signed, as in records; the flexible protocol uses unsigned ones) ---


def write_varint(out: bytearray, n: int) -> None:
    """Append `n` (a signed int64) as a zigzag varint."""
    v = (n << 1) ^ (n >> 63)
    while v > 0x7F:
        out.append((v & 0x7F) | 0x80)
        v >>= 7
    out.append(v)


def read_varint(buf: bytes, pos: int) -> tuple[int, int]:
    """Zigzag varint at `pos` -> (value, next position). IndexError when truncated."""
    byte = buf[pos]
    if byte < 0x80:
        return (byte >> 1) ^ -(byte & 1), pos + 1
    value = byte & 0x7F
    shift = 7
    pos += 1
    while True:
        byte = buf[pos]
        pos += 1
        value |= (byte & 0x7F) << shift
        if byte < 0x80:
            return (value >> 1) ^ -(value & 1), pos
        shift += 7
        if shift > 63:
            raise InvalidRecordError("varint longer than 10 bytes")


def varint_size(n: int) -> int:
    v = (n << 1) ^ (n >> 63)
    size = 1
    while v > 0x7F:
        v >>= 7
        size += 1
    return size


# --- record bodies ---


def encode_record(out: bytearray, offset_delta: int, timestamp_delta: int, record: Record) -> None:
    """Append one record (length prefix included) to `out`."""
    body = bytearray(b"\x00")  # record attributes: unused
    write_varint(body, timestamp_delta)
    write_varint(body, offset_delta)
    for data in (record.key, record.value):
        if data is None:
            body.append(1)  # zigzag(-1)
        else:
            write_varint(body, len(data))
            body += data
    write_varint(body, len(record.headers))
    for name, data in record.headers:
        raw = name.encode("utf-8", "surrogateescape")
        write_varint(body, len(raw))
        body += raw
        if data is None:
            body.append(1)
        else:
            write_varint(body, len(data))
            body += data
    write_varint(out, len(body))
    out += body


def decode_records(
    data: bytes,
    count: int,
    base_offset: int,
    base_timestamp: int,
    log_append_time: int | None = None,
) -> list[Record]:
    """Decode `count` records filling `data` exactly; InvalidRecordError otherwise.

    `log_append_time`, when given, replaces every record's timestamp (LogAppendTime batches).
    """
    records = []
    pos = 0
    end = len(data)
    try:
        for _ in range(count):
            length, pos = read_varint(data, pos)
            stop = pos + length
            if length < 0 or stop > end:
                raise InvalidRecordError("record length past the end of the batch")
            pos += 1  # attributes
            ts_delta, pos = read_varint(data, pos)
            offset_delta, pos = read_varint(data, pos)
            size, pos = read_varint(data, pos)
            if size >= 0:
                key = data[pos : pos + size]
                pos += size
            else:
                key = None
            size, pos = read_varint(data, pos)
            if size >= 0:
                value = data[pos : pos + size]
                pos += size
            else:
                value = None
            n_headers, pos = read_varint(data, pos)
            if n_headers < 0:
                raise InvalidRecordError("negative header count")
            headers = []
            for _ in range(n_headers):
                size, pos = read_varint(data, pos)
                if size < 0:
                    raise InvalidRecordError("null header key")
                name = data[pos : pos + size].decode("utf-8", "surrogateescape")
                pos += size
                size, pos = read_varint(data, pos)
                if size >= 0:
                    hvalue = data[pos : pos + size]
                    pos += size
                else:
                    hvalue = None
                headers.append((name, hvalue))
            if pos != stop:
                raise InvalidRecordError("record length does not match its contents")
            timestamp = base_timestamp + ts_delta if log_append_time is None else log_append_time
            records.append(Record(base_offset + offset_delta, timestamp, key, value, headers))
    except IndexError:
        raise InvalidRecordError("truncated record") from None
    if pos != end:
        raise InvalidRecordError("bytes left after the batch's declared record count")
    return records


def batch_body(
    buf: bytes | bytearray | memoryview,
    header: BatchHeader,
    pos: int = 0,
    *,
    max_decompressed_bytes: int = DEFAULT_MAX_DECOMPRESSED,
) -> bytes:
    """The uncompressed records section of the batch at `pos`."""
    view = memoryview(buf)[pos + b.HEADER_SIZE : pos + header.size]
    codec = codec_of(header.compression)
    if codec == Codec.NONE:
        return bytes(view)
    return decompress(codec, view, max_size=max_decompressed_bytes)


def decode_batch(
    buf: bytes | bytearray | memoryview,
    pos: int = 0,
    *,
    check_crc: bool = True,
    max_decompressed_bytes: int = DEFAULT_MAX_DECOMPRESSED,
) -> tuple[BatchHeader, list[Record]]:
    """Header and records of the v2 batch at `pos`, offsets and timestamps made absolute."""
    header = b.validate(buf, pos) if check_crc else b.parse_header(buf, pos)
    if not check_crc and pos + header.size > len(buf):
        raise b.CorruptRecordError("record batch extends past the end of the data")
    body = batch_body(buf, header, pos, max_decompressed_bytes=max_decompressed_bytes)
    lat = header.max_timestamp if header.log_append_time else None
    records = decode_records(
        body, header.records_count, header.base_offset, header.base_timestamp, lat
    )
    return header, records


def build_batch(
    records: Sequence[Record],
    *,
    base_offset: int = 0,
    compression: int = Codec.NONE,
    log_append_time: bool = False,
    producer_id: int = b.NO_PRODUCER_ID,
    producer_epoch: int = -1,
    base_sequence: int = b.NO_SEQUENCE,
    transactional: bool = False,
    partition_leader_epoch: int = b.NO_PARTITION_LEADER_EPOCH,
    control: bool = False,
    delete_horizon_ms: int | None = None,
    last_offset_delta: int | None = None,
) -> bytes:
    """Encode a v2 batch. Record offsets and timestamps are taken relative to the first record.

    `last_offset_delta` overrides the computed one (compaction keeps it when it drops the
    tail); `delete_horizon_ms` sets the KIP-534 flag and stores the horizon as base timestamp.
    With `log_append_time` the batch is typed LogAppendTime and its max timestamp is the
    largest record timestamp (callers stamp records with the append time).
    """
    if records:
        first = records[0]
        base_ts = first.timestamp if delete_horizon_ms is None else delete_horizon_ms
        max_ts = max(r.timestamp for r in records)
        body = bytearray()
        for r in records:
            offset_delta = r.offset - first.offset
            ts_delta = r.timestamp - base_ts
            if not INT32_MIN <= offset_delta <= INT32_MAX:
                raise ValueError("record offset delta out of int32 range")
            if not INT64_MIN <= ts_delta <= INT64_MAX:
                raise ValueError("record timestamp delta out of int64 range")
            encode_record(body, offset_delta, ts_delta, r)
        computed_last_delta = records[-1].offset - first.offset
    else:
        base_ts = b.NO_TIMESTAMP if delete_horizon_ms is None else delete_horizon_ms
        max_ts = b.NO_TIMESTAMP
        body = bytearray()
        computed_last_delta = 0
    codec = Codec(compression)
    if control and codec != Codec.NONE:
        raise ValueError("control batches are never compressed")
    payload = compress(codec, body) if codec != Codec.NONE else body
    attributes = int(codec)
    if log_append_time:
        attributes |= b.TIMESTAMP_TYPE_MASK
    if transactional:
        attributes |= b.TRANSACTIONAL_FLAG
    if control:
        attributes |= b.CONTROL_FLAG
    if delete_horizon_ms is not None:
        attributes |= b.DELETE_HORIZON_FLAG
    size = b.HEADER_SIZE + len(payload)
    out = bytearray(size)
    b.HEADER_STRUCT.pack_into(
        out,
        0,
        base_offset,
        size - b.LOG_OVERHEAD,
        partition_leader_epoch,
        b.MAGIC,
        0,
        attributes,
        computed_last_delta if last_offset_delta is None else last_offset_delta,
        base_ts,
        max_ts,
        producer_id,
        producer_epoch,
        base_sequence,
        len(records),
    )
    out[b.HEADER_SIZE :] = payload
    b.set_crc(out, 0, size)
    return bytes(out)


def decode_all(
    buf: bytes | bytearray | memoryview,
    *,
    check_crc: bool = True,
    allow_partial_tail: bool = False,
    max_decompressed_bytes: int = DEFAULT_MAX_DECOMPRESSED,
) -> list[tuple[BatchHeader, list[Record]]]:
    """Decode every v2 batch in `buf`; with `allow_partial_tail` a cut-off last one is ignored
    (fetch responses end wherever the byte limit fell)."""
    out = []
    view = memoryview(buf)
    pos = 0
    end = len(view)
    while pos < end:
        if allow_partial_tail and _partial_at(view, pos):
            break
        header, records = decode_batch(
            view, pos, check_crc=check_crc, max_decompressed_bytes=max_decompressed_bytes
        )
        out.append((header, records))
        pos += header.size
    return out


def _partial_at(view: memoryview, pos: int) -> bool:
    remaining = len(view) - pos
    if remaining < b.LOG_OVERHEAD:
        return True
    (length,) = struct.unpack_from(">i", view, pos + 8)
    return remaining < b.LOG_OVERHEAD + length


# --- control records (transaction markers) ---


class ControlType(IntEnum):
    ABORT = 0
    COMMIT = 1


_CONTROL_KEY = struct.Struct(">hh")
_MARKER_VALUE = struct.Struct(">hi")


def control_type(record: Record) -> int | None:
    """Type of a control record from bytes 2-3 of its key (any key version is read as 0)."""
    if record.key is None or len(record.key) < 4:
        return None
    return _CONTROL_KEY.unpack_from(record.key)[1]


def marker_coordinator_epoch(record: Record) -> int | None:
    """Coordinator epoch of an ABORT/COMMIT marker's value."""
    if record.value is None or len(record.value) < 6:
        return None
    return _MARKER_VALUE.unpack_from(record.value)[1]


def end_txn_marker(buf: bytes | bytearray | memoryview, pos: int = 0) -> tuple[int, int] | None:
    """(control type, coordinator epoch) of the ABORT/COMMIT marker batch at `pos`; None for an
    empty control batch (compaction removed its record) or another control type."""
    _, records = decode_batch(buf, pos, check_crc=False)
    if not records:
        return None
    kind = control_type(records[0])
    epoch = marker_coordinator_epoch(records[0])
    if kind not in (ControlType.ABORT, ControlType.COMMIT) or epoch is None:
        return None
    return kind, epoch


def build_control_batch(
    kind: int,
    *,
    producer_id: int,
    producer_epoch: int,
    coordinator_epoch: int,
    timestamp: int,
    base_offset: int = 0,
    partition_leader_epoch: int = b.NO_PARTITION_LEADER_EPOCH,
) -> bytes:
    """A transaction marker: one control record in a transactional, uncompressed batch."""
    record = Record(
        offset=0,
        timestamp=timestamp,
        key=_CONTROL_KEY.pack(0, int(kind)),
        value=_MARKER_VALUE.pack(0, coordinator_epoch),
    )
    return build_batch(
        [record],
        base_offset=base_offset,
        producer_id=producer_id,
        producer_epoch=producer_epoch,
        transactional=True,
        control=True,
        partition_leader_epoch=partition_leader_epoch,
    )


def records_from(
    items: Iterable[tuple[bytes | None, bytes | None]], timestamp: int
) -> list[Record]:
    """Records with consecutive offsets from (key, value) pairs, all at `timestamp`."""
    return [Record(i, timestamp, k, v) for i, (k, v) in enumerate(items)]
