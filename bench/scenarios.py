"""The scenarios of bench/run.py. Each runs on a deployment (systems.py) started for it or shared
with scenarios of the same kind, once per repeat, and adds its measurements to the results.

Client work happens in bench/loadgen.py processes; the functions here orchestrate them, time
what the clients cannot (start-up, recovery) and account the brokers' CPU time and memory.
"""

from __future__ import annotations

import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
from array import array
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field, replace
from pathlib import Path

from baton import Baton
from confluent_kafka import Consumer, ElectionType, TopicPartition
from confluent_kafka.admin import AdminClient
from loadgen import create_topics, percentile
from report import Results
from systems import Deployment

HERE = Path(__file__).resolve().parent
LOADGEN = HERE / "loadgen.py"
KiB = 1024
SIZES = (100, KiB, 10 * KiB)
# glibc's allocator in every load generator: a fixed mmap threshold and no trimming. With its
# defaults a reader of 10 KiB records gave memory back and faulted it in again (three times the
# page faults) and read a quarter slower from either system (bench/README.md, "Phase length").
CLIENT_MALLOC = {"MALLOC_MMAP_THRESHOLD_": str(32 << 20), "MALLOC_TRIM_THRESHOLD_": str(4 << 30)}


# A produce phase sends for a fixed time, not a fixed count: the fast producers sent the former
# 64 MB in 0.15 to 0.3 s, where one stall moved a median by a fifth (bench/README.md). 3 s
# rather than the 4 s until stop 42, for a full run within 30 minutes on the slower machine.
PHASE_SECONDS = 3.0
# The two systems rehearse side by side, on half the cores each. With 2 s phases Kafka's
# produce rows still climbed through the repeats after it (1 KiB 451,000, 572,000, 626,000
# records/s; 10 KiB 52,000 to 73,000); with 5 s they held (591,000 to 606,000; 68,000 to
# 74,000), for 16 s more of the produce scenario's rehearsal.
REHEARSAL_SECONDS = 5.0
# Kafka's transaction coordinator runs a few hundred times a second here, and its JIT wants
# tens of seconds of that: after a rehearsal of 1 s its repeats rose from 15,000-19,000 to
# 34,000-38,000 records/s through every full run (one partition and eight alike).
TXN_REHEARSAL_SECONDS = 15.0
# Kafka's cleaner read 647 to 821 MB/s in the first of its three repeats and 701 to 1,164
# after (nine full runs, stops 48 to 50): the one rehearsal cleans this much first.
REHEARSAL_COMPACTION_MB = 256
LATENCY_SECONDS = 5.0  # of sending at the offered rate (the first fifth not counted)
OFFLINE_RECORDS = 500_000


def size_label(size: int) -> str:
    return f"{size} B" if size < KiB else f"{size // KiB} KiB"


@dataclass(frozen=True)
class Plan:
    """How big a run is: `--quick` shrinks everything to a smoke test."""

    quick: bool
    repeats: int
    phase_seconds: float  # of a produce phase: it sends for this long
    phase_bytes: int  # values written into a consume row's topic (records = phase_bytes / size)
    max_records: int
    duration: float  # time bound of one phase (s)
    partitions: int  # of the single-broker topics
    many_partitions: int
    scale_topics: int  # the partitions-scale scenario: topics of many_partitions each
    recovery_mb: int
    recovery_segment_bytes: int
    catchup_mb: int  # what a stopped follower misses and catches up
    latency_seconds: float
    compaction_mb: int
    offline_records: int
    slow_repeats: int  # the 1 GB compaction fill is slow: three at most (Kafka's cleaner warms)
    # restarts (start-up, catch-up) and spark-submit (its rate moved 1-2% between runs) are
    # slow: two at most
    structural_repeats: int
    long_restarts: int  # Kafka's kill -9 on 2 GB and its start over 10,000 partitions: 20-40 s
    # records of 1 KiB the cluster's consumer group reads: the first of its topic, topped up
    # (not measured) when the 8 producers wrote fewer, so both systems' groups read as many
    group_records: int

    @classmethod
    def make(
        cls,
        quick: bool,
        repeats: int | None,
        phase_mb: int | None = None,
        phase_seconds: float | None = None,
    ) -> Plan:
        if quick:
            plan = cls(True, repeats or 1, 0.5, 8_000_000, 20_000, 10.0, 4, 100, 4,
                       32, 1_000_000, 32, 2.0, 16, 50_000, 1, 1, 1, 7_812)  # fmt: skip
        else:
            reps = repeats or 5
            plan = cls(False, reps, PHASE_SECONDS, 500_000_000, 1_000_000, 30.0, 4, 1000, 10,
                       2000, 1_000_000, 1000, LATENCY_SECONDS, 1024, OFFLINE_RECORDS, min(reps, 3),
                       min(reps, 2), 1, 2_000_000)  # fmt: skip
        if phase_mb:
            mb = phase_mb * 1_000_000
            plan = replace(plan, phase_bytes=mb, max_records=max(plan.max_records, mb // 200))
            plan = replace(plan, group_records=plan.records(KiB))
        if phase_seconds:
            plan = replace(plan, phase_seconds=phase_seconds)
        return plan

    def records(self, size: int) -> int:
        return max(1000, min(self.max_records, self.phase_bytes // size))

    def rehearsal(self) -> Plan:
        """Every throughput phase once, shorter, before the measured repeats: without it Kafka's
        first repeats ran at half speed (its JIT had compiled the paths the 30,000-record
        warm-up took, not acks=all, 10 KiB or the transaction coordinator), and its
        8-producer row rose from 110,000 to 230,000 records/s across the five repeats of that run."""
        return replace(self, repeats=1, phase_seconds=REHEARSAL_SECONDS, phase_bytes=100_000_000,
                       group_records=100_000, compaction_mb=REHEARSAL_COMPACTION_MB)  # fmt: skip


@dataclass
class Ctx:
    """What a scenario needs: the deployment, the plan, the results and the progress output."""

    deployment: Deployment
    plan: Plan
    results: Results
    scenario: str = ""
    repeat: int = 0
    repeats: int = 1  # of the current scenario (fewer for the slow ones, see within)
    cpu: float = 0.0  # broker CPU seconds of the measured phases
    moved: int = 0  # records produced or consumed in those phases
    peak_rss: int = 0  # the largest VmHWM seen, kept across broker restarts
    shared: dict = field(default_factory=dict)  # topics one scenario leaves for another
    rehearsing: bool = False  # nothing is recorded (see bench/run.py rehearse)
    rehearsed: dict[str, float] = field(default_factory=dict)  # a rehearsal's rates by label
    baton: Baton | None = None  # handed on between measurements (see baton.py)
    owes_turn: bool = False  # measured since it took the baton: hands it on at the next phase

    @property
    def system(self) -> str:
        return self.deployment.system

    def loadgen(self, phase: str, **options: object) -> dict:
        bound = float(options.get("duration", self.plan.duration))  # type: ignore[arg-type]
        self.before_phase()
        out = subprocess.run(
            self.loadgen_command(phase, **options),
            capture_output=True,
            text=True,
            env=client_env(),
            timeout=3 * bound + 180,
        )
        if out.returncode != 0 or not out.stdout.strip():
            raise RuntimeError(f"loadgen {phase} failed ({out.returncode}): {out.stderr[-1500:]}")
        result = json.loads(out.stdout.strip().splitlines()[-1])
        if result.get("error") and not result.get("records") and phase != "create":
            raise RuntimeError(f"loadgen {phase}: {result['error']}")
        return result

    def loadgen_command(self, phase: str, **options: object) -> list[str]:
        options.setdefault("duration", self.plan.duration)
        bootstrap = options.pop("bootstrap", None) or self.deployment.bootstrap
        cmd = [sys.executable, str(LOADGEN), phase, "--bootstrap", str(bootstrap)]
        for key, value in options.items():
            flag = f"--{key.replace('_', '-')}"
            if value is True:
                cmd.append(flag)
            elif isinstance(value, list):
                for item in value:
                    cmd += [flag, str(item)]
            elif value is not False and value is not None:
                cmd += [flag, str(value)]
        return cmd

    def create(self, prefix: str, partitions: int, replication: int = 1, **config: str) -> str:
        return self.create_many([prefix], partitions, replication, **config)[0]

    def create_many(
        self, prefixes: list[str], partitions: int, replication: int = 1, **config: str
    ) -> list[str]:
        """Fresh topics named after `prefixes`, created in one request; every partition led.
        Created from this process (loadgen.create_topics), after handing on the baton as a
        client phase does."""
        self.before_phase()
        result = create_topics(
            admin_client(self.deployment.bootstrap),
            prefixes,
            partitions,
            replication,
            {k.replace("_", "."): v for k, v in config.items()},
            max(self.plan.duration, 120),
        )
        if not result.get("topics"):
            raise RuntimeError(result.get("error") or "topic creation failed")
        return result["topics"]

    def delete(self, *topics: str) -> None:
        """Drop topics whose rows are done: a timed produce phase writes gigabytes."""
        delete_topics(self.deployment.bootstrap, list(topics))
        self.deployment.wait_removed(list(topics))

    def produce_for(self, topic: str, size: int, **options: object) -> dict:
        """A produce phase of `plan.phase_seconds` (see loadgen.py produce --seconds)."""
        return self.loadgen("produce", topic=topic, seconds=self.plan.phase_seconds, size=size,
                            **options)  # fmt: skip

    def read_for(self, topic: str, records: int, partitions: int) -> dict:
        """A consume phase of `plan.phase_seconds` over a topic holding `records`, a consumer
        per second (see loadgen.py consume --seconds)."""
        seconds = self.plan.phase_seconds
        return self.loadgen("consume", topic=topic, records=records, partitions=partitions,
                            seconds=seconds, readers=max(1, round(seconds)))  # fmt: skip

    def within(self, repeats: int) -> bool:
        """Whether this repeat is one of the first `repeats` of a slow scenario (measured
        fewer times than --repeats says); the progress lines count to that."""
        self.repeats = min(self.repeats, repeats)
        return self.repeat < repeats

    @property
    def in_last_repeat(self) -> bool:
        return not self.rehearsing and self.repeat == self.plan.repeats - 1

    def last_rounds(self, rounds: int) -> Iterator[int]:
        """The rounds of a measurement that restarts a broker, all of them in the last repeat:
        no measured phase of the deployment follows a restart, which leaves a JVM cold (Kafka's
        produce over 1,000 partitions read 457,000 to 475,000 records/s in the repeats after
        one, 561,000 to 612,000 later). The progress lines count the rounds."""
        if not self.in_last_repeat:
            return
        last = self.repeat
        self.repeats = rounds
        try:
            for self.repeat in range(rounds):
                yield self.repeat
        finally:
            self.repeat = last

    def record(self, label: str, unit: str, higher: bool, value: float, shown: str = "") -> None:
        if self.rehearsing:
            if unit == "rec/s":
                self.rehearsed[label] = value
            return
        self.results.add(self.scenario, label, unit, higher, self.system, value)
        n = f"{self.repeat + 1}/{self.repeats}"
        print(
            f"  [{time.strftime('%H:%M:%S')}] {self.scenario} · {self.system} · {label} #{n}: "
            f"{shown or f'{value:,.2f} {unit}'}",
            flush=True,
        )
        self.owes_turn = True

    def fail(self, label: str, unit: str, higher: bool, exc: BaseException) -> None:
        if self.rehearsing:
            print(f"  rehearsal · {label}: failed {exc}"[:600], flush=True)
            return
        self.results.error(self.scenario, label, unit, higher, self.system, str(exc))
        print(f"  {self.scenario} · {self.system} · {label}: FAILED {exc}"[:600], flush=True)
        self.owes_turn = True

    def before_phase(self) -> None:
        """A client phase or a timed step starts. Having measured since it took the baton,
        this system hands it on first, so the other measures the same row; the clean-up after
        the measurement (a deleted topic's gigabytes, whose dirty pages are then dropped rather
        than written back) stays in this system's turn. Then the page cache is written back."""
        if self.owes_turn and self.baton is not None:
            self.owes_turn = False
            self.baton.pass_on(self.system)
        write_back()

    def note_peak(self) -> None:
        """Remember the brokers' peak RSS (before a restart resets it)."""
        peaks = [u.peak_rss_bytes for u in self.deployment.usage()]
        self.peak_rss = max([self.peak_rss, *peaks])

    def accounted(self, run: Callable[[], dict]) -> dict:
        """Run one client phase; the brokers' CPU time and the records it moved count towards
        the CPU per million records."""
        cpu = self.deployment.cpu_seconds()
        result = run()
        self.cpu += self.deployment.cpu_seconds() - cpu
        self.moved += result["records"]
        return result

    def throughput(self, label: str, run: Callable[[], dict], size: int) -> dict | None:
        """Run one client phase, record records/s, account the brokers' CPU time."""
        try:
            result = self.accounted(run)
            rate = result["records"] / result["seconds"] if result.get("seconds") else 0.0
            if result["records"] == 0:
                raise RuntimeError(result.get("error") or "no record moved")
            self.record(label, "rec/s", True, rate,
                        f"{rate:,.0f} rec/s, {rate * size / 1e6:.1f} MB/s "
                        f"({result['records']:,} in {result['seconds']:.1f} s)")  # fmt: skip
            return result
        except Exception as exc:  # noqa: BLE001 - a failed phase is a result too
            self.fail(label, "rec/s", True, exc)
            return None

    def resources(self) -> None:
        """Peak RSS of the largest broker and CPU seconds per million records moved in the
        measured phases, per broker (rows of this scenario)."""
        usage = self.deployment.usage()
        self.note_peak()
        peak = self.peak_rss / (1 << 20)
        self.results.add(self.scenario, "broker peak RSS", "MiB", False, self.system, peak)
        if self.moved:
            per_m = self.cpu / len(usage) / self.moved * 1e6
            self.results.add(
                self.scenario, "broker CPU per million records", "CPU s", False, self.system, per_m
            )
        print(f"  {self.scenario} · {self.system} · peak RSS {peak:.0f} MiB, "
              f"{self.cpu:.1f} CPU s for {self.moved:,} records", flush=True)  # fmt: skip


def warm_up(ctx: Ctx) -> None:
    """JIT, page cache, connections: produce and consume a little, not reported. With three
    brokers the warm-up replicates (RF=3, acks=all), so the replication path is warm too.
    A quick run warms up less, but does: a cold three-broker Kafka has failed its consumer
    group row."""
    n = 2_000 if ctx.plan.quick else 30_000
    brokers = len(ctx.deployment.brokers)
    try:
        topic = ctx.create("warm", brokers, brokers)
        ctx.loadgen("produce", topic=topic, records=n * brokers, size=KiB, acks="all")
        ctx.loadgen("consume", topic=topic, records=n * brokers, partitions=brokers)
    except Exception as exc:  # noqa: BLE001 - the measurements will say more
        print(f"  warm-up failed: {exc}", flush=True)


# -- one broker ------------------------------------------------------------------------------


def produce(ctx: Ctx) -> None:
    """acks=1 at three record sizes, acks=all and idempotent at 1 KiB."""
    p = ctx.plan
    cases = [(f"acks=1, {size_label(s)}", s, {"acks": "1"}) for s in SIZES]
    cases += [
        ("acks=all, 1 KiB", KiB, {"acks": "all"}),
        ("idempotent (acks=all), 1 KiB", KiB, {"acks": "all", "idempotent": True}),
    ]
    topics = ctx.create_many([f"produce-{i}" for i in range(len(cases))], p.partitions)
    for topic, (label, size, options) in zip(topics, cases, strict=True):
        ctx.throughput(
            f"produce {label}",
            lambda t=topic, s=size, o=options: ctx.produce_for(t, s, **o),
            size,
        )
        # Gone at once: its gigabytes would otherwise be written back to the disk while the
        # next phases run (the consume rows fill a topic of their own).
        ctx.delete(topic)


def consume(ctx: Ctx) -> None:
    """Read a topic of one size from the start for `phase_seconds`, starting over at its end:
    `phase_bytes` of values, written into it before the first repeat (not measured) and read
    by every repeat, deleted after the last. Both systems serve it from the page cache in
    under a second, too short a phase to measure."""
    p = ctx.plan
    for size in SIZES:
        label = f"consume from the start, {size_label(size)}"
        key = f"consume-{size}"
        if key not in ctx.shared:
            try:
                topic = ctx.create(key, p.partitions)
                # as many records in every partition: with the client's sticky partitioner one
                # partition held 72 MB and another 160, the last fetches of a pass carried one
                # or two partitions, and the row moved with the draw (615 fetches for three
                # passes against 413 when even)
                filled = ctx.loadgen("produce", topic=topic, records=p.records(size), size=size,
                                     even=True)  # fmt: skip
            except Exception as exc:  # noqa: BLE001
                ctx.fail(label, "rec/s", True, exc)
                continue
            ctx.shared[key] = (topic, filled["records"])
        topic, records = ctx.shared[key]
        ctx.throughput(label, lambda t=topic, n=records: ctx.read_for(t, n, p.partitions), size)
        if ctx.repeat == ctx.repeats - 1:
            ctx.delete(topic)
            del ctx.shared[key]


def compression(ctx: Ctx) -> None:
    """Compressible 1 KiB values (text), compressed by the producer with lz4 and zstd."""
    codecs = ("lz4", "zstd")
    topics = ctx.create_many([f"compressed-{c}" for c in codecs], ctx.plan.partitions)
    for topic, codec in zip(topics, codecs, strict=True):
        ctx.throughput(
            f"produce {codec}, 1 KiB text, acks=1",
            lambda t=topic, c=codec: ctx.produce_for(t, KiB, compression=c, payload="text"),
            KiB,
        )
        ctx.delete(topic)


# Transactions as an exactly-once application commits them: Kafka Streams does every 100 ms
# (commit.interval.ms under exactly_once_v2), Kafka's own producer-perf-test every 3 s.
TXN_COMMIT_MS = 100
TXN_PARTITIONS = 8
# The cost of one transaction itself: this many records, committed before the next begins. As
# a rate (stops 39 to 43) it swung threefold within a run on both systems alike, following the
# time the host stole from this VM (bench/README.md, "Transactions"); its time per transaction
# is a latency row.
TXN_RECORDS = 100
TXN_LABELS = tuple(
    f"transaction of {TXN_RECORDS} records of 1 KiB, begin to commit, {q}" for q in ("p50", "p99")
)


def transactions(ctx: Ctx) -> None:
    """A transactional producer into 8 partitions committing every 100 ms, as fast as it can
    send; then one committing 100 records at a time into 1 partition: the time each
    transaction takes, from its begin to the commit's return."""
    seconds = ctx.plan.phase_seconds
    topic = ctx.create("txn-rate", TXN_PARTITIONS)
    ctx.throughput(
        f"transactional produce, a commit every {TXN_COMMIT_MS} ms, 1 KiB, "
        f"{TXN_PARTITIONS} partitions",
        lambda: ctx.loadgen(
            "txn-produce", topic=topic, seconds=seconds, size=KiB, txn_ms=TXN_COMMIT_MS
        ),  # fmt: skip
        KiB,
    )
    ctx.delete(topic)
    topic = ctx.create("txn-each", 1)
    try:
        result = ctx.accounted(lambda: ctx.loadgen(
            "txn-produce", topic=topic, size=KiB, txn_records=TXN_RECORDS,
            seconds=TXN_REHEARSAL_SECONDS if ctx.rehearsing else seconds))  # fmt: skip
        if not result.get("transactions"):
            raise RuntimeError(result.get("error") or "no transaction committed")
        for label, key in zip(TXN_LABELS, ("txn_p50_ms", "txn_p99_ms"), strict=True):
            ctx.record(label, "ms", False, result[key],
                       f"{result[key]:,.2f} ms ({result['transactions']:,} transactions)")  # fmt: skip
    except Exception as exc:  # noqa: BLE001 - a failed phase is a result too
        for label in TXN_LABELS:
            ctx.fail(label, "ms", False, exc)
    ctx.delete(topic)


# -- three brokers ---------------------------------------------------------------------------

PRODUCERS = 8
CONSUMERS = 4
CLUSTER_PARTITIONS = 12
# The latency rows offer both systems the same rate, one both sustain on two shared cores with
# the consumers running: at half of each system's own (sub-second) produce maximum, the faster
# system was measured saturated and the two rows compared different loads.
LATENCY_RATE = 10_000


def write_back() -> None:
    """Write the page cache's dirty pages to disk before a client phase starts. A 4 s produce
    phase leaves up to 2.5 GB dirty; without this the kernel writes it back during whichever
    later phase crosses its thresholds, and that phase's rate drops by chance. (Takes about
    0.3 s here.)"""
    os.sync()


def client_env() -> dict[str, str]:
    return {**os.environ, **CLIENT_MALLOC}


def spawn(ctx: Ctx, phase: str, count: int, **options: object) -> list[subprocess.Popen[str]]:
    ctx.before_phase()
    return [
        subprocess.Popen(
            ctx.loadgen_command(phase, **options),
            stdout=subprocess.PIPE,
            text=True,
            env=client_env(),
        )
        for _ in range(count)
    ]


def start_together(
    ctx: Ctx, work: Path, count: int, timeout: float, **options: object
) -> list[dict]:
    """`count` producers that connect first and start sending together; their results."""
    go = work / "go-producers"
    procs = spawn(ctx, "produce", count, go_file=go, **options)
    deadline = time.monotonic() + 120
    while len(list(work.glob("go-producers.ready-*"))) < count and time.monotonic() < deadline:
        if any(p.poll() is not None for p in procs):
            break
        time.sleep(0.05)
    go.write_text("go")
    return collect(procs, timeout)


def wait_assigned(
    work: Path, procs: list[subprocess.Popen[str]], partitions: int, settle: float
) -> None:
    """Until every member holds partitions, all of them are held, and that has not changed for
    `settle` seconds (a member that joins late triggers another rebalance)."""
    deadline = time.monotonic() + 120
    stable_since, last = time.monotonic(), None
    while time.monotonic() < deadline:
        if any(p.poll() is not None for p in procs):
            raise RuntimeError("a group member exited")
        held = sorted(int(f.read_text() or 0) for f in work.glob("assigned-*"))
        if held != last:
            stable_since, last = time.monotonic(), held
        elif len(held) == len(procs) and all(held) and sum(held) == partitions:
            if time.monotonic() - stable_since >= settle:
                return
        time.sleep(0.1)
    raise RuntimeError(f"the group did not settle: partitions held {last}")


def collect(procs: list[subprocess.Popen[str]], timeout: float) -> list[dict]:
    """Every client's result. One still running after `timeout` (from the first wait on) is
    killed, so that it does not run on into later phases; what it printed before still counts
    (a group member prints its result before closing its consumer)."""
    deadline = time.monotonic() + timeout
    out = []
    try:
        for proc in procs:
            try:
                stdout, _ = proc.communicate(timeout=max(0.0, deadline - time.monotonic()))
            except subprocess.TimeoutExpired:
                proc.kill()
                stdout, _ = proc.communicate()
                print(f"  a client (pid {proc.pid}) still ran {timeout:.0f} s on: killed",
                      flush=True)  # fmt: skip
            else:
                if proc.returncode != 0:
                    raise RuntimeError(f"a client exited with {proc.returncode}")
            lines = stdout.strip().splitlines()
            if not lines or not lines[-1].startswith("{"):
                raise RuntimeError(f"a client exited with {proc.returncode} and no result")
            out.append(json.loads(lines[-1]))
    finally:
        for proc in procs:  # the others, when one failed
            if proc.poll() is None:
                proc.kill()
                proc.wait()
    return out


def run_group(
    ctx: Ctx, topic: str, work: Path, latency: bool, wait: float
) -> tuple[float, Callable[[int], list[dict]]]:
    """Start a consumer group of CONSUMERS members, wait until it has settled and let it go.
    Returns the wall clock of the go and a function that waits for a total of records,
    stops the members and collects their results."""
    procs = spawn(ctx, "group-consume", CONSUMERS, topic=topic, group=f"g-{work.name}",
                  work_dir=work, latency=latency, duration=wait + 240)  # fmt: skip
    try:
        # 2 s is four heartbeats (0.5 s): a member joining late has made itself known by then.
        wait_assigned(work, procs, CLUSTER_PARTITIONS, 2.0)
    except BaseException:
        (work / "go").write_text("go")
        (work / "stop").write_text("stop")
        collect(procs, 60)
        raise
    went = time.time()
    (work / "go").write_text("go")

    def finish(total: int) -> list[dict]:
        deadline = time.monotonic() + wait
        while time.monotonic() < deadline:
            counts = [int(p.read_text() or 0) for p in work.glob("count-*")]
            if sum(counts) >= total or all(p.poll() is not None for p in procs):
                break
            time.sleep(0.1)
        (work / "stop").write_text("stop")
        out = collect(procs, 60)
        if moved := sum(r.get("rebalances", 0) for r in out):
            print(f"  {ctx.scenario} · {ctx.system}: the group rebalanced after the go "
                  f"({moved} new assignments)", flush=True)  # fmt: skip
        return out

    return went, finish


def cluster(ctx: Ctx) -> None:
    """Eight producers (acks=all) into a topic of RF=3, min.insync.replicas=2; a consumer group
    of four reads it; then end-to-end latency at a fixed rate, the same for both systems."""
    size = KiB
    topic = ctx.create("cluster", CLUSTER_PARTITIONS, 3, min_insync_replicas="2")
    try:
        throughput_together(ctx, topic, size)
    finally:
        ctx.delete(topic)
    latency(ctx, size)


def throughput_together(ctx: Ctx, topic: str, size: int) -> None:
    """The produce row (8 producers for `phase_seconds`) and the group's consume row (the
    first `group_records` of what they wrote)."""
    p = ctx.plan
    label = f"produce, {PRODUCERS} producers, acks=all, 1 KiB"
    cpu = ctx.deployment.cpu_seconds()
    try:
        with tempfile.TemporaryDirectory(prefix="bench-producers-") as tmp:
            got = start_together(ctx, Path(tmp), PRODUCERS, 3 * p.duration + 180, topic=topic,
                                 seconds=p.phase_seconds, size=size, acks="all")  # fmt: skip
        delivered = sum(r["records"] for r in got)
        seconds = max(r["end_wall"] for r in got) - min(r["start_wall"] for r in got)
        rate = delivered / seconds
        ctx.moved += delivered
        ctx.record(label, "rec/s", True, rate,
                   f"{rate:,.0f} rec/s ({delivered:,} in {seconds:.1f} s)")  # fmt: skip
    except Exception as exc:  # noqa: BLE001
        ctx.fail(label, "rec/s", True, exc)
        return
    label = f"consume, group of {CONSUMERS}, from the start"
    try:
        if delivered < p.group_records:
            # Kafka's producers wrote 420,000 to 950,000 records: a group reading all of them
            # moved its rate 17% between runs.
            more = ctx.loadgen("produce", topic=topic, records=p.group_records - delivered,
                               size=size, acks="1")  # fmt: skip
            ctx.moved += more["records"]
        wanted = p.group_records
        with tempfile.TemporaryDirectory(prefix="bench-group-") as tmp:
            went, finish = run_group(ctx, topic, Path(tmp), False, p.duration * 3 + 60)
            got = finish(wanted)
        received, seconds = first_records(got, wanted, went)
        rate = received / seconds
        ctx.moved += received
        ctx.record(label, "rec/s", True, rate,
                   f"{rate:,.0f} rec/s ({received:,} in {seconds:.1f} s)")  # fmt: skip
    except Exception as exc:  # noqa: BLE001
        ctx.fail(label, "rec/s", True, exc)
    ctx.cpu += ctx.deployment.cpu_seconds() - cpu


def first_records(got: list[dict], wanted: int, went: float) -> tuple[int, float]:
    """The group's first `wanted` records (the members read on until told to stop): how many
    had arrived with the batch that reached `wanted`, and the seconds from the go until then."""
    batches = sorted(
        (t, n) for r in got for t, n in zip(r["arrivals"][0::2], r["arrivals"][1::2], strict=True)
    )
    total = 0
    for t, n in batches:
        total += int(n)
        if total >= wanted:
            return total, t - went
    raise RuntimeError(f"the group read {total} of {wanted} records")


def latency(ctx: Ctx, size: int) -> None:
    p = ctx.plan
    if ctx.rehearsing:  # ten seconds at a tenth of the load: nothing left to warm
        return
    rate = LATENCY_RATE
    labels = ("end-to-end latency p50", "end-to-end latency p99", "end-to-end latency p99.9")
    topic = None
    ctx.record("offered rate for the latency rows (the same for both systems)", "rec/s", True,
               rate)  # fmt: skip
    try:
        topic = ctx.create("latency", CLUSTER_PARTITIONS, 3, min_insync_replicas="2")
        with tempfile.TemporaryDirectory(prefix="bench-latency-") as tmp:
            work = Path(tmp)
            _, finish = run_group(ctx, topic, work, True, p.latency_seconds + 60)
            per = int(rate / PRODUCERS * p.latency_seconds)
            got = start_together(ctx, work, PRODUCERS, p.latency_seconds * 3 + 120, topic=topic,
                                 records=per, size=size, acks="all", rate=rate / PRODUCERS,
                                 stamp=True, duration=p.latency_seconds * 3)  # fmt: skip
            sent = sum(r["records"] for r in got)
            finish(sent)
            pairs = array("d")
            for f in work.glob("latency-*"):
                pairs.frombytes(f.read_bytes())
        if len(pairs) // 2 < sent * 0.99:
            raise RuntimeError(f"only {len(pairs) // 2} of {sent} records arrived")
        # The first fifth of the sending time warms up (connections to every leader).
        first = min(pairs[0::2])
        skip = first + p.latency_seconds / 5
        ms = sorted(a * 1000 for t, a in zip(pairs[0::2], pairs[1::2], strict=True) if t >= skip)
        for label, q in zip(labels, (0.5, 0.99, 0.999), strict=True):
            ctx.record(label, "ms", False, percentile(ms, q))
    except Exception as exc:  # noqa: BLE001
        for label in labels:
            ctx.fail(label, "ms", False, exc)
        print(ctx.deployment.log_tail(30), flush=True)  # what the brokers said meanwhile
    finally:
        if topic is not None:
            ctx.delete(topic)


CATCHUP_PARTITIONS = 6


def wait_isr(bootstrap: str, topic: str, broker_id: int, inside: bool, deadline: float) -> None:
    """Poll Metadata until `broker_id` is (or is not) in the ISR of every partition."""
    while in_isr(bootstrap, topic, CATCHUP_PARTITIONS, broker_id) is not inside:
        if time.monotonic() > deadline:
            raise RuntimeError(f"broker {broker_id} {'not ' if inside else ''}back in the ISR")
        time.sleep(0.1)


def catch_up(ctx: Ctx) -> None:
    """A follower misses `catchup_mb` MB and catches up: a topic of 6 partitions with RF=3;
    the last broker is stopped (SIGTERM, so it leaves every ISR at once); the others take the
    records (acks=1, 10 KiB values); the broker is started again. The rows: seconds from its
    launch until Metadata shows it in the ISR of every partition, and from its first answer
    (ApiVersions) until then, which leaves the process's start out."""
    for _ in ctx.last_rounds(ctx.plan.structural_repeats):
        catch_up_once(ctx)


def catch_up_once(ctx: Ctx) -> None:
    p = ctx.plan
    label = f"follower back in the ISR after a restart, {p.catchup_mb:,} MB behind"
    after = f"follower back in the ISR, {p.catchup_mb:,} MB behind, from serving"
    brokers = ctx.deployment.brokers
    follower, follower_id = brokers[-1], len(brokers)
    others = ",".join(b.bootstrap for b in brokers[:-1])
    try:
        topic = ctx.create("catch-up", CATCHUP_PARTITIONS, len(brokers))
    except Exception as exc:  # noqa: BLE001
        ctx.fail(label, "s", False, exc)
        return
    try:
        ctx.note_peak()
        follower.stop(120)
        wait_isr(others, topic, follower_id, False, time.monotonic() + 120)
        size = 10 * KiB
        n = p.catchup_mb * 1_000_000 // size
        filled = ctx.loadgen("produce", bootstrap=others, topic=topic, records=n, size=size,
                             acks="1", duration=900)  # fmt: skip
        if filled["records"] < n:
            raise RuntimeError(f"wrote {filled['records']} of {n} records: {filled['error']}")
        follower.launch()
        serving = follower.wait_serving(600)
        wait_isr(others, topic, follower_id, True, follower.launched_at + 900)
        seconds = time.monotonic() - follower.launched_at
        ctx.record(label, "s", False, seconds)
        ctx.record(after, "s", False, seconds - serving)
    except Exception as exc:  # noqa: BLE001
        ctx.fail(label, "s", False, exc)
        if not follower.running:  # the next scenarios need all three
            follower.start(600)
    finally:
        ctx.delete(topic)
        elect_preferred(ctx.deployment.bootstrap)


def admin_client(bootstrap: str, **conf: object) -> AdminClient:
    """An admin client for one of the harness's own calls, its log quiet (a broker being
    restarted makes it complain)."""
    return AdminClient({"bootstrap.servers": bootstrap, "log_level": 0, **conf})


def elect_preferred(bootstrap: str) -> None:
    """Leadership back to the preferred replicas now. The restarted broker lost every
    partition it led (the internal topics' too, so a group coordinator moved); left alone,
    the controller's periodic check (leader.imbalance.check.interval.seconds, 5 minutes on both
    systems) moves it back in the middle of some later measured phase (in a run of
    2026-11-26 a latency phase that it fell in ended with 7,812 of 100,000 records unread)."""
    admin = admin_client(bootstrap)  # held until the answer: a dropped client cancels it
    try:
        admin.elect_leaders(ElectionType.PREFERRED, None).result(60)
    except Exception as exc:  # noqa: BLE001 - the controller's own check will do it later
        print(f"  preferred leader election failed: {exc}"[:600], flush=True)


def delete_topics(bootstrap: str, topics: list[str]) -> None:
    """Delete what a scenario no longer needs (a GB of log times three replicas)."""
    admin = admin_client(bootstrap)  # held until the answers: a dropped client cancels them
    for future in admin.delete_topics(topics, operation_timeout=60).values():
        try:
            future.result(90)
        except Exception as exc:  # noqa: BLE001 - the run goes on; the disk is not full yet
            print(f"  could not delete {topics}: {exc}", flush=True)


# -- 1,000 partitions ------------------------------------------------------------------------


def partitions(ctx: Ctx) -> None:
    """A fresh topic of 1,000 partitions per repeat: its creation time, the Metadata and
    ListOffsets round trips; then produce and consume over all partitions, and the topic is
    deleted (a timed produce phase writes gigabytes). Last, in the last repeat, the broker's
    start-up over another fresh topic of as many partitions, empty (so both systems restart
    with the same log), `structural_repeats` times."""
    p = ctx.plan
    many = p.many_partitions
    began = time.monotonic()
    topic = ctx.create("many", many)
    try:
        # Leaders in Metadata are not enough: wait until every partition answers ListOffsets.
        deadline = time.monotonic() + 300
        while True:
            try:
                ctx.loadgen("list-offsets", topic=topic, partitions=many, requests=0)
                break
            except RuntimeError:
                if time.monotonic() > deadline:
                    raise
        ctx.record(f"create a topic of {many:,} partitions, until all answer ListOffsets", "s",
                   False, time.monotonic() - began)  # fmt: skip
        for phase, what in (("metadata", "Metadata"), ("list-offsets", "ListOffsets (latest)")):
            label = f"{what} of {many:,} partitions, round trip"
            try:
                result = ctx.loadgen(phase, topic=topic, partitions=many, requests=20)
                if result.get("error"):
                    raise RuntimeError(result["error"])
                ctx.record(label, "ms", False, statistics.median(result["ms"]))
            except Exception as exc:  # noqa: BLE001
                ctx.fail(label, "ms", False, exc)
        filled = ctx.throughput(
            f"produce acks=1, 1 KiB, {many:,} partitions",
            lambda: ctx.produce_for(topic, KiB, acks="1"),
            KiB,
        )
        if filled:
            ctx.throughput(
                f"consume from the start, {many:,} partitions",
                lambda: ctx.read_for(topic, filled["records"], many),
                KiB,
            )
    finally:
        ctx.delete(topic)
    if p.quick or not ctx.in_last_repeat:
        return
    empty = ctx.create("restart", many)  # both systems restart with the same empty log
    try:
        restart_until_led(ctx, [empty], p.structural_repeats)
    finally:
        ctx.delete(empty)


def topic_metadata(bootstrap: str, topics: list[str]) -> dict | None:
    """Metadata of `topics` (of every topic when there are several: the client asks for one
    or all), or None while the broker does not answer."""
    admin = admin_client(bootstrap, **{"socket.timeout.ms": 5000})
    try:
        return admin.list_topics(topics[0] if len(topics) == 1 else None, timeout=10).topics
    except Exception:  # noqa: BLE001 - not serving yet
        return None


def leaders_ready(bootstrap: str, topics: list[str], count: int) -> bool:
    """Every one of `topics` shows `count` partitions, each with a leader."""
    found = topic_metadata(bootstrap, topics) or {}
    for topic in topics:
        meta = found.get(topic)
        if meta is None or meta.error is not None or len(meta.partitions) != count:
            return False
        if not all(p.leader >= 0 and not p.error for p in meta.partitions.values()):
            return False
    return bool(found)


def in_isr(bootstrap: str, topic: str, count: int, broker_id: int) -> bool | None:
    """Whether `broker_id` is in the ISR of every partition of `topic` (True), of none (False)
    or of some (None), as Metadata says."""
    meta = (topic_metadata(bootstrap, [topic]) or {}).get(topic)
    if meta is None or meta.error is not None or len(meta.partitions) != count:
        return None
    inside = [broker_id in p.isrs for p in meta.partitions.values()]
    return True if all(inside) else False if not any(inside) else None


def back_in_service(
    ctx: Ctx, kill: bool, ready: Callable[[str], bool], limit: float = 600
) -> float:
    """Stop (SIGTERM) or kill -9 the broker, start it again and poll `ready(bootstrap)`; the
    seconds from the launch until it holds."""
    ctx.before_phase()
    broker = ctx.deployment.brokers[0]
    ctx.note_peak()
    if kill:
        broker.kill()
    else:
        broker.stop(120)
    broker.launch()
    broker.wait_serving(limit)
    deadline = broker.launched_at + limit
    while not ready(broker.bootstrap):
        if time.monotonic() > deadline or not broker.running:
            raise RuntimeError(f"not ready {limit} s after the start\n{broker.log_tail(20)}")
        time.sleep(0.1)
    return time.monotonic() - broker.launched_at


def restart_until_led(ctx: Ctx, topics: list[str], restarts: int) -> None:
    """The start-up row, `restarts` times in the last repeat (Ctx.last_rounds: the caller's
    last step, so no measured phase meets a JVM restarted cold): SIGTERM, start again, until
    every partition of `topics` has a leader. A quick run leaves it out (its one restart is
    the recovery scenario's, kill -9, through the same code), and so does a rehearsal."""
    many = ctx.plan.many_partitions
    label = f"broker start-up with {many * len(topics):,} partitions"
    if ctx.plan.quick:
        return
    for _ in ctx.last_rounds(restarts):
        try:
            seconds = back_in_service(ctx, False, lambda b: leaders_ready(b, topics, many))
            ctx.record(label, "s", False, seconds)
        except Exception as exc:  # noqa: BLE001
            ctx.fail(label, "s", False, exc)


def partitions_scale(ctx: Ctx) -> None:
    """`scale_topics` topics of `many_partitions` each (10,000 partitions in full mode, about
    one open file each on both systems, see bench/README.md): the
    creation time, the Metadata round trip for all of them and the broker's start-up time.
    The topics are created one request each: Kafka's KRaft controller refuses a CreateTopics
    request that makes more than 10,000 metadata records."""
    p = ctx.plan
    many, total = p.many_partitions, p.many_partitions * p.scale_topics
    topics = ctx.shared.get("scale")
    if topics is None:
        label = f"create {p.scale_topics} topics of {many:,} partitions, until all have leaders"
        try:
            result = ctx.loadgen("create", topic=[f"scale-{i}" for i in range(p.scale_topics)],
                                 partitions=many, one_by_one=True, duration=600)  # fmt: skip
            if not result.get("topics"):
                raise RuntimeError(result.get("error") or "topic creation failed")
            topics = ctx.shared["scale"] = result["topics"]
            ctx.record(label, "s", False, result["seconds"])
        except Exception as exc:  # noqa: BLE001
            ctx.fail(label, "s", False, exc)
            return
    label = f"Metadata of {total:,} partitions ({p.scale_topics} topics), round trip"
    try:
        result = ctx.loadgen("metadata", topic=topics, partitions=many, requests=20)
        if result.get("error"):
            raise RuntimeError(result["error"])
        ctx.record(label, "ms", False, statistics.median(result["ms"]))
    except Exception as exc:  # noqa: BLE001
        ctx.fail(label, "ms", False, exc)
    restart_until_led(ctx, topics, p.long_restarts)


# -- crash recovery --------------------------------------------------------------------------


def end_offset(bootstrap: str, topic: str) -> int | None:
    consumer = Consumer({"bootstrap.servers": bootstrap, "group.id": "bench-recovery",
                         "socket.timeout.ms": 2000, "log_level": 0})  # fmt: skip
    try:
        return consumer.get_watermark_offsets(TopicPartition(topic, 0), timeout=2)[1]
    except Exception:  # noqa: BLE001 - not serving yet
        return None
    finally:
        consumer.close()


def recovery(ctx: Ctx) -> None:
    """A log of `recovery_mb` MB in segments of `recovery_segment_bytes` (2,000 MB in 2,000 in
    full mode); kill -9 the broker and time its way back to answering ListOffsets with the
    same end offset."""
    p = ctx.plan
    segments = p.recovery_mb * 1_000_000 // p.recovery_segment_bytes
    label = f"serving again after kill -9, {p.recovery_mb:,} MB log in ~{segments:,} segments"
    if not ctx.within(p.long_restarts):
        return
    try:
        if "recovery" not in ctx.shared:
            topic = ctx.create("recovery", 1, segment_bytes=str(p.recovery_segment_bytes))
            size = 10 * KiB
            n = p.recovery_mb * 1_000_000 // size
            filled = ctx.loadgen("produce", topic=topic, records=n, size=size, acks="1",
                                 duration=600)  # fmt: skip
            ctx.shared["recovery"] = (topic, filled["records"])
        topic, n = ctx.shared["recovery"]
        seconds = back_in_service(ctx, True, lambda b: end_offset(b, topic) == n)
        ctx.record(label, "s", False, seconds)
    except Exception as exc:  # noqa: BLE001
        ctx.fail(label, "s", False, exc)


# -- log compaction and the offline load (one measurement each) ------------------------------


def compaction(ctx: Ctx) -> None:
    """bench/compaction.py on this broker: the cleaner's rate, produce latency meanwhile. A
    fresh topic in each of the first `slow_repeats` repeats, deleted after."""
    import compaction as job

    if not ctx.within(ctx.plan.slow_repeats):
        return
    mb = ctx.plan.compaction_mb
    rows = [
        (
            f"cleaner throughput, {mb} MB in {job.segment_bytes(mb) >> 20} MiB segments, 10% distinct keys",
            "MB/s",
            True,
            ("clean_mb_per_s",),
        ),
        ("produce p99 before cleaning, 200 rec/s", "ms", False, ("probe", "before", "p99")),
        ("produce p99 while cleaning, 200 rec/s", "ms", False, ("probe", "during", "p99")),
    ]
    broker = ctx.deployment.brokers[0]
    try:
        ctx.before_phase()
        result = job.measure(
            ctx.deployment.bootstrap,
            broker.log_text,
            job.options(mb, 60, 2.0)
            if ctx.plan.quick or ctx.rehearsing
            else job.options(mb, 400, 5.0),
        )
    except Exception as exc:  # noqa: BLE001
        for label, unit, higher, _ in rows:
            ctx.fail(label, unit, higher, exc)
        return
    ctx.delete(result["topic"], result["topic"] + "-latency")
    for label, unit, higher, path in rows:
        value: object = result
        for key in path:
            value = value.get(key) if isinstance(value, dict) else None
        if isinstance(value, int | float):
            ctx.record(label, unit, higher, float(value))
        else:
            ctx.fail(label, unit, higher, RuntimeError(f"no {'.'.join(path)} in {result}"))


def offline_load(ctx: Ctx) -> None:
    """pipelines/offline_load.py (spark-submit, local[*]) loading a 4-partition topic of
    200-byte records into Parquet; the job's own rate. The topic is written before the first
    repeat and loaded by each of the first `structural_repeats`, deleted after the last."""
    import offline_load as job

    n = ctx.plan.offline_records
    label = f"Spark offline load into Parquet, {n:,} records of 200 B, 4 partitions"
    if not ctx.within(ctx.plan.structural_repeats):
        return
    try:
        if "offline" not in ctx.shared:
            topic = ctx.create("offline", 4)
            ctx.shared["offline"] = topic
            filled = ctx.loadgen("produce", topic=topic, records=n, size=200, duration=600)
            if filled["records"] < n:
                raise RuntimeError(f"filled only {filled['records']} of {n} records")
        ctx.before_phase()
        with tempfile.TemporaryDirectory(prefix="bench-offline-") as tmp:
            row = job.run_job(ctx.deployment.bootstrap, ctx.shared["offline"],
                              f"bench-offline-{ctx.repeat}", Path(tmp), job.connector_jars())  # fmt: skip
        ctx.record(label, "rec/s", True, row["records_per_s"],
                   f"{row['records_per_s']:,.0f} rec/s ({row['wall_seconds']:.0f} s with "
                   "spark-submit)")  # fmt: skip
    except Exception as exc:  # noqa: BLE001
        ctx.fail(label, "rec/s", True, exc)
        if (topic := ctx.shared.pop("offline", None)) is not None:
            ctx.delete(topic)  # a short fill is not loaded again
        return
    if ctx.repeat == ctx.repeats - 1:
        ctx.delete(ctx.shared.pop("offline"))
