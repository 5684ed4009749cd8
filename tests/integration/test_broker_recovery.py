"""Crashes, torn segments, retention and restarts of a real broker process.

The check is always the same (DESIGN.md "Testing"): no acknowledged record is lost, offsets stay
contiguous, and new records continue right after the last one in the log. Each test owns its
broker (broker_factory), since it kills it or edits its files.
"""

from __future__ import annotations

import struct
import threading
import time
import uuid
from pathlib import Path

from confluent_kafka import (
    OFFSET_BEGINNING,
    Consumer,
    KafkaError,
    Message,
    Producer,
    TopicPartition,
)
from confluent_kafka.admin import AdminClient, ConfigResource, NewTopic, ResourceType
from polling import wait_until
from topic_ready import wait_for_topic

TIMEOUT = 60.0


# --- helpers ------------------------------------------------------------------------------------


def unique(prefix: str) -> str:
    return f"{prefix}-{uuid.uuid4().hex[:8]}"


def create_topic(
    bootstrap: str, prefix: str, partitions: int = 1, config: dict[str, str] | None = None
) -> str:
    name = unique(prefix)
    admin = AdminClient({"bootstrap.servers": bootstrap})
    new = NewTopic(name, partitions, 1, config=config or {})
    admin.create_topics([new], operation_timeout=30)[name].result(TIMEOUT)
    wait_for_topic(AdminClient({"bootstrap.servers": bootstrap}), name, partitions)
    return name


def produce(
    bootstrap: str,
    topic: str,
    values: list[bytes],
    *,
    partition: int = 0,
    timestamp: int | None = None,
    per_flush: int | None = None,
) -> list[int]:
    """Produce values in order (flushing every `per_flush`, so each round is its own batch)."""
    producer = Producer({"bootstrap.servers": bootstrap, "linger.ms": 5})
    offsets: dict[int, int] = {}

    def report(i: int):
        def on_delivery(err: KafkaError | None, msg: Message) -> None:
            assert err is None, f"delivery failed: {err}"
            offsets[i] = msg.offset()

        return on_delivery

    for i, value in enumerate(values):
        kwargs = {"timestamp": timestamp} if timestamp is not None else {}
        producer.produce(topic, value=value, partition=partition, on_delivery=report(i), **kwargs)
        if per_flush and (i + 1) % per_flush == 0:
            assert producer.flush(TIMEOUT) == 0
    assert producer.flush(TIMEOUT) == 0
    assert len(offsets) == len(values)
    return [offsets[i] for i in range(len(values))]


def watermarks(bootstrap: str, topic: str, partition: int = 0) -> tuple[int, int]:
    """(log start offset, high watermark): ListOffsets earliest and latest."""
    consumer = Consumer({"bootstrap.servers": bootstrap, "group.id": unique("wm")})
    try:
        return consumer.get_watermark_offsets(TopicPartition(topic, partition), timeout=TIMEOUT)
    finally:
        consumer.close()


def read_all(bootstrap: str, topic: str, partition: int = 0) -> dict[int, bytes]:
    """Every record from the log start to the high watermark, by offset."""
    low, high = watermarks(bootstrap, topic, partition)
    out: dict[int, bytes] = {}
    if high == low:
        return out
    consumer = Consumer(
        {
            "bootstrap.servers": bootstrap,
            "group.id": unique("read"),
            "enable.auto.commit": False,
            "auto.offset.reset": "earliest",
        }
    )
    try:
        consumer.assign([TopicPartition(topic, partition, OFFSET_BEGINNING)])
        deadline = time.monotonic() + TIMEOUT
        while not out or max(out) < high - 1:
            assert time.monotonic() < deadline, f"read {len(out)} records of {low}..{high - 1}"
            for msg in consumer.consume(num_messages=1000, timeout=0.5):
                assert msg.error() is None, msg.error()
                assert msg.offset() not in out, f"offset {msg.offset()} delivered twice"
                out[msg.offset()] = msg.value()
    finally:
        consumer.close()
    assert min(out) == low, f"first record at {min(out)}, log start offset {low}"
    return out


def partition_dir(broker, topic: str, partition: int = 0) -> Path:
    path = broker.data_dir / f"{topic}-{partition}"
    assert path.is_dir(), f"{path} missing; data dir has {sorted(broker.data_dir.iterdir())}"
    return path


def live_segments(broker, topic: str) -> list[Path]:
    """Segment files by base offset (those renamed *.log.deleted are on their way out)."""
    return sorted(partition_dir(broker, topic).glob("*.log"), key=lambda p: int(p.stem))


def batches_in(segment: Path) -> list[tuple[int, int, int, int]]:
    """(start position, end position, base offset, last offset) of every batch in a segment."""
    data = segment.read_bytes()
    out = []
    pos = 0
    while pos + 61 <= len(data):  # 61 = v2 batch header size
        base_offset, length = struct.unpack_from(">qi", data, pos)
        (last_delta,) = struct.unpack_from(">i", data, pos + 23)
        end = pos + 12 + length
        if end > len(data):
            break
        out.append((pos, end, base_offset, base_offset + last_delta))
        pos = end
    assert pos == len(data), f"{segment}: {len(data) - pos} bytes after the last whole batch"
    return out


# --- (a) kill -9 while producing ----------------------------------------------------------------


class ContinuousProducer:
    """acks=1, no idempotence: a plain producer that keeps going through broker crashes."""

    def __init__(self, bootstrap: str, topic: str) -> None:
        self.topic = topic
        self.lock = threading.Lock()
        self.acked: dict[int, bytes] = {}
        self.reused: list[str] = []
        self.failed = 0
        self.sent: set[bytes] = set()
        self.stop = threading.Event()
        self.producer = Producer(
            {
                "bootstrap.servers": bootstrap,
                "acks": "1",
                "linger.ms": 2,
                "enable.idempotence": False,
                "message.timeout.ms": 180000,
                "retry.backoff.ms": 100,
                "reconnect.backoff.ms": 50,
                "reconnect.backoff.max.ms": 1000,
            }
        )
        self.thread = threading.Thread(target=self._run, name="crash-producer", daemon=True)

    def _on_delivery(self, err: KafkaError | None, msg: Message) -> None:
        with self.lock:
            if err is not None:
                self.failed += 1  # never acknowledged: no promise to keep
                return
            offset, value = msg.offset(), msg.value()
            previous = self.acked.get(offset)
            if previous is not None and previous != value:
                self.reused.append(f"offset {offset}: {previous!r} then {value!r}")
            self.acked[offset] = value

    def _run(self) -> None:
        i = 0
        while not self.stop.is_set():
            value = f"crash-{i}".encode()
            try:
                self.producer.produce(self.topic, value=value, on_delivery=self._on_delivery)
            except BufferError:
                self.producer.poll(0.1)
                continue
            with self.lock:
                self.sent.add(value)
            i += 1
            self.producer.poll(0.001)

    def count(self) -> int:
        with self.lock:
            return len(self.acked)


def test_kill9_while_producing_loses_no_acknowledged_record(broker_factory) -> None:
    b = broker_factory()
    topic = create_topic(b.bootstrap, "crash")
    p = ContinuousProducer(b.bootstrap, topic)
    p.thread.start()
    try:
        for _cycle in range(3):
            target = p.count() + 1000
            wait_until(lambda t=target: p.count() >= t, 120, what=f"{target} acknowledgements")
            b.kill()  # SIGKILL while records are in flight
            b.start()
        target = p.count() + 500
        wait_until(
            lambda t=target: p.count() >= t, 180, what="acknowledgements after the last restart"
        )
    finally:
        p.stop.set()
        p.thread.join(30)
    assert p.producer.flush(200) == 0, "records still queued"
    print(f"acknowledged {len(p.acked)}, failed {p.failed}")
    assert not p.reused, f"offsets given to two different records: {p.reused[:5]}"

    log = read_all(b.bootstrap, topic)
    low, high = watermarks(b.bootstrap, topic)
    assert low == 0
    assert sorted(log) == list(range(high)), "the log has gaps"
    lost = {o: v for o, v in p.acked.items() if log.get(o) != v}
    assert not lost, f"{len(lost)} acknowledged records lost or changed: {sorted(lost)[:10]}"
    junk = [o for o, v in log.items() if v not in p.sent]
    assert not junk, f"records nobody produced at offsets {junk[:10]}"

    # New records continue right after the last one in the log.
    assert produce(b.bootstrap, topic, [b"after-%d" % i for i in range(50)]) == list(
        range(high, high + 50)
    )


# --- (b) a torn last batch ----------------------------------------------------------------------


TEARS = {
    "a few bytes": lambda size: size - 5,
    "half the batch": lambda size: size // 2,
    "all but the start of its header": lambda size: 10,
}


def test_torn_last_batch_is_truncated_on_restart(broker_factory) -> None:
    """SIGKILL, then cut the active segment inside its last batch: recovery drops that batch."""
    b = broker_factory()
    values = [b"torn-%03d-" % i + b"x" * 100 for i in range(120)]
    topics = {}
    for what in TEARS:
        topic = create_topic(b.bootstrap, "torn")
        assert produce(b.bootstrap, topic, values, per_flush=20) == list(range(120))
        topics[what] = topic
    b.kill()

    ends = {}
    for what, keep in TEARS.items():
        segment = live_segments(b, topics[what])[-1]
        batches = batches_in(segment)
        assert len(batches) >= 2, f"{segment} has {len(batches)} batches"
        start, stop, _, last = batches[-1]
        assert last == 119
        kept = keep(stop - start)
        assert 0 < kept < stop - start
        with open(segment, "r+b") as f:
            f.truncate(start + kept)
        ends[what] = batches[-2][3] + 1  # the log must end after the last whole batch

    b.start()
    for what, topic in topics.items():
        end = ends[what]
        assert watermarks(b.bootstrap, topic) == (0, end), f"after tearing {what}"
        assert read_all(b.bootstrap, topic) == dict(enumerate(values[:end])), what
        # Producing continues right after the last whole batch, and everything reads back.
        more = [b"more-%d" % i for i in range(30)]
        assert produce(b.bootstrap, topic, more) == list(range(end, end + 30)), what
        assert read_all(b.bootstrap, topic) == dict(enumerate(values[:end] + more)), what

    # ... and survives another crash.
    b.kill()
    b.start()
    for what, topic in topics.items():
        more = [b"more-%d" % i for i in range(30)]
        assert read_all(b.bootstrap, topic) == dict(enumerate(values[: ends[what]] + more))


# --- (c) retention ------------------------------------------------------------------------------


RETENTION_BROKER = {"log.retention.check.interval.ms": "1000"}


def test_retention_by_size_deletes_old_segments(broker_factory) -> None:
    b = broker_factory(overrides=RETENTION_BROKER)
    segment_bytes, retention_bytes = 16384, 32768
    topic = create_topic(
        b.bootstrap,
        "retention-size",
        config={"segment.bytes": str(segment_bytes), "retention.bytes": str(retention_bytes)},
    )
    values = [b"size-%04d-" % i + b"y" * 400 for i in range(400)]
    assert produce(b.bootstrap, topic, values, per_flush=10) == list(range(400))

    def settled() -> tuple[list[Path], int, int] | None:
        segments = live_segments(b, topic)
        try:
            sizes = [s.stat().st_size for s in segments]
        except FileNotFoundError:
            return None  # retention renamed a segment between the listing and the stat
        # Done once deleting the oldest segment would leave less than retention.bytes, and the
        # log start offset is that segment's base offset.
        low, high = watermarks(b.bootstrap, topic)
        if sum(sizes) - sizes[0] < retention_bytes and low == int(segments[0].stem):
            return segments, low, high
        return None

    segments, low, high = wait_until(settled, TIMEOUT, what="size retention")
    assert high == 400
    assert low > 0, "no segment was deleted"
    assert sum(s.stat().st_size for s in segments) >= retention_bytes, "deleted too much"
    assert batches_in(segments[-1])[-1][3] == 399, "the active segment is gone"
    log = read_all(b.bootstrap, topic)
    assert log == {o: values[o] for o in range(low, 400)}
    # The log keeps growing at the end.
    assert produce(b.bootstrap, topic, [b"after"]) == [400]


def test_retention_by_time_deletes_old_segments(broker_factory) -> None:
    b = broker_factory(overrides=RETENTION_BROKER)
    topic = create_topic(
        b.bootstrap,
        "retention-time",
        config={"segment.bytes": "16384", "retention.ms": "600000"},
    )
    hour_ago = int(time.time() * 1000) - 3_600_000
    old = [b"old-%04d-" % i + b"z" * 400 for i in range(200)]
    assert produce(b.bootstrap, topic, old, per_flush=10, timestamp=hour_ago) == list(range(200))
    recent = [b"recent-%02d" % i for i in range(20)]
    assert produce(b.bootstrap, topic, recent) == list(range(200, 220))

    # Every segment holding only hour-old records goes; the one holding offset 200 stays.
    bases = [int(s.stem) for s in live_segments(b, topic)]
    assert len(bases) > 2, f"expected several segments, got {bases}"
    keep_from = max(base for base in bases if base <= 200)
    assert keep_from > 0
    wait_until(
        lambda: watermarks(b.bootstrap, topic)[0] == keep_from,
        TIMEOUT,
        what=f"log start {keep_from}",
    )
    assert watermarks(b.bootstrap, topic) == (keep_from, 220)
    assert int(live_segments(b, topic)[0].stem) == keep_from
    everything = old + recent
    assert read_all(b.bootstrap, topic) == {o: everything[o] for o in range(keep_from, 220)}
    assert produce(b.bootstrap, topic, [b"after"]) == [220]


# --- (d) restarts keep topics and data ----------------------------------------------------------


def topic_config(bootstrap: str, topic: str, key: str) -> str:
    admin = AdminClient({"bootstrap.servers": bootstrap})
    resource = ConfigResource(ResourceType.TOPIC, topic)
    return admin.describe_configs([resource])[resource].result(TIMEOUT)[key].value


def test_clean_restart_keeps_topics_configs_and_data(broker_factory) -> None:
    b = broker_factory()
    single = create_topic(b.bootstrap, "keep-single")
    multi = create_topic(b.bootstrap, "keep-multi", partitions=3, config={"retention.ms": "123456"})
    doomed = create_topic(b.bootstrap, "keep-deleted")
    admin = AdminClient({"bootstrap.servers": b.bootstrap})
    admin.delete_topics([doomed], operation_timeout=30)[doomed].result(TIMEOUT)
    wait_until(lambda: doomed not in admin.list_topics(timeout=10).topics, TIMEOUT, what="deletion")

    data = {(single, 0): [b"single-%d" % i for i in range(100)]}
    for p in range(3):
        data[(multi, p)] = [b"multi-%d-%d" % (p, i) for i in range(20 + p)]
    for (topic, p), values in data.items():
        assert produce(b.bootstrap, topic, values, partition=p) == list(range(len(values)))

    assert b.stop() == 0, "the broker did not shut down cleanly"
    b.start()

    topics = AdminClient({"bootstrap.servers": b.bootstrap}).list_topics(timeout=10).topics
    assert single in topics and multi in topics
    assert doomed not in topics, "a deleted topic came back"
    wait_for_topic(AdminClient({"bootstrap.servers": b.bootstrap}), multi, 3)
    assert topic_config(b.bootstrap, multi, "retention.ms") == "123456"
    for (topic, p), values in data.items():
        assert watermarks(b.bootstrap, topic, p) == (0, len(values))
        assert read_all(b.bootstrap, topic, p) == dict(enumerate(values))
    n = len(data[(multi, 2)])
    assert produce(b.bootstrap, multi, [b"after"], partition=2) == [n]


def test_topic_created_just_before_kill9_survives(broker_factory) -> None:
    """A CreateTopics answer is a promise: the metadata store has it on disk."""
    b = broker_factory()
    topic = create_topic(
        b.bootstrap, "created-then-killed", partitions=2, config={"retention.ms": "86400000"}
    )
    b.kill()
    b.start()
    wait_for_topic(AdminClient({"bootstrap.servers": b.bootstrap}), topic, 2)
    assert topic_config(b.bootstrap, topic, "retention.ms") == "86400000"
    assert produce(b.bootstrap, topic, [b"k"], partition=1) == [0]
