"""Transactions at a partition leader: producer state tracks open transactions, markers end
them, the last stable offset follows, aborted transactions land in Kafka's .txnindex, and all
of it is rebuilt after a crash. On a real log in a temporary directory."""

from __future__ import annotations

import pytest
from leader_partition import append, open_partition
from odradek.broker.protocol.errors import ErrorCode, KafkaError
from odradek.broker.records.batch import iter_batches
from odradek.broker.records.record import ControlType, Record, build_batch, build_control_batch
from odradek.broker.replication.partition import Partition, PartitionState
from odradek.broker.replication.producer_state import AppendOrigin, now_ms
from odradek.broker.storage import Log, LogConfig
from odradek.broker.storage.txn_index import ENTRY_SIZE, AbortedTxn, TransactionIndex

A, B = 7000, 7001


def data(pid: int, seq: int, n: int = 1, *, epoch: int = 0, txn: bool = True) -> bytes:
    records = [
        Record(offset=i, timestamp=now_ms(), value=f"{pid}-{seq + i}".encode()) for i in range(n)
    ]
    return build_batch(
        records, producer_id=pid, producer_epoch=epoch, base_sequence=seq, transactional=txn
    )


def marker(pid: int, commit: bool, *, epoch: int = 0, coordinator_epoch: int = 0) -> bytes:
    return build_control_batch(
        ControlType.COMMIT if commit else ControlType.ABORT,
        producer_id=pid,
        producer_epoch=epoch,
        coordinator_epoch=coordinator_epoch,
        timestamp=now_ms(),
    )


def write_marker(p: Partition, batch: bytes) -> int:
    return p.append_as_leader(bytearray(batch), AppendOrigin.COORDINATOR).first_offset


def error_of(fn, *args) -> ErrorCode:
    with pytest.raises(KafkaError) as info:
        fn(*args)
    return info.value.code


def aborted(p: Partition) -> list[AbortedTxn]:
    return [t for seg in p.log.segments for t in seg.txn_index.entries]


def test_lso_stops_at_the_first_open_transaction_and_moves_with_markers(tmp_path):
    p = open_partition(tmp_path)
    append(p, data(A, 0))  # 0: A opens a transaction
    append(p, data(B, 0))  # 1: B opens one
    append(p, data(A, 1))  # 2
    assert p.high_watermark == 3 and p.last_stable_offset == 0
    assert p.producer_state.producers[A].current_txn_first_offset == 0
    write_marker(p, marker(A, commit=True))  # 3: A commits
    assert p.last_stable_offset == 1  # B's transaction is still open
    write_marker(p, marker(B, commit=False))  # 4: B aborts
    assert p.last_stable_offset == p.high_watermark == 5
    assert aborted(p) == [AbortedTxn(B, 1, 4, 5)]
    assert p.producer_state.producers[B].current_txn_first_offset == -1


def test_lso_waits_for_the_marker_to_be_replicated(tmp_path):
    p = open_partition(tmp_path)
    p.log.hw_tracks_leo = False  # as a replicated partition: the HW follows the followers
    append(p, data(A, 0))
    write_marker(p, marker(A, commit=True))
    p.log.high_watermark = 1  # the data is replicated, the marker not yet
    assert p.last_stable_offset == 0
    p.log.high_watermark = 2
    assert p.last_stable_offset == 2


def test_abort_index_entry_records_the_next_open_transaction_as_lso(tmp_path):
    p = open_partition(tmp_path)
    append(p, data(A, 0))  # 0
    append(p, data(B, 0))  # 1
    write_marker(p, marker(A, commit=False))  # 2: B still open from 1
    assert aborted(p) == [AbortedTxn(A, 0, 2, 1)]


def test_partition_side_rules(tmp_path):
    p = open_partition(tmp_path)
    append(p, data(A, 0))
    # A producer in a transaction may not write outside it.
    assert error_of(append, p, data(A, 1, txn=False)) == ErrorCode.INVALID_TXN_STATE
    write_marker(p, marker(A, commit=False, epoch=1, coordinator_epoch=3))  # fenced abort
    # The old epoch can write nothing more; the marker's coordinator epoch fences older ones.
    assert error_of(append, p, data(A, 1)) == ErrorCode.INVALID_PRODUCER_EPOCH
    stale = marker(A, commit=True, epoch=1, coordinator_epoch=2)
    assert error_of(write_marker, p, stale) == ErrorCode.TRANSACTION_COORDINATOR_FENCED
    old = marker(A, commit=True, epoch=0, coordinator_epoch=3)
    assert error_of(write_marker, p, old) == ErrorCode.INVALID_PRODUCER_EPOCH
    # The next incarnation (epoch 2) starts over at sequence 0.
    assert append(p, data(A, 0, epoch=2)) == 2
    # A marker for a producer with no open transaction changes nothing but the epochs.
    write_marker(p, marker(B, commit=True))
    assert p.last_stable_offset == 2


def test_read_committed_gets_the_lso_bound_and_the_aborted_ranges(tmp_path):
    p = open_partition(tmp_path, segment_bytes=400)
    offsets = []
    for i in range(6):
        pid = A if i % 2 == 0 else B
        offsets.append(append(p, data(pid, i // 2)))
        if i % 2:
            write_marker(p, marker(A, commit=False))
            write_marker(p, marker(B, commit=True))
    assert len(p.log.segments) > 1
    append(p, data(A, 3))  # open
    lso = p.last_stable_offset
    assert lso == p.log.log_end_offset - 1
    # A consumer reading through the log (one segment per read) learns every aborted
    # transaction, each with the read whose batches it overlaps.
    position, seen = 0, []
    while position < lso:
        region, found = p.log.read_committed(position, 1 << 20, max_offset=lso)
        assert region is not None
        end = max(h.last_offset for _, h in iter_batches(region.read())) + 1
        assert all(t.last_offset >= position and t.first_offset < end for t in found)
        seen += [
            (t.producer_id, t.first_offset)
            for t in found
            if (t.producer_id, t.first_offset) not in seen
        ]
        position = end
    assert seen == [(A, 0), (A, 4), (A, 8)]
    region, found = p.log.read_committed(5, 1 << 20, max_offset=lso)
    assert (A, 0) not in [(t.producer_id, t.first_offset) for t in found]
    region, found = p.log.read_committed(lso, 1 << 20, max_offset=lso)
    assert region is None and found == []


def test_txnindex_file_is_kafkas_layout(tmp_path):
    index = TransactionIndex(tmp_path / "00000000000000000100.txnindex", 100)
    assert not index.path.exists() and index.last_offset == -1
    assert index.append(AbortedTxn(5, 100, 110, 111))
    assert not index.append(AbortedTxn(5, 100, 110, 111))  # a replay writes each once
    index.append(AbortedTxn(6, 105, 120, 121))
    raw = index.path.read_bytes()
    assert len(raw) == 2 * ENTRY_SIZE == 68
    assert raw[:2] == b"\x00\x00" and int.from_bytes(raw[2:10], "big") == 5
    assert TransactionIndex(index.path, 100).entries == index.entries
    assert index.collect(111, 200) == ([AbortedTxn(6, 105, 120, 121)], False)
    assert index.collect(0, 104) == ([AbortedTxn(5, 100, 110, 111)], True)
    index.truncate_to(120)
    assert TransactionIndex(index.path, 100).entries == [AbortedTxn(5, 100, 110, 111)]
    index.path.write_bytes(raw[:40])
    with pytest.raises(ValueError):
        TransactionIndex(index.path, 100).sanity_check()


def test_crash_rebuilds_txnindex_and_open_transactions(tmp_path):
    one = len(data(A, 0))
    p = open_partition(tmp_path, segment_bytes=4 * one)
    append(p, data(A, 0))  # 0
    append(p, data(B, 0))  # 1
    write_marker(p, marker(A, commit=False))  # 2
    append(p, data(A, 1))  # 3: open
    append(p, data(B, 1))  # 4
    write_marker(p, marker(B, commit=False))  # 5
    before = aborted(p)
    lso = p.last_stable_offset
    assert lso == 3 and len(before) == 2
    # kill -9: no snapshot at close; the index files are lost too (not flushed).
    for seg in p.log.segments:
        seg.txn_index.path.unlink(missing_ok=True)
    p = open_partition(tmp_path, clean=False, segment_bytes=4 * one)
    assert aborted(p) == before
    assert p.last_stable_offset == lso
    assert p.producer_state.producers[A].current_txn_first_offset == 3
    write_marker(p, marker(A, commit=True))
    assert p.last_stable_offset == p.high_watermark


def test_clean_restart_keeps_open_transactions_in_the_snapshot(tmp_path):
    p = open_partition(tmp_path)
    append(p, data(A, 0))
    append(p, data(B, 0))
    write_marker(p, marker(B, commit=True))
    p.log.close()
    p = open_partition(tmp_path)
    assert p.last_stable_offset == 0
    write_marker(p, marker(A, commit=False))
    assert aborted(p) == [AbortedTxn(A, 0, 3, 4)]
    assert p.last_stable_offset == 4


def test_follower_replay_tracks_transactions_and_indexes_aborts(tmp_path):
    leader = open_partition(tmp_path / "leader")
    append(leader, data(A, 0))
    write_marker(leader, marker(A, commit=False))
    append(leader, data(B, 0))
    fetched = leader.log.read(0, 1 << 20).read()
    follower_log = Log(tmp_path / "follower" / "topic-0", LogConfig())
    follower = Partition("topic", 0, None, follower_log, PartitionState(2, 0, [1, 2], [1, 2]), 1)
    buf = bytearray(fetched)
    follower.log.append(buf, assign_offsets=False)
    follower.producer_state.replay_buffer(buf)
    assert aborted(follower) == [AbortedTxn(A, 0, 1, 2)]
    assert follower.producer_state.first_unstable_offset(3) == 2
