"""confluent-kafka (librdkafka) against a real broker process: produce, consume, offsets."""

from __future__ import annotations

import time

import pytest
from confluent_kafka import (
    OFFSET_BEGINNING,
    TIMESTAMP_CREATE_TIME,
    Consumer,
    KafkaError,
    Message,
    Producer,
    TopicPartition,
)

CODECS = ["none", "gzip", "snappy", "lz4", "zstd"]
BASE_TS = 1_700_000_000_000  # a fixed CreateTime, far from "now", so it cannot be confused


def produce_all(bootstrap: str, topic: str, records: list[dict], **conf: object) -> list[Message]:
    """Produce ``records`` (kwargs of Producer.produce) and return the delivery reports in order."""
    producer = Producer({"bootstrap.servers": bootstrap, "linger.ms": 50, **conf})
    reports: list[Message] = []

    def on_delivery(err: KafkaError | None, msg: Message) -> None:
        assert err is None, f"delivery failed: {err}"
        reports.append(msg)

    for rec in records:
        producer.produce(topic, on_delivery=on_delivery, **rec)
    assert producer.flush(60) == 0, "records still queued after 60 s"
    assert len(reports) == len(records)
    return reports


def consumer(bootstrap: str, **conf: object) -> Consumer:
    return Consumer(
        {
            "bootstrap.servers": bootstrap,
            "group.id": f"odradek-tests-{time.monotonic_ns()}",
            "enable.auto.commit": False,
            "auto.offset.reset": "earliest",
            **conf,
        }
    )


def consume_n(c: Consumer, n: int, timeout: float = 60.0) -> list[Message]:
    out: list[Message] = []
    deadline = time.monotonic() + timeout
    while len(out) < n and time.monotonic() < deadline:
        for msg in c.consume(num_messages=n - len(out), timeout=1.0):
            assert msg.error() is None, msg.error()
            out.append(msg)
    assert len(out) == n, f"consumed {len(out)} of {n} records within {timeout}s"
    return out


def sample_records(n: int) -> list[dict]:
    """Keys, a null key, null values, headers (one with a null value) and explicit timestamps."""
    records = []
    for i in range(n):
        records.append(
            {
                "key": None if i % 7 == 3 else f"key-{i}".encode(),
                "value": None if i % 5 == 4 else (f"value-{i}-" * (i % 13 + 1)).encode(),
                "headers": [("h-index", str(i).encode()), ("h-null", None)] if i % 2 else None,
                "timestamp": BASE_TS + i * 10,
            }
        )
    return records


@pytest.mark.parametrize("codec", CODECS)
def test_roundtrip_every_codec(bootstrap: str, new_topic, codec: str) -> None:
    topic = new_topic()
    records = sample_records(60)
    reports = produce_all(bootstrap, topic, records, **{"compression.type": codec})
    assert [r.offset() for r in reports] == list(range(len(records)))

    c = consumer(bootstrap)
    try:
        c.assign([TopicPartition(topic, 0, OFFSET_BEGINNING)])
        got = consume_n(c, len(records))
    finally:
        c.close()
    for i, (want, msg) in enumerate(zip(records, got, strict=True)):
        assert msg.offset() == i
        assert msg.key() == want["key"]
        assert msg.value() == want["value"]
        assert msg.timestamp() == (TIMESTAMP_CREATE_TIME, want["timestamp"])
        assert (msg.headers() or None) == want["headers"]


def test_large_batches_and_many_partitions(bootstrap: str, new_topic) -> None:
    topic = new_topic(partitions=4)
    records = [
        {"key": f"k{i % 50}".encode(), "value": bytes([i % 256]) * 2000} for i in range(2000)
    ]
    reports = produce_all(bootstrap, topic, records, **{"compression.type": "lz4"})
    per_partition: dict[int, list[int]] = {}
    for r in reports:
        per_partition.setdefault(r.partition(), []).append(r.offset())
    for offsets in per_partition.values():
        assert sorted(offsets) == list(range(len(offsets)))

    c = consumer(bootstrap)
    try:
        c.assign([TopicPartition(topic, p, OFFSET_BEGINNING) for p in range(4)])
        got = consume_n(c, len(records))
    finally:
        c.close()
    assert sorted((m.partition(), m.offset()) for m in got) == sorted(
        (r.partition(), r.offset()) for r in reports
    )
    # The default partitioner hashes keys: one key always lands in one partition.
    key_partitions: dict[bytes, set[int]] = {}
    for m in got:
        key_partitions.setdefault(m.key(), set()).add(m.partition())
    assert all(len(parts) == 1 for parts in key_partitions.values())


def test_watermarks_and_offsets_for_times(bootstrap: str, new_topic) -> None:
    topic = new_topic()
    records = [{"value": f"v{i}".encode(), "timestamp": BASE_TS + 1000 * i} for i in range(10)]
    produce_all(bootstrap, topic, records)

    c = consumer(bootstrap)
    try:
        assert c.get_watermark_offsets(TopicPartition(topic, 0), timeout=30) == (0, 10)
        # First offset whose timestamp is >= the one asked for.
        found = c.offsets_for_times([TopicPartition(topic, 0, BASE_TS + 3500)], timeout=30)
        assert found[0].error is None and found[0].offset == 4
        exact = c.offsets_for_times([TopicPartition(topic, 0, BASE_TS + 7000)], timeout=30)
        assert exact[0].offset == 7
        before = c.offsets_for_times([TopicPartition(topic, 0, BASE_TS - 1)], timeout=30)
        assert before[0].offset == 0
        # No record that late: the broker answers offset -1.
        after = c.offsets_for_times([TopicPartition(topic, 0, BASE_TS + 60_000)], timeout=30)
        assert after[0].offset == -1
    finally:
        c.close()


def test_seek_to_offset(bootstrap: str, new_topic) -> None:
    topic = new_topic()
    produce_all(bootstrap, topic, [{"value": f"v{i}".encode()} for i in range(20)])

    c = consumer(bootstrap)
    try:
        c.assign([TopicPartition(topic, 0, 15)])
        first = consume_n(c, 5)
        assert [m.offset() for m in first] == [15, 16, 17, 18, 19]
        assert first[0].value() == b"v15"
        c.seek(TopicPartition(topic, 0, 3))
        again = consume_n(c, 4)
        assert [m.offset() for m in again] == [3, 4, 5, 6]
        assert [m.value() for m in again] == [b"v3", b"v4", b"v5", b"v6"]
    finally:
        c.close()


def test_consumer_group_commit_and_resume(bootstrap: str, new_topic) -> None:
    topic = new_topic(partitions=2)
    produce_all(
        bootstrap, topic, [{"key": f"k{i}".encode(), "value": f"v{i}".encode()} for i in range(40)]
    )
    group = f"{topic}-group"

    c = consumer(bootstrap, **{"group.id": group})
    try:
        c.subscribe([topic])
        got = consume_n(c, 40)
        assert {m.value() for m in got} == {f"v{i}".encode() for i in range(40)}
        c.commit(asynchronous=False)
        committed = c.committed([TopicPartition(topic, 0), TopicPartition(topic, 1)], timeout=30)
        ends = [c.get_watermark_offsets(TopicPartition(topic, p), timeout=30)[1] for p in (0, 1)]
        assert [tp.offset for tp in committed] == ends
    finally:
        c.close()

    produce_all(bootstrap, topic, [{"key": b"later", "value": b"after-commit"}])
    c2 = consumer(bootstrap, **{"group.id": group})
    try:
        c2.subscribe([topic])
        (msg,) = consume_n(c2, 1)
        assert msg.value() == b"after-commit"
    finally:
        c2.close()


def test_idempotent_producer(bootstrap: str, new_topic) -> None:
    topic = new_topic()
    records = [{"value": f"v{i}".encode()} for i in range(500)]
    reports = produce_all(
        bootstrap, topic, records, **{"enable.idempotence": True, "compression.type": "zstd"}
    )
    assert [r.offset() for r in reports] == list(range(500))
    c = consumer(bootstrap)
    try:
        c.assign([TopicPartition(topic, 0, OFFSET_BEGINNING)])
        assert [m.value() for m in consume_n(c, 500)] == [r["value"] for r in records]
    finally:
        c.close()
