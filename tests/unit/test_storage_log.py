"""Log: appends, segment rolling, offset and time lookups, reads, retention, DeleteRecords."""

from __future__ import annotations

import os
import socket

import pytest
from manual_clock import Clock
from odradek.broker.records import batch as rb
from odradek.broker.records.compression import Codec
from odradek.broker.records.record import Record, build_batch, decode_all
from odradek.broker.storage import Log, LogConfig, OffsetOutOfRange, RecordListTooLarge
from odradek.broker.storage.errors import UnexpectedAppendOffset
from odradek.broker.storage.log_timestamps import (
    EARLIEST_TIMESTAMP,
    LATEST_TIMESTAMP,
    MAX_TIMESTAMP,
)


def make_batch(
    n: int = 1, ts: int = 1000, value: bytes = b"v" * 20, step: int = 0, **kw
) -> bytearray:
    records = [Record(offset=i, timestamp=ts + i * step, value=value) for i in range(n)]
    return bytearray(build_batch(records, **kw))


def offsets_of(data: bytes) -> list[int]:
    return [r.offset for _, records in decode_all(data) for r in records]


def base_offsets(data: bytes) -> list[int]:
    return [h.base_offset for _, h in rb.iter_batches(data)]


def open_log(tmp_path, clock=None, **cfg) -> Log:
    return Log(tmp_path / "topic-0", LogConfig(**cfg), clean_shutdown=True, clock=clock or Clock())


def fill(log: Log, batches: int, n: int = 2, ts: int = 1000, step: int = 0) -> None:
    for i in range(batches):
        log.append(make_batch(n, ts=ts + i * step))


def test_append_assigns_offsets_and_epoch_in_place(tmp_path):
    log = open_log(tmp_path)
    buf = make_batch(3, base_offset=777) + make_batch(2)
    result = log.append(buf, leader_epoch=5)
    assert (result.first_offset, result.last_offset) == (0, 4)
    assert result.max_timestamp == 1000 and result.log_start_offset == 0
    assert base_offsets(bytes(buf)) == [0, 3]
    assert log.log_end_offset == 5 == log.high_watermark
    data = log.read(0, 1 << 20).read()
    assert data == bytes(buf)
    for _, header in rb.iter_batches(data):  # CRC still valid: it does not cover these fields
        assert header.partition_leader_epoch == 5
    assert offsets_of(data) == [0, 1, 2, 3, 4]
    assert log.epoch_cache.entries == [(5, 0)]
    log.append(make_batch(1), leader_epoch=7)
    assert log.epoch_cache.entries == [(5, 0), (7, 5)]
    log.close()


def test_append_larger_than_segment_is_rejected(tmp_path):
    log = open_log(tmp_path, segment_bytes=200)
    with pytest.raises(RecordListTooLarge):
        log.append(make_batch(10))
    log.close()


def test_roll_by_segment_bytes(tmp_path):
    log = open_log(tmp_path, segment_bytes=1000)
    size = len(make_batch(2))
    fill(log, 40)
    segs = log.segments
    assert len(segs) > 3
    per_segment = 1000 // size
    for seg in segs[:-1]:
        assert seg.size == per_segment * size
    assert [s.base_offset for s in segs] == [i * per_segment * 2 for i in range(len(segs))]
    names = sorted(os.listdir(log.dir))
    assert "00000000000000000000.log" in names
    assert f"{segs[1].base_offset:020d}.index" in names
    assert f"{segs[1].base_offset:020d}.timeindex" in names
    # inactive indexes are trimmed, the active one is preallocated to segment.index.bytes
    inactive = segs[0]
    assert os.path.getsize(inactive.offset_index.path) == inactive.offset_index.entries * 8
    assert os.path.getsize(inactive.time_index.path) == inactive.time_index.entries * 12
    assert os.path.getsize(segs[-1].offset_index.path) == LogConfig().segment_index_bytes
    log.close()
    assert os.path.getsize(segs[-1].offset_index.path) == segs[-1].offset_index.entries * 8


def test_roll_by_time_uses_first_batch_timestamp(tmp_path):
    log = open_log(tmp_path, segment_ms=1000)
    log.append(make_batch(1, ts=10_000))
    log.append(make_batch(1, ts=10_900))
    assert len(log.segments) == 1
    log.append(make_batch(1, ts=11_001))  # 1001 ms after the segment's first batch
    assert [s.base_offset for s in log.segments] == [0, 2]
    log.close()


def test_roll_by_time_without_timestamps_uses_creation_time(tmp_path):
    clock = Clock(50_000)
    log = open_log(tmp_path, clock=clock, segment_ms=1000)
    log.append(make_batch(1, ts=-1))
    clock.now += 900
    log.append(make_batch(1, ts=-1))
    assert len(log.segments) == 1
    clock.now += 200
    log.append(make_batch(1, ts=-1))
    assert [s.base_offset for s in log.segments] == [0, 2]
    log.close()


def test_roll_when_index_full(tmp_path):
    log = open_log(tmp_path, segment_index_bytes=8 * 3, index_interval_bytes=0)
    fill(log, 12, n=1)
    segs = log.segments
    assert len(segs) > 2
    assert all(s.offset_index.entries <= 3 for s in segs)
    for offset in range(12):
        assert offsets_of(log.read(offset, 1).read())[0] == offset
    log.close()


def test_sparse_index_every_interval(tmp_path):
    log = open_log(tmp_path, index_interval_bytes=300)
    size = len(make_batch(2))
    fill(log, 50)
    index = log.active_segment.offset_index
    assert index.entries > 3
    for i in range(index.entries):
        offset, position = index.entry_at(i)
        header = log.active_segment.header_at(position)
        assert header.last_offset == offset
        assert position % size == 0
    positions = [index.entry_at(i)[1] for i in range(index.entries)]
    gaps = {b - a for a, b in zip(positions, positions[1:], strict=False)}
    assert all(gap > 300 for gap in gaps)
    log.close()


def test_read_lookup_returns_batch_containing_offset(tmp_path):
    log = open_log(tmp_path, segment_bytes=2000, index_interval_bytes=150)
    for i in range(60):
        log.append(make_batch(1 + i % 4))
    end = log.log_end_offset
    for offset in range(end):
        data = log.read(offset, 1).read()  # min_one_batch: exactly the batch holding offset
        batches = decode_all(data)
        assert len(batches) == 1
        header, records = batches[0]
        assert header.base_offset <= offset <= header.last_offset
    assert log.read(end, 100) is None
    with pytest.raises(OffsetOutOfRange):
        log.read(end + 1, 100)
    log.close()


def test_read_max_bytes_whole_batches(tmp_path):
    log = open_log(tmp_path, index_interval_bytes=100)
    size = len(make_batch(2))
    fill(log, 30)
    sl = log.read(4, size * 3 + size // 2)
    assert sl.size == size * 3
    assert base_offsets(sl.read()) == [4, 6, 8]
    sl = log.read(5, size - 1)  # first batch whole even if bigger than max_bytes
    assert sl.size == size and base_offsets(sl.read()) == [4]
    assert log.read(5, size - 1, min_one_batch=False) is None
    assert log.read(0, 1 << 30).size == 30 * size
    log.close()


def test_read_stops_at_max_offset(tmp_path):
    log = open_log(tmp_path, segment_bytes=600)
    fill(log, 20)
    assert base_offsets(log.read(0, 1 << 20, max_offset=6).read()) == [0, 2, 4]
    assert log.read(6, 1 << 20, max_offset=6) is None
    # max_offset in a later segment: everything before it, from the first segment only
    data = log.read(0, 1 << 20, max_offset=30).read()
    assert base_offsets(data)[0] == 0 and all(b < 30 for b in base_offsets(data))
    last_batch = log.read(36, 1 << 20, max_offset=40).read()
    assert base_offsets(last_batch) == [36, 38]
    log.close()


def test_read_continues_into_next_segment(tmp_path):
    log = open_log(tmp_path, segment_bytes=600)
    fill(log, 20)
    second = log.segments[1].base_offset
    sl = log.read(second, 1 << 20)
    assert sl.fileno() == log.segments[1].fileno()
    assert base_offsets(sl.read())[0] == second
    log.close()


def test_file_slice_can_be_sent_with_sendfile(tmp_path):
    log = open_log(tmp_path)
    fill(log, 5)
    sl = log.read(2, 1 << 20)
    a, b = socket.socketpair()
    with a, b:
        sent = 0
        while sent < sl.size:
            sent += os.sendfile(a.fileno(), sl.fileno(), sl.position + sent, sl.size - sent)
        received = b""
        while len(received) < sl.size:
            received += b.recv(65536)
    assert received == sl.read()
    assert offsets_of(received)[0] == 2
    log.close()


def test_offset_for_timestamp(tmp_path):
    log = open_log(tmp_path, segment_bytes=1500, index_interval_bytes=100)
    for i in range(40):  # timestamps 0, 10, ... per record, 3 records per batch
        log.append(make_batch(3, ts=i * 30, step=10))
    assert len(log.segments) > 2
    for target in range(0, 1191, 7):
        found = log.offset_for_timestamp(target)
        expected = (target + 9) // 10  # first record with timestamp >= target
        assert found.offset == expected, target
        assert found.timestamp == expected * 10
    assert log.offset_for_timestamp(100_000) is None
    assert log.offset_for_timestamp(EARLIEST_TIMESTAMP).offset == 0
    assert log.offset_for_timestamp(LATEST_TIMESTAMP).offset == 120
    assert log.offset_for_timestamp(MAX_TIMESTAMP)[:2] == (1190, 119)
    log.close()


def test_offset_for_timestamp_inside_compressed_batch(tmp_path):
    log = open_log(tmp_path)
    log.append(make_batch(5, ts=100, step=100, compression=Codec.GZIP))
    log.append(make_batch(5, ts=600, step=100, compression=Codec.LZ4))
    assert log.offset_for_timestamp(250)[:2] == (300, 2)
    assert log.offset_for_timestamp(800)[:2] == (800, 7)
    # timestamps out of order inside a batch: the max is not the last record
    log.append(
        bytearray(build_batch([Record(offset=0, timestamp=5000), Record(offset=1, timestamp=10)]))
    )
    assert log.offset_for_timestamp(MAX_TIMESTAMP)[:2] == (5000, 10)
    log.close()


def test_retention_by_time_moves_log_start(tmp_path):
    clock = Clock(1_000_000)
    log = open_log(
        tmp_path, clock=clock, segment_bytes=600, retention_ms=10_000, file_delete_delay_ms=500
    )
    for i in range(30):
        log.append(make_batch(2, ts=900_000 + i * 1000))
    segs = log.segments
    assert len(segs) > 3
    # segments whose largest timestamp is older than now - retention.ms go
    clock.now = segs[1].max_timestamp + 10_001
    assert log.delete_old_segments() == 2
    assert log.log_start_offset == segs[2].base_offset
    assert log.segments[0] is segs[2]
    with pytest.raises(OffsetOutOfRange):
        log.read(0, 100)
    deleted = [p for p in os.listdir(log.dir) if p.endswith(".deleted")]
    assert len(deleted) == 6
    log.remove_deleted_segments(clock.now + 499)
    assert len([p for p in os.listdir(log.dir) if p.endswith(".deleted")]) == 6
    log.remove_deleted_segments(clock.now + 500)
    assert not [p for p in os.listdir(log.dir) if p.endswith(".deleted")]
    log.close()


def test_retention_of_expired_active_segment_rolls_first(tmp_path):
    clock = Clock(1_000_000)
    log = open_log(tmp_path, clock=clock, retention_ms=1000)
    fill(log, 3, ts=500_000)
    end = log.log_end_offset
    assert log.delete_old_segments() == 1
    assert [s.base_offset for s in log.segments] == [end]
    assert log.log_start_offset == end == log.log_end_offset
    assert log.read(end, 100) is None
    assert log.delete_old_segments() == 0  # the empty active segment stays
    assert log.append(make_batch(1)).first_offset == end
    log.close()


def test_retention_waits_for_high_watermark(tmp_path):
    clock = Clock(1_000_000)
    log = open_log(tmp_path, clock=clock, segment_bytes=600, retention_ms=1000)
    log.hw_tracks_leo = False
    log.high_watermark = 0
    fill(log, 10, ts=1)
    assert log.delete_old_segments() == 0
    log.high_watermark = log.segments[1].base_offset
    assert log.delete_old_segments() == 1
    log.close()


def test_retention_by_size(tmp_path):
    log = open_log(tmp_path, segment_bytes=600, retention_bytes=1500, retention_ms=-1)
    fill(log, 30)
    before = log.segments
    seg_size = before[0].size
    total = log.size
    deleted = log.delete_old_segments()
    assert deleted == (total - 1500) // seg_size
    assert log.size >= 1500 and log.size - log.segments[0].size < 1500
    assert log.log_start_offset == log.segments[0].base_offset == before[deleted].base_offset
    log.close()


def test_retention_not_applied_to_compact_only(tmp_path):
    log = open_log(tmp_path, segment_bytes=600, retention_bytes=1, cleanup_policy=("compact",))
    fill(log, 30)
    assert log.delete_old_segments() == 0
    log.close()


def test_delete_records_before(tmp_path):
    log = open_log(tmp_path, segment_bytes=600)
    fill(log, 30)
    third = log.segments[2].base_offset
    assert log.delete_records_before(third + 3) == third + 3
    assert log.segments[0].base_offset == third
    with pytest.raises(OffsetOutOfRange):
        log.read(third + 2, 100)
    assert base_offsets(log.read(third + 3, 1).read()) == [third + 2]  # batch holding it
    assert log.offset_for_timestamp(EARLIEST_TIMESTAMP).offset == third + 3
    assert log.delete_records_before(5) == third + 3  # never moves back
    with pytest.raises(OffsetOutOfRange):
        log.delete_records_before(log.log_end_offset + 1)
    log.delete_records_before(log.log_end_offset)
    assert log.log_start_offset == log.log_end_offset
    assert log.read(log.log_end_offset, 100) is None
    log.close()


def test_flush_messages_moves_recovery_point(tmp_path):
    log = open_log(tmp_path, flush_messages=4)
    fill(log, 1)
    assert log.recovery_point == 0
    fill(log, 1)
    assert log.recovery_point == 4
    log.close()


def test_flush_ms_and_roll_flush_by_tick(tmp_path):
    clock = Clock(0)
    log = open_log(tmp_path, clock=clock, flush_ms=1000, segment_bytes=600)
    fill(log, 20)
    assert log.recovery_point == 0
    log.maybe_flush(clock.now)  # rolled segments are flushed on the next tick
    assert log.recovery_point == log.active_segment.base_offset
    log.maybe_flush(clock.now + 1000)
    assert log.recovery_point == log.log_end_offset
    log.close()


def test_follower_append_and_truncate(tmp_path):
    log = open_log(tmp_path, segment_bytes=600)
    batches = b"".join(
        bytes(make_batch(2, base_offset=i * 2, partition_leader_epoch=i // 10)) for i in range(20)
    )
    log.append(bytearray(batches), assign_offsets=False)
    assert log.log_end_offset == 40
    assert log.epoch_cache.entries == [(0, 0), (1, 20)]
    assert log.epoch_cache.end_offset_for(0, log.log_end_offset) == (0, 20)
    with pytest.raises(UnexpectedAppendOffset):
        log.append(make_batch(1, base_offset=10), assign_offsets=False)
    assert log.truncate_to(15)
    assert log.log_end_offset == 14  # the batch holding 15 (14-15) went too
    assert log.epoch_cache.entries == [(0, 0)]
    assert base_offsets(log.read(0, 1 << 20, max_offset=100).read())[-1] <= 12
    assert log.append(make_batch(1), leader_epoch=2).first_offset == 14
    log.truncate_to(0)
    assert log.log_end_offset == 0 and len(log.segments) == 1
    log.close()


def test_truncating_at_the_end_forgets_an_epoch_that_began_there(tmp_path):
    """A leader that wrote nothing in its epoch before it became a follower again."""
    log = open_log(tmp_path)
    log.append(make_batch(3, base_offset=0, partition_leader_epoch=4), assign_offsets=False)
    log.epoch_cache.assign(5, log.log_end_offset)  # led epoch 5 from offset 3, wrote nothing
    assert log.epoch_cache.latest_epoch == 5
    assert not log.truncate_to(3)  # the new leader's answer: epoch 4 ends at 3
    assert log.log_end_offset == 3
    assert log.epoch_cache.entries == [(4, 0)]
    log.close()


def test_update_config_applies_to_new_appends(tmp_path):
    log = open_log(tmp_path)
    fill(log, 10)
    log.update_config(LogConfig(segment_bytes=300))
    fill(log, 3)
    assert len(log.segments) > 1
    log.close()


def test_follower_append_larger_than_segment_is_split(tmp_path):
    log = open_log(tmp_path, segment_bytes=300)
    batches = b"".join(bytes(make_batch(2, base_offset=i * 2)) for i in range(10))
    result = log.append(bytearray(batches), assign_offsets=False)
    assert (result.first_offset, result.last_offset) == (0, 19)
    assert all(s.size <= 300 for s in log.segments) and len(log.segments) > 3
    with pytest.raises(RecordListTooLarge):
        log.append(make_batch(20, base_offset=20), assign_offsets=False)
    log.close()


def _open_fds() -> int:
    return len(os.listdir("/proc/self/fd"))


def test_an_open_log_holds_one_descriptor_its_active_log_file(tmp_path):
    """The active indexes are not mapped (a mapping keeps a dup()ed fd in CPython): a broker
    with thousands of partitions would otherwise need three descriptors per partition."""
    before = _open_fds()
    logs = [open_log(tmp_path / str(i), index_interval_bytes=0) for i in range(20)]
    for log in logs:
        fill(log, 5)
        log.read(2, 1)  # a lookup in the active index
    assert _open_fds() - before == len(logs)
    for log in logs:
        log.close()
    assert _open_fds() == before


def test_active_index_entries_reach_the_file_at_flush(tmp_path):
    log = open_log(tmp_path, index_interval_bytes=0)
    fill(log, 5)
    index = log.active_segment.offset_index
    assert index.entries == 4
    path = index.path
    assert not path.read_bytes().strip(b"\0")  # kept in memory until the flush
    log.flush()
    data = path.read_bytes()
    assert [int.from_bytes(data[i * 8 : i * 8 + 4], "big") for i in range(4)] == [3, 5, 7, 9]
    assert not data[32:].strip(b"\0")  # still preallocated
    log.truncate_to(6)  # keeps the entries of offsets 3 and 5
    log.flush()
    log.close()
    assert os.path.getsize(path) == 2 * 8
