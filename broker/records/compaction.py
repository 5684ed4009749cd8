"""Rewriting a v2 batch with only some of its records, as the log cleaner does.

Records are scanned rather than decoded: for each one only its span in the batch body, its
offset and timestamp deltas, its key and whether it has a value are read. Retained records are
copied as the bytes they are; only when a batch gets a delete horizon (KIP-534: its base
timestamp becomes the time after which its tombstones may go, flagged in the attributes) are
their timestamp deltas re-encoded. The rewritten batch keeps the original base offset, last
offset delta, producer fields and partition leader epoch, so offsets and idempotent producers'
sequences survive compaction; compressed batches are recompressed with their own codec.

The map pass reads every record of the dirty section, so its loop (`index_keys`, in C in
`_keyindex.c` where that is built) works on the batch's bytes in place and builds a Python
object only for a key it files; with each key's offset it files where the record starts in its
batch, so the copy pass reads only the records that stay (`spans_at`).
`select_records` is the record-by-record reading for what the map pass did not read whole (the
clean section, malformed batches).
"""

from __future__ import annotations

from collections.abc import Sequence
from collections.abc import Set as AbstractSet
from hashlib import md5
from typing import NamedTuple

from . import batch as b
from .batch import BatchHeader, InvalidRecordError
from .compression import Codec, codec_of, compress
from .record import read_varint, write_varint

try:
    from . import _keyindex as _native
except ImportError:  # built without a C compiler: the Python reading alone
    _native = None


class RecordSpan(NamedTuple):
    """Where one record sits in a batch body, and what the cleaner needs to know of it."""

    start: int  # the record's length varint
    attributes: int  # its attributes byte (start of the length-counted part)
    after_timestamp: int  # just after its timestamp delta (the offset delta starts here)
    end: int
    offset_delta: int
    timestamp_delta: int
    key: bytes | None
    has_value: bool


def scan_records(body: bytes, count: int) -> list[RecordSpan]:
    """The spans of the `count` records filling `body`; InvalidRecordError when they do not."""
    return select_records(body, 0, len(body), count, 0, None)[0]


def select_records(
    buf: bytes, pos: int, end: int, count: int, base_offset: int, winners: AbstractSet[int] | None
) -> tuple[list[RecordSpan], int]:
    """The spans of the records whose offsets are in `winners` (all of them when None) among
    the `count` records filling `buf[pos:end]`, and how many records have no key.

    InvalidRecordError when the records do not fill the span (or a record's fields overrun
    it). The copy pass's reading of batches the map pass did not read whole.
    """
    spans = []
    keyless = 0
    try:
        for _ in range(count):
            span = _span_at(buf, pos, end)
            if span.key is None:
                keyless += 1
            if winners is None or base_offset + span.offset_delta in winners:
                spans.append(span)
            pos = span.end
    except IndexError:
        raise InvalidRecordError("truncated record") from None
    if pos != end:
        raise InvalidRecordError("bytes left after the batch's declared record count")
    return spans, keyless


MAP_KEY_DIGEST_FROM = 16  # bytes: an MD5 digest's size
# The offset map's values: an offset and, in its low bits, where its record starts in its batch's
# records (UNKNOWN_POSITION when not known), so the copy pass need not walk the losers.
POSITION_BITS = 32
POSITION_MASK = (1 << POSITION_BITS) - 1
UNKNOWN_POSITION = POSITION_MASK


def located(offset: int, position: int = UNKNOWN_POSITION) -> int:
    """An offset map value: `offset` with its record's `position` (see POSITION_BITS)."""
    return (offset << POSITION_BITS) | position


def map_key(key: bytes) -> bytes:
    """What the offset map files `key` under: the key itself when shorter than an MD5 digest
    (exact, and no larger), else its MD5 (Kafka's log.cleaner hash); lengths keep them apart."""
    return key if len(key) < MAP_KEY_DIGEST_FROM else _digest(key)


def _digest(key: bytes) -> bytes:
    return md5(key, usedforsecurity=False).digest()


def index_keys(
    buf: bytes,
    pos: int,
    end: int,
    count: int,
    base_offset: int,
    last_offset: int,
    start: int,
    into: dict[bytes, int],
    *,
    in_c: bool = True,
) -> tuple[int, bool]:
    """`into[map_key(key)] = located(offset, record's position from pos)` for each keyed record
    at or above offset `start` among the `count` records filling `buf[pos:end]`, in order (a
    later record of a key wins). Returns how many records have no key and whether the records'
    offsets fail to rise strictly within [`base_offset`, `last_offset`] (a malformed batch): the
    copy pass, which goes straight to the winning records by their positions, relies on both.
    InvalidRecordError when the records do not fill the span.

    The offset map's inner loop: only lengths, offset deltas and keys are read, inline. In C
    (`_keyindex`) when it is built and `in_c`; a batch the C loop does not read whole, and every
    batch without it, is read by the Python below, which defines the result.
    """
    if in_c and _native is not None:
        read = _native.index_keys(
            buf, pos, end, count, base_offset, last_offset, start, into, _digest,
            MAP_KEY_DIGEST_FROM,
        )  # fmt: skip
        if read is not None:
            return read
    keyless = 0
    stray = False
    first = pos
    prev = base_offset - 1
    try:
        for _ in range(count):
            b = buf[pos]
            if b < 0x80:
                length, p = (b >> 1) ^ -(b & 1), pos + 1
            elif (c := buf[pos + 1]) < 0x80:
                raw = (b & 0x7F) | (c << 7)
                length, p = (raw >> 1) ^ -(raw & 1), pos + 2
            else:
                length, p = read_varint(buf, pos)
            stop = p + length
            if length < 0 or stop > end:
                raise InvalidRecordError("record length past the end of the batch")
            p += 1  # attributes
            while buf[p] & 0x80:  # the timestamp delta, skipped
                p += 1
            b = buf[p + 1]
            if b < 0x80:
                offset, p = base_offset + ((b >> 1) ^ -(b & 1)), p + 2
            elif (c := buf[p + 2]) < 0x80:
                raw = (b & 0x7F) | (c << 7)
                offset, p = base_offset + ((raw >> 1) ^ -(raw & 1)), p + 3
            else:
                delta, p = read_varint(buf, p + 1)
                offset = base_offset + delta
            if offset <= prev or offset > last_offset:
                stray = True
            prev = offset
            b = buf[p]
            if b < 0x80:
                key_len, p = (b >> 1) ^ -(b & 1), p + 1
            else:
                key_len, p = read_varint(buf, p)
            if key_len >= 0:
                if p + key_len >= stop:
                    raise InvalidRecordError("record fields past the record's length")
                if offset >= start:
                    key = buf[p : p + key_len]
                    if key_len >= MAP_KEY_DIGEST_FROM:
                        key = _digest(key)
                    into[key] = (offset << POSITION_BITS) | (pos - first)
            elif p >= stop:
                raise InvalidRecordError("record fields past the record's length")
            else:
                keyless += 1
            pos = stop
    except IndexError:
        raise InvalidRecordError("truncated record") from None
    if pos != end:
        raise InvalidRecordError("bytes left after the batch's declared record count")
    return keyless, stray


def spans_at(buf: bytes, pos: int, located_: Sequence[int]) -> list[RecordSpan]:
    """The spans of the records `located_` (offset map values, see `located`) place in the
    batch whose records start at `pos` of `buf`, records `index_keys` has read whole."""
    try:
        return [_span_at(buf, pos + (value & POSITION_MASK), len(buf)) for value in located_]
    except IndexError:
        raise InvalidRecordError("truncated record") from None


def _span_at(buf: bytes, start: int, end: int) -> RecordSpan:
    """The span of the record at `start` of `buf`, which must end by `end`. The inner loop of
    both passes' record reading (a call per record): varints of one or two bytes (nearly all
    of them) are decoded inline, longer ones by `read_varint`."""
    b = buf[start]
    if b < 0x80:
        length, attributes = (b >> 1) ^ -(b & 1), start + 1
    elif (c := buf[start + 1]) < 0x80:
        raw = (b & 0x7F) | (c << 7)
        length, attributes = (raw >> 1) ^ -(raw & 1), start + 2
    else:
        length, attributes = read_varint(buf, start)
    stop = attributes + length
    if length < 0 or stop > end:
        raise InvalidRecordError("record length past the end of the batch")
    p = attributes + 1
    b = buf[p]
    if b < 0x80:
        ts_delta, p = (b >> 1) ^ -(b & 1), p + 1
    else:
        ts_delta, p = read_varint(buf, p)
    after_ts = p
    b = buf[p]
    if b < 0x80:
        offset_delta, p = (b >> 1) ^ -(b & 1), p + 1
    elif (c := buf[p + 1]) < 0x80:
        raw = (b & 0x7F) | (c << 7)
        offset_delta, p = (raw >> 1) ^ -(raw & 1), p + 2
    else:
        offset_delta, p = read_varint(buf, p)
    b = buf[p]
    if b < 0x80:
        key_len, p = (b >> 1) ^ -(b & 1), p + 1
    else:
        key_len, p = read_varint(buf, p)
    return _span(buf, start, attributes, after_ts, stop, offset_delta, ts_delta, key_len, p)


def _span(
    buf: bytes,
    start: int,
    attributes: int,
    after_ts: int,
    stop: int,
    offset_delta: int,
    ts_delta: int,
    key_len: int,
    p: int,
) -> RecordSpan:
    """The span of a record read up to its key, which starts at `p`."""
    if key_len >= 0:
        key: bytes | None = buf[p : p + key_len]
        p += key_len
    else:
        key = None
    if p >= stop:
        raise InvalidRecordError("record fields past the record's length")
    # A null value's length is zigzag(-1): the one-byte varint 0x01.
    return RecordSpan(start, attributes, after_ts, stop, offset_delta, ts_delta, key, buf[p] != 1)


def rebuild_batch(
    header: BatchHeader,
    body: bytes,
    kept: Sequence[RecordSpan],
    *,
    delete_horizon_ms: int | None = None,
) -> bytes:
    """The batch `header` described, holding only `kept` (spans of its uncompressed `body`).

    `delete_horizon_ms` stamps a new delete horizon (the records' timestamp deltas are
    re-encoded against it); None keeps the batch's own base timestamp and flags.
    """
    attributes = header.attributes
    base_ts = header.base_timestamp
    if delete_horizon_ms is None:
        records = b"".join(body[s.start : s.end] for s in kept)
        new_base_ts = base_ts
    else:
        attributes |= b.DELETE_HORIZON_FLAG
        new_base_ts = delete_horizon_ms
        out = bytearray()
        for s in kept:
            record = bytearray(body[s.attributes : s.attributes + 1])
            write_varint(record, base_ts + s.timestamp_delta - new_base_ts)
            record += body[s.after_timestamp : s.end]
            write_varint(out, len(record))
            out += record
        records = bytes(out)
    if header.log_append_time or not kept:
        max_ts = header.max_timestamp
    else:
        max_ts = base_ts + max(s.timestamp_delta for s in kept)
    codec = codec_of(header.compression)
    payload = compress(codec, records) if codec != Codec.NONE else records
    return _pack(header, attributes, new_base_ts, max_ts, len(kept), payload)


def empty_batch(header: BatchHeader) -> bytes:
    """The batch `header` described with no records left: kept only for its offsets and
    producer fields (an idempotent producer's last sequence, the last offset of a round)."""
    attributes = header.attributes & ~(b.COMPRESSION_MASK | b.DELETE_HORIZON_FLAG)
    return _pack(header, attributes, b.NO_TIMESTAMP, header.max_timestamp, 0, b"")


def _pack(
    header: BatchHeader,
    attributes: int,
    base_ts: int,
    max_ts: int,
    count: int,
    payload: bytes,
) -> bytes:
    size = b.HEADER_SIZE + len(payload)
    out = bytearray(size)
    b.HEADER_STRUCT.pack_into(
        out,
        0,
        header.base_offset,
        size - b.LOG_OVERHEAD,
        header.partition_leader_epoch,
        b.MAGIC,
        0,
        attributes,
        header.last_offset_delta,
        base_ts,
        max_ts,
        header.producer_id,
        header.producer_epoch,
        header.base_sequence,
        count,
    )
    out[b.HEADER_SIZE :] = payload
    b.set_crc(out, 0, size)
    return bytes(out)


def delete_horizon(header: BatchHeader) -> int | None:
    """The batch's KIP-534 delete horizon (ms), or None when it has none."""
    return header.base_timestamp if header.attributes & b.DELETE_HORIZON_FLAG else None
