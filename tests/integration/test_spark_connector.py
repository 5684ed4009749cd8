"""Spark's own Kafka connector (spark-sql-kafka-0-10, Apache's Java kafka-clients inside) against
Odradek: batch reads with every way of bounding them, read_committed, batch writes through the
idempotent producer, and a Structured Streaming aggregation restarted from its checkpoint.

One broker and one SparkSession serve the whole module (spark_support.py); each test uses its own
topics. Records are produced with confluent-kafka and compared field by field with what Spark
returns.
"""

from __future__ import annotations

import json
import threading
import time
from collections import Counter
from pathlib import Path
from typing import Any

import pytest
from confluent_kafka import Consumer, Producer, TopicPartition
from conftest import OdradekBroker
from odradek.broker.records.batch import iter_batches
from spark_support import kafka_options, spark_session

TIMEOUT = 120


@pytest.fixture(scope="module")
def spark(tmp_path_factory: pytest.TempPathFactory):
    yield from spark_session(tmp_path_factory.mktemp("spark"))


Record = tuple[int, int, bytes | None, bytes | None, int, tuple[tuple[str, bytes | None], ...]]


def produce(
    bootstrap: str, topic: str, records: list[dict[str, Any]], **config: Any
) -> list[Record]:
    """Produce `records` (partition, key, value, timestamp, headers) and return what the broker
    acknowledged as (partition, offset, key, value, timestamp ms, headers)."""
    producer = Producer({"bootstrap.servers": bootstrap, "linger.ms": 20, **config})
    acked: list[Record] = []
    errors: list[Any] = []

    def delivered(headers: tuple) -> Any:
        def report(err: Any, msg: Any) -> None:
            if err is not None:
                errors.append(err)
                return
            acked.append(
                (msg.partition(), msg.offset(), msg.key(), msg.value(), msg.timestamp()[1], headers)
            )

        return report

    for r in records:
        headers = tuple(r.get("headers") or ())
        producer.produce(
            topic,
            key=r.get("key"),
            value=r.get("value"),
            partition=r["partition"],
            timestamp=r.get("timestamp", 0),
            headers=r.get("headers"),
            on_delivery=delivered(headers),
        )
    assert producer.flush(TIMEOUT) == 0
    assert not errors, errors
    return sorted(acked)


# An hour ago, in whole seconds: recent enough that retention (7 days) keeps the records.
BASE_TS = (int(time.time()) - 3600) * 1000


def sample_records(n: int, partitions: int = 3, base_ts: int = BASE_TS) -> list[dict]:
    """Records with every shape a Kafka record can take: null keys and values (tombstones),
    empty values, headers with repeated keys and null values, distinct timestamps."""
    out = []
    for i in range(n):
        r: dict[str, Any] = {
            "partition": i % partitions,
            "key": None if i % 7 == 0 else f"key-{i}".encode(),
            "value": None if i % 11 == 0 else (b"" if i % 13 == 0 else f"value-{i}".encode() * 3),
            "timestamp": base_ts + i * 1000,
        }
        if i % 3 == 0:
            r["headers"] = [("trace", f"t{i}".encode()), ("trace", None), ("n", str(i).encode())]
        out.append(r)
    return out


def spark_rows(df: Any) -> list[Record]:
    """(partition, offset, key, value, timestamp ms, headers) of every row, sorted."""
    from pyspark.sql import functions as F

    cols = [
        "partition",
        "offset",
        "key",
        "value",
        F.unix_millis("timestamp").alias("ts"),
        "headers" if "headers" in df.columns else F.lit(None).alias("headers"),
    ]
    out = []
    for row in df.select(*cols).collect():
        headers = tuple((h["key"], _bytes(h["value"])) for h in (row["headers"] or []))
        out.append(
            (row["partition"], row["offset"], _bytes(row["key"]), _bytes(row["value"]), row["ts"],
             headers)
        )  # fmt: skip
    return sorted(out)


def _bytes(value: Any) -> bytes | None:
    return None if value is None else bytes(value)


def read_batch(spark: Any, bootstrap: str, **options: Any) -> Any:
    reader = spark.read.format("kafka")
    for key, value in kafka_options(bootstrap, **options).items():
        reader = reader.option(key, value)
    return reader.load()


@pytest.mark.parametrize("compression", ["none", "gzip", "snappy", "lz4", "zstd"])
def test_batch_read_returns_exactly_the_produced_records(
    spark, bootstrap: str, new_topic, compression: str
) -> None:
    topic = new_topic(partitions=3)
    acked = produce(bootstrap, topic, sample_records(300), **{"compression.type": compression})
    df = read_batch(spark, bootstrap, subscribe=topic, includeHeaders="true")
    assert spark_rows(df) == acked
    # The other columns: the topic name and CreateTime (0) as the timestamp type.
    meta = {(r["topic"], r["timestampType"]) for r in df.select("topic", "timestampType").collect()}
    assert meta == {(topic, 0)}


def test_log_append_time_topic_reports_broker_timestamps(spark, bootstrap: str, new_topic) -> None:
    topic = new_topic(partitions=1, config={"message.timestamp.type": "LogAppendTime"})
    before = int(time.time() * 1000)
    produce(bootstrap, topic, sample_records(20, partitions=1))
    after = int(time.time() * 1000)
    rows = read_batch(spark, bootstrap, subscribe=topic).selectExpr(
        "timestampType", "unix_millis(timestamp) AS ts"
    )
    got = rows.collect()
    assert len(got) == 20
    assert {r["timestampType"] for r in got} == {1}
    assert all(before - 1000 <= r["ts"] <= after + 1000 for r in got)


def test_offset_and_timestamp_bounds(spark, bootstrap: str, new_topic) -> None:
    topic = new_topic(partitions=3)
    base = BASE_TS
    acked = produce(bootstrap, topic, sample_records(90, base_ts=base))  # 30 per partition
    by_part = {p: [r for r in acked if r[0] == p] for p in range(3)}

    # JSON offsets, with -2 (earliest) and -1 (latest) for some partitions.
    starting = json.dumps({topic: {"0": 5, "1": -2, "2": 10}})
    ending = json.dumps({topic: {"0": 12, "1": 3, "2": -1}})
    df = read_batch(
        spark, bootstrap, subscribe=topic, startingOffsets=starting, endingOffsets=ending,
        includeHeaders="true",
    )  # fmt: skip
    expected = by_part[0][5:12] + by_part[1][0:3] + by_part[2][10:]
    assert spark_rows(df) == sorted(expected)

    # Timestamps: the first offset whose timestamp is at or after the bound (record i has
    # timestamp base + i s, and lands in partition i % 3).
    start_ts, end_ts = base + 30_000, base + 60_000
    expected = [r for r in acked if start_ts <= r[4] < end_ts]
    assert len(expected) == 30
    df = read_batch(
        spark, bootstrap, subscribe=topic, startingTimestamp=start_ts, endingTimestamp=end_ts,
        includeHeaders="true",
    )  # fmt: skip
    assert spark_rows(df) == expected
    by_ts = json.dumps({topic: {str(p): start_ts for p in range(3)}})
    df = read_batch(
        spark, bootstrap, subscribe=topic, startingOffsetsByTimestamp=by_ts,
        endingOffsetsByTimestamp=json.dumps({topic: {str(p): end_ts for p in range(3)}}),
        includeHeaders="true",
    )  # fmt: skip
    assert spark_rows(df) == expected

    # assign: two of the three partitions, all of their records.
    df = read_batch(spark, bootstrap, assign=json.dumps({topic: [0, 2]}), includeHeaders="true")
    assert spark_rows(df) == sorted(by_part[0] + by_part[2])

    # minPartitions splits the offset ranges into more Spark partitions (a hint: about that
    # many), with the same records.
    df = read_batch(spark, bootstrap, subscribe=topic, minPartitions=6, includeHeaders="true")
    assert df.rdd.getNumPartitions() > 3
    assert spark_rows(df) == acked


def test_subscribe_pattern_reads_every_matching_topic(spark, bootstrap: str, new_topic) -> None:
    first = new_topic(partitions=2, suffix="-a")
    second = new_topic(partitions=1, suffix="-b")
    other = new_topic(partitions=1, suffix="-other")
    produce(bootstrap, first, sample_records(10, partitions=2))
    produce(bootstrap, second, sample_records(5, partitions=1))
    produce(bootstrap, other, sample_records(3, partitions=1))
    prefix = first[: -len("-a")]
    df = read_batch(spark, bootstrap, subscribePattern=f"{prefix}-[ab]")
    counts = Counter(r["topic"] for r in df.select("topic").collect())
    assert counts == {first: 10, second: 5}


def test_read_committed_reads_plain_topics_to_the_end(spark, bootstrap: str, new_topic) -> None:
    """Without transactions the last stable offset is the high watermark: read_committed sees
    every record, from a plain producer and from an idempotent one."""
    topic = new_topic(partitions=3)
    acked = produce(bootstrap, topic, sample_records(60))
    acked += produce(bootstrap, topic, sample_records(60), **{"enable.idempotence": True})
    df = read_batch(
        spark, bootstrap, subscribe=topic, includeHeaders="true",
        **{"kafka.isolation.level": "read_committed"},
    )  # fmt: skip
    assert spark_rows(df) == sorted(acked)
    # "latest" as the end resolves, under read_committed, to the same end offsets.
    df = read_batch(
        spark, bootstrap, subscribe=topic, endingOffsets="latest",
        **{"kafka.isolation.level": "read_committed"},
    )  # fmt: skip
    ends = {r["partition"]: r["end"] for r in df.groupBy("partition").agg({"offset": "max"})
            .withColumnRenamed("max(offset)", "end").collect()}  # fmt: skip
    assert ends == {p: 39 for p in range(3)}


def test_batch_write_through_the_idempotent_producer(
    spark, broker, bootstrap: str, new_topic
) -> None:
    from pyspark.sql import functions as F

    topic = new_topic(partitions=3)
    n = 3000
    df = (
        spark.range(n)
        .select(
            F.col("id").cast("int").alias("i"),
        )
        .select(
            F.concat(F.lit("k"), F.col("i")).alias("key"),
            F.concat(F.lit("v"), F.col("i")).alias("value"),
            (F.col("i") % 3).alias("partition"),
            F.array(
                F.struct(
                    F.lit("i").alias("key"), F.col("i").cast("string").cast("binary").alias("value")
                )
            ).alias("headers"),
        )
    )
    writer = df.write.format("kafka")
    options = kafka_options(
        bootstrap, topic=topic, **{"kafka.enable.idempotence": "true", "kafka.acks": "all"}
    )
    for key, value in options.items():
        writer = writer.option(key, value)
    writer.save()

    consumer = Consumer({"bootstrap.servers": bootstrap, "group.id": f"check-{topic}"})
    try:
        consumer.assign([TopicPartition(topic, p, 0) for p in range(3)])
        got: dict[int, list[tuple[bytes, bytes, list]]] = {0: [], 1: [], 2: []}
        deadline = time.monotonic() + TIMEOUT
        while sum(map(len, got.values())) < n and time.monotonic() < deadline:
            msg = consumer.poll(1.0)
            if msg is None or msg.error():
                continue
            got[msg.partition()].append((msg.key(), msg.value(), msg.headers()))
    finally:
        consumer.close()
    for p, rows in got.items():
        expected = sorted(
            (f"k{i}".encode(), f"v{i}".encode(), [("i", str(i).encode())]) for i in range(p, n, 3)
        )
        assert sorted(rows) == expected
    # The sink's producer is idempotent: every batch in the log carries its producer id.
    if isinstance(broker, OdradekBroker):
        for p in range(3):
            headers = [
                h
                for _, h in iter_batches(
                    (broker.data_dir / f"{topic}-{p}" / "00000000000000000000.log").read_bytes()
                )
            ]
            assert headers and all(h.producer_id >= 0 and h.base_sequence >= 0 for h in headers)


def test_streaming_aggregate_survives_restart_from_checkpoint(
    spark, bootstrap: str, new_topic, tmp_path: Path
) -> None:
    """A query counts records per key while a producer writes, writing the running counts to
    another topic; stopped halfway and restarted from its checkpoint, its final counts equal
    what was produced: nothing lost, nothing counted twice."""
    source = new_topic(partitions=3, suffix="-in")
    sink = new_topic(partitions=2, suffix="-out")
    keys = [f"key-{k}" for k in range(5)]
    total = 3000
    checkpoint = tmp_path / "checkpoint"
    restarted = threading.Event()  # the producer keeps writing across the stop and restart
    produced: Counter[str] = Counter()

    def producer() -> None:
        p = Producer({"bootstrap.servers": bootstrap, "linger.ms": 5, "acks": "all"})
        for i in range(total):
            if i == 2 * total // 3:
                restarted.wait(TIMEOUT)
            key = keys[i % len(keys)]
            p.produce(source, key=key, value=str(i))
            produced[key] += 1
            if i % 100 == 99:
                p.flush(TIMEOUT)
                time.sleep(0.05)
        assert p.flush(TIMEOUT) == 0

    def start_query() -> Any:
        reader = spark.readStream.format("kafka")
        options = kafka_options(
            bootstrap, subscribe=source, startingOffsets="earliest", maxOffsetsPerTrigger=400,
            failOnDataLoss="true",
        )  # fmt: skip
        for key, value in options.items():
            reader = reader.option(key, value)
        counts = (
            reader.load()
            .selectExpr("CAST(key AS STRING) AS k")
            .groupBy("k")
            .count()
            .selectExpr("k AS key", "CAST(count AS STRING) AS value")
        )
        writer = counts.writeStream.format("kafka").outputMode("update")
        for key, value in kafka_options(bootstrap, topic=sink).items():
            writer = writer.option(key, value)
        return (
            writer.option("checkpointLocation", str(checkpoint))
            .trigger(processingTime="500 milliseconds")
            .start()
        )

    writer_thread = threading.Thread(target=producer, daemon=True)
    writer_thread.start()
    query = start_query()
    try:
        wait_for(lambda: processed(query) >= 800, query, "the first batches")
        # maxOffsetsPerTrigger bounds every micro-batch.
        assert all(p["numInputRows"] <= 400 for p in query.recentProgress)
    finally:
        query.stop()
    assert processed(query) < total

    query = start_query()
    try:
        restarted.set()
        writer_thread.join(TIMEOUT)
        assert not writer_thread.is_alive()
        expected = dict(produced)
        assert sum(expected.values()) == total
        wait_for(lambda: latest_counts(bootstrap, sink) == expected, query, "the final counts")
    finally:
        restarted.set()
        query.stop()


def processed(query: Any) -> int:
    return sum(p["numInputRows"] for p in query.recentProgress)


def wait_for(check: Any, query: Any, what: str, timeout: float = TIMEOUT) -> None:
    deadline = time.monotonic() + timeout
    while not check():
        if query.exception() is not None:
            pytest.fail(f"the streaming query failed: {query.exception()}")
        if time.monotonic() > deadline:
            pytest.fail(f"timed out waiting for {what}; last progress: {query.lastProgress}")
        time.sleep(0.5)


def latest_counts(bootstrap: str, topic: str) -> dict[str, int]:
    """The last value written for each key of `topic` (the query's latest count per key)."""
    consumer = Consumer(
        {
            "bootstrap.servers": bootstrap,
            "group.id": f"check-{time.time()}",
            "enable.auto.commit": False,
        }
    )
    try:
        parts = consumer.list_topics(topic, timeout=30).topics[topic].partitions
        latest: dict[str, int] = {}
        for p in parts:
            _, high = consumer.get_watermark_offsets(TopicPartition(topic, p), timeout=30)
            if high == 0:
                continue
            consumer.assign([TopicPartition(topic, p, 0)])
            offset = -1
            deadline = time.monotonic() + 30
            while offset < high - 1 and time.monotonic() < deadline:
                msg = consumer.poll(1.0)
                if msg is None or msg.error():
                    continue
                offset = msg.offset()
                latest[msg.key().decode()] = int(msg.value())
        return latest
    finally:
        consumer.close()
