"""kcat (librdkafka's command-line client) against a real broker process."""

from __future__ import annotations

import json

import pytest
from confluent_kafka import Producer
from conftest import run_checked

CODECS = ["none", "gzip", "snappy", "lz4", "zstd"]
BASE_TS = 1_700_000_000_000


def kcat_run(kcat: str, *args: str, stdin: str | None = None, timeout: float = 90.0) -> str:
    return run_checked([kcat, *args], input=stdin, timeout=timeout).stdout


def consume_json(kcat: str, bootstrap: str, topic: str, *extra: str) -> list[dict]:
    """Read a topic from the beginning (or ``-o`` in extra) to its end, one JSON object a record."""
    out = kcat_run(kcat, "-C", "-b", bootstrap, "-t", topic, "-e", "-q", "-J", *extra)
    return [json.loads(line) for line in out.splitlines() if line.strip()]


def produce_with_timestamps(bootstrap: str, topic: str, n: int) -> None:
    """kcat cannot set a record's timestamp, so confluent-kafka writes these records."""
    producer = Producer({"bootstrap.servers": bootstrap})
    for i in range(n):
        producer.produce(
            topic,
            key=f"k{i}".encode(),
            value=f"v{i}".encode(),
            timestamp=BASE_TS + 1000 * i,
            headers=[("origin", b"confluent")],
        )
    assert producer.flush(60) == 0


@pytest.mark.parametrize("codec", CODECS)
def test_produce_consume_every_codec(kcat: str, bootstrap: str, new_topic, codec: str) -> None:
    topic = new_topic()
    # "key:value" lines; -Z turns an empty key or value into null.
    lines = ["k0:v0", "k1:", ":v2", "k3:" + "x" * 5000, "k4:v4"]
    kcat_run(
        kcat,
        "-P", "-b", bootstrap, "-t", topic, "-K:", "-Z", "-z", codec,
        "-H", "h1=a", "-H", "h-null", "-H", "h-empty=",
        stdin="\n".join(lines) + "\n",
    )  # fmt: skip
    got = consume_json(kcat, bootstrap, topic, "-o", "beginning")
    assert [r["offset"] for r in got] == list(range(5))
    assert [r["key"] for r in got] == ["k0", "k1", None, "k3", "k4"]
    assert [r["payload"] for r in got] == ["v0", None, "v2", "x" * 5000, "v4"]
    for r in got:
        assert r["headers"] == ["h1", "a", "h-null", None, "h-empty", ""]
        assert r["tstype"] == "create" and r["ts"] > 0


def test_reads_timestamps_and_headers_from_another_client(
    kcat: str, bootstrap: str, new_topic
) -> None:
    topic = new_topic()
    produce_with_timestamps(bootstrap, topic, 5)
    got = consume_json(kcat, bootstrap, topic, "-o", "beginning")
    assert [(r["offset"], r["key"], r["payload"]) for r in got] == [
        (i, f"k{i}", f"v{i}") for i in range(5)
    ]
    assert [r["ts"] for r in got] == [BASE_TS + 1000 * i for i in range(5)]
    assert all(r["tstype"] == "create" and r["headers"] == ["origin", "confluent"] for r in got)


def test_query_offsets_by_timestamp(kcat: str, bootstrap: str, new_topic) -> None:
    topic = new_topic()
    produce_with_timestamps(bootstrap, topic, 10)

    def query(ts: int) -> int:
        out = kcat_run(kcat, "-Q", "-b", bootstrap, "-t", f"{topic}:0:{ts}", "-J")
        return json.loads(out)[topic]["0"]["offset"]

    assert query(BASE_TS + 3500) == 4
    assert query(BASE_TS + 7000) == 7
    assert query(BASE_TS - 5) == 0
    assert query(BASE_TS + 60_000) == -1


def test_consume_from_offsets(kcat: str, bootstrap: str, new_topic) -> None:
    topic = new_topic()
    kcat_run(kcat, "-P", "-b", bootstrap, "-t", topic, stdin="".join(f"m{i}\n" for i in range(10)))
    got = consume_json(kcat, bootstrap, topic, "-o", "5", "-c", "3")
    assert [(r["offset"], r["payload"]) for r in got] == [(5, "m5"), (6, "m6"), (7, "m7")]
    # A negative offset counts back from the end of the log.
    tail = consume_json(kcat, bootstrap, topic, "-o", "-2")
    assert [r["payload"] for r in tail] == ["m8", "m9"]


def test_metadata_listing(kcat: str, bootstrap: str, new_topic) -> None:
    topic = new_topic(partitions=3)
    meta = json.loads(kcat_run(kcat, "-L", "-b", bootstrap, "-t", topic, "-J"))
    assert len(meta["brokers"]) >= 1
    (entry,) = [t for t in meta["topics"] if t["topic"] == topic]
    assert "error" not in entry
    assert sorted(p["partition"] for p in entry["partitions"]) == [0, 1, 2]
    broker_ids = {b["id"] for b in meta["brokers"]}
    assert all(p["leader"] in broker_ids for p in entry["partitions"])


@pytest.mark.parametrize("fallback", ["0.9.0", "0.10.0"])
def test_legacy_protocol(kcat: str, bootstrap: str, new_topic, fallback: str) -> None:
    """librdkafka without ApiVersions speaks the old Produce/Fetch with message sets v0/v1."""
    topic = new_topic()
    legacy = ["-X", "api.version.request=false", "-X", f"broker.version.fallback={fallback}"]
    lines = [f"key{i}:value{i}" for i in range(20)]
    kcat_run(
        kcat, "-P", "-b", bootstrap, "-t", topic, "-K:", "-z", "gzip", *legacy,
        stdin="\n".join(lines) + "\n",
    )  # fmt: skip
    out = kcat_run(
        kcat, "-C", "-b", bootstrap, "-t", topic, "-e", "-q", "-o", "beginning",
        "-f", "%o|%k|%s\n", *legacy,
    )  # fmt: skip
    assert out.splitlines() == [f"{i}|key{i}|value{i}" for i in range(20)]
    # Read back with the current protocol too.
    got = consume_json(kcat, bootstrap, topic, "-o", "beginning")
    assert [(r["key"], r["payload"]) for r in got] == [(f"key{i}", f"value{i}") for i in range(20)]


def test_balanced_consumer_group(kcat: str, bootstrap: str, new_topic) -> None:
    topic = new_topic(partitions=2)
    kcat_run(
        kcat, "-P", "-b", bootstrap, "-t", topic, "-K:",
        stdin="".join(f"k{i}:m{i}\n" for i in range(30)),
    )  # fmt: skip
    group = ["-G", f"{topic}-group", "-b", bootstrap, "-e", "-q"]
    offsets = ["-X", "auto.offset.reset=earliest"]
    first = kcat_run(kcat, *group, *offsets, "-f", "%s\n", topic)
    assert sorted(first.split()) == sorted(f"m{i}" for i in range(30))
    # kcat commits on exit: the same group sees only what arrives afterwards.
    kcat_run(kcat, "-P", "-b", bootstrap, "-t", topic, "-K:", stdin="late:m-late\n")
    second = kcat_run(kcat, *group, *offsets, "-f", "%s\n", topic)
    assert second.split() == ["m-late"]
