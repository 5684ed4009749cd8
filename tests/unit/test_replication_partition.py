"""Leader-side replication rules: follower tracking, the high watermark, ISR expand and shrink,
and follower-side truncation decisions (reference §3.2, §3.3, §3.5)."""

from __future__ import annotations

import asyncio

import pytest
from odradek.broker.records.record import Record, build_batch
from odradek.broker.replication.fetcher import (
    FetcherSettings,
    FetchPartition,
    ReplicaFetcher,
    whole_batches,
)
from odradek.broker.replication.partition import FollowerState, Partition, PartitionState
from odradek.broker.replication.truncation import truncation_for
from odradek.broker.storage import Log, LogConfig
from odradek.broker.storage.leader_epoch import LeaderEpochCache

LAG = 30_000


def batch(n: int = 1, value: bytes = b"v") -> bytearray:
    return bytearray(build_batch([Record(offset=i, timestamp=1000, value=value) for i in range(n)]))


def make_partition(
    tmp_path, broker: int, leader: int, isr, replicas=(1, 2, 3), epoch=0, name="t-0"
):
    log = Log(tmp_path / f"b{broker}" / name, LogConfig(), clean_shutdown=True)
    state = PartitionState(
        leader=leader, leader_epoch=epoch, isr=list(isr), replicas=list(replicas)
    )
    p = Partition("t", 0, None, log, state, broker)
    if leader == broker:
        p.make_leader(state, None, 0)
    else:
        p.make_follower(state, None)
    return p


def test_high_watermark_is_min_leo_of_isr_and_never_moves_back(tmp_path):
    p = make_partition(tmp_path, 1, 1, [1, 2, 3])
    p.append_as_leader(batch(5))
    assert p.log.log_end_offset == 5
    assert p.high_watermark == 0  # followers' positions are unknown
    p.update_follower_fetch(2, 5, 0, 10, LAG)
    assert p.high_watermark == 0
    p.update_follower_fetch(3, 3, 0, 10, LAG)
    assert p.high_watermark == 3
    # A follower reporting an older position (a stale fetch) cannot pull the HW back.
    p.update_follower_fetch(3, 1, 0, 11, LAG)
    assert p.high_watermark == 3
    p.update_follower_fetch(3, 5, 0, 12, LAG)
    assert p.high_watermark == 5


def test_single_replica_high_watermark_follows_the_log_end(tmp_path):
    p = make_partition(tmp_path, 1, 1, [1], replicas=(1,))
    p.append_as_leader(batch(3))
    assert p.high_watermark == 3


def test_an_append_wakes_followers_and_the_high_watermark_wakes_consumers(tmp_path):
    """A consumer's long poll sees nothing new until the HW moves, so only that wakes it; a
    follower's fetch reads to the log end, so the append does. Waking the wrong one costs a
    re-read of every partition of its fetch, on every acks=all append."""
    loop = asyncio.new_event_loop()
    try:
        p = make_partition(tmp_path, 1, 1, [1, 2, 3])
        consumer, follower = loop.create_future(), loop.create_future()
        p.fetch_waiters.add(consumer)
        p.replica_waiters.add(follower)
        p.append_as_leader(batch(2))
        assert follower.done() and not consumer.done()
        follower = loop.create_future()
        p.replica_waiters.add(follower)
        p.update_follower_fetch(2, 2, 0, 10, LAG)
        assert not consumer.done()  # broker 3 has not fetched the records: the HW stays at 0
        p.update_follower_fetch(3, 2, 0, 10, LAG)
        assert p.high_watermark == 2
        assert consumer.done() and not follower.done()
    finally:
        loop.close()


def test_single_replica_append_wakes_consumers_at_once(tmp_path):
    loop = asyncio.new_event_loop()
    try:
        p = make_partition(tmp_path, 1, 1, [1], replicas=(1,))
        consumer = loop.create_future()
        p.fetch_waiters.add(consumer)
        p.append_as_leader(batch(1))
        assert consumer.done()
    finally:
        loop.close()


def test_isr_expands_once_a_follower_reaches_the_high_watermark(tmp_path):
    p = make_partition(tmp_path, 1, 1, [1, 2], replicas=(1, 2, 3))
    p.append_as_leader(batch(4))
    p.update_follower_fetch(2, 4, 0, 10, LAG)
    assert p.high_watermark == 4
    assert p.update_follower_fetch(3, 2, 0, 10, LAG) is None
    proposal = p.update_follower_fetch(3, 4, 0, 11, LAG)
    assert proposal == [1, 2, 3]
    # While the expansion is pending, the HW already counts the new member (maximal ISR).
    p.pending_isr = proposal
    p.append_as_leader(batch(1))
    p.update_follower_fetch(2, 5, 0, 12, LAG)
    assert p.high_watermark == 4
    p.isr_committed(proposal, 1)
    assert p.state.isr == [1, 2, 3] and p.state.partition_epoch == 1
    p.update_follower_fetch(3, 5, 0, 13, LAG)
    assert p.high_watermark == 5


def test_expansion_waits_for_the_current_leader_epoch_start(tmp_path):
    p = make_partition(tmp_path, 1, 1, [1, 2], replicas=(1, 2, 3))
    p.append_as_leader(batch(4))
    # A new leader epoch starts at the log end (4); the HW may be stale (0).
    p.make_leader(PartitionState(1, 1, [1, 2], [1, 2, 3]), None, 0)
    assert p.leader_epoch_start_offset == 4
    assert p.update_follower_fetch(3, 2, 0, 10, LAG) is None
    assert p.update_follower_fetch(3, 4, 0, 11, LAG) == [1, 2, 3]


def test_isr_shrinks_followers_that_lag_too_long(tmp_path):
    p = make_partition(tmp_path, 1, 1, [1, 2, 3])
    p.append_as_leader(batch(2))
    p.update_follower_fetch(2, 2, 0, 1_000, LAG)
    p.update_follower_fetch(3, 0, 0, 1_000, LAG)
    # make_leader counted both as caught up at time 0.
    assert p.isr_shrink(LAG, LAG) is None
    assert p.isr_shrink(LAG + 1, LAG) == [1, 2]
    # A follower at the log end is always in sync.
    assert 2 not in p.out_of_sync_replicas(10 * LAG, LAG)


def test_caught_up_rule_credits_a_follower_that_keeps_up_with_a_stream():
    f = FollowerState()
    f.update(fetch_offset=10, log_start=0, leader_leo=10, now=100)
    assert f.last_caught_up_time_ms == 100
    # Behind the leader now, but at least where the leader was at the previous fetch.
    f.update(fetch_offset=12, log_start=0, leader_leo=15, now=200)
    assert f.last_caught_up_time_ms == 100
    f.update(fetch_offset=15, log_start=0, leader_leo=18, now=300)
    assert f.last_caught_up_time_ms == 200
    # Fell behind the previous leader end: no credit.
    f.update(fetch_offset=16, log_start=0, leader_leo=30, now=400)
    assert f.last_caught_up_time_ms == 200
    assert not f.caught_up(30, 200 + LAG + 1, LAG)


def test_min_isr_is_capped_by_the_replication_factor(tmp_path):
    p = make_partition(tmp_path, 1, 1, [1], replicas=(1,))
    p.log.update_config(LogConfig(min_insync_replicas=2))
    assert p.effective_min_isr == 1
    q = make_partition(tmp_path, 1, 1, [1], name="t-1")
    q.log.update_config(LogConfig(min_insync_replicas=2))
    assert q.effective_min_isr == 2


# --- truncation decisions ------------------------------------------------------------------


def cache(tmp_path, *entries) -> LeaderEpochCache:
    c = LeaderEpochCache(tmp_path)
    for epoch, start in entries:
        c.assign(epoch, start)
    return c


def test_truncation_unknown_leader_offset_goes_to_high_watermark(tmp_path):
    t = truncation_for(-1, -1, cache(tmp_path, (0, 0)), 10, 7)
    assert t == (7, True)


def test_truncation_old_leader_without_epochs(tmp_path):
    assert truncation_for(-1, 5, cache(tmp_path, (0, 0)), 10, 0) == (5, True)
    assert truncation_for(-1, 50, cache(tmp_path, (0, 0)), 10, 0) == (10, True)


def test_truncation_same_epoch_takes_the_smaller_end(tmp_path):
    c = cache(tmp_path, (0, 0), (2, 10))
    # Leader: epoch 2 ends at 15; follower's log ends at 20 (uncommitted tail of epoch 2).
    assert truncation_for(2, 15, c, 20, 12) == (15, True)
    assert truncation_for(2, 25, c, 20, 12) == (20, True)


def test_truncation_follower_lacking_the_leaders_epoch_repeats(tmp_path):
    # Follower wrote epoch 1 at 10..; the leader never had epoch 1 and answers epoch 0 ends at 8.
    c = cache(tmp_path, (0, 0), (1, 10))
    first = truncation_for(0, 8, c, 20, 5)
    assert first == (8, True)
    # KIP-279: leader answers epoch 1 (ending at 12) while the follower has epochs 0 and 2.
    (tmp_path / "x").mkdir()
    c2 = cache(tmp_path / "x", (0, 0), (2, 10))
    step = truncation_for(1, 12, c2, 20, 5)
    assert step == (10, False)


def test_truncation_follower_without_epochs(tmp_path):
    assert truncation_for(3, 4, cache(tmp_path), 9, 0) == (4, True)


# --- follower appends ------------------------------------------------------------------------


def test_whole_batches_drops_a_partial_tail_and_old_batches():
    a, b, c = batch(2), batch(3), batch(1)
    a[0:8] = (0).to_bytes(8, "big")
    b[0:8] = (2).to_bytes(8, "big")
    c[0:8] = (5).to_bytes(8, "big")
    data = bytes(a + b + c[: len(c) - 5])
    assert bytes(whole_batches(data, 0)) == bytes(a + b)
    assert bytes(whole_batches(data, 2)) == bytes(b)
    assert len(whole_batches(None, 0)) == 0


def fetch_response(leader: Partition, follower: Partition) -> dict:
    """What the leader's Fetch handler answers a follower (read up to the log end)."""
    lg = leader.log
    region = lg.read(follower.log.log_end_offset, 1 << 20, max_offset=None)
    return {
        "error_code": 0,
        "high_watermark": leader.high_watermark,
        "log_start_offset": lg.log_start_offset,
        "diverging_epoch": {"epoch": -1, "end_offset": -1},
        "records": region.read() if region is not None else b"",
    }


def follow(fetcher: ReplicaFetcher, follower: Partition) -> FetchPartition:
    fp = FetchPartition(follower, follower.state.leader_epoch, truncating=False)
    fetcher.partitions[("t", 0)] = fp
    return fp


def test_follower_copies_batches_and_takes_the_leaders_high_watermark(tmp_path):
    leader = make_partition(tmp_path, 1, 1, [1, 2], replicas=(1, 2))
    follower = make_partition(tmp_path, 2, 1, [1, 2], replicas=(1, 2))
    fetcher = ReplicaFetcher(1, "localhost", 0, FetcherSettings(2))
    fp = follow(fetcher, follower)
    leader.append_as_leader(batch(3))
    leader.append_as_leader(batch(2))
    fetcher._process(fp, fetch_response(leader, follower))
    assert follower.log.log_end_offset == 5
    assert follower.high_watermark == 0
    leader.update_follower_fetch(2, follower.log.log_end_offset, 0, 1, LAG)
    assert leader.high_watermark == 5
    fetcher._process(fp, fetch_response(leader, follower))
    assert follower.high_watermark == 5
    assert follower.log.epoch_cache.entries == leader.log.epoch_cache.entries


def test_divergent_follower_truncates_and_ends_identical(tmp_path):
    # Broker 2 led epoch 0 and wrote 5 records, only 3 of which reached broker 1.
    old = make_partition(tmp_path, 2, 2, [2, 1], replicas=(1, 2))
    old.append_as_leader(batch(3, b"acked"))
    old.append_as_leader(batch(2, b"lost"))
    new = make_partition(tmp_path, 1, 2, [2, 1], replicas=(1, 2))
    fetcher = ReplicaFetcher(2, "localhost", 0, FetcherSettings(1))
    fp = follow(fetcher, new)
    region = old.log.read(0, 1 << 20, max_offset=3)
    fetcher._process(fp, {**fetch_response(old, new), "records": region.read()})
    assert new.log.log_end_offset == 3
    # Broker 1 becomes leader in epoch 1 and writes on; broker 2 becomes its follower.
    new.make_leader(PartitionState(1, 1, [1], [1, 2]), None, 0)
    new.append_as_leader(batch(4, b"epoch1"))
    old.make_follower(PartitionState(1, 1, [1], [1, 2]), None)
    fetcher2 = ReplicaFetcher(1, "localhost", 0, FetcherSettings(2))
    fp2 = FetchPartition(old, 1, truncating=True)
    fetcher2.partitions[("t", 0)] = fp2
    # OffsetForLeaderEpoch with the follower's latest epoch (0): the leader says epoch 0 ends at 3.
    epoch, end = new.log.epoch_cache.end_offset_for(0, new.log.log_end_offset)
    assert (epoch, end) == (0, 3)
    fetcher2._apply_epoch_answer(fp2, epoch, end)
    assert not fp2.truncating
    assert old.log.log_end_offset == 3
    fetcher2._process(fp2, fetch_response(new, old))
    assert old.log.log_end_offset == 7
    assert old.log.epoch_cache.entries == new.log.epoch_cache.entries
    for a, b in zip(old.log.segments, new.log.segments, strict=True):
        assert a.base_offset == b.base_offset
    old_bytes = (old.log.dir / "00000000000000000000.log").read_bytes()
    new_bytes = (new.log.dir / "00000000000000000000.log").read_bytes()
    assert old_bytes == new_bytes


def test_diverging_epoch_in_a_fetch_response_truncates(tmp_path):
    follower = make_partition(tmp_path, 2, 1, [1, 2], replicas=(1, 2))
    follower.log.append(batch(2), leader_epoch=0)
    follower.log.append(batch(2), leader_epoch=0)
    fetcher = ReplicaFetcher(1, "localhost", 0, FetcherSettings(2))
    fp = follow(fetcher, follower)
    fetcher._process(
        fp,
        {
            "error_code": 0,
            "high_watermark": 2,
            "log_start_offset": 0,
            "diverging_epoch": {"epoch": 0, "end_offset": 2},
            "records": b"",
        },
    )
    assert follower.log.log_end_offset == 2


@pytest.mark.parametrize("leader_start", [10])
def test_out_of_range_below_the_leaders_log_start_restarts_the_log(tmp_path, leader_start):
    follower = make_partition(tmp_path, 2, 1, [1, 2], replicas=(1, 2))
    follower.log.append(batch(4), leader_epoch=0)
    fetcher = ReplicaFetcher(1, "localhost", 0, FetcherSettings(2))
    fp = follow(fetcher, follower)
    fetcher._process(
        fp,
        {"error_code": 1, "high_watermark": -1, "log_start_offset": leader_start, "records": b""},
    )
    assert follower.log.log_start_offset == leader_start == follower.log.log_end_offset
