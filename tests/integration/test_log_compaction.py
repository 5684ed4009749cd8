"""Log compaction in a running broker, checked through real clients and the segment files.

One broker serves the module, its cleaner polling every 200 ms. Topics roll their active
segment by time (segment.ms) so a test can make everything it wrote cleanable by writing one
more record after a pause.
"""

from __future__ import annotations

import re
import time
from collections.abc import Iterator
from pathlib import Path

import pytest
from confluent_kafka import Consumer, Producer, TopicPartition
from conftest import OdradekBroker, retire, run_kafka_tool
from odradek.broker.records.record import decode_all
from odradek.broker.testing.processes import free_port
from polling import wait_until

TIMEOUT = 90.0
SEGMENT_MS = 2000
METRICS_PORT = free_port()


@pytest.fixture(scope="module")
def broker(tmp_path_factory: pytest.TempPathFactory) -> Iterator[OdradekBroker]:
    base = tmp_path_factory.mktemp("compaction")
    overrides = {
        "log.cleaner.backoff.ms": "200",
        "offsets.topic.segment.bytes": "16384",
        "prometheus.metrics.port": str(METRICS_PORT),
        "prometheus.metrics.host": "127.0.0.1",
    }
    proc = OdradekBroker(base / "data", base / "logs", overrides=overrides)
    try:
        yield proc.start()
    finally:
        retire(proc)


def compacted(**extra: str) -> dict[str, str]:
    return {
        "cleanup.policy": "compact",
        "segment.bytes": str(256 * 1024),
        "segment.ms": str(SEGMENT_MS),
        "min.cleanable.dirty.ratio": "0.01",
        **extra,
    }


def produce(bootstrap: str, topic: str, items, **conf) -> dict[int, tuple[bytes, bytes | None]]:
    """Produce (key, value) pairs in big batches; returns offset -> (key, value) as acked."""
    acked: dict[int, tuple[bytes, bytes | None]] = {}
    errors = []

    def on_delivery(err, msg):
        if err is not None:
            errors.append(err)
        else:
            acked[msg.offset()] = (msg.key(), msg.value())

    producer = Producer(
        {"bootstrap.servers": bootstrap, "linger.ms": 20, "batch.num.messages": 10000,
         "queue.buffering.max.messages": 200000, "batch.size": 65536, **conf}
    )  # fmt: skip
    for key, value in items:
        while True:
            try:
                producer.produce(topic, value, key, on_delivery=on_delivery)
                break
            except BufferError:
                producer.poll(0.05)
        producer.poll(0)
    assert producer.flush(60) == 0
    assert not errors, errors[:3]
    return acked


def roll(bootstrap: str, topic: str) -> None:
    """Make everything written so far cleanable: a record after segment.ms rolls the segment."""
    time.sleep(SEGMENT_MS / 1000 + 0.5)
    produce(bootstrap, topic, [(b"~roll", str(time.time()).encode())])


def segment_records(partition_dir: Path) -> list[list[tuple[int, bytes | None, bytes | None]]]:
    """The records of each segment file, in offset order (retried while files are swapped)."""
    for _ in range(50):
        try:
            out = []
            for path in sorted(partition_dir.glob("*.log")):
                out.append(
                    [(r.offset, r.key, r.value)
                     for _, records in decode_all(path.read_bytes()) for r in records]
                )  # fmt: skip
            return out
        except (FileNotFoundError, ValueError):
            time.sleep(0.05)
    raise AssertionError(f"could not read the segments of {partition_dir}")


def below_active(partition_dir: Path) -> list[tuple[int, bytes | None, bytes | None]]:
    segments = segment_records(partition_dir)
    return [r for seg in segments[:-1] for r in seg]


def wait_cleaned(partition_dir: Path, records: int, what: str) -> None:
    """Until the segments below the active one hold `records` records besides roll markers."""
    wait_until(
        lambda: len([r for r in below_active(partition_dir) if r[1] != b"~roll"]) == records,
        TIMEOUT,
        what=what,
    )


def consume_all(bootstrap: str, topic: str) -> list[tuple[int, bytes | None, bytes | None]]:
    consumer = Consumer(
        {"bootstrap.servers": bootstrap, "group.id": f"reader-{time.time_ns()}",
         "enable.auto.commit": False, "auto.offset.reset": "earliest"}
    )  # fmt: skip
    try:
        _, high = consumer.get_watermark_offsets(TopicPartition(topic, 0), timeout=10)
        consumer.assign([TopicPartition(topic, 0, 0)])
        out = []
        deadline = time.monotonic() + 60
        while (not out or out[-1][0] < high - 1) and time.monotonic() < deadline:
            msg = consumer.poll(0.5)
            if msg is None or msg.error():
                continue
            out.append((msg.offset(), msg.key(), msg.value()))
        assert out and out[-1][0] == high - 1, "did not read up to the high watermark"
        return out
    finally:
        consumer.close()


def test_100k_updates_over_1000_keys(broker, new_topic) -> None:
    bootstrap = broker.bootstrap
    topic = new_topic(config=compacted(**{"delete.retention.ms": "4000"}))
    keys = [f"key-{k:04d}".encode() for k in range(1000)]
    updates = []
    for i in range(100):
        for k, key in enumerate(keys):
            last_round = i == 99
            value = None if last_round and k < 100 else f"v{i}-{k}".encode()
            updates.append((key, value))
    acked = produce(bootstrap, topic, updates)
    assert len(acked) == 100_000
    latest: dict[bytes, int] = {}
    for offset in sorted(acked):
        latest[acked[offset][0]] = offset
    roll(bootstrap, topic)
    pdir = broker.data_dir / f"{topic}-0"

    def cleaned():
        records = below_active(pdir)
        keys_seen = [k for _, k, _ in records if k != b"~roll"]
        return records if len(keys_seen) == len(set(keys_seen)) == 1000 else None

    records = wait_until(cleaned, TIMEOUT, what="the log to hold one record per key")
    for offset, key, value in records:
        if key == b"~roll":
            continue
        assert latest[key] == offset and acked[offset] == (key, value)
    # A consumer from the beginning sees each key's latest value (tombstones included).
    seen = {k: v for _, k, v in consume_all(bootstrap, topic) if k != b"~roll"}
    assert seen == {key: acked[latest[key]][1] for key in keys}
    assert sum(1 for v in seen.values() if v is None) == 100

    # The tombstones go once delete.retention.ms has passed and the log is cleaned again.
    time.sleep(4.5)
    produce(bootstrap, topic, [(key, b"again") for key in keys[100:]])
    roll(bootstrap, topic)

    def tombstones_gone():
        records = below_active(pdir)
        data = [(k, v) for _, k, v in records if k != b"~roll"]
        return data if len(data) == 900 and all(v == b"again" for _, v in data) else None

    wait_until(tombstones_gone, TIMEOUT, what="the tombstones to be removed")
    seen = {k: v for _, k, v in consume_all(bootstrap, topic) if k != b"~roll"}
    assert seen == {key: b"again" for key in keys[100:]}


def test_head_younger_than_min_compaction_lag_is_never_touched(broker, new_topic) -> None:
    bootstrap = broker.bootstrap
    young = new_topic(config=compacted(**{"min.compaction.lag.ms": "3600000"}), suffix="-young")
    other = new_topic(config=compacted(), suffix="-other")
    items = [(f"k{i % 10}".encode(), f"value-{i}".encode() * 3) for i in range(5000)]
    acked_young = produce(bootstrap, young, items)
    produce(bootstrap, other, items)
    roll(bootstrap, young)
    roll(bootstrap, other)
    # The cleaner works: the other topic shrinks to one record per key...
    wait_cleaned(broker.data_dir / f"{other}-0", 10, "the other topic to be cleaned")
    time.sleep(1.0)  # several more cleaner passes
    # ...while every record of the young topic is still there, at its offset.
    records = [r for seg in segment_records(broker.data_dir / f"{young}-0") for r in seg]
    assert {o: (k, v) for o, k, v in records if k != b"~roll"} == acked_young


@pytest.mark.parametrize(
    "point",
    [
        "cleaner-cleaned-partial",  # in the worker, half-way through a .cleaned segment
        "cleaner-cleaned-written",  # in the worker, the .cleaned segment complete
        "cleaner-swap-renamed",  # the .swap files in place: the commit point
        "cleaner-old-deleted",  # the replaced segments renamed .deleted
        "cleaner-swapped",  # the swap done, the checkpoint not yet written
    ],
)
def test_kill_9_during_cleaning(broker_factory, point) -> None:
    """The broker is killed at `point` of its first cleaning; after a restart the log is
    consistent, no key's latest value is lost, and cleaning completes."""
    node = broker_factory(overrides={"log.cleaner.backoff.ms": "200"}, start=False)
    node.env = {"ODRADEK_CRASH_AT": point}
    node.start()
    topic = "crash"
    from confluent_kafka.admin import (
        AdminClient,
        AlterConfigOpType,
        ConfigEntry,
        ConfigResource,
        NewTopic,
    )

    # Written while the policy is delete, so the first cleaning starts once everything is in.
    admin = AdminClient({"bootstrap.servers": node.bootstrap})
    config = compacted(**{"segment.bytes": str(64 * 1024)})
    delete = {**config, "cleanup.policy": "delete"}
    admin.create_topics([NewTopic(topic, 1, 1, config=delete)])[topic].result(30)
    items = [(f"k{i % 200}".encode(), f"v{i}".encode()) for i in range(20000)]
    acked = produce(node.bootstrap, topic, items, **{"batch.size": 32768})
    compact = ConfigEntry("cleanup.policy", "compact", incremental_operation=AlterConfigOpType.SET)
    resource = ConfigResource("topic", topic, incremental_configs=[compact])
    admin.incremental_alter_configs([resource])[resource].result(30)
    assert node.proc is not None
    node.proc.wait(timeout=TIMEOUT)  # the crash point killed it
    assert f"crash point {point} reached" in node.log_text()
    node.env = {}
    node.start()
    latest = {}
    for offset in sorted(acked):
        latest[acked[offset][0]] = offset
    records = consume_all(node.bootstrap, topic)
    offsets = [o for o, _, _ in records]
    assert offsets == sorted(set(offsets))
    for offset, key, value in records:
        if key != b"~roll":
            assert acked[offset] == (key, value)
    assert {k: v for _, k, v in records if k != b"~roll"} == {
        k: acked[o][1] for k, o in latest.items()
    }
    pdir = node.data_dir / f"{topic}-0"
    roll(node.bootstrap, topic)
    wait_cleaned(pdir, 200, "cleaning to complete after the restart")


def test_consumer_offsets_shrink_and_commits_stay_readable(broker, new_topic) -> None:
    """Many commits of one group to the same partitions: __consumer_offsets is compacted down
    to the last commit of each, which the coordinator reads back, also after a restart."""
    bootstrap = broker.bootstrap
    topic = new_topic(partitions=3)
    group = f"committer-{time.time_ns()}"
    consumer = Consumer({"bootstrap.servers": bootstrap, "group.id": group})
    commits = 1500
    try:
        for i in range(1, commits + 1):
            offsets = [TopicPartition(topic, p, i + p) for p in range(3)]
            consumer.commit(offsets=offsets, asynchronous=False)
    finally:
        consumer.close()
    dirs = [d for d in broker.data_dir.glob("__consumer_offsets-*") if any(d.glob("*.log"))]
    # The partition holding the commits; read through segment_records, which retries when the
    # cleaner swaps a file between the listing and the read (a stat() here failed once on CI).
    pdir = max(dirs, key=lambda d: sum(len(seg) for seg in segment_records(d)))

    def shrunk():
        segments = segment_records(pdir)
        below = [r for seg in segments[:-1] for r in seg]
        total = sum(len(seg) for seg in segments)
        return (
            len(segments) > 1
            and len({k for _, k, _ in below}) == len(below)
            and total < (commits * 3 // 4)
        )

    wait_until(shrunk, TIMEOUT, what="__consumer_offsets to be compacted")

    def committed() -> list[int]:
        reader = Consumer({"bootstrap.servers": bootstrap, "group.id": group})
        try:
            found = reader.committed([TopicPartition(topic, p) for p in range(3)], timeout=30)
            return [tp.offset for tp in found]
        finally:
            reader.close()

    assert committed() == [commits, commits + 1, commits + 2]
    broker.restart()  # the coordinator loads the compacted log from scratch
    assert committed() == [commits, commits + 1, commits + 2]


def test_keyless_records_are_refused_one_by_one(broker, new_topic) -> None:
    """KIP-467: Produce v8+ names each keyless record of a batch sent to a compacted topic;
    librdkafka fails those with INVALID_RECORD and the rest of the batch with
    INVALID_DIFFERENT_RECORD, while keyless records to other topics are fine."""
    from confluent_kafka import KafkaError

    topic = new_topic(config=compacted())
    plain = new_topic(suffix="-plain")
    keys = [b"a", None, b"b", None, b"c"]
    for target in (topic, plain):
        results: dict[int, object] = {}
        producer = Producer({"bootstrap.servers": broker.bootstrap, "linger.ms": 500})
        for i, key in enumerate(keys):
            producer.produce(
                target, f"v{i}".encode(), key,
                on_delivery=lambda err, msg, i=i, r=results: r.__setitem__(i, err),
            )  # fmt: skip
        assert producer.flush(30) == 0
        codes = [results[i].code() if results[i] is not None else None for i in range(5)]
        if target == topic:
            different = KafkaError._INVALID_DIFFERENT_RECORD
            invalid = KafkaError.INVALID_RECORD
            assert codes == [different, invalid, different, invalid, different]
        else:
            assert codes == [None] * 5
    assert consume_all(broker.bootstrap, plain)[-1][0] == 4


def test_compressed_batches_survive_cleaning_and_kafka_dump_log_reads_them(
    broker, new_topic, kafka_libs
) -> None:
    """Producers of every codec write to one compacted topic; after cleaning each batch keeps
    its codec and its latest records, and Kafka's own kafka-dump-log reads the segments."""
    topic = new_topic(config=compacted())
    codecs = ["gzip", "snappy", "lz4", "zstd"]
    latest = {}
    for codec in codecs:
        items = [(f"{codec}-k{j}".encode(), f"{codec}-r{r}-{j}".encode() * 4)
                 for r in range(20) for j in range(50)]  # fmt: skip
        acked = produce(broker.bootstrap, topic, items, **{"compression.type": codec})
        for offset in sorted(acked):
            latest[acked[offset][0]] = (offset, acked[offset][1])
    roll(broker.bootstrap, topic)
    pdir = broker.data_dir / f"{topic}-0"
    wait_cleaned(pdir, 200, "the topic to be cleaned")
    segments = sorted(pdir.glob("*.log"))[:-1]
    out = run_kafka_tool(
        "kafka-dump-log.sh", "--files", ",".join(map(str, segments)), "--print-data-log",
        "--deep-iteration",
    ).stdout  # fmt: skip
    dumped = {}
    batch_codecs = set()
    for line in out.splitlines():
        if line.startswith("baseOffset:"):
            fields = dict(re.findall(r"(\w+): (\S+)", line))
            if int(fields["count"]) and fields.get("isControl") == "false":
                batch_codecs.add(fields["compresscodec"].lower())
        elif line.startswith("| offset:"):
            fields = dict(re.findall(r"(\w+): (\S+)", line))
            dumped[fields["key"].encode()] = (int(fields["offset"]), fields["payload"].encode())
    dumped.pop(b"~roll", None)
    assert dumped == latest
    assert batch_codecs == set(codecs)


def test_cleaner_metrics_with_kafkas_names(broker, new_topic) -> None:
    from test_broker_metrics import sample, scrape

    topic = new_topic(config=compacted())
    items = [(f"k{i % 2500}".encode(), b"x" * 50) for i in range(5000)]
    produce(broker.bootstrap, topic, items)
    roll(broker.bootstrap, topic)
    pdir = broker.data_dir / f"{topic}-0"
    wait_cleaned(pdir, 2500, "cleaning")
    text = scrape(METRICS_PORT)
    # Every key was written twice: the last cleaning dropped part of what it read.
    assert 0 < sample(text, "kafka_log_logcleaner_cleaner_recopy_percent") < 100
    assert sample(text, "kafka_log_logcleaner_max_clean_time_secs") >= 0
    assert 0 <= sample(text, "kafka_log_logcleaner_max_buffer_utilization_percent") <= 100
    assert 0 <= sample(text, "kafka_log_logcleanermanager_max_dirty_percent") <= 100
    assert sample(text, "kafka_log_logcleanermanager_time_since_last_run_ms") < 60_000
    assert sample(text, "kafka_log_logcleaner_deadthreadcount") == 0
    assert sample(text, "kafka_log_logmanager_offlinelogdirectorycount") == 0
    assert (
        sample(text, "kafka_log_logmanager_logdirectoryoffline", logdirectory=str(broker.data_dir))
        == 0
    )


def test_aborted_transactions_are_cleaned_away(broker, new_topic) -> None:
    """A transactional producer commits and aborts in turn on a compacted topic: cleaning
    removes the aborted records from the log, so even a read_uncommitted consumer from the
    beginning sees the last committed value of each key."""
    topic = new_topic(config=compacted())
    producer = Producer({"bootstrap.servers": broker.bootstrap, "linger.ms": 20,
                         "transactional.id": f"cleaner-{topic}"})  # fmt: skip
    producer.init_transactions(30)
    for round_ in range(10):
        producer.begin_transaction()
        for k in range(20):
            producer.produce(topic, f"r{round_}".encode(), f"k{k}".encode())
        if round_ % 2:
            # Flushed first so the aborted records are in the log for the cleaner to remove.
            # It also keeps librdkafka from sending EndTxn(abort) after an AddPartitionsToTxn
            # that met the previous commit still completing (librdkafka issue 4849): the
            # coordinator, like Kafka's, answers that abort with INVALID_TXN_STATE.
            assert producer.flush(30) == 0
            producer.abort_transaction(30)
        else:
            producer.commit_transaction(30)
    roll(broker.bootstrap, topic)
    pdir = broker.data_dir / f"{topic}-0"

    def data_below_active():
        out = []
        for path in sorted(pdir.glob("*.log"))[:-1]:
            for header, records in decode_all(path.read_bytes()):
                if not header.is_control:
                    out += [(r.key, r.value) for r in records if r.key != b"~roll"]
        return out

    def cleaned():
        try:
            found = data_below_active()
        except (FileNotFoundError, ValueError):
            return None
        return (
            found if sorted(found) == sorted((f"k{k}".encode(), b"r8") for k in range(20)) else None
        )

    wait_until(cleaned, TIMEOUT, what="the aborted transactions to be cleaned away")
    consumer = Consumer({"bootstrap.servers": broker.bootstrap, "group.id": f"u-{topic}",
                         "isolation.level": "read_uncommitted", "enable.auto.commit": False})  # fmt: skip
    consumer.assign([TopicPartition(topic, 0, 0)])
    seen = {}
    deadline = time.monotonic() + 30
    while len(seen) < 20 and time.monotonic() < deadline:
        msg = consumer.poll(0.5)
        if msg is not None and not msg.error() and msg.key() != b"~roll":
            seen[msg.key()] = msg.value()
    consumer.close()
    assert seen == {f"k{k}".encode(): b"r8" for k in range(20)}
