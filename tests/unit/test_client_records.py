"""Producer partitioning and option parsing, and the consumer's decoding of fetched log bytes."""

from __future__ import annotations

import warnings

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from odradek.broker.client.cluster import TopicPartition
from odradek.broker.client.consumer import decode_fetched
from odradek.broker.client.producer import (
    default_partition,
    murmur2,
    parse_acks,
    parse_compression,
)
from odradek.broker.records.compression import Codec
from odradek.broker.records.legacy import build_message_set
from odradek.broker.records.record import ControlType, Record, build_batch, build_control_batch

with warnings.catch_warnings():  # kafka-python loads its schemas with deprecated calls
    warnings.simplefilter("ignore", DeprecationWarning)
    from kafka.partitioner.default import murmur2 as kafka_python_murmur2

TP = TopicPartition("t", 0)


def test_murmur2_known_values() -> None:
    # Values Kafka's own test suite pins for Utils.murmur2.
    assert murmur2(b"21") == -973932308
    assert murmur2(b"foobar") == -790332482
    assert murmur2(b"a-little-bit-long-string") == -985981536
    assert murmur2(b"a-little-bit-longer-string") == -1486304829
    assert murmur2(b"lkjh234lh9fiuh90y23oiuhsafujhadof229phr9h19h89h8") == -58897971
    assert murmur2(b"abc") == 479470107


@settings(max_examples=300, deadline=None, derandomize=True, database=None)
@given(st.binary(max_size=64))
def test_murmur2_matches_kafka_python(key: bytes) -> None:
    assert murmur2(key) & 0xFFFFFFFF == kafka_python_murmur2(key)


def test_default_partition_is_stable_and_in_range() -> None:
    for n in (1, 3, 7, 100):
        for i in range(50):
            key = f"key-{i}".encode()
            p = default_partition(key, n)
            assert 0 <= p < n
            assert p == (kafka_python_murmur2(key) & 0x7FFFFFFF) % n


def test_parse_acks_and_compression() -> None:
    assert parse_acks("all") == -1
    assert parse_acks("-1") == -1
    assert parse_acks(1) == 1
    assert parse_acks("0") == 0
    with pytest.raises(ValueError):
        parse_acks(2)
    assert parse_compression("zstd") == Codec.ZSTD
    assert parse_compression("NONE") == Codec.NONE
    assert parse_compression(None) == Codec.NONE
    with pytest.raises(ValueError, match="unknown compression"):
        parse_compression("brotli")


def records(n: int, base: int = 0, ts: int = 1000) -> list[Record]:
    return [
        Record(i, ts + i, f"k{base + i}".encode(), f"v{base + i}".encode(), [("h", b"x")])
        for i in range(n)
    ]


@pytest.mark.parametrize("codec", list(Codec))
def test_decode_fetched_batches(codec: Codec) -> None:
    data = build_batch(records(3), base_offset=10, compression=codec) + build_batch(
        records(2, 3), base_offset=13, compression=codec
    )
    out, nxt = decode_fetched(TP, data, 10)
    assert [r.offset for r in out] == [10, 11, 12, 13, 14]
    assert [r.value for r in out] == [b"v0", b"v1", b"v2", b"v3", b"v4"]
    assert out[0].key == b"k0" and out[0].headers == [("h", b"x")]
    assert out[0].timestamp == 1000 and out[0].timestamp_type == 0
    assert nxt == 15


def test_decode_fetched_skips_records_before_the_fetch_offset() -> None:
    data = build_batch(records(5), base_offset=100, compression=Codec.LZ4)
    out, nxt = decode_fetched(TP, data, 103)
    assert [r.offset for r in out] == [103, 104]
    assert nxt == 105


def test_decode_fetched_ignores_a_cut_off_last_batch() -> None:
    first = build_batch(records(2), base_offset=0)
    second = build_batch(records(2, 2), base_offset=2)
    out, nxt = decode_fetched(TP, first + second[:-5], 0)
    assert [r.offset for r in out] == [0, 1]
    assert nxt == 2
    out, nxt = decode_fetched(TP, second[:30], 2)
    assert out == [] and nxt == 2


def test_decode_fetched_log_append_time() -> None:
    data = build_batch(records(2), base_offset=0, log_append_time=True)
    out, _ = decode_fetched(TP, data, 0)
    assert all(r.timestamp_type == 1 for r in out)


def marker(control: ControlType, producer_id: int, *, base_offset: int) -> bytes:
    """A transaction marker of producer epoch 0 from coordinator epoch 0."""
    return build_control_batch(
        control,
        producer_id=producer_id,
        producer_epoch=0,
        coordinator_epoch=0,
        timestamp=1,
        base_offset=base_offset,
    )


def test_decode_fetched_skips_control_batches_and_aborted_transactions() -> None:
    committed = build_batch(
        records(2), base_offset=0, producer_id=5, producer_epoch=0, transactional=True
    )
    commit = marker(ControlType.COMMIT, 5, base_offset=2)
    aborted = build_batch(
        records(2, 10), base_offset=3, producer_id=6, producer_epoch=0, transactional=True
    )
    abort = marker(ControlType.ABORT, 6, base_offset=5)
    plain = build_batch(records(1, 20), base_offset=6)
    data = committed + commit + aborted + abort + plain
    out, nxt = decode_fetched(TP, data, 0)  # read_uncommitted: only markers are hidden
    assert [r.offset for r in out] == [0, 1, 3, 4, 6]
    assert nxt == 7
    out, nxt = decode_fetched(TP, data, 0, [{"producer_id": 6, "first_offset": 3}])
    assert [r.offset for r in out] == [0, 1, 6]
    assert nxt == 7


def test_decode_fetched_legacy_message_sets() -> None:
    msgs = [Record(7 + i, 500 + i, None, f"m{i}".encode()) for i in range(3)]
    for magic in (0, 1):
        for codec in (Codec.NONE, Codec.GZIP):
            data = build_message_set(msgs, magic=magic, compression=codec)
            out, nxt = decode_fetched(TP, data, 8)
            assert [(r.offset, r.value) for r in out] == [(8, b"m1"), (9, b"m2")]
            assert nxt == 10
