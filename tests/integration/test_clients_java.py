"""Apache Kafka's own Java client and tools against Odradek: the client Spark's Kafka source
and sink are built on, driven through Kafka 3.9's command-line classes (kafka-topics,
kafka-configs, kafka-consumer-groups, the console and verifiable producer and consumer).

The tools run the way `odradek kafka-tool NAME` runs them (odradek.broker.kafka_tools: the pinned
jars from Maven Central, cached); a missing JDK or Kafka skips these tests on a developer machine
and fails them under CI=true.
"""

from __future__ import annotations

import collections
import json
import subprocess
from pathlib import Path

import pytest
from odradek.broker import kafka_tools

TIMEOUT = 120


@pytest.fixture
def kafka(kafka_libs: Path, bootstrap: str):
    """Run one of Kafka's tools (by its bin/ name) against the broker; returns the finished
    process."""

    def run(
        tool: str, *args: str, check: bool = True, stdin: str | None = None
    ) -> subprocess.CompletedProcess[str]:
        cmd = kafka_tools.command(tool, ["--bootstrap-server", bootstrap, *args])
        proc = subprocess.run(
            cmd, input=stdin, capture_output=True, text=True, timeout=TIMEOUT, check=False
        )
        if check and proc.returncode != 0:
            pytest.fail(f"{tool} {' '.join(args)} exited {proc.returncode}\n{proc.stderr[-3000:]}")
        return proc

    return run


TOPICS = "kafka-topics.sh"
CONFIGS = "kafka-configs.sh"
GROUPS = "kafka-consumer-groups.sh"
CONSOLE_PRODUCER = "kafka-console-producer.sh"
CONSOLE_CONSUMER = "kafka-console-consumer.sh"
VERIFIABLE_PRODUCER = "kafka-verifiable-producer.sh"
VERIFIABLE_CONSUMER = "kafka-verifiable-consumer.sh"


def events(output: str) -> list[dict]:
    return [json.loads(line) for line in output.splitlines() if line.startswith("{")]


def test_kafka_topics_and_configs(kafka, topic_name: str) -> None:
    kafka(TOPICS, "--create", "--topic", topic_name, "--partitions", "3",
          "--replication-factor", "1", "--config", "retention.ms=3600000")  # fmt: skip
    assert topic_name in kafka(TOPICS, "--list").stdout.split()
    kafka(TOPICS, "--alter", "--topic", topic_name, "--partitions", "5")
    described = kafka(TOPICS, "--describe", "--topic", topic_name).stdout
    assert "PartitionCount: 5" in described and "retention.ms=3600000" in described
    kafka(CONFIGS, "--alter", "--entity-type", "topics", "--entity-name", topic_name,
          "--add-config", "cleanup.policy=compact,max.message.bytes=200000")  # fmt: skip
    configs = kafka(CONFIGS, "--describe", "--entity-type", "topics", "--entity-name", topic_name)
    assert "cleanup.policy=compact" in configs.stdout
    assert "max.message.bytes=200000" in configs.stdout
    # Lowering the partition count is refused with Kafka's own error and message.
    lowered = kafka(TOPICS, "--alter", "--topic", topic_name, "--partitions", "2", check=False)
    assert lowered.returncode != 0
    expected = (
        "InvalidPartitionsException: Topic currently has 5 partitions, which is higher than "
        "the requested 2."
    )
    assert expected in lowered.stderr
    kafka(TOPICS, "--delete", "--topic", topic_name)
    assert topic_name not in kafka(TOPICS, "--list").stdout.split()


def test_verifiable_producer_and_consumer_group(kafka, new_topic, tmp_path: Path) -> None:
    """Kafka's system-test clients: an idempotent acks=all producer, then a consumer group that
    commits; every record acknowledged is consumed once, and offsets are committed to the end."""
    topic = new_topic(partitions=3)
    config = tmp_path / "producer.properties"
    config.write_text("enable.idempotence=true\nretries=2147483647\nlinger.ms=5\n")
    produced = events(
        kafka(
            VERIFIABLE_PRODUCER,
            "--topic",
            topic,
            "--max-messages",
            "3000",
            "--acks",
            "-1",
            "--producer.config",
            str(config),
        ).stdout  # fmt: skip
    )
    acked = [e for e in produced if e["name"] == "producer_send_success"]
    assert len(acked) == 3000
    assert not [e for e in produced if e["name"] == "producer_send_error"]
    by_partition = collections.Counter(e["partition"] for e in acked)

    consumed = events(
        kafka(
            VERIFIABLE_CONSUMER,
            "--topic",
            topic,
            "--group-id",
            f"{topic}-g",
            "--max-messages",
            "3000",
            "--reset-policy",
            "earliest",
        ).stdout  # fmt: skip
    )
    counts: collections.Counter[int] = collections.Counter()
    for e in consumed:
        if e["name"] == "records_consumed":
            for p in e["partitions"]:
                counts[p["partition"]] += p["count"]
    assert counts == by_partition
    committed = {
        o["partition"]: o["offset"]
        for e in consumed
        if e["name"] == "offsets_committed" and e["success"]
        for o in e["offsets"]
    }
    assert committed == dict(by_partition)  # committed up to each partition's end

    described = kafka(GROUPS, "--describe", "--group", f"{topic}-g").stdout
    rows = [line.split() for line in described.splitlines() if line.startswith(f"{topic}-g")]
    # A row per partition with a committed offset, none lagging (LAG column)
    assert sorted(int(r[2]) for r in rows) == sorted(by_partition), described
    assert all(r[5] == "0" for r in rows), described
    kafka(GROUPS, "--reset-offsets", "--group", f"{topic}-g", "--topic", topic,
          "--to-earliest", "--execute")  # fmt: skip
    described = kafka(GROUPS, "--describe", "--group", f"{topic}-g").stdout
    # Reset to the earliest offsets of every partition: each lags by all of its records.
    lags = {int(line.split()[2]): int(line.split()[5]) for line in described.splitlines()
            if line.startswith(f"{topic}-g")}  # fmt: skip
    assert lags == {p: by_partition.get(p, 0) for p in range(3)}, described


def test_console_producer_and_consumer_keep_keys(kafka, new_topic) -> None:
    topic = new_topic(partitions=1)
    lines = "".join(f"k{i}:value {i}\n" for i in range(5))
    kafka(CONSOLE_PRODUCER, "--topic", topic, "--property", "parse.key=true",
          "--property", "key.separator=:", stdin=lines)  # fmt: skip
    out = kafka(CONSOLE_CONSUMER, "--topic", topic, "--from-beginning", "--max-messages", "5",
                "--property", "print.key=true", "--property", "key.separator=:").stdout  # fmt: skip
    assert out.splitlines() == [f"k{i}:value {i}" for i in range(5)]


ACLS = "kafka-acls.sh"
DELETE_RECORDS = "kafka-delete-records.sh"
LOG_DIRS = "kafka-log-dirs.sh"


def test_kafka_acls(kafka_libs: Path, broker_factory, tmp_path: Path) -> None:
    broker = broker_factory(overrides={
        "authorizer.class.name": "kafka.security.authorizer.AclAuthorizer",
        "super.users": "User:ANONYMOUS",
    })  # fmt: skip

    def acls(*args: str) -> str:
        cmd = kafka_tools.command(ACLS, ["--bootstrap-server", broker.bootstrap, *args])
        proc = subprocess.run(cmd, capture_output=True, text=True, timeout=TIMEOUT)
        assert proc.returncode == 0, proc.stderr[-3000:]
        return proc.stdout

    acls("--add", "--allow-principal", "User:alice", "--operation", "Read",
         "--operation", "Describe", "--topic", "orders", "--group", "readers")  # fmt: skip
    acls("--add", "--deny-principal", "User:mallory", "--operation", "All",
         "--topic", "orders-", "--resource-pattern-type", "prefixed")  # fmt: skip
    listed = acls("--list", "--topic", "orders")
    assert "principal=User:alice, host=*, operation=READ, permissionType=ALLOW" in listed
    prefixed = acls("--list", "--topic", "orders-", "--resource-pattern-type", "prefixed")
    assert "principal=User:mallory, host=*, operation=ALL, permissionType=DENY" in prefixed
    acls("--remove", "--force", "--allow-principal", "User:alice", "--operation", "Read",
         "--topic", "orders")  # fmt: skip
    listed = acls("--list", "--topic", "orders")
    assert "operation=READ" not in listed and "operation=DESCRIBE" in listed


def test_delete_records_and_log_dirs(kafka, new_topic, tmp_path: Path) -> None:
    topic = new_topic(partitions=1)
    kafka(CONSOLE_PRODUCER, "--topic", topic, stdin="".join(f"r{i}\n" for i in range(10)))
    offsets = tmp_path / "offsets.json"
    offsets.write_text(json.dumps(
        {"version": 1, "partitions": [{"topic": topic, "partition": 0, "offset": 4}]}
    ))  # fmt: skip
    deleted = kafka(DELETE_RECORDS, "--offset-json-file", str(offsets)).stdout
    assert f"partition: {topic}-0\tlow_watermark: 4" in deleted
    out = kafka(
        CONSOLE_CONSUMER, "--topic", topic, "--from-beginning", "--max-messages", "6"
    ).stdout
    assert out.splitlines() == [f"r{i}" for i in range(4, 10)]
    described = kafka(LOG_DIRS, "--describe", "--topic-list", topic).stdout
    report = json.loads(next(line for line in described.splitlines() if line.startswith("{")))
    (partition,) = [
        p for b in report["brokers"] for d in b["logDirs"] for p in d["partitions"]
        if p["partition"] == f"{topic}-0"
    ]  # fmt: skip
    assert partition["size"] > 0
