"""The log cleaner on real segment files: what a round keeps, where it stops, how it swaps.

Rounds run in the test's thread (`LogCleaner.clean_one` with an in-process worker, the owner
being the caller), so every step is deterministic; the worker process and the threads are
covered by the broker's integration tests.
"""

from __future__ import annotations

import os
from types import SimpleNamespace

import pytest
from manual_clock import Clock
from odradek.broker.records import batch as rb
from odradek.broker.records.compaction import delete_horizon, rebuild_batch, scan_records
from odradek.broker.records.compression import Codec
from odradek.broker.records.record import Record, batch_body, build_batch, decode_all
from odradek.broker.storage import LogConfig, LogManager
from odradek.broker.storage.checkpoint import CLEANER_CHECKPOINT, read_offset_checkpoint
from odradek.broker.storage.cleaner import CleanerStats, OffsetMap, SegmentRef, group_segments
from odradek.broker.storage.log import Log
from odradek.broker.storage.log_cleaner import CleanerConfig, InlineWorker, LogCleaner

NOW = 10_000_000


def keyed(pairs, ts: int = NOW - 1000, codec: int = Codec.NONE, **kw) -> bytearray:
    records = [Record(i, ts, k, v) for i, (k, v) in enumerate(pairs)]
    return bytearray(build_batch(records, compression=codec, **kw))


def append_versions(log: Log, key: bytes, n: int, prefix: str, **kw) -> None:
    """`n` batches, each a new value of `key`: prefix0, prefix1, ... (`kw` go to keyed)."""
    for i in range(n):
        log.append(keyed([(key, f"{prefix}{i}".encode())], **kw))


def contents(log: Log) -> list[tuple[int, bytes | None, bytes | None]]:
    """(offset, key, value) of every record in the log, by reading it as a consumer does."""
    out = []
    for seg in log.segments:
        data = seg.read_bytes(0, seg.size)
        for _, records in decode_all(data):
            out += [(r.offset, r.key, r.value) for r in records]
    return out


def manager_with_log(tmp_path, clock: Clock, **cfg) -> tuple[LogManager, Log]:
    config = LogConfig(cleanup_policy=("compact",), **cfg)
    lm = LogManager([tmp_path / "data"], config, clock=clock)
    lm.startup()
    return lm, lm.get_or_create_log("t", 0, config)


def one_round(lm: LogManager, settings: dict | None = None) -> bool:
    cleaner = LogCleaner(lm.cleaner_manager, CleanerConfig(), lambda fn: fn(), in_process=True)
    worker = InlineWorker({**CleanerConfig().worker_settings(), **(settings or {})})
    return cleaner.clean_one(worker)


def test_scan_and_rebuild_keep_offsets_and_timestamps():
    data = bytes(keyed([(b"a", b"1"), (b"b", None), (b"c", b"3")], ts=5000, base_offset=40))
    header = rb.parse_header(data)
    body = batch_body(data, header)
    spans = scan_records(body, header.records_count)
    assert [(s.key, s.has_value, s.offset_delta) for s in spans] == [
        (b"a", True, 0), (b"b", False, 1), (b"c", True, 2),
    ]  # fmt: skip
    rebuilt = rebuild_batch(header, body, [spans[1], spans[2]], delete_horizon_ms=99_000)
    new = rb.validate(rebuilt)
    assert (new.base_offset, new.last_offset_delta, new.records_count) == (40, 2, 2)
    assert delete_horizon(new) == 99_000
    [(_, records)] = decode_all(rebuilt)
    assert [(r.offset, r.key, r.value, r.timestamp) for r in records] == [
        (41, b"b", None, 5000), (42, b"c", b"3", 5000),
    ]  # fmt: skip


def test_offset_map_is_bounded_like_kafkas():
    m = OffsetMap(24 * 100, load_factor=0.5)
    assert (m.slots, m.max_entries) == (100, 50)
    m.put(b"k", 3)
    m.put(b"k", 9)
    assert (m.get(b"k"), m.get(b"other"), m.size) == (9, -1, 1)


def test_segments_grouped_by_size():
    segs = [SegmentRef(i * 10, f"{i}", 400, 16, 24, 0) for i in range(5)]
    groups = group_segments(segs, 1000, 1 << 20, 50)
    assert [[s.base_offset for s in g] for g in groups] == [[0, 10], [20, 30], [40]]


def test_round_keeps_latest_value_of_each_key_with_offsets(tmp_path):
    clock = Clock(NOW)
    lm, log = manager_with_log(tmp_path, clock, segment_bytes=2000)
    for i in range(300):
        log.append(keyed([(f"k{i % 10}".encode(), f"v{i}".encode())]))
    log.roll()
    before = contents(log)
    assert len(log.segments) > 5
    assert one_round(lm)
    after = contents(log)
    latest = {}
    for offset, key, value in before:
        latest[key] = (offset, key, value)
    assert after == sorted(latest.values())
    # The checkpoint records the first dirty offset: everything below the active segment.
    cp = read_offset_checkpoint(tmp_path / "data" / CLEANER_CHECKPOINT)
    assert cp == {("t", 0): log.active_segment.base_offset}
    assert log.log_start_offset == 0 and log.log_end_offset == 300
    # Reading from an offset that was removed returns the next record, as the design says.
    data = log.read(5, 1 << 20).read()
    assert [r.offset for _, rs in decode_all(data) for r in rs][0] >= 5
    assert not one_round(lm)  # nothing dirty left
    lm.shutdown()
    lm2 = LogManager([tmp_path / "data"], LogConfig(cleanup_policy=("compact",)), clock=clock)
    lm2.startup()
    assert contents(lm2.get_log("t", 0)) == after
    assert not [n for n in os.listdir(log.dir) if n.endswith((".cleaned", ".swap"))]
    lm2.shutdown()


def test_active_segment_and_records_above_high_watermark_stay(tmp_path):
    clock = Clock(NOW)
    lm, log = manager_with_log(tmp_path, clock, segment_bytes=2000)
    append_versions(log, b"same", 100, "v")
    active_base = log.active_segment.base_offset
    assert active_base > 0
    log.hw_tracks_leo = False
    log.high_watermark = 30
    assert one_round(lm)
    records = contents(log)
    # Only what lies below the segment holding the high watermark was cleaned.
    hw_segment = max(s.base_offset for s in log.segments if s.base_offset <= 30)
    assert [o for o, _, _ in records if o >= hw_segment] == list(range(hw_segment, 100))
    assert len([o for o, _, _ in records if o < hw_segment]) == 1
    lm.shutdown()


def test_min_compaction_lag_protects_young_segments(tmp_path):
    clock = Clock(NOW)
    lm, log = manager_with_log(tmp_path, clock, segment_bytes=2000, min_compaction_lag_ms=60_000)
    append_versions(log, b"k", 100, "v", ts=NOW - 1000)
    log.roll()
    assert not one_round(lm)  # every segment is younger than the lag
    assert len(contents(log)) == 100
    clock.now += 120_000
    assert one_round(lm)
    assert [v for _, _, v in contents(log)] == [b"v99"]
    lm.shutdown()


def test_tombstones_go_after_delete_retention(tmp_path):
    clock = Clock(NOW)
    lm, log = manager_with_log(
        tmp_path,
        clock,
        segment_bytes=2000,
        delete_retention_ms=50_000,
        min_cleanable_dirty_ratio=0.01,
    )
    for i in range(50):
        log.append(keyed([(b"gone", f"v{i}".encode()), (b"kept", f"w{i}".encode())]))
    log.append(keyed([(b"gone", None)]))
    log.roll()
    assert one_round(lm)
    assert [(k, v) for _, k, v in contents(log)] == [(b"kept", b"w49"), (b"gone", None)]
    headers = [h for s in log.segments for _, h in s.iter_headers()]
    assert any(delete_horizon(h) == NOW + 50_000 for h in headers)
    # More writes make the log dirty again; before the horizon the tombstone stays...
    append_versions(log, b"kept", 30, "x")
    log.roll()
    assert one_round(lm)
    assert (b"gone", None) in [(k, v) for _, k, v in contents(log)]
    # ...after it, the next round removes it.
    clock.now += 60_000
    append_versions(log, b"kept", 30, "y")
    log.roll()
    assert one_round(lm)
    assert [(k, v) for _, k, v in contents(log)] == [(b"kept", b"y29")]
    lm.shutdown()


@pytest.mark.parametrize("codec", [Codec.GZIP, Codec.SNAPPY, Codec.LZ4, Codec.ZSTD])
def test_compressed_batches_keep_their_codec(tmp_path, codec):
    clock = Clock(NOW)
    lm, log = manager_with_log(tmp_path, clock, segment_bytes=4000)
    for i in range(60):
        pairs = [(f"k{j}".encode(), f"v{i}-{j}".encode() * 5) for j in range(i % 3, 6)]
        log.append(keyed(pairs, codec=codec))
    log.roll()
    before = contents(log)
    assert one_round(lm)
    latest = {}
    for record in before:
        latest[record[1]] = record
    assert contents(log) == sorted(latest.values())
    for seg in log.segments:
        for _, h in seg.iter_headers():
            if h.records_count:
                assert h.compression == codec
    lm.shutdown()


def test_last_batch_of_an_idempotent_producer_is_kept_empty(tmp_path):
    clock = Clock(NOW)
    lm, log = manager_with_log(tmp_path, clock, segment_bytes=2000)
    log.append(keyed([(b"k", b"old")], producer_id=7, producer_epoch=0, base_sequence=0))
    append_versions(log, b"k", 60, "v")
    log.roll()
    log.active_producers = lambda: {7: 0}
    assert one_round(lm)
    headers = [h for s in log.segments for _, h in s.iter_headers()]
    first = headers[0]
    assert (first.producer_id, first.base_offset, first.records_count) == (7, 0, 0)
    assert [v for _, _, v in contents(log)] == [b"v59"]
    lm.shutdown()


def test_truncation_during_a_round_refuses_the_swap(tmp_path):
    clock = Clock(NOW)
    lm, log = manager_with_log(tmp_path, clock, segment_bytes=2000)
    append_versions(log, b"k", 100, "v")
    log.roll()
    append_versions(log, b"k", 5, "w")
    task = lm.cleaner_manager.grab_filthiest()
    assert task is not None
    log.truncate_to(102)  # in the active segment: the round's files are untouched
    worker = InlineWorker(CleanerConfig().worker_settings())
    swaps = []

    def swap(base, old):
        swaps.append(lm.cleaner_manager.swap(task, base, old))
        return swaps[-1]

    with pytest.raises(Exception, match="changed"):
        worker.clean(task, swap)
    lm.cleaner_manager.done_cleaning(task, None)
    assert swaps == [False]
    assert [o for o, _, _ in contents(log)] == list(range(102))
    assert not [n for n in os.listdir(log.dir) if n.endswith((".cleaned", ".swap"))]
    lm.shutdown()


class Crash(BaseException):
    pass


CRASH_POINTS = [
    "cleaner-map-built",
    "cleaner-cleaned-partial",
    "cleaner-cleaned-written",
    "cleaner-swap-renamed",
    "cleaner-old-deleted",
    "cleaner-swapped",
]


@pytest.mark.parametrize("point", CRASH_POINTS)
def test_a_crash_at_any_step_recovers_to_a_consistent_log(tmp_path, monkeypatch, point):
    """Each crash point raises instead of killing; the manager is then abandoned without a
    clean shutdown and the directory loaded again, as after kill -9."""
    from odradek.broker.storage import cleaner as cleaner_mod
    from odradek.broker.storage import log as log_mod

    def crash_at(name: str) -> None:
        if name == point:
            raise Crash(name)

    monkeypatch.setattr(cleaner_mod, "crash_point", crash_at)
    monkeypatch.setattr(log_mod, "crash_point", crash_at)
    clock = Clock(NOW)
    lm, log = manager_with_log(tmp_path, clock, segment_bytes=1500, index_interval_bytes=100)
    for i in range(400):
        log.append(keyed([(f"k{i % 7}".encode(), f"v{i}".encode())]))
    log.roll()
    log.flush()
    before = contents(log)
    latest = {k: (o, k, v) for o, k, v in before}
    with pytest.raises(Crash):
        one_round(lm)
    for fd in lm._locks:  # the "dead" process's locks
        os.close(fd)
    lm2 = LogManager([tmp_path / "data"], LogConfig(cleanup_policy=("compact",)), clock=clock)
    lm2.startup()
    recovered = lm2.get_log("t", 0)
    after = contents(recovered)
    assert [o for o, _, _ in after] == sorted({o for o, _, _ in after})  # offsets ascending
    assert set(after) <= set(before)  # nothing invented, offsets unchanged
    assert set(latest.values()) <= set(after)  # no key's latest value lost
    assert recovered.log_end_offset == 400
    names = os.listdir(recovered.dir)
    assert not [n for n in names if n.endswith((".cleaned", ".swap", ".deleted"))]
    # Every segment's index agrees with its log: reading from each offset finds it.
    for offset, key, value in after:
        data = recovered.read(offset, 100).read()
        [(_, records)] = decode_all(data)[:1]
        assert (records[0].offset, records[0].key, records[0].value) == (offset, key, value)
    # A later round still brings the log down to one record per key.
    monkeypatch.setattr(cleaner_mod, "crash_point", lambda name: None)
    monkeypatch.setattr(log_mod, "crash_point", lambda name: None)
    one_round(lm2)
    assert contents(recovered) == sorted(latest.values())
    lm2.shutdown()


def test_max_compaction_lag_forces_a_clean_below_the_dirty_ratio(tmp_path):
    clock = Clock(NOW)
    lm, log = manager_with_log(
        tmp_path, clock, segment_bytes=2000, min_cleanable_dirty_ratio=0.5,
        max_compaction_lag_ms=60_000,
    )  # fmt: skip
    for i in range(100):
        log.append(keyed([(f"k{i}".encode(), b"v" * 30)], ts=NOW))
    log.roll()
    assert one_round(lm)  # never cleaned: 100% dirty
    for i in range(5):
        log.append(keyed([(b"k1", f"{i}".encode())], ts=NOW))
    log.roll()
    assert not one_round(lm)  # a few percent dirty, and not overdue yet
    clock.now += 120_000
    assert lm.cleaner_manager.max_compaction_delay(log, 100, clock.now) > 0
    assert one_round(lm)
    assert [(k, v) for _, k, v in contents(log) if k == b"k1"] == [(b"k1", b"4")]
    lm.shutdown()


def test_compact_and_delete_policies_both_apply(tmp_path):
    clock = Clock(NOW)
    config = dict(segment_bytes=2000, retention_ms=100_000)
    lm, log = manager_with_log(tmp_path, clock, **config)
    log.update_config(LogConfig(cleanup_policy=("compact", "delete"), **config))
    for i in range(50):
        log.append(keyed([(f"old{i}".encode(), f"{i}".encode())], ts=NOW - 500_000))
    log.roll()
    for i in range(50):
        log.append(keyed([(f"new{i % 5}".encode(), f"{i}".encode())], ts=NOW))
    log.roll()
    assert one_round(lm)  # compaction: one record per new key
    assert len(contents(log)) == 55
    assert log.delete_old_segments(clock.now) > 0  # retention: the old keys' segments go
    assert one_round(lm) is not None
    assert [k for _, k, _ in contents(log)] == [f"new{i}".encode() for i in range(5)]
    lm.shutdown()


def test_aborted_transactions_and_their_markers_are_removed(tmp_path):
    """Kafka's rules: aborted records go at once and never shadow committed ones; a marker
    stays while its transaction had records, then gets a delete horizon and goes after it."""
    from odradek.broker.records.record import ControlType, build_control_batch
    from odradek.broker.storage.txn_index import AbortedTxn

    clock = Clock(NOW)
    lm, log = manager_with_log(
        tmp_path, clock, segment_bytes=4000, delete_retention_ms=50_000,
        min_cleanable_dirty_ratio=0.01,
    )  # fmt: skip
    txn = dict(producer_epoch=0, transactional=True)

    def marker(kind: ControlType, pid: int) -> bytearray:
        return bytearray(build_control_batch(kind, producer_id=pid, producer_epoch=0,
                                             coordinator_epoch=0, timestamp=NOW - 1000))  # fmt: skip

    log.append(keyed([(b"a", b"committed-a"), (b"b", b"committed-b")], producer_id=1,
                     base_sequence=0, **txn))  # fmt: skip
    log.append(marker(ControlType.COMMIT, 1))  # offset 2
    first = log.log_end_offset
    log.append(keyed([(b"a", b"aborted-a"), (b"c", b"aborted-c")], producer_id=2,
                     base_sequence=0, **txn))  # fmt: skip
    log.append(marker(ControlType.ABORT, 2))  # offset 5
    log.append_aborted_txn(AbortedTxn(2, first, 5, 6))
    log.append(keyed([(b"d", b"plain")]))
    log.roll()
    assert one_round(lm)

    def view() -> list[tuple[int, bytes | None, bytes | None, bool]]:
        out = []
        for seg in log.segments:
            for h, rs in decode_all(seg.read_bytes(0, seg.size)):
                out += [(r.offset, r.key, r.value, h.is_control) for r in rs]
        return out

    records = view()
    data = [(o, k, v) for o, k, v, control in records if not control]
    assert data == [(0, b"a", b"committed-a"), (1, b"b", b"committed-b"), (6, b"d", b"plain")]
    assert [o for o, _, _, control in records if control] == [2, 5]  # both markers still needed
    cleaned = [s for s in log.segments if s.txn_index.entries]
    assert [t.last_offset for s in cleaned for t in s.txn_index.entries] == [5]

    # Later rounds: the abort marker has nothing left, and gets a delete horizon; the commit
    # marker too, one round after its records were superseded (as in Kafka, a round that
    # still reads them keeps it); both go once their horizon has passed.
    def horizons() -> list[int | None]:
        return [delete_horizon(h) for s in log.segments for _, h in s.iter_headers()
                if h.is_control and h.records_count]  # fmt: skip

    log.append(keyed([(b"a", b"new-a"), (b"b", b"new-b")]))
    log.roll()
    assert one_round(lm)
    assert horizons() == [None, NOW + 50_000]
    clock.now += 10_000
    log.append(keyed([(b"d", b"new-d")]))
    log.roll()
    assert one_round(lm)
    assert horizons() == [NOW + 60_000, NOW + 50_000]
    clock.now += 60_000
    log.append(keyed([(b"d", b"newer-d")]))
    log.roll()
    assert one_round(lm)
    assert not [h for s in log.segments for _, h in s.iter_headers()
                if h.is_control and h.records_count]  # fmt: skip
    assert [(k, v) for _, k, v, _ in view()] == [
        (b"a", b"new-a"),
        (b"b", b"new-b"),
        (b"d", b"newer-d"),
    ]
    lm.shutdown()


def model_round(records: list[tuple[int, bytes | None, bytes | None]]) -> list:
    """What a round keeps of `records` (offset, key, value) read in log order, no tombstones:
    the record of each key read last, by offset; keyless records go."""
    winners = {key: offset for offset, key, _ in records if key is not None}
    return [r for r in records if r[1] is not None and winners[r[1]] == r[0]]


def stats_round(lm: LogManager) -> CleanerStats:
    cleaner = LogCleaner(lm.cleaner_manager, CleanerConfig(), lambda fn: fn(), in_process=True)
    worker = InlineWorker(CleanerConfig().worker_settings())
    thread = SimpleNamespace(last_stats=None)
    assert cleaner.clean_one(worker, thread)
    return thread.last_stats


def test_batches_of_many_records_keep_the_winners_and_count_the_keyless(tmp_path):
    """The copy pass reads only each batch's winners, where the map pass found them, and skips
    batches with none: the same records stay, and keyless ones are still counted as invalid."""
    clock = Clock(NOW)
    lm, log = manager_with_log(tmp_path, clock, segment_bytes=20_000)
    n = 0
    for _batch in range(40):
        pairs = []
        for _ in range(30):
            key = None if n % 97 == 5 else f"k{(n * 7919) % 53}".encode()
            pairs.append((key, f"v{n}".encode()))
            n += 1
        log.append(keyed(pairs))
    log.roll()
    before = contents(log)
    stats = stats_round(lm)
    assert contents(log) == model_round(before)
    assert stats.invalid_messages == sum(1 for _, key, _ in before if key is None)
    lm.shutdown()


def test_a_batch_whose_offsets_do_not_rise_is_cleaned_record_by_record(tmp_path):
    """A malformed batch (offset deltas out of order, one repeated) is kept to the old rule:
    a record stays when its offset is the one the map holds for some key."""
    clock = Clock(NOW)
    lm, log = manager_with_log(tmp_path, clock, segment_bytes=1 << 20)
    log.append(keyed([(b"a", b"1"), (b"b", b"2"), (b"c", b"3")]))
    deltas = [(0, b"x", b"4"), (2, b"a", b"5"), (1, b"e", b"6"), (3, b"f", b"7"), (3, b"h", b"8")]
    odd = [Record(d, NOW - 1000, k, v) for d, k, v in deltas]
    log.append(bytearray(build_batch(odd, last_offset_delta=4)))
    log.append(keyed([(b"b", b"9"), (b"x", b"10"), (b"f", b"11")]))
    log.roll()
    before = contents(log)
    one_round(lm)
    winners = {}
    for offset, key, _ in before:
        winners[key] = offset
    assert contents(log) == [r for r in before if r[0] in set(winners.values())]
    lm.shutdown()


@pytest.mark.parametrize(
    ("marker_at", "forks"),
    [(None, 2), (20, 2), (390, 1)],
    ids=["no transaction", "marker in the first half", "marker in the second half"],
)
def test_a_round_on_two_cores_cleans_as_one_in_order(tmp_path, monkeypatch, marker_at, forks):
    """The worker's map pass may fork to read the first half of the segments, and its copy
    pass to write the first half of the groups: the cleaned log is byte for byte the one an
    in-order reading gives. The copy does not split when a transaction's marker lies in the
    second half (whether it stays depends on records in the first)."""
    from odradek.broker.records.record import ControlType, build_control_batch

    forked = []
    fork = os.fork
    monkeypatch.setattr(os, "fork", lambda: forked.append(1) or fork())
    results = []
    for two_cores in (False, True):
        clock = Clock(NOW)
        lm, log = manager_with_log(tmp_path / str(two_cores), clock, segment_bytes=4000)
        for i in range(400):
            log.append(keyed([(f"k{(i * 31) % 37}".encode(), f"v{i}".encode())] * 3))
            if i % 50 == 0:
                log.append(keyed([(f"k{i % 37}".encode(), None)]))
            if marker_at is not None and i == 10:
                log.append(keyed([(b"t", b"in a transaction")], producer_id=7, producer_epoch=0,
                                 base_sequence=0, transactional=True))  # fmt: skip
            if i == marker_at:
                log.append(bytearray(build_control_batch(
                    ControlType.COMMIT, producer_id=7, producer_epoch=0, coordinator_epoch=0,
                    timestamp=NOW - 1000)))  # fmt: skip
        log.roll()
        before = len(forked)
        cleaner = LogCleaner(lm.cleaner_manager, CleanerConfig(), lambda fn: fn(), in_process=True)
        worker = InlineWorker(CleanerConfig().worker_settings())
        worker.cleaner.two_cores = two_cores
        assert cleaner.clean_one(worker)
        assert len(forked) - before == (forks if two_cores else 0)
        results.append([seg.read_bytes(0, seg.size) for seg in log.segments])
        lm.shutdown()
    assert results[0] == results[1]
    if marker_at is not None:  # the transaction's record and its marker both stayed
        assert any(b"in a transaction" in data for data in results[1])
        markers = [h for data in results[1] for h, _ in decode_all(data) if h.is_control]
        assert len(markers) == 1


def test_a_copy_process_that_fails_leaves_its_groups_to_the_worker(tmp_path, monkeypatch):
    """When the forked copy process dies, the worker writes its groups itself: the round
    still ends with the log an in-order cleaning gives."""
    from odradek.broker.storage.cleaner import Cleaner

    worker_pid = os.getpid()
    clean_segments = Cleaner.clean_segments

    def dies_in_a_child(self, *args):
        if os.getpid() != worker_pid:
            raise OSError("the disk went away")
        return clean_segments(self, *args)

    results = []
    for two_cores in (False, True):
        if two_cores:
            monkeypatch.setattr(Cleaner, "clean_segments", dies_in_a_child)
        lm, log = manager_with_log(tmp_path / str(two_cores), Clock(NOW), segment_bytes=4000)
        for i in range(400):
            log.append(keyed([(f"k{(i * 31) % 37}".encode(), f"v{i}".encode())] * 3))
        log.roll()
        cleaner = LogCleaner(lm.cleaner_manager, CleanerConfig(), lambda fn: fn(), in_process=True)
        worker = InlineWorker(CleanerConfig().worker_settings())
        worker.cleaner.two_cores = two_cores
        assert cleaner.clean_one(worker)
        results.append([seg.read_bytes(0, seg.size) for seg in log.segments])
        assert not list((tmp_path / str(two_cores)).rglob("*.cleaned"))
        lm.shutdown()
    assert results[0] == results[1]
