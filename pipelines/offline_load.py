"""Offline load: bulk-load Kafka topics into Parquet with Spark, each record exactly once.

Run it with spark-submit (Spark's Kafka connector on the classpath), against any Kafka-compatible
cluster:

    spark-submit --jars <the connector's jars> pipelines/offline_load.py \\
        --bootstrap-servers broker:9092 --topics orders,payments --output /data/kafka

Each run loads what arrived since the previous one: one Spark task per topic-partition reads
its offset range with Spark's Kafka source and writes Parquet files partitioned by topic and
record date (UTC), ``<output>/topic=<t>/date=<yyyy-mm-dd>/part-*.parquet``. Columns: partition,
offset, timestamp, timestampType, key, value, headers.

Where the offsets live, and why a failed or repeated run neither duplicates nor skips records:

- The offsets loaded so far are the committed offsets of a consumer group in Kafka (``--group``,
  default ``odradek-offline-load``), so ``kafka-consumer-groups --describe`` shows the lag of the
  load like any consumer's. They are committed only after the run's output is in place.
- A run first writes its plan, the exact offset range of every partition, to
  ``<output>/_offline_load/<group>/pending.json``. Spark writes the range into a staging
  directory of that plan (``staging/<plan>/``); Spark's commit protocol marks the staging
  complete with ``_SUCCESS``. The run then moves the staged files into place under their own
  names (one rename per file, so each file is either staged or published, never both or half),
  commits the plan's end offsets to the group, and moves the plan to ``history/<plan>.json``
  (a record of every range each run loaded).
- A run that finds a pending plan finishes it before planning new work: if the group's offsets
  are already the plan's end, only the bookkeeping was missing; otherwise it rewrites the staging
  if Spark never completed it (the same offset range, so the same records), publishes what is
  still staged, and commits. Killed at any point, a rerun therefore publishes every record of the
  range once. A plan whose start no longer matches the group's offsets (someone reset the group)
  is dropped with a warning, together with what it had not published yet.
- Directories whose names start with ``_`` are invisible to Spark's Parquet reader, so readers
  of ``<output>`` never see staged or half-written files.

Only one run per group may work on an output at a time (schedule it as a Kubernetes Job or
CronJob with ``concurrencyPolicy: Forbid``).

The job talks to Kafka (topics, offsets, the group) through the Java admin client that ships with
the connector, inside Spark's JVM, so it takes the same client properties as Spark's Kafka
source: ``--command-config`` names a Kafka client properties file (security.protocol,
sasl.mechanism, sasl.jaas.config, ssl.truststore.location, ...), ``--kafka-option KEY=VALUE``
adds single ones. They apply to the admin client and, prefixed with ``kafka.``, to the source.
"""

from __future__ import annotations

import argparse
import json
import re
import sys
import time
import uuid
from collections.abc import Callable
from dataclasses import asdict, dataclass, field
from typing import Any

DEFAULT_GROUP = "odradek-offline-load"
STATE_DIR = "_offline_load"
EARLIEST, LATEST = -2, -1
# Consumer settings Spark's Kafka source sets itself and refuses from its options.
SOURCE_OWNED = {
    "group.id",
    "auto.offset.reset",
    "enable.auto.commit",
    "key.deserializer",
    "value.deserializer",
    "interceptor.classes",
}

TopicPartition = tuple[str, int]


class LoadError(Exception):
    """A problem the user has to fix (missing topic, unreachable brokers, lost records)."""


@dataclass(frozen=True)
class Range:
    """The offsets [start, end) of one topic-partition that a plan loads."""

    topic: str
    partition: int
    start: int
    end: int

    @property
    def tp(self) -> TopicPartition:
        return (self.topic, self.partition)


@dataclass
class Plan:
    id: str
    group: str
    ranges: list[Range]
    created_ms: int

    def to_json(self) -> str:
        return json.dumps(asdict(self), indent=1)

    @classmethod
    def from_json(cls, text: str) -> Plan:
        raw = json.loads(text)
        return cls(raw["id"], raw["group"], [Range(**r) for r in raw["ranges"]], raw["created_ms"])

    @property
    def ends(self) -> dict[TopicPartition, int]:
        return {r.tp: r.end for r in self.ranges}


@dataclass
class Options:
    bootstrap_servers: str
    output: str
    topics: list[str] = field(default_factory=list)
    topic_pattern: str | None = None
    group: str = DEFAULT_GROUP
    max_records: int | None = None
    starting_offsets: str = "earliest"
    starting_timestamp: int | None = None
    kafka_options: dict[str, str] = field(default_factory=dict)
    isolation_level: str = "read_committed"
    fail_on_data_loss: bool = True
    timeout_s: float = 60.0


@dataclass
class PartitionStats:
    topic: str
    partition: int
    start: int
    end: int
    records: int = 0
    bytes: int = 0
    lag: int = 0


@dataclass
class Summary:
    plan: str | None  # None when there was nothing to load
    resumed: str | None  # the plan of an earlier, killed run this run finished first
    resumed_records: int
    seconds: float
    partitions: list[PartitionStats]

    @property
    def records(self) -> int:
        return sum(p.records for p in self.partitions)

    @property
    def bytes(self) -> int:
        return sum(p.bytes for p in self.partitions)

    def to_dict(self) -> dict[str, Any]:
        return {
            "plan": self.plan,
            "resumed": self.resumed,
            "resumed_records": self.resumed_records,
            "seconds": self.seconds,
            "records": self.records,
            "bytes": self.bytes,
            "partitions": [asdict(p) for p in self.partitions],
        }


# --- Kafka, through the Java admin client in Spark's JVM ------------------------------------------


class KafkaAdmin:
    """Topics, offsets and the group's committed offsets, with errors a user can act on."""

    def __init__(self, spark: Any, options: Options) -> None:
        self.jvm = spark.sparkContext._jvm
        self.bootstrap = options.bootstrap_servers
        self.timeout_s = options.timeout_s
        self.isolation = options.isolation_level
        props = self.jvm.java.util.Properties()
        timeout_ms = str(int(options.timeout_s * 1000))
        settings = {
            "default.api.timeout.ms": timeout_ms,
            "request.timeout.ms": str(min(int(options.timeout_s * 1000), 30000)),
            "client.id": f"offline-load-{options.group}",
            **options.kafka_options,
            "bootstrap.servers": options.bootstrap_servers,
        }
        for key, value in settings.items():
            props.put(key, value)
        admin = self.jvm.org.apache.kafka.clients.admin
        try:
            self.admin = admin.Admin.create(props)
        except Exception as e:  # noqa: BLE001 - a bad property, reported as the client says
            raise LoadError(f"cannot create a Kafka client: {_java_message(e)}") from None
        self._admin_pkg = admin

    def close(self) -> None:
        self.admin.close()

    def _wait(self, future: Any, what: str) -> Any:
        unit = self.jvm.java.util.concurrent.TimeUnit.MILLISECONDS
        try:
            return future.get(int(self.timeout_s * 1000) + 5000, unit)
        except Exception as e:  # noqa: BLE001 - py4j wraps every Java exception alike
            name, message = _java_cause(e)
            if name.endswith("TimeoutException"):
                raise LoadError(
                    f"cannot reach the Kafka brokers at {self.bootstrap}: {what} got no answer "
                    f"within {self.timeout_s:g} s ({message})"
                ) from None
            if name.endswith("UnknownTopicOrPartitionException"):
                raise LoadError(f"{what}: {message}") from None
            raise LoadError(f"{what} failed: {name.rsplit('.', 1)[-1]}: {message}") from None

    def topics(self) -> set[str]:
        names = self._wait(self.admin.listTopics().names(), "listing topics")
        return {str(n) for n in names}

    def partition_counts(self, topics: list[str]) -> dict[str, int]:
        described = self._wait(
            self.admin.describeTopics(_java_list(self.jvm, topics)).allTopicNames(),
            "describing topics",
        )
        return {str(name): len(desc.partitions()) for name, desc in described.items()}

    def offsets(self, tps: list[TopicPartition], spec: int) -> dict[TopicPartition, int]:
        """EARLIEST, LATEST (the last stable offset under read_committed) or a timestamp."""
        offset_spec = self._admin_pkg.OffsetSpec
        if spec == EARLIEST:
            which = offset_spec.earliest()
        elif spec == LATEST:
            which = offset_spec.latest()
        else:
            which = offset_spec.forTimestamp(spec)
        wanted = self.jvm.java.util.HashMap()
        for topic, partition in tps:
            wanted.put(self.jvm.org.apache.kafka.common.TopicPartition(topic, partition), which)
        level = self.jvm.org.apache.kafka.common.IsolationLevel
        isolation = (
            level.READ_COMMITTED if self.isolation == "read_committed" else level.READ_UNCOMMITTED
        )
        options = self._admin_pkg.ListOffsetsOptions(isolation)
        result = self._wait(self.admin.listOffsets(wanted, options).all(), "listing offsets")
        return {(str(tp.topic()), int(tp.partition())): int(r.offset()) for tp, r in result.items()}

    def committed(self, group: str) -> dict[TopicPartition, int]:
        result = self._wait(
            self.admin.listConsumerGroupOffsets(group).partitionsToOffsetAndMetadata(),
            f"reading the committed offsets of group {group}",
        )
        return {
            (str(tp.topic()), int(tp.partition())): int(om.offset())
            for tp, om in result.items()
            if om is not None
        }

    def commit(self, group: str, offsets: dict[TopicPartition, int], note: str) -> None:
        java_offsets = self.jvm.java.util.HashMap()
        for (topic, partition), offset in offsets.items():
            java_offsets.put(
                self.jvm.org.apache.kafka.common.TopicPartition(topic, partition),
                self.jvm.org.apache.kafka.clients.consumer.OffsetAndMetadata(offset, note),
            )
        self._wait(
            self.admin.alterConsumerGroupOffsets(group, java_offsets).all(),
            f"committing the offsets of group {group}",
        )


def _java_list(jvm: Any, items: list[str]) -> Any:
    out = jvm.java.util.ArrayList()
    for item in items:
        out.add(item)
    return out


def _java_cause(e: Exception) -> tuple[str, str]:
    """(class name, message) of the innermost cause of a Java exception raised through py4j."""
    java = getattr(e, "java_exception", None)
    if java is None:
        return type(e).__name__, str(e)
    while java.getCause() is not None and java.getCause() != java:
        java = java.getCause()
    return str(java.getClass().getName()), str(java.getMessage())


def _java_message(e: Exception) -> str:
    name, message = _java_cause(e)
    return f"{name.rsplit('.', 1)[-1]}: {message}"


# --- the output directory, through Hadoop's FileSystem (local, HDFS, S3A, ...) ------------------


class OutputState:
    """The plan files and staging directories of one group under ``<output>/_offline_load``."""

    def __init__(self, spark: Any, output: str, group: str) -> None:
        self.jvm = spark.sparkContext._jvm
        self.output = output.rstrip("/")
        self.base = f"{self.output}/{STATE_DIR}/{group}"
        self.fs = self._path(self.output).getFileSystem(
            spark.sparkContext._jsc.hadoopConfiguration()
        )

    def _path(self, path: str) -> Any:
        return self.jvm.org.apache.hadoop.fs.Path(path)

    def exists(self, path: str) -> bool:
        return bool(self.fs.exists(self._path(path)))

    def delete(self, path: str) -> None:
        self.fs.delete(self._path(path), True)

    def read_text(self, path: str) -> str:
        stream = self.fs.open(self._path(path))
        try:
            return str(self.jvm.org.apache.commons.io.IOUtils.toString(stream, "UTF-8"))
        finally:
            stream.close()

    def write_text(self, path: str, text: str) -> None:
        """Write through a temporary file and a rename, so a crash leaves old or new, not half."""
        tmp = f"{path}.tmp"
        stream = self.fs.create(self._path(tmp), True)
        try:
            stream.write(bytearray(text.encode()))
        finally:
            stream.close()
        self.rename(tmp, path)

    def rename(self, src: str, dst: str) -> None:
        if self.exists(dst):
            self.delete(dst)
        self.fs.mkdirs(self._path(dst).getParent())
        if not self.fs.rename(self._path(src), self._path(dst)):
            raise LoadError(f"cannot move {src} to {dst}")

    @property
    def pending_path(self) -> str:
        return f"{self.base}/pending.json"

    def staging(self, plan: Plan) -> str:
        return f"{self.base}/staging/{plan.id}"

    def pending(self) -> Plan | None:
        if self.exists(f"{self.pending_path}.tmp"):
            self.delete(f"{self.pending_path}.tmp")  # a plan that was never saved
        if not self.exists(self.pending_path):
            return None
        return Plan.from_json(self.read_text(self.pending_path))

    def save_pending(self, plan: Plan) -> None:
        self.write_text(self.pending_path, plan.to_json())

    def drop_orphans(self, keep: Plan | None) -> None:
        """Staging directories of plans that are neither pending nor kept."""
        staging = self._path(f"{self.base}/staging")
        if not self.fs.exists(staging):
            return
        for status in self.fs.listStatus(staging):
            if keep is None or status.getPath().getName() != keep.id:
                self.fs.delete(status.getPath(), True)

    def staged_files(self, plan: Plan) -> list[str]:
        """Relative paths of the data files still staged for `plan` (hidden files excluded)."""
        root = self.staging(plan)
        if not self.exists(root):
            return []
        prefix = str(self.fs.makeQualified(self._path(root)).toUri().getPath()).rstrip("/") + "/"
        files = []
        it = self.fs.listFiles(self._path(root), True)
        while it.hasNext():
            path = it.next().getPath()
            rel = str(path.toUri().getPath())[len(prefix) :]
            if not any(part.startswith(("_", ".")) for part in rel.split("/")):
                files.append(rel)
        return sorted(files)

    def finish(self, plan: Plan) -> None:
        self.rename(self.pending_path, f"{self.base}/history/{plan.id}.json")
        self.delete(self.staging(plan))


# --- planning -------------------------------------------------------------------------------------


def resolve_topics(admin: KafkaAdmin, options: Options) -> list[str]:
    existing = admin.topics()
    if options.topic_pattern is not None:
        pattern = re.compile(options.topic_pattern)
        topics = sorted(t for t in existing if pattern.fullmatch(t) and not t.startswith("__"))
        if not topics:
            raise LoadError(f"no topic matches the pattern {options.topic_pattern!r}")
        return topics
    missing = sorted(set(options.topics) - existing)
    if missing:
        raise LoadError(f"topic does not exist: {', '.join(missing)}")
    return sorted(set(options.topics))


def first_run_starts(
    admin: KafkaAdmin, options: Options, tps: list[TopicPartition]
) -> dict[TopicPartition, int]:
    """Where partitions that the group never loaded begin: --starting-offsets/-timestamp."""
    if not tps:
        return {}
    if options.starting_timestamp is not None:
        found = admin.offsets(tps, options.starting_timestamp)
        latest = admin.offsets(tps, LATEST)
        return {tp: found[tp] if found[tp] >= 0 else latest[tp] for tp in tps}
    spec = options.starting_offsets
    if spec in ("earliest", "latest"):
        return admin.offsets(tps, EARLIEST if spec == "earliest" else LATEST)
    try:
        given = json.loads(spec)
        explicit = {(t, int(p)): int(o) for t, parts in given.items() for p, o in parts.items()}
    except (ValueError, AttributeError, TypeError):
        raise LoadError(
            "--starting-offsets takes earliest, latest or JSON like "
            '{"topic": {"0": 42, "1": -2}} (-2 earliest, -1 latest)'
        ) from None
    earliest = admin.offsets(tps, EARLIEST)
    latest = admin.offsets(tps, LATEST)
    starts = {}
    for tp in tps:
        offset = explicit.get(tp, EARLIEST)
        starts[tp] = (
            earliest[tp] if offset == EARLIEST else latest[tp] if offset == LATEST else offset
        )
    return starts


def allocate(lags: dict[TopicPartition, int], budget: int | None) -> dict[TopicPartition, int]:
    """How many records each partition may load: all of them, or a fair share of `budget`."""
    if budget is None:
        return dict(lags)
    share = dict.fromkeys(lags, 0)
    waiting = {tp: lag for tp, lag in lags.items() if lag > 0}
    left = budget
    while waiting and left > 0:
        each = max(left // len(waiting), 1)
        for tp in sorted(waiting):
            take = min(each, waiting[tp], left)
            share[tp] += take
            waiting[tp] -= take
            left -= take
            if not waiting[tp]:
                del waiting[tp]
            if not left:
                break
    return share


def make_plan(
    admin: KafkaAdmin, options: Options, topics: list[str]
) -> tuple[Plan, dict[TopicPartition, int], dict[TopicPartition, int]]:
    """The next offset ranges, the latest offset of every partition (for the lag) and the
    group's committed offsets."""
    counts = admin.partition_counts(topics)
    tps = [(t, p) for t in topics for p in range(counts[t])]
    committed = admin.committed(options.group)
    earliest = admin.offsets(tps, EARLIEST)
    latest = admin.offsets(tps, LATEST)
    known_topics = {t for t, _ in committed}
    # A partition added to a topic the group already loads starts at its beginning.
    starts = first_run_starts(admin, options, [tp for tp in tps if tp[0] not in known_topics])
    for tp in tps:
        if tp in committed:
            starts[tp] = committed[tp]
        elif tp[0] in known_topics:
            starts[tp] = earliest[tp]
    for tp in tps:
        start = starts[tp]
        if start < earliest[tp]:
            if options.fail_on_data_loss:
                raise LoadError(
                    f"{tp[0]}-{tp[1]}: offsets {start}..{earliest[tp]} were deleted (retention) "
                    f"before they were loaded; rerun with --no-fail-on-data-loss to skip them"
                )
            log(f"warning: {tp[0]}-{tp[1]}: skipping deleted offsets {start}..{earliest[tp]}")
            starts[tp] = earliest[tp]
        elif start > latest[tp]:
            raise LoadError(
                f"{tp[0]}-{tp[1]}: the group's offset {start} is past the end of the partition "
                f"({latest[tp]}); was the topic recreated? Reset the group {options.group} to "
                "load it again"
            )
    shares = allocate({tp: latest[tp] - starts[tp] for tp in tps}, options.max_records)
    ranges = [Range(t, p, starts[(t, p)], starts[(t, p)] + shares[(t, p)]) for t, p in tps]
    plan = Plan(uuid.uuid4().hex, options.group, ranges, int(time.time() * 1000))
    return plan, latest, committed


# --- running a plan -------------------------------------------------------------------------------


Phase = Callable[[str, Plan], None]


def read_ranges(spark: Any, options: Options, plan: Plan) -> Any:
    """Spark's Kafka source over the plan's non-empty ranges: one task per topic-partition."""
    from pyspark.sql import functions as F

    ranges = [r for r in plan.ranges if r.end > r.start]
    assign: dict[str, list[int]] = {}
    starting: dict[str, dict[str, int]] = {}
    ending: dict[str, dict[str, int]] = {}
    for r in ranges:
        assign.setdefault(r.topic, []).append(r.partition)
        starting.setdefault(r.topic, {})[str(r.partition)] = r.start
        ending.setdefault(r.topic, {})[str(r.partition)] = r.end
    reader = (
        spark.read.format("kafka")
        .option("kafka.bootstrap.servers", options.bootstrap_servers)
        .option("assign", json.dumps(assign))
        .option("startingOffsets", json.dumps(starting))
        .option("endingOffsets", json.dumps(ending))
        .option("includeHeaders", "true")
        .option("failOnDataLoss", str(options.fail_on_data_loss).lower())
        .option("kafka.isolation.level", options.isolation_level)
    )
    for key, value in options.kafka_options.items():
        if key not in SOURCE_OWNED:
            reader = reader.option(f"kafka.{key}", value)
    day_us = 86_400_000_000
    return reader.load().select(
        "topic",
        "partition",
        "offset",
        "timestamp",
        "timestampType",
        "key",
        "value",
        "headers",
        # The record's UTC date, whatever the session's time zone.
        F.date_from_unix_date(F.floor(F.unix_micros("timestamp") / day_us).cast("int")).alias(
            "date"
        ),
    )


def write_parquet(spark: Any, df: Any, path: str) -> None:
    """Parquet partitioned by topic and date, timestamps as TIMESTAMP_MICROS (readable by every
    Parquet reader, unlike Spark's default INT96)."""
    key = "spark.sql.parquet.outputTimestampType"
    before = spark.conf.get(key, None)
    spark.conf.set(key, "TIMESTAMP_MICROS")
    try:
        df.write.partitionBy("topic", "date").parquet(path)
    finally:
        if before is None:
            spark.conf.unset(key)
        else:
            spark.conf.set(key, before)


def staged_stats(spark: Any, path: str) -> dict[TopicPartition, tuple[int, int]]:
    """(records, key and value bytes) per topic-partition of a complete staging directory."""
    from pyspark.sql import functions as F

    rows = (
        spark.read.parquet(path)
        .groupBy("topic", "partition")
        .agg(
            F.count(F.lit(1)).alias("records"),
            F.sum(
                F.coalesce(F.octet_length("key"), F.lit(0))
                + F.coalesce(F.octet_length("value"), F.lit(0))
            ).alias("bytes"),
        )
        .collect()
    )
    return {(r["topic"], r["partition"]): (r["records"], r["bytes"] or 0) for r in rows}


def execute(
    spark: Any,
    options: Options,
    admin: KafkaAdmin,
    state: OutputState,
    plan: Plan,
    on_phase: Phase,
) -> dict[TopicPartition, tuple[int, int]]:
    """Stage, publish and commit `plan` (or finish what a killed run left of it)."""
    state.save_pending(plan)
    staging = state.staging(plan)
    stats_path = f"{staging}/_stats.json"
    if any(r.end > r.start for r in plan.ranges):
        if not state.exists(f"{staging}/_SUCCESS"):
            state.delete(staging)
            on_phase("writing", plan)
            try:
                write_parquet(spark, read_ranges(spark, options, plan), staging)
            except Exception as e:  # noqa: BLE001 - py4j wraps every Java exception alike
                if getattr(e, "java_exception", None) is None:
                    raise
                raise LoadError(f"the Spark job failed: {_java_message(e)}") from None
            on_phase("written", plan)
        if not state.exists(stats_path):
            stats = staged_stats(spark, staging)
            state.write_text(
                stats_path, json.dumps([[t, p, n, b] for (t, p), (n, b) in stats.items()])
            )
        stats = {(t, p): (n, b) for t, p, n, b in json.loads(state.read_text(stats_path))}
        for rel in state.staged_files(plan):
            state.rename(f"{staging}/{rel}", f"{state.output}/{rel}")
        on_phase("published", plan)
    else:
        stats = {}
    admin.commit(options.group, plan.ends, f"offline-load plan {plan.id}")
    on_phase("committed", plan)
    state.finish(plan)
    return stats


def finish_pending(
    spark: Any,
    options: Options,
    admin: KafkaAdmin,
    state: OutputState,
    pending: Plan,
    on_phase: Phase,
) -> dict[TopicPartition, tuple[int, int]] | None:
    """Finish the plan a killed run left; its stats when it was resumed, None when it only
    needed tidying away."""
    committed = admin.committed(pending.group)
    if all(committed.get(r.tp) == r.end for r in pending.ranges):
        state.finish(pending)  # the offsets were committed; only the bookkeeping was missing
        return None
    if any(committed.get(r.tp) not in (None, r.start, r.end) for r in pending.ranges):
        log(
            f"warning: dropping unfinished plan {pending.id}: the offsets of group "
            f"{pending.group} were changed since it was made"
        )
        state.delete(state.staging(pending))
        state.delete(state.pending_path)
        return None
    log(f"finishing plan {pending.id} left by an earlier run")
    return execute(spark, options, admin, state, pending, on_phase)


def load(spark: Any, options: Options, on_phase: Phase | None = None) -> Summary:
    """One run: finish any plan a killed run left, then load what is new (at most
    --max-records records). `on_phase(name, plan)` is called as a plan moves through
    writing, written, published and committed."""
    phase = on_phase or (lambda _name, _plan: None)
    began = time.monotonic()
    state = OutputState(spark, options.output, options.group)
    admin = KafkaAdmin(spark, options)
    try:
        topics = resolve_topics(admin, options)
        pending = state.pending()
        state.drop_orphans(pending)
        resumed: Plan | None = None
        resumed_stats: dict[TopicPartition, tuple[int, int]] = {}
        if pending is not None:
            done = finish_pending(spark, options, admin, state, pending, phase)
            if done is not None:
                resumed, resumed_stats = pending, done
        plan, latest, committed = make_plan(admin, options, topics)
        ran = any(r.end > r.start or committed.get(r.tp) != r.end for r in plan.ranges)
        # Without new records, and with the group's offsets already at the end, nothing is done.
        stats = execute(spark, options, admin, state, plan, phase) if ran else {}
    finally:
        admin.close()
    parts = []
    for r in plan.ranges:
        records, size = stats.get(r.tp, (0, 0))
        lag = latest[r.tp] - r.end
        parts.append(PartitionStats(r.topic, r.partition, r.start, r.end, records, size, lag))
    return Summary(
        plan.id if ran else None,
        resumed.id if resumed is not None else None,
        sum(n for n, _ in resumed_stats.values()),
        time.monotonic() - began,
        parts,
    )


# --- command line ---------------------------------------------------------------------------------


def log(message: str) -> None:
    print(f"offline-load: {message}", file=sys.stderr, flush=True)


def progress(summary: Summary, group: str) -> str:
    """The per-run progress report: records, bytes and lag left per topic-partition."""
    loaded = summary.records + summary.resumed_records
    rate = loaded / summary.seconds if summary.seconds > 0 else 0.0
    lines = [
        f"offline-load: group {group}, plan {summary.plan or '(none: nothing new)'}: "
        f"{summary.records} records, "
        f"{_size(summary.bytes)} from {len(summary.partitions)} topic-partitions in "
        f"{summary.seconds:.1f} s ({rate:,.0f} records/s), lag left "
        f"{sum(p.lag for p in summary.partitions)}"
    ]
    if summary.resumed:
        lines.append(
            f"offline-load: first finished plan {summary.resumed} of an earlier run "
            f"({summary.resumed_records} records)"
        )
    for p in summary.partitions:
        lines.append(
            f"  {p.topic}-{p.partition}: offsets {p.start}..{p.end}, {p.records} records, "
            f"{_size(p.bytes)}, lag {p.lag}"
        )
    return "\n".join(lines)


def _size(n: int) -> str:
    for unit in ("B", "kB", "MB", "GB"):
        if n < 1000 or unit == "GB":
            return f"{n:.0f} {unit}" if unit == "B" else f"{n:.1f} {unit}"
        n /= 1000
    return f"{n} B"


def read_properties(path: str) -> dict[str, str]:
    """A Java properties file of Kafka client settings (key=value lines, # comments)."""
    props = {}
    try:
        with open(path, encoding="utf-8") as f:
            for raw in f:
                line = raw.strip()
                if not line or line.startswith(("#", "!")):
                    continue
                key, sep, value = line.partition("=")
                if not sep:
                    raise LoadError(f"{path}: not a key=value line: {line!r}")
                props[key.strip()] = value.strip()
    except OSError as e:
        raise LoadError(f"cannot read {path}: {e.strerror}") from None
    return props


def parse_args(argv: list[str] | None) -> tuple[Options, str | None]:
    parser = argparse.ArgumentParser(
        prog="offline_load.py",
        description="Bulk-load Kafka topics into Parquet (partitioned by topic and date), "
        "restartable from the offsets committed to a consumer group.",
    )
    parser.add_argument("--bootstrap-servers", required=True, help="host:port[,host:port...]")
    which = parser.add_mutually_exclusive_group(required=True)
    which.add_argument("--topics", help="comma-separated topic names")
    which.add_argument("--topic-pattern", help="regular expression matching whole topic names")
    parser.add_argument("--output", required=True, help="output directory (any Hadoop path)")
    parser.add_argument("--group", default=DEFAULT_GROUP, help="consumer group of the offsets")
    parser.add_argument("--max-records", type=int, help="load at most this many records per run")
    parser.add_argument(
        "--starting-offsets",
        default="earliest",
        help="first run only: earliest (default), latest, or JSON "
        '{"topic": {"0": 42}} (-2 earliest, -1 latest)',
    )
    parser.add_argument(
        "--starting-timestamp", type=int, help="first run only: start at this time (ms)"
    )
    parser.add_argument("--command-config", help="Kafka client properties file (TLS, SASL)")
    parser.add_argument(
        "--kafka-option", action="append", default=[], metavar="KEY=VALUE",
        help="one Kafka client property (repeatable)",
    )  # fmt: skip
    parser.add_argument(
        "--isolation-level",
        choices=["read_committed", "read_uncommitted"],
        default="read_committed",
    )
    parser.add_argument(
        "--fail-on-data-loss",
        action=argparse.BooleanOptionalAction,
        default=True,
        help="stop when records to load were deleted first (default: on)",
    )
    parser.add_argument("--timeout", type=float, default=60.0, help="Kafka request timeout (s)")
    parser.add_argument("--summary-json", help="also write the run's summary to this file")
    args = parser.parse_args(argv)
    if args.max_records is not None and args.max_records < 1:
        parser.error("--max-records must be at least 1")
    kafka_options = read_properties(args.command_config) if args.command_config else {}
    for item in args.kafka_option:
        key, sep, value = item.partition("=")
        if not sep:
            parser.error(f"--kafka-option takes KEY=VALUE, not {item!r}")
        kafka_options[key.strip()] = value.strip()
    options = Options(
        bootstrap_servers=args.bootstrap_servers,
        output=args.output,
        topics=[t.strip() for t in (args.topics or "").split(",") if t.strip()],
        topic_pattern=args.topic_pattern,
        group=args.group,
        max_records=args.max_records,
        starting_offsets=args.starting_offsets,
        starting_timestamp=args.starting_timestamp,
        kafka_options=kafka_options,
        isolation_level=args.isolation_level,
        fail_on_data_loss=args.fail_on_data_loss,
        timeout_s=args.timeout,
    )
    return options, args.summary_json


def main(argv: list[str] | None = None) -> int:
    try:
        options, summary_json = parse_args(argv)
    except LoadError as e:
        log(f"error: {e}")
        return 2
    from pyspark.sql import SparkSession

    # Under spark-submit the job owns its session; called from a running application, it
    # borrows that application's session and leaves it running.
    owned = SparkSession.getActiveSession() is None
    spark = SparkSession.builder.appName("odradek-offline-load").getOrCreate()
    try:
        summary = load(spark, options)
    except LoadError as e:
        log(f"error: {e}")
        return 2
    finally:
        if owned:
            spark.stop()
    print(progress(summary, options.group), flush=True)
    if summary_json:
        with open(summary_json, "w", encoding="utf-8") as f:
            json.dump(summary.to_dict(), f, indent=1)
    return 0


if __name__ == "__main__":
    sys.exit(main())
