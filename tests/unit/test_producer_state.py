"""Producer state of a partition: Kafka's duplicate, sequence and epoch rules, and its recovery
from snapshots and the log after clean and unclean stops."""

from __future__ import annotations

import asyncio
import struct

import pytest
from leader_partition import append, open_partition
from odradek.broker.cluster.embedded_store import EmbeddedStore
from odradek.broker.cluster.kafka_zk import KafkaZk
from odradek.broker.protocol.errors import ErrorCode, KafkaError
from odradek.broker.records.record import Record, build_batch, decode_all
from odradek.broker.replication.producer_entry import (
    INT32_MAX,
    NUM_BATCHES_TO_RETAIN,
    ProducerStateEntry,
    increment_sequence,
)
from odradek.broker.replication.producer_ids import ProducerIdManager
from odradek.broker.replication.producer_state import (
    CorruptSnapshot,
    ProducerStateManager,
    decode_snapshot,
    encode_snapshot,
    list_snapshots,
    now_ms,
    snapshot_path,
)
from odradek.broker.storage import Log

PID = 4000


def batch(seq: int, n: int = 1, *, pid: int = PID, epoch: int = 0, ts: int | None = None) -> bytes:
    ts = now_ms() if ts is None else ts
    records = [Record(offset=i, timestamp=ts, value=f"{pid}-{seq + i}".encode()) for i in range(n)]
    return build_batch(records, producer_id=pid, producer_epoch=epoch, base_sequence=seq)


def plain_batch(n: int = 1) -> bytes:
    return build_batch([Record(offset=i, timestamp=now_ms(), value=b"x") for i in range(n)])


class Leader:
    """A ProducerStateManager driven the way a partition leader drives it, over a list log."""

    def __init__(self, state: ProducerStateManager | None = None) -> None:
        self.state = state or ProducerStateManager()
        self.end = 0

    def append(self, *batches: bytes) -> int:
        """Append; returns the base offset the producer is told."""
        buf = b"".join(batches)
        pending = self.state.prepare_append(buf, self.end)
        if pending.duplicate is not None:
            return pending.duplicate.first_offset
        first = self.end
        for b in batches:
            self.end += struct.unpack_from(">i", b, 23)[0] + 1
        self.state.complete_append(pending, self.end)
        return first


def error_of(fn, *args) -> ErrorCode:
    with pytest.raises(KafkaError) as info:
        fn(*args)
    return info.value.code


# --- the rules ------------------------------------------------------------------------------


def test_in_sequence_batches_are_appended_and_remembered():
    leader = Leader()
    assert leader.append(batch(0, 3)) == 0
    assert leader.append(batch(3, 2)) == 3
    entry = leader.state.producers[PID]
    assert (entry.epoch, entry.first_seq, entry.last_seq, entry.last_offset) == (0, 0, 4, 4)


def test_retry_of_any_of_the_last_five_batches_gets_its_original_offset():
    leader = Leader()
    offsets = [leader.append(batch(2 * i, 2)) for i in range(7)]
    end = leader.end
    for i in range(7 - NUM_BATCHES_TO_RETAIN, 7):
        assert leader.append(batch(2 * i, 2)) == offsets[i]
    assert leader.end == end  # nothing appended


def test_batch_older_than_the_window_is_out_of_order():
    leader = Leader()
    for i in range(NUM_BATCHES_TO_RETAIN + 1):
        leader.append(batch(i))
    assert error_of(leader.append, batch(0)) == ErrorCode.OUT_OF_ORDER_SEQUENCE_NUMBER


def test_duplicate_needs_the_same_sequence_range():
    leader = Leader()
    leader.append(batch(0, 3))
    # Same first sequence, different length: not a duplicate, and out of order.
    assert error_of(leader.append, batch(0, 2)) == ErrorCode.OUT_OF_ORDER_SEQUENCE_NUMBER


def test_gap_is_out_of_order():
    leader = Leader()
    leader.append(batch(0, 2))
    assert error_of(leader.append, batch(3)) == ErrorCode.OUT_OF_ORDER_SEQUENCE_NUMBER
    assert leader.append(batch(2)) == 2  # the state did not move


def test_unknown_producer_may_start_at_any_sequence():
    leader = Leader()
    assert leader.append(batch(57, 2)) == 0
    assert leader.append(batch(59)) == 2


def test_older_epoch_is_refused():
    leader = Leader()
    leader.append(batch(0, epoch=3))
    assert error_of(leader.append, batch(1, epoch=2)) == ErrorCode.INVALID_PRODUCER_EPOCH
    assert error_of(leader.append, batch(0, epoch=2)) == ErrorCode.INVALID_PRODUCER_EPOCH


def test_new_epoch_must_start_at_zero_and_resets_the_window():
    leader = Leader()
    leader.append(batch(0, 2, epoch=0))
    assert error_of(leader.append, batch(2, epoch=1)) == ErrorCode.OUT_OF_ORDER_SEQUENCE_NUMBER
    assert leader.append(batch(0, 2, epoch=1)) == 2
    entry = leader.state.producers[PID]
    assert entry.epoch == 1 and len(entry.batches) == 1
    # The old epoch's batch with the same sequences is no longer a duplicate: it is fenced.
    assert error_of(leader.append, batch(0, 2, epoch=0)) == ErrorCode.INVALID_PRODUCER_EPOCH


def test_sequence_wraps_after_int32_max():
    assert increment_sequence(INT32_MAX, 1) == 0
    assert increment_sequence(INT32_MAX - 1, 3) == 1
    leader = Leader()
    leader.append(batch(INT32_MAX - 1, 3))  # sequences MAX-1, MAX, 0
    assert leader.state.producers[PID].last_seq == 0
    assert leader.append(batch(1)) == 3
    assert leader.append(batch(INT32_MAX - 1, 3)) == 0  # its retry
    other = Leader()
    other.append(batch(INT32_MAX - 1, 2))
    assert other.append(batch(0)) == 2


def test_several_batches_in_one_append_are_checked_in_order():
    leader = Leader()
    assert leader.append(batch(0, 2), batch(2, 2), plain_batch(3), batch(0, pid=PID + 1)) == 0
    assert leader.state.producers[PID].last_offset == 3
    assert leader.state.producers[PID + 1].last_offset == 7
    with pytest.raises(KafkaError):
        leader.append(batch(4), batch(6))
    assert leader.state.producers[PID].last_seq == 3  # nothing of the failed append kept


def test_batches_without_producer_id_are_not_tracked():
    leader = Leader()
    leader.append(plain_batch(2))
    leader.append(plain_batch(2))
    assert leader.state.producers == {}
    assert leader.end == 4


def test_idle_producers_expire():
    clock = [now_ms()]
    state = ProducerStateManager(expiration_ms=1000, clock=lambda: clock[0])
    leader = Leader(state)
    leader.append(batch(0, ts=clock[0]))
    leader.append(batch(0, pid=PID + 1, ts=clock[0] + 800))
    clock[0] += 1000
    assert state.remove_expired() == 1
    assert list(state.producers) == [PID + 1]
    # Forgotten: any sequence is accepted again.
    assert leader.append(batch(9)) == 2


# --- snapshots ------------------------------------------------------------------------------


def test_snapshot_format_round_trip():
    entry = ProducerStateEntry(7, 2, last_timestamp=123, coordinator_epoch=-1)
    entry.add_batch(2, 41, 1000, 9, 123)
    empty = ProducerStateEntry(8, 0)
    data = encode_snapshot([entry, empty])
    # version 1, then CRC-32C, count, 46-byte entries: Kafka's layout.
    assert struct.unpack_from(">h", data)[0] == 1
    assert len(data) == 2 + 4 + 4 + 2 * 46
    got = decode_snapshot(data)
    assert got[0].producer_id == 7 and got[0].epoch == 2
    (b,) = got[0].batches
    assert (b.first_seq, b.last_seq, b.first_offset, b.last_offset) == (32, 41, 991, 1000)
    assert got[1].producer_id == 8 and not got[1].batches
    corrupt = bytearray(data)
    corrupt[-1] ^= 1
    with pytest.raises(CorruptSnapshot):
        decode_snapshot(bytes(corrupt))
    with pytest.raises(CorruptSnapshot):
        decode_snapshot(data[:-3])


# --- with a real log ------------------------------------------------------------------------


def values(log: Log) -> list[bytes]:
    out = []
    for seg in log.segments:
        out += [r.value for _, recs in decode_all(seg.read_bytes(0, seg.size)) for r in recs]
    return out


def test_partition_does_not_append_a_retry(tmp_path):
    p = open_partition(tmp_path)
    assert append(p, batch(0, 2)) == 0
    assert append(p, batch(0, 2)) == 0
    assert p.log.log_end_offset == 2
    assert values(p.log) == [b"4000-0", b"4000-1"]


def test_state_survives_a_clean_restart_through_the_snapshot(tmp_path):
    p = open_partition(tmp_path)
    for i in range(3):
        append(p, batch(2 * i, 2))
    p.log.close()
    assert list_snapshots(p.log.dir) == [6]
    p = open_partition(tmp_path)
    # The snapshot keeps the last batch (as Kafka's does): its retry is still recognised.
    assert append(p, batch(4, 2)) == 4
    assert error_of(append, p, batch(7)) == ErrorCode.OUT_OF_ORDER_SEQUENCE_NUMBER
    assert append(p, batch(6)) == 6


def test_state_survives_a_crash_by_replaying_the_log(tmp_path):
    p = open_partition(tmp_path)
    for i in range(6):
        append(p, batch(i))
    # No close: nothing but the log is on disk.
    assert list_snapshots(p.log.dir) == []
    p = open_partition(tmp_path, clean=False)
    for i in range(1, 6):
        assert append(p, batch(i)) == i
    assert p.log.log_end_offset == 6
    assert error_of(append, p, batch(9)) == ErrorCode.OUT_OF_ORDER_SEQUENCE_NUMBER
    assert append(p, batch(6)) == 6


def test_rolls_write_snapshots_and_recovery_replays_after_the_latest(tmp_path):
    one = len(batch(0))
    p = open_partition(tmp_path, segment_bytes=3 * one)
    for i in range(10):
        append(p, batch(i))
    bases = [s.base_offset for s in p.log.segments]
    assert bases == [0, 3, 6, 9]
    assert list_snapshots(p.log.dir) == [3, 6, 9]
    # A snapshot at a segment base holds the state up to it.
    state = {e.producer_id: e for e in decode_snapshot(snapshot_path(p.log.dir, 9).read_bytes())}
    assert state[PID].last_seq == 8
    p = open_partition(tmp_path, clean=False, segment_bytes=3 * one)
    assert p.producer_state.map_end_offset == 10
    assert append(p, batch(9)) == 9  # from the replayed tail
    assert append(p, batch(8)) == 8  # from the snapshot
    assert append(p, batch(10)) == 10


def test_corrupt_and_out_of_range_snapshots_are_dropped(tmp_path):
    p = open_partition(tmp_path)
    for i in range(4):
        append(p, batch(i))
    p.log.close()
    directory = p.log.dir
    snapshot_path(directory, 4).write_bytes(b"\x00\x01garbage")
    snapshot_path(directory, 99).write_bytes(encode_snapshot([]))  # past the log end
    p = open_partition(tmp_path)
    assert list_snapshots(directory) == []
    assert append(p, batch(3)) == 3  # rebuilt from the log alone
    assert append(p, batch(4)) == 4


# --- producer ids ---------------------------------------------------------------------------


def test_producer_ids_come_from_blocks_in_the_metadata_store(tmp_path):
    store = EmbeddedStore(str(tmp_path / "meta"), fsync=False)
    zk = KafkaZk(store)

    async def run() -> list[int]:
        async def allocate():
            return zk.allocate_producer_id_block(1)

        first = ProducerIdManager(allocate)
        ids = [await first.generate() for _ in range(1500)]
        # Another broker (or this one after a restart) claims the blocks after these.
        second = ProducerIdManager(allocate)
        return ids + [await second.generate()]

    ids = asyncio.run(run())
    store.close()
    assert ids[:1500] == list(range(1500))
    # The first manager claimed [0, 999] and, at 90% of it, [1000, 1999]; the second one next.
    assert ids[1500] == 2000
