"""Spark Structured Streaming against a three-broker Odradek cluster (real ZooKeeper ensemble)
while the leader of a partition it reads is killed with SIGKILL.

The query runs with failOnDataLoss=true, so any offset that goes backwards or any record the
consumer cannot find fails it; it must instead ride through the leader election and deliver
every record an acks=all producer had acknowledged, each exactly once.
"""

from __future__ import annotations

import threading
import time
from typing import Any

import pytest
from cluster import cluster_factory_fixture  # noqa: F401  (fixture: cluster_factory)
from confluent_kafka import Producer
from spark_support import kafka_options, spark_session

TIMEOUT = 180


@pytest.fixture(scope="module")
def spark(tmp_path_factory: pytest.TempPathFactory):
    yield from spark_session(tmp_path_factory.mktemp("spark"))


def test_streaming_query_rides_through_a_leader_kill(spark, cluster_factory, tmp_path) -> None:
    cluster = cluster_factory(3, {"min.insync.replicas": "2"})
    topic = "spark-failover"
    cluster.create_topic(topic, 3, 3)
    cluster.wait_until(
        lambda: (v := cluster.converged([topic])) and len(v["topics"].get(topic, {})) == 3,
        "the topic's leaders on every broker",
    )
    bootstrap = ",".join(b.bootstrap for b in cluster.brokers.values())

    stop = threading.Event()
    acked: list[tuple[int, int, bytes]] = []
    errors: list[str] = []

    def produce() -> None:
        producer = Producer(
            {"bootstrap.servers": bootstrap, "enable.idempotence": True, "acks": "all",
             "linger.ms": 5, "message.timeout.ms": 120000}
        )  # fmt: skip

        def delivered(err: Any, msg: Any) -> None:
            if err is not None:
                errors.append(str(err))
            else:
                acked.append((msg.partition(), msg.offset(), msg.value()))

        i = 0
        while not stop.is_set():
            producer.produce(topic, value=f"v{i}".encode(), on_delivery=delivered)
            producer.poll(0)
            i += 1
            if i % 50 == 0:
                time.sleep(0.05)
        assert producer.flush(TIMEOUT) == 0

    writer = threading.Thread(target=produce, daemon=True)
    writer.start()

    reader = spark.readStream.format("kafka")
    options = kafka_options(
        bootstrap, subscribe=topic, startingOffsets="earliest", failOnDataLoss="true",
        maxOffsetsPerTrigger=2000,
    )  # fmt: skip
    for key, value in options.items():
        reader = reader.option(key, value)
    query = (
        reader.load()
        .selectExpr("partition", "offset", "value")
        .writeStream.format("memory")
        .queryName("failover_sink")
        .option("checkpointLocation", str(tmp_path / "checkpoint"))
        .trigger(processingTime="500 milliseconds")
        .start()
    )
    try:
        wait_for(query, lambda: sink_count(spark) >= 500, "records before the kill")
        leader = cluster.converged([topic])["topics"][topic][0][0]
        cluster[leader].kill()
        cluster.wait_until(
            lambda: (v := cluster.converged([topic])) and v["topics"][topic][0][0] != leader,
            "a new leader for partition 0",
        )
        before = sink_count(spark)
        wait_for(query, lambda: sink_count(spark) >= before + 500, "records after the kill")
        stop.set()
        writer.join(TIMEOUT)
        assert not writer.is_alive() and not errors, errors
        wait_for(query, lambda: sink_count(spark) >= len(acked), "every acknowledged record")
        assert query.exception() is None
        rows = spark.sql("SELECT partition, offset, value FROM failover_sink").collect()
    finally:
        stop.set()
        query.stop()
    got = [(r["partition"], r["offset"], bytes(r["value"])) for r in rows]
    assert len(got) == len(set(got)), "the query delivered some records twice"
    assert set(acked) <= set(got), "acknowledged records missing from the query's output"
    for p in range(3):
        offsets = sorted(o for part, o, _ in got if part == p)
        assert offsets == list(range(len(offsets))), f"partition {p} has gaps"


def sink_count(spark: Any) -> int:
    return spark.sql("SELECT count(*) AS n FROM failover_sink").collect()[0]["n"]


def wait_for(query: Any, check: Any, what: str, timeout: float = TIMEOUT) -> None:
    deadline = time.monotonic() + timeout
    while True:
        if query.exception() is not None:
            pytest.fail(f"the streaming query failed while waiting for {what}: {query.exception()}")
        if check():
            return
        if time.monotonic() > deadline:
            pytest.fail(f"timed out waiting for {what}; last progress: {query.lastProgress}")
        time.sleep(0.5)
