"""pipelines/offline_load.py against Odradek: repeated runs, runs capped by --max-records, and
drivers killed with SIGKILL mid-write and between publishing the output and committing the
offsets; after every rerun the Parquet output holds each produced record exactly once and the
consumer group's committed offsets are the end of what was loaded.

Most runs call the job's `load()` in the module's SparkSession; one rerun goes through
spark-submit and the command line, as users run it. The killed drivers are separate processes
(tests/integration/offline_load_driver.py) killed with their JVM at a chosen point.
"""

from __future__ import annotations

import datetime as dt
import json
import os
import subprocess
import sys
from dataclasses import replace
from pathlib import Path
from typing import Any

import pytest
from confluent_kafka import ConsumerGroupTopicPartitions, Producer, TopicPartition
from confluent_kafka.admin import AdminClient
from odradek.broker.testing.processes import free_port
from odradek.pipelines import offline_load
from odradek.pipelines.offline_load import LoadError, Options, load
from spark_support import ROOT, spark_conf, spark_session, spark_submit

JOB = ROOT / "pipelines" / "offline_load.py"
DRIVER = Path(__file__).with_name("offline_load_driver.py")
DAY_MS = 86_400_000
BASE_TS = 1_767_225_600_000  # 2026-01-01T00:00:00Z
# The records' timestamps are old: keep time-based retention from deleting them mid-test.
KEEP = {"retention.ms": "-1"}


@pytest.fixture(scope="module")
def spark(tmp_path_factory: pytest.TempPathFactory):
    yield from spark_session(tmp_path_factory.mktemp("spark"))


Row = tuple[str, int, int, bytes | None, bytes | None, int, tuple]


def produce(bootstrap: str, topic: str, first: int, n: int, partitions: int = 3, size: int = 20):
    """Records `first`..`first + n - 1`, spread over partitions and over three days; returns
    them as the Parquet rows they must become (topic, partition, offset, key, value, ms, headers)."""
    producer = Producer({"bootstrap.servers": bootstrap, "linger.ms": 20, "acks": "all"})
    acked: list[Row] = []

    def report(headers: tuple) -> Any:
        def delivered(err: Any, msg: Any) -> None:
            assert err is None, err
            acked.append(
                (msg.topic(), msg.partition(), msg.offset(), msg.key(), msg.value(),
                 msg.timestamp()[1], headers)
            )  # fmt: skip

        return delivered

    for i in range(first, first + n):
        headers = (("i", str(i).encode()),) if i % 2 else ()
        producer.produce(
            topic,
            key=None if i % 5 == 0 else f"k{i}".encode(),
            value=f"{i:0{size}d}".encode(),
            partition=i % partitions,
            timestamp=BASE_TS + (i % 3) * DAY_MS + i,
            headers=list(headers) or None,
            on_delivery=report(headers),
        )
        if i % 10_000 == 9_999:
            producer.poll(0)
    assert producer.flush(120) == 0
    return acked


def parquet_rows(spark: Any, output: Path) -> list[Row]:
    """Every row under `output`, checking that its date partition is its timestamp's UTC date."""
    if not any(output.glob("topic=*")):
        return []
    df = spark.read.parquet(str(output))
    rows = []
    for r in df.selectExpr(
        "topic", "partition", "offset", "key", "value", "unix_millis(timestamp) AS ts",
        "headers", "CAST(date AS STRING) AS date",
    ).collect():  # fmt: skip
        day = dt.datetime.fromtimestamp(r["ts"] / 1000, dt.UTC).date().isoformat()
        assert r["date"] == day, r
        headers = tuple((h["key"], bytes(h["value"])) for h in r["headers"] or ())
        key = None if r["key"] is None else bytes(r["key"])
        rows.append((r["topic"], r["partition"], r["offset"], key, bytes(r["value"]), r["ts"],
                     headers))  # fmt: skip
    return sorted(rows)


def assert_exactly_once(spark: Any, output: Path, produced: list[Row]) -> None:
    rows = parquet_rows(spark, output)
    assert len(rows) == len(produced)
    assert rows == sorted(produced)


def committed(bootstrap: str, group: str, topic: str, partitions: int = 3) -> dict[int, int]:
    admin = AdminClient({"bootstrap.servers": bootstrap})
    request = ConsumerGroupTopicPartitions(
        group, [TopicPartition(topic, p) for p in range(partitions)]
    )
    result = admin.list_consumer_group_offsets([request])[group].result(30)
    return {tp.partition: tp.offset for tp in result.topic_partitions}


def ends(produced: list[Row], partitions: int = 3) -> dict[int, int]:
    return {
        p: 1 + max((r[2] for r in produced if r[1] == p), default=-1) for p in range(partitions)
    }


def state_dir(output: Path, group: str) -> Path:
    return output / offline_load.STATE_DIR / group


def test_repeated_runs_load_each_record_once(spark, bootstrap: str, new_topic, tmp_path) -> None:
    topic = new_topic(partitions=3, config=KEEP)
    output = tmp_path / "out"
    options = Options(bootstrap, str(output), topics=[topic], group=f"load-{topic}")
    produced = produce(bootstrap, topic, 0, 300)

    first = load(spark, options)
    assert (first.records, first.resumed) == (300, None)
    assert {p.partition: (p.start, p.end, p.records, p.lag) for p in first.partitions} == {
        p: (0, 100, 100, 0) for p in range(3)
    }
    assert first.bytes == sum(len(r[3] or b"") + len(r[4]) for r in produced)
    assert_exactly_once(spark, output, produced)
    assert committed(bootstrap, options.group, topic) == ends(produced)
    # Partitioned by topic and date: three days of records.
    days = sorted(p.name for p in (output / f"topic={topic}").iterdir())
    assert days == ["date=2026-01-01", "date=2026-01-02", "date=2026-01-03"]

    # New records; a capped run loads a fair share of them and reports the lag left.
    produced += produce(bootstrap, topic, 300, 150)
    capped = load(spark, replace(options, max_records=90))
    assert capped.records == 90
    assert sum(p.lag for p in capped.partitions) == 60
    assert {p.partition: p.records for p in capped.partitions} == {0: 30, 1: 30, 2: 30}
    report = offline_load.progress(capped, options.group)
    assert f"{topic}-0: offsets 100..130, 30 records" in report and "lag 20" in report

    rest = load(spark, options)
    assert rest.records == 60 and sum(p.lag for p in rest.partitions) == 0
    assert_exactly_once(spark, output, produced)
    assert committed(bootstrap, options.group, topic) == ends(produced)

    # Nothing new: nothing written, no plan.
    idle = load(spark, options)
    assert (idle.plan, idle.records) == (None, 0)
    assert_exactly_once(spark, output, produced)
    history = state_dir(output, options.group) / "history"
    assert len(list(history.glob("*.json"))) == 3
    assert not (state_dir(output, options.group) / "pending.json").exists()


def test_pattern_and_latest_start(spark, bootstrap: str, new_topic, tmp_path) -> None:
    """A first run from "latest" loads nothing but records where it started; a pattern picks
    up every matching topic, and only those."""
    a, b = new_topic(3, KEEP, "-a"), new_topic(3, KEEP, "-b")
    other = new_topic(3, KEEP, "-c")
    for t in (a, b, other):
        produce(bootstrap, t, 0, 30)
    output = tmp_path / "out"
    options = Options(
        bootstrap, str(output), topic_pattern=f"{a[:-2]}-[ab]", group=f"load-{a}",
        starting_offsets="latest",
    )  # fmt: skip
    first = load(spark, options)
    assert first.records == 0 and {p.topic for p in first.partitions} == {a, b}
    assert committed(bootstrap, options.group, a) == {0: 10, 1: 10, 2: 10}
    new = produce(bootstrap, a, 30, 6) + produce(bootstrap, b, 30, 9)
    produce(bootstrap, other, 30, 3)
    assert load(spark, options).records == 15
    assert_exactly_once(spark, output, new)


def test_clear_errors(spark, bootstrap: str, new_topic, tmp_path, capsys) -> None:
    output = str(tmp_path / "out")
    with pytest.raises(LoadError, match="topic does not exist: no-such-topic"):
        load(spark, Options(bootstrap, output, topics=["no-such-topic"]))
    with pytest.raises(LoadError, match="no topic matches the pattern"):
        load(spark, Options(bootstrap, output, topic_pattern="no-such-.*"))
    unreachable = f"127.0.0.1:{free_port()}"
    with pytest.raises(LoadError, match=f"cannot reach the Kafka brokers at {unreachable}"):
        load(spark, Options(unreachable, output, topics=["t"], timeout_s=3))

    # Records deleted before they were loaded: an error, unless told to skip them.
    topic = new_topic(partitions=1, config=KEEP)
    produce(bootstrap, topic, 0, 20, partitions=1)
    options = Options(bootstrap, output, topics=[topic], group=f"load-{topic}")
    assert load(spark, replace(options, max_records=5)).records == 5
    admin = AdminClient({"bootstrap.servers": bootstrap})
    admin.delete_records([TopicPartition(topic, 0, 12)])[TopicPartition(topic, 0, 12)].result(30)
    with pytest.raises(LoadError, match=f"{topic}-0: offsets 5..12 were deleted"):
        load(spark, options)
    assert load(spark, replace(options, fail_on_data_loss=False)).records == 8

    # The command line says the same on stderr and exits with 2.
    code = offline_load.main(["--bootstrap-servers", bootstrap, "--topics", "no-such-topic",
                              "--output", output])  # fmt: skip
    assert code == 2
    assert "offline-load: error: topic does not exist: no-such-topic" in capsys.readouterr().err


def run_killed_driver(
    tmp_path: Path, crash_at: str, args: list[str]
) -> subprocess.CompletedProcess[str]:
    conf = spark_conf(tmp_path / "driver")
    proc = subprocess.run(
        [sys.executable, str(DRIVER), crash_at, json.dumps(conf), "--", *args],
        capture_output=True, text=True, timeout=600, start_new_session=True,
        env={**os.environ, "PYSPARK_PYTHON": sys.executable, "SPARK_LOCAL_IP": "127.0.0.1",
             "PYTHONPATH": str(Path(__file__).parent)},
    )  # fmt: skip
    assert proc.returncode == -9, f"the driver was not killed ({proc.returncode}):\n{proc.stderr}"
    return proc


@pytest.mark.timeout(900)  # two Spark drivers of their own
def test_driver_killed_while_writing_then_rerun_with_spark_submit(
    spark, bootstrap: str, new_topic, tmp_path
) -> None:
    topic = new_topic(partitions=3, config=KEEP)
    group, output = f"load-{topic}", tmp_path / "out"
    produced = produce(bootstrap, topic, 0, 15_000, size=100)
    args = ["--bootstrap-servers", bootstrap, "--topics", topic, "--group", group,
            "--output", str(output)]  # fmt: skip
    run_killed_driver(tmp_path, "writing", args)
    # Killed with its plan saved and the staging incomplete: nothing published or committed.
    state = state_dir(output, group)
    plan = json.loads((state / "pending.json").read_text())
    assert not (state / "staging" / plan["id"] / "_SUCCESS").exists()
    assert parquet_rows(spark, output) == []
    assert committed(bootstrap, group, topic) == {0: -1001, 1: -1001, 2: -1001}

    produced += produce(bootstrap, topic, 15_000, 300)
    summary = tmp_path / "summary.json"
    rerun = spark_submit(tmp_path / "submit", JOB, [*args, "--summary-json", str(summary)])
    assert rerun.returncode == 0, rerun.stderr[-5000:]
    # (spark-submit merges the Python driver's stderr into its stdout)
    assert f"finishing plan {plan['id']} left by an earlier run" in rerun.stdout
    assert f"first finished plan {plan['id']} of an earlier run (15000 records)" in rerun.stdout
    assert f"{topic}-0: offsets 5000..5100, 100 records" in rerun.stdout
    assert json.loads(summary.read_text())["records"] == 300
    assert_exactly_once(spark, output, produced)
    assert committed(bootstrap, group, topic) == ends(produced)
    assert not (state / "pending.json").exists() and not any((state / "staging").iterdir())


def test_driver_killed_between_publishing_and_committing(
    spark, bootstrap: str, new_topic, tmp_path
) -> None:
    topic = new_topic(partitions=3, config=KEEP)
    group, output = f"load-{topic}", tmp_path / "out"
    produced = produce(bootstrap, topic, 0, 3000)
    options = Options(bootstrap, str(output), topics=[topic], group=group, max_records=1500)
    assert load(spark, options).records == 1500
    before = committed(bootstrap, group, topic)

    args = ["--bootstrap-servers", bootstrap, "--topics", topic, "--group", group,
            "--output", str(output)]  # fmt: skip
    run_killed_driver(tmp_path, "published", args)
    # Every record is in place, but the group's offsets are still those of the first run.
    assert_exactly_once(spark, output, produced)
    assert committed(bootstrap, group, topic) == before

    rerun = load(spark, options)
    assert rerun.resumed is not None and rerun.resumed_records == 1500
    assert rerun.records == 0
    assert_exactly_once(spark, output, produced)
    assert committed(bootstrap, group, topic) == ends(produced)


def test_scram_login_through_command_config(spark, broker_factory, tmp_path) -> None:
    """The job logs in like any Kafka client: SASL/SCRAM-SHA-512 settings from a client
    properties file reach both its admin client and Spark's Kafka source."""
    from confluent_kafka.admin import (
        NewTopic,
        ScramCredentialInfo,
        ScramMechanism,
        UserScramCredentialUpsertion,
    )

    port, sasl_port = free_port(), free_port()
    secured = broker_factory(
        port=port,
        overrides={
            "listeners": f"PLAINTEXT://127.0.0.1:{port},SASL_PLAINTEXT://127.0.0.1:{sasl_port}",
            "listener.name.sasl_plaintext.sasl.enabled.mechanisms": "SCRAM-SHA-512",
        },
    )
    admin = AdminClient({"bootstrap.servers": secured.bootstrap})
    upsert = UserScramCredentialUpsertion(
        "loader", ScramCredentialInfo(ScramMechanism.SCRAM_SHA_512, 4096), b"loader-secret"
    )
    for fut in admin.alter_user_scram_credentials([upsert], request_timeout=30).values():
        fut.result(30)
    new = NewTopic("secured", 3, 1, config=KEEP)
    admin.create_topics([new], operation_timeout=30)["secured"].result(60)
    produced = produce(secured.bootstrap, "secured", 0, 60)

    def properties(password: str) -> Path:
        path = tmp_path / f"client-{password}.properties"
        path.write_text(
            "security.protocol=SASL_PLAINTEXT\nsasl.mechanism=SCRAM-SHA-512\n"
            "sasl.jaas.config=org.apache.kafka.common.security.scram.ScramLoginModule required "
            f'username="loader" password="{password}";\n'
        )
        return path

    output = tmp_path / "out"
    args = ["--bootstrap-servers", f"127.0.0.1:{sasl_port}", "--topics", "secured",
            "--output", str(output), "--timeout", "10"]  # fmt: skip
    options, _ = offline_load.parse_args([*args, "--command-config", str(properties("nope"))])
    with pytest.raises(LoadError, match="Authentication failed"):
        load(spark, options)
    options, _ = offline_load.parse_args(
        [*args, "--command-config", str(properties("loader-secret"))]
    )
    assert load(spark, options).records == 60
    assert_exactly_once(spark, output, produced)
