"""kafka-python against a real broker process, on current and on 0.9/0.10 protocol versions.

Forcing ``api_version`` makes kafka-python speak the old protocol: (0, 10) produces and fetches
message format v1 (timestamps, no headers), (0, 9) message format v0 (no timestamps). The broker has
to convert between those and the v2 batches it stores. At (0, 9) kafka-python is used without a
consumer group (assign + seek), as the brief for these tests demands.
"""

from __future__ import annotations

import time
from collections.abc import Iterator
from contextlib import contextmanager

import pytest
from client_samples import BASE_TS, assert_read_back, sample_records
from kafka import KafkaConsumer, KafkaProducer, TopicPartition
from kafka.consumer.fetcher import ConsumerRecord

CODECS = [None, "gzip", "snappy", "lz4", "zstd"]
OLD_CODECS = [None, "gzip", "snappy", "lz4"]  # zstd needs produce v7 (Kafka 2.1)
OLD_APIS = [(0, 10), (0, 9)]


def api_id(api: tuple[int, ...]) -> str:
    return "api" + ".".join(map(str, api))


def produce_all(bootstrap: str, topic: str, records: list[dict], **conf: object) -> list:
    producer = KafkaProducer(bootstrap_servers=bootstrap, linger_ms=20, **conf)
    try:
        futures = [producer.send(topic, **rec) for rec in records]
        producer.flush(timeout=60)
        return [f.get(timeout=60) for f in futures]
    finally:
        producer.close(timeout=30)


@contextmanager
def assigned_consumer(
    bootstrap: str, topic: str, partitions: int = 1, offset: int = 0, **conf: object
) -> Iterator[KafkaConsumer]:
    c = KafkaConsumer(
        bootstrap_servers=bootstrap,
        group_id=None,
        enable_auto_commit=False,
        auto_offset_reset="earliest",
        **conf,
    )
    try:
        tps = [TopicPartition(topic, p) for p in range(partitions)]
        c.assign(tps)
        for tp in tps:
            c.seek(tp, offset)
        yield c
    finally:
        c.close()


def poll_n(c: KafkaConsumer, n: int, timeout: float = 60.0) -> list[ConsumerRecord]:
    out: list[ConsumerRecord] = []
    deadline = time.monotonic() + timeout
    while len(out) < n and time.monotonic() < deadline:
        for batch in c.poll(timeout_ms=1000, max_records=n - len(out)).values():
            out.extend(batch)
    assert len(out) == n, f"consumed {len(out)} of {n} records within {timeout}s"
    return out


@pytest.mark.parametrize("codec", CODECS, ids=lambda c: c or "none")
def test_roundtrip_every_codec(bootstrap: str, new_topic, codec: str | None) -> None:
    topic = new_topic()
    records = sample_records(60)
    meta = produce_all(bootstrap, topic, records, compression_type=codec)
    assert [m.offset for m in meta] == list(range(60))

    with assigned_consumer(bootstrap, topic) as c:
        got = poll_n(c, 60)
    assert_read_back(records, got)


@pytest.mark.parametrize("codec", OLD_CODECS, ids=lambda c: c or "none")
@pytest.mark.parametrize("api", OLD_APIS, ids=api_id)
def test_old_protocol_roundtrip(
    bootstrap: str, new_topic, api: tuple[int, int], codec: str | None
) -> None:
    topic = new_topic()
    v1 = api >= (0, 10)
    records = sample_records(40, headers=False, timestamps=v1)
    meta = produce_all(bootstrap, topic, records, api_version=api, compression_type=codec)
    assert [m.offset for m in meta] == list(range(40))

    with assigned_consumer(bootstrap, topic, api_version=api) as c:
        got = poll_n(c, 40)
    assert [r.offset for r in got] == list(range(40))
    assert [r.key for r in got] == [w["key"] for w in records]
    assert [r.value for r in got] == [w["value"] for w in records]
    if v1:
        assert [r.timestamp for r in got] == [w["timestamp_ms"] for w in records]
        assert all(r.timestamp_type == 0 for r in got)


@pytest.mark.parametrize("api", OLD_APIS, ids=api_id)
def test_old_producer_read_by_current_consumer(
    bootstrap: str, new_topic, api: tuple[int, int]
) -> None:
    """Message sets v0/v1 in, record batches v2 out."""
    topic = new_topic()
    v1 = api >= (0, 10)
    records = sample_records(30, headers=False, timestamps=v1)
    produce_all(bootstrap, topic, records, api_version=api, compression_type="gzip")

    with assigned_consumer(bootstrap, topic) as c:
        got = poll_n(c, 30)
    assert [(r.offset, r.key, r.value) for r in got] == [
        (i, w["key"], w["value"]) for i, w in enumerate(records)
    ]
    assert all(list(r.headers) == [] for r in got)
    if v1:
        assert [r.timestamp for r in got] == [w["timestamp_ms"] for w in records]
    else:
        assert all(r.timestamp == -1 for r in got)  # v0 carries no timestamp


@pytest.mark.parametrize("codec", [None, "snappy"], ids=lambda c: c or "none")
@pytest.mark.parametrize("api", OLD_APIS, ids=api_id)
def test_current_producer_read_by_old_consumer(
    bootstrap: str, new_topic, api: tuple[int, int], codec: str | None
) -> None:
    """Record batches v2 in, message sets v1/v0 out (headers dropped, v0 without timestamps)."""
    topic = new_topic()
    records = sample_records(30)
    produce_all(bootstrap, topic, records, compression_type=codec)

    with assigned_consumer(bootstrap, topic, api_version=api) as c:
        got = poll_n(c, 30)
    assert [(r.offset, r.key, r.value) for r in got] == [
        (i, w["key"], w["value"]) for i, w in enumerate(records)
    ]
    if api >= (0, 10):
        assert [r.timestamp for r in got] == [w["timestamp_ms"] for w in records]


def test_offsets_for_times_and_ends(bootstrap: str, new_topic) -> None:
    topic = new_topic()
    produce_all(
        bootstrap,
        topic,
        [{"value": f"v{i}".encode(), "timestamp_ms": BASE_TS + 1000 * i} for i in range(10)],
    )
    tp = TopicPartition(topic, 0)
    with assigned_consumer(bootstrap, topic) as c:
        assert c.beginning_offsets([tp], timeout_ms=30_000) == {tp: 0}
        assert c.end_offsets([tp], timeout_ms=30_000) == {tp: 10}
        found = c.offsets_for_times({tp: BASE_TS + 3500}, timeout_ms=30_000)[tp]
        assert (found.offset, found.timestamp) == (4, BASE_TS + 4000)
        exact = c.offsets_for_times({tp: BASE_TS + 7000}, timeout_ms=30_000)[tp]
        assert (exact.offset, exact.timestamp) == (7, BASE_TS + 7000)
        assert c.offsets_for_times({tp: BASE_TS + 60_000}, timeout_ms=30_000)[tp] is None

        c.seek(tp, found.offset)
        assert [r.value for r in poll_n(c, 2)] == [b"v4", b"v5"]


def test_seek_to_offset(bootstrap: str, new_topic) -> None:
    topic = new_topic()
    produce_all(bootstrap, topic, [{"value": f"v{i}".encode()} for i in range(20)])
    tp = TopicPartition(topic, 0)
    with assigned_consumer(bootstrap, topic, offset=12) as c:
        assert [r.offset for r in poll_n(c, 3)] == [12, 13, 14]
        c.seek(tp, 2)
        assert [r.value for r in poll_n(c, 3)] == [b"v2", b"v3", b"v4"]
        assert c.position(tp) == 5
        c.seek_to_end(tp)
        assert c.position(tp) == 20


def test_consumer_group_commit(bootstrap: str, new_topic) -> None:
    topic = new_topic(partitions=2)
    produce_all(bootstrap, topic, [{"key": f"k{i}".encode(), "value": b"x"} for i in range(30)])
    group = f"{topic}-group"
    c = KafkaConsumer(
        topic,
        bootstrap_servers=bootstrap,
        group_id=group,
        enable_auto_commit=False,
        auto_offset_reset="earliest",
    )
    try:
        assert len(poll_n(c, 30)) == 30
        c.commit()
        tps = [TopicPartition(topic, p) for p in range(2)]
        ends = c.end_offsets(tps, timeout_ms=30_000)
        assert {tp: c.committed(tp) for tp in tps} == ends
    finally:
        c.close()
