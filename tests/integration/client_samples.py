"""What the tests driving the Python clients (kafka-python, aiokafka) share: the sample records
they send, the check that a consumer read them back unchanged, and a kafka-python round trip."""

from __future__ import annotations

from typing import Any

BASE_TS = 1_700_000_000_000  # a fixed CreateTime, far from "now"


def sample_records(n: int, *, headers: bool = True, timestamps: bool = True) -> list[dict]:
    """Keyword arguments for a producer's send: keys, values and headers of varied shapes,
    null keys and null values included (never both: kafka-python refuses that)."""
    records = []
    for i in range(n):
        rec: dict = {
            "key": None if i % 7 == 3 and i % 5 != 4 else f"key-{i}".encode(),
            "value": None if i % 5 == 4 else (f"value-{i}-" * (i % 11 + 1)).encode(),
        }
        if headers and i % 2:
            rec["headers"] = [("h-index", str(i).encode()), ("h-empty", b"")]
        if timestamps:
            rec["timestamp_ms"] = BASE_TS + 10 * i
        records.append(rec)
    return records


def assert_read_back(records: list[dict], got: list[Any]) -> None:
    """`got` (consumer records from offset 0) are `records`, field by field, with CreateTime."""
    for i, (want, rec) in enumerate(zip(records, got, strict=True)):
        assert rec.offset == i
        assert rec.key == want["key"]
        assert rec.value == want["value"]
        assert rec.timestamp == want["timestamp_ms"]
        assert rec.timestamp_type == 0  # CreateTime
        assert list(rec.headers) == want.get("headers", [])


def kafka_python_round_trip(conf: dict[str, Any], topic: str, values: list[bytes]) -> list[bytes]:
    """Write `values` to `topic` with kafka-python's producer, then read back as many values
    from the start of partition 0 with its consumer, both with `conf` (bootstrap, security)."""
    from kafka import KafkaConsumer, KafkaProducer, TopicPartition

    producer = KafkaProducer(**conf)
    for value in values:
        producer.send(topic, value)
    producer.flush(30)
    producer.close()
    consumer = KafkaConsumer(**conf, enable_auto_commit=False, consumer_timeout_ms=10000)
    consumer.assign([TopicPartition(topic, 0)])
    consumer.seek_to_beginning()
    got = [m.value for _, m in zip(range(len(values)), consumer, strict=False)]
    consumer.close()
    return got
