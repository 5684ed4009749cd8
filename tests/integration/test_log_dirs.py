"""A broker with three log dirs (JBOD): placement, DescribeLogDirs, and moving a replica between
dirs (AlterReplicaLogDirs) while it is written and read, through Kafka's own tools and ours."""

from __future__ import annotations

import json
import subprocess
import sys
import threading
import time
from collections.abc import Iterator
from pathlib import Path

import pytest
from confluent_kafka import Consumer, Producer, TopicPartition
from confluent_kafka.admin import AdminClient, NewTopic
from conftest import OdradekBroker, retire, run_kafka_tool

LOG_DIRS = "kafka-log-dirs.sh"
REASSIGN = "kafka-reassign-partitions.sh"
TIMEOUT = 90.0


@pytest.fixture(scope="module")
def jbod(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[OdradekBroker, list[Path]]]:
    base = tmp_path_factory.mktemp("jbod")
    dirs = [base / f"disk{i}" for i in range(3)]
    proc = OdradekBroker(
        dirs[0], base / "logs",
        overrides={"log.dirs": ",".join(map(str, dirs)), "log.segment.delete.delay.ms": "1000"},
    )  # fmt: skip
    try:
        yield proc.start(), dirs
    finally:
        retire(proc)


def create(bootstrap: str, name: str, partitions: int, **config: str) -> None:
    admin = AdminClient({"bootstrap.servers": bootstrap})
    admin.create_topics([NewTopic(name, partitions, 1, config=config)])[name].result(30)
    deadline = time.monotonic() + 30
    while True:
        meta = admin.list_topics(name, timeout=10).topics[name]
        if meta.error is None and all(p.leader >= 0 for p in meta.partitions.values()):
            return
        assert time.monotonic() < deadline, f"no leaders for {name}"
        time.sleep(0.1)


def where(dirs: list[Path], topic: str, partition: int) -> Path:
    found = [d for d in dirs if (d / f"{topic}-{partition}").is_dir()]
    assert len(found) == 1, found
    return found[0]


def log_dirs_report(bootstrap: str, topic: str) -> dict:
    out = run_kafka_tool(LOG_DIRS, "--bootstrap-server", bootstrap, "--describe",
                   "--topic-list", topic).stdout  # fmt: skip
    return json.loads(next(line for line in out.splitlines() if line.startswith("{")))


def test_new_partitions_spread_over_the_dirs(jbod, kafka_libs) -> None:
    broker, dirs = jbod
    create(broker.bootstrap, "spread", 6)
    per_dir = {d: sorted(p.name for p in d.glob("spread-*")) for d in dirs}
    assert sorted(len(v) for v in per_dir.values()) == [2, 2, 2], per_dir
    for d in dirs:
        props = (d / "meta.properties").read_text()
        assert "broker.id=1001" in props and "cluster.id=" in props
    # Each dir keeps the checkpoints of its own partitions (the HW one is written every 5 s).
    deadline = time.monotonic() + 30
    while not all((d / "replication-offset-checkpoint").exists() for d in dirs):
        assert time.monotonic() < deadline
        time.sleep(0.2)
    for d in dirs:
        lines = (d / "replication-offset-checkpoint").read_text().splitlines()
        assert sorted(f"{t}-{p}" for t, p, _ in (x.split() for x in lines[2:])) == per_dir[d]
    # Kafka's kafka-log-dirs lists every dir with its replicas.
    report = log_dirs_report(broker.bootstrap, "spread")
    (entry,) = report["brokers"]
    listed = {
        d["logDir"]: sorted(p["partition"] for p in d["partitions"]) for d in entry["logDirs"]
    }
    assert listed == {str(d): per_dir[d] for d in dirs}
    assert all(d["error"] is None for d in entry["logDirs"])


class Traffic:
    """An idempotent acks=all producer writing a counter, and a consumer reading it back."""

    def __init__(self, bootstrap: str, topic: str) -> None:
        self.bootstrap = bootstrap
        self.topic = topic
        self.acked: list[int] = []
        self.errors: list[object] = []
        self.seen: list[tuple[int, int]] = []
        self.stop = threading.Event()
        self.threads = [
            threading.Thread(target=self._produce),
            threading.Thread(target=self._consume),
        ]

    def __enter__(self) -> Traffic:
        for t in self.threads:
            t.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self.stop.set()
        for t in self.threads:
            t.join(60)

    def _produce(self) -> None:
        producer = Producer({"bootstrap.servers": self.bootstrap, "acks": "all",
                             "enable.idempotence": True, "linger.ms": 5,
                             "batch.size": 16384})  # fmt: skip

        def on_delivery(err, msg) -> None:
            if err is not None:
                self.errors.append(err)
            else:
                self.acked.append(int(msg.value()))

        n = 0
        while not self.stop.is_set():
            producer.produce(self.topic, str(n).encode(), on_delivery=on_delivery)
            n += 1
            if n % 100 == 0:
                producer.poll(0.01)
        producer.flush(30)

    def _consume(self) -> None:
        consumer = Consumer({"bootstrap.servers": self.bootstrap, "group.id": "jbod-reader",
                             "enable.auto.commit": False})  # fmt: skip
        consumer.assign([TopicPartition(self.topic, 0, 0)])
        idle_after_stop = 0
        while idle_after_stop < 10:
            msg = consumer.poll(0.2)
            if msg is None or msg.error():
                if self.stop.is_set() and len(self.seen) >= len(self.acked):
                    idle_after_stop += 1
                continue
            self.seen.append((msg.offset(), int(msg.value())))
        consumer.close()

    def wait_for(self, count: int) -> None:
        deadline = time.monotonic() + TIMEOUT
        while len(self.acked) < count:
            assert time.monotonic() < deadline, f"only {len(self.acked)} records acked"
            time.sleep(0.05)

    def check(self) -> None:
        assert not self.errors, self.errors[:3]
        values = [v for _, v in self.seen]
        assert values == sorted(set(values)), "duplicates or reordering"
        assert set(self.acked) <= set(values), "acknowledged records missing"
        offsets = [o for o, _ in self.seen]
        assert offsets == list(range(len(offsets)))


def test_reassign_tool_moves_a_partition_while_it_is_written_and_read(jbod, kafka_libs) -> None:
    broker, dirs = jbod
    topic = "moving"
    create(broker.bootstrap, topic, 1, **{"segment.bytes": str(64 * 1024)})
    source = where(dirs, topic, 0)
    dest = next(d for d in dirs if d != source)
    plan = broker.log_dir.parent / "reassign.json"
    plan.write_text(json.dumps({"version": 1, "partitions": [
        {"topic": topic, "partition": 0, "replicas": [1001], "log_dirs": [str(dest)]}]}))  # fmt: skip
    with Traffic(broker.bootstrap, topic) as traffic:
        traffic.wait_for(20_000)
        out = run_kafka_tool(REASSIGN, "--bootstrap-server", broker.bootstrap,
                       "--reassignment-json-file", str(plan), "--execute").stdout  # fmt: skip
        assert f"Successfully started moving log directory to {dest}" in out
        deadline = time.monotonic() + TIMEOUT
        while True:
            verify = run_kafka_tool(REASSIGN, "--bootstrap-server", broker.bootstrap,
                              "--reassignment-json-file", str(plan), "--verify").stdout  # fmt: skip
            if "completed successfully" in verify:
                break
            assert time.monotonic() < deadline, verify
            time.sleep(0.5)
        moved_at = len(traffic.acked)
        traffic.wait_for(moved_at + 5000)  # and it goes on being written there
    traffic.check()
    assert where(dirs, topic, 0) == dest
    report = log_dirs_report(broker.bootstrap, topic)
    (entry,) = report["brokers"]
    holders = [d["logDir"] for d in entry["logDirs"] for p in d["partitions"]]
    assert holders == [str(dest)]
    # The old copy goes after file.delete.delay.ms.
    deadline = time.monotonic() + TIMEOUT
    while any(source.glob(f"{topic}-0*")):
        assert time.monotonic() < deadline, list(source.glob(f"{topic}-0*"))
        time.sleep(0.2)


def test_odradek_cli_describes_and_moves(jbod) -> None:
    broker, dirs = jbod
    topic = "cli-move"
    create(broker.bootstrap, topic, 1)
    producer = Producer({"bootstrap.servers": broker.bootstrap})
    for i in range(1000):
        producer.produce(topic, str(i).encode())
    producer.flush(30)
    source = where(dirs, topic, 0)
    dest = next(d for d in dirs if d != source)

    def cli(*args: str) -> str:
        proc = subprocess.run(
            [sys.executable, "-m", "odradek.broker.cli", "log-dirs", *args,
             "--bootstrap-server", broker.bootstrap],
            capture_output=True, text=True, timeout=TIMEOUT, check=False,
        )  # fmt: skip
        assert proc.returncode == 0, proc.stderr
        return proc.stdout

    table = cli("describe", "--topic", topic)
    rows = [line.split() for line in table.splitlines()[1:]]
    assert [(r[1], r[3], r[4], r[7]) for r in rows if r[3] == topic] == [
        (str(source), topic, "0", "no")
    ]
    assert {r[1] for r in rows} == {str(d) for d in dirs}
    out = cli("move", "--topic", topic, "--partition", "0", "--broker", "1001",
              "--dir", str(dest), "--wait")  # fmt: skip
    assert f"Done: the replicas are in {dest}." in out
    assert where(dirs, topic, 0) == dest
    consumer = Consumer({"bootstrap.servers": broker.bootstrap, "group.id": "cli-move"})
    consumer.assign([TopicPartition(topic, 0, 0)])
    values = []
    deadline = time.monotonic() + 30
    while len(values) < 1000 and time.monotonic() < deadline:
        msg = consumer.poll(0.5)
        if msg is not None and not msg.error():
            values.append(int(msg.value()))
    consumer.close()
    assert values == list(range(1000))
    bad = subprocess.run(
        [sys.executable, "-m", "odradek.broker.cli", "log-dirs", "move", "--topic", topic,
         "--partition", "0", "--broker", "1001", "--dir", "/nowhere",
         "--bootstrap-server", broker.bootstrap],
        capture_output=True, text=True, timeout=TIMEOUT, check=False,
    )  # fmt: skip
    assert bad.returncode == 1 and "LOG_DIR_NOT_FOUND" in bad.stderr
