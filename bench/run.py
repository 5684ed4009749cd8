"""Odradek next to Apache Kafka 3.9 on the same machine: ``make bench`` (every scenario, four
repeats) and ``make bench-quick`` (a smoke run).

Scenarios that share a kind of deployment (one broker, three brokers...) run on the same servers.
For each kind, Kafka and Odradek are started side by side and warmed up; in each repeat the two
take turns at every measurement, one system's phase and then the other's (--repeats), and the
table gives the median with the min and max, and the ratio of the medians. Results go to
bench/results/<timestamp>/ (results.md, results.json, results.png).
See bench/README.md for what every scenario measures and how to read the table.
"""

from __future__ import annotations

import argparse
import datetime as dt
import importlib.metadata
import os
import platform
import shutil
import signal
import statistics
import subprocess
import sys
import threading
import time
from collections.abc import Callable
from contextlib import suppress
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import TypeVar

import report
import scenarios as sc
from baton import Baton
from confluent_kafka import libversion
from kernel_settings import (
    damon_held,
    fault_in_free_memory,
    page_reporting_held,
    restore_left_behind,
    writeback_held,
)
from odradek.broker.testing.processes import descendants
from profiles import py_spy, recording
from systems import SYSTEMS, Deployment, deploy, stop_with_harness

HERE = Path(__file__).resolve().parent
REPO = HERE.parent
T = TypeVar("T")
R = TypeVar("R")


@dataclass(frozen=True)
class Kind:
    """A deployment some scenarios share."""

    name: str
    label: str
    brokers: int = 1
    settings: dict[str, str] = field(default_factory=dict)


# The kinds whose scenarios delete the topics of timed produce phases (gigabytes each) remove
# the files a second after the deletion, not a minute (both systems' default): the disk and
# the page cache stay bounded, and the harness waits for them (Deployment.wait_removed).
# Kafka's first pass over deleted logs comes log.initial.task.delay.ms after it starts (30 s;
# an internal setting of Kafka's LogManager, which Odradek has no use for and ignores).
DROP_SOON = {"log.segment.delete.delay.ms": "100", "log.initial.task.delay.ms": "1000"}

KINDS = {
    "single": Kind("single", "one broker", settings=DROP_SOON),
    "cluster": Kind("cluster", "three brokers", brokers=3, settings=DROP_SOON),
    "partitions": Kind("partitions", "one broker, 1,000 partitions", settings=DROP_SOON),
    "partitions-scale": Kind("partitions-scale", "one broker, 1,000-partition topics"),
    "recovery": Kind("recovery", "one broker, crash recovery"),
    "compaction": Kind(
        "compaction", "one broker, compaction", settings={"log.cleaner.backoff.ms": "1000"}
    ),  # fmt: skip
    "offline-load": Kind("offline-load", "one broker, Spark"),
}


@dataclass(frozen=True)
class Scenario:
    name: str
    kind: str
    run: Callable[[sc.Ctx], None]
    summary: str
    in_quick: bool = True
    # run once before the measured repeats (see Plan.rehearsal, which makes the compaction's
    # fill small); not the ones made of restarts, slow fills or jobs, nor the 10,000
    # partitions of partitions-scale (their creation took Kafka 19 to 43 s, and is measured
    # once, in its first repeat)
    rehearsed: bool = True
    # on a JVM, rehearsed again, up to this many times, until its JIT compilers have gone
    # quiet (see rehearse)
    rehearsals: int = 1


# Alone, Kafka's 8-producer row over three brokers read 155,000, 226,000, 286,000 and then
# 355,000 to 374,000 records/s through eight repeats after one rehearsal. Its rate in the
# rehearsal is no sign of a warm JVM: it held within 10% from round to round (188,000 then
# 206,000) while the measured repeats after it read 199,000, 291,000, 333,000, 344,000 and
# 357,000, and the JIT compilers' CPU per round went 12, 8, 6, 2.3, 3.1 and 2.0 s (three
# brokers, ~20 s rounds). So a JVM rehearses again until a round in which its compilers used at
# most JIT_QUIET of a core per broker, for WARM_REHEARSALS rounds or REHEARSAL_LIMIT seconds
# at most.
WARM_REHEARSALS = 12
JIT_QUIET = 0.03
REHEARSAL_LIMIT = 180.0

SCENARIOS = [
    Scenario("produce", "single", sc.produce,
             "one broker: acks=1 at 100 B, 1 KiB, 10 KiB; acks=all; idempotent"),
    Scenario("consume", "single", sc.consume,
             "one broker: read 4 partitions from the start, three record sizes"),
    Scenario("compression", "single", sc.compression,
             "one broker: lz4 and zstd producers, compressible 1 KiB values"),
    Scenario("transactions", "single", sc.transactions,
             "one broker: a transactional producer committing every 100 ms (8 partitions), "
             "and the time of a transaction of 100 records (1 partition)"),
    Scenario("cluster", "cluster", sc.cluster,
             "three brokers, RF=3, min.insync.replicas=2: 8 producers acks=all, a group of 4 "
             "consumers, end-to-end latency at a fixed 10,000 records/s",
             rehearsals=WARM_REHEARSALS),
    Scenario("catch-up", "cluster", sc.catch_up,
             "three brokers: a follower stopped while 1 GB is written, then started again: "
             "time until it is back in the ISR", rehearsed=False),
    Scenario("partitions", "partitions", sc.partitions,
             "one broker, a topic of 1,000 partitions: produce, consume, Metadata, ListOffsets, "
             "start-up time", rehearsals=WARM_REHEARSALS),
    Scenario("partitions-scale", "partitions-scale", sc.partitions_scale,
             "one broker, 10 topics of 1,000 partitions (--scale-topics): creation, Metadata "
             "round trip, start-up time", rehearsed=False),
    Scenario("recovery", "recovery", sc.recovery,
             "one broker killed with kill -9 holding 2 GB of log in 2,000 segments: time to "
             "serve again", rehearsed=False),
    Scenario("compaction", "compaction", sc.compaction,
             "the log cleaner's rate and produce latency while it runs (3 repeats at most)"),
    Scenario("offline-load", "offline-load", sc.offline_load,
             "the Spark offline-load pipeline into Parquet (2 repeats at most)",
             in_quick=False, rehearsed=False),
]  # fmt: skip


def deployments(chosen: list[Scenario], quick: bool) -> list[tuple[Kind, list[Scenario]]]:
    """The deployments to start and the scenarios each serves. A quick run starts fewer
    servers: every one-broker scenario shares one broker (with every kind's settings)."""
    if not quick:
        return [(k, g) for k in KINDS.values() if (g := [s for s in chosen if s.kind == k.name])]
    one = [s for s in chosen if KINDS[s.kind].brokers == 1]
    settings = {k: v for s in one for k, v in KINDS[s.kind].settings.items()}
    out = [(Kind("single", "one broker", 1, settings), one)] if one else []
    three = [s for s in chosen if KINDS[s.kind].brokers > 1]
    return out + ([(KINDS["cluster"], three)] if three else [])


def run_kind(kind: Kind, chosen: list[Scenario], systems: list[str], plan: sc.Plan,
             results: report.Results, heap: str, profiles: Path | None) -> None:  # fmt: skip
    """Every system's servers up side by side, then in each repeat the systems take turns at
    every measurement (the first one changing every repeat): a slow stretch of the machine
    lands on both systems' phases of a row, and each median is taken over repeats spread
    across the whole kind. With `profiles`, one more turn of Odradek's is profiled."""
    began = time.monotonic()
    live: list[Deployment] = []  # every deployment started, to be stopped whatever happens
    interrupted = True
    try:
        # Both systems start and warm up side by side (nothing is measured yet): a three-broker
        # Kafka takes 10 s or more to start, which the other system's start no longer adds to.
        started = [ctx for ctx in side_by_side(
            lambda system: start(kind, chosen, system, plan, results, heap, live), systems,
            wait_when_interrupted=True) if ctx is not None]  # fmt: skip
        if not plan.quick:
            # Side by side too: nothing is measured, and the systems' waits (topic creation
            # and deletion, transaction round trips) overlap. Interrupted, the servers are
            # stopped (below) rather than the threads waited for.
            side_by_side(lambda c: rehearse(c.deployment, chosen, plan), started,
                         wait_when_interrupted=False)  # fmt: skip
        for repeat in range(plan.repeats):
            # One thread per system, one at a time (the baton): the systems take turns at
            # every measured phase, the first of them alternating from repeat to repeat.
            order = started if repeat % 2 == 0 else started[::-1]
            baton = Baton([ctx.system for ctx in order])
            try:
                side_by_side(lambda c, r=repeat, b=baton: take_turn(c, chosen, kind, r, b), order,
                             wait_when_interrupted=False)  # fmt: skip
            finally:
                baton.abandon()  # interrupted: a thread waiting for its turn stops there
        for ctx in started:
            ctx.scenario = kind.label
            ctx.resources()
        if profiles is not None:  # after the peak RSS is read
            for ctx in started:
                if ctx.system == "Odradek":
                    profile_turn(ctx, chosen, kind, profiles)
        interrupted = False
    finally:
        for deployment in live:
            deployment.stop()
        if interrupted:
            kill_children()
        print(f"== {kind.label}: done in {time.monotonic() - began:.0f} s", flush=True)


def side_by_side(work: Callable[[T], R], items: list[T], *, wait_when_interrupted: bool) -> list[R]:
    """`work` on every item at once, a thread each; the results in the items' order (or the
    first error). When interrupted, the threads are waited for only if
    `wait_when_interrupted`; daemon threads, so one left in a client phase does not hold the
    harness's exit (run_kind kills its processes)."""
    results: list = [None] * len(items)
    errors: list[BaseException | None] = [None] * len(items)

    def run(i: int, item: T) -> None:
        try:
            results[i] = work(item)
        except BaseException as exc:  # noqa: BLE001 - raised in the calling thread
            errors[i] = exc

    threads = [threading.Thread(target=run, args=(i, item), daemon=True)
               for i, item in enumerate(items)]  # fmt: skip
    for t in threads:
        t.start()
    try:
        for t in threads:
            t.join()
    except BaseException:
        if wait_when_interrupted:
            for t in threads:
                t.join()
        raise
    for exc in errors:
        if exc is not None:
            raise exc
    return results


def kill_children() -> None:
    """What a thread of an interrupted repeat still runs (a client phase): killed."""
    for pid in descendants(os.getpid())[1:]:
        with suppress(ProcessLookupError):
            os.kill(pid, signal.SIGKILL)


def start(kind: Kind, chosen: list[Scenario], system: str, plan: sc.Plan,
          results: report.Results, heap: str, live: list[Deployment]) -> sc.Ctx | None:  # fmt: skip
    """One system's servers of this kind, warmed up, added to `live` as soon as they run;
    None (and the rows in error) when they did not start."""
    # One write per line (end=""): the two systems' threads print at the same time.
    print(f"== {kind.label} · {system}: starting\n", end="", flush=True)
    began = time.monotonic()
    try:
        deployment = deploy(system, kind.brokers, settings=kind.settings, kafka_heap=heap)
    except Exception as exc:  # noqa: BLE001 - the other system still runs
        print(f"   {system} did not start: {exc}"[:3000] + "\n", end="", flush=True)
        for s in chosen:
            results.error(s.name, "(not measured)", "", True, system, f"did not start: {exc}")
        return None
    live.append(deployment)
    serving = time.monotonic() - began
    ctx = sc.Ctx(deployment, plan, results)
    sc.warm_up(ctx)
    print(f"   {system}: serving in {serving:.1f} s, warmed up "
          f"{time.monotonic() - began - serving:.1f} s later\n", end="", flush=True)  # fmt: skip
    return ctx


def take_turn(ctx: sc.Ctx, chosen: list[Scenario], kind: Kind, repeat: int, baton: Baton) -> None:
    """One system's repeat in its thread: it runs only while holding the baton."""
    baton.take(ctx.system)
    ctx.repeat, ctx.baton, ctx.owes_turn = repeat, baton, False
    try:
        entry = reference(ctx.results, kind, ctx.system, repeat)
        stolen, began = steal_seconds(), time.monotonic()
        turn(ctx, chosen)
        # Between this system's phases the other's ran: the share is of the whole stretch.
        entry["steal_pct"] = (
            100 * (steal_seconds() - stolen) / ((time.monotonic() - began) * (os.cpu_count() or 1))
        )
    finally:
        ctx.baton = None
        baton.finish(ctx.system)


def steal_seconds() -> float:
    """CPU time the hypervisor gave other guests while this machine's vCPUs wanted to run
    (/proc/stat's steal, every CPU together): a busy host slows every phase it falls in."""
    try:
        with open("/proc/stat") as stat:
            fields = stat.readline().split()
        return int(fields[8]) / os.sysconf("SC_CLK_TCK")
    except (OSError, IndexError, ValueError):
        return 0.0


def turn(ctx: sc.Ctx, chosen: list[Scenario]) -> None:
    """One repeat of every chosen scenario on one system."""
    for s in chosen:
        ctx.scenario = s.name
        ctx.repeats = ctx.plan.repeats
        try:
            s.run(ctx)
        except Exception as exc:  # noqa: BLE001 - a failed scenario is a result too
            print(f"   {s.name} · {ctx.system} failed: {exc}"[:2000], flush=True)
            ctx.results.error(s.name, "(scenario)", "", True, ctx.system, str(exc))


def profile_turn(ctx: sc.Ctx, chosen: list[Scenario], kind: Kind, folder: Path) -> None:
    """After the measured repeats, every scenario once more on Odradek alone with py-spy on each
    of its brokers: a flame graph per scenario and broker in `folder` (<kind>-<scenario>-
    <broker>.svg, e.g. single-produce-odradek1.svg). Nothing of this turn is recorded."""
    profiled = sc.Ctx(ctx.deployment, ctx.plan, report.Results())
    for s in chosen:
        profiled.scenario, profiled.repeat, profiled.repeats = s.name, 0, 1
        pids = {b.name: pid for b in ctx.deployment.brokers if (pid := b.pid) is not None}
        print(f"   profiling {s.name} · {ctx.system} (not measured)", flush=True)
        with recording(pids, folder, f"{kind.name}-{s.name}") as written:
            try:
                s.run(profiled)
            except Exception as exc:  # noqa: BLE001 - the flame graph still shows the way there
                print(f"   {s.name} failed while profiled: {exc}"[:2000], flush=True)
        for path in written:
            print(f"   flame graph {path.relative_to(REPO) if path.is_relative_to(REPO) else path}",
                  flush=True)  # fmt: skip


def reference(results: report.Results, kind: Kind, system: str, repeat: int) -> dict:
    """Time a fixed slice of work (a Python loop, copies of 64 MiB; the median of three) before
    a system's turn: the machine's own speed then. A row that moved between runs as much as
    this did moved with the machine, not with the system."""
    times = []
    block = bytes(64 << 20)
    for _ in range(3):
        began = time.perf_counter()
        total = 0
        for i in range(500_000):
            total += i & 7
        for _ in range(2):
            bytearray(block)
        times.append(time.perf_counter() - began)
    ms = statistics.median(times) * 1000
    entry = {"kind": kind.name, "repeat": repeat + 1, "system": system, "ms": ms}
    results.reference.append(entry)
    return entry


def rehearse(deployment: Deployment, chosen: list[Scenario], plan: sc.Plan) -> None:
    """The rehearsed scenarios once with short phases, nothing recorded (see Plan.rehearsal);
    on a JVM, those with `rehearsals` again until its JIT compilers have gone quiet (see
    JIT_QUIET). Odradek rehearses once: a CPython process compiles nothing as it runs."""
    began = time.monotonic()
    ctx = sc.Ctx(deployment, plan.rehearsal(), report.Results(), rehearsing=True)
    rehearsed = [s for s in chosen if s.rehearsed]
    rounds = []
    for s in rehearsed:
        ctx.scenario = s.name
        rates = []  # the first produce row's, round by round
        jit = []  # the JIT compilers' share of a core per broker, round by round
        first = time.monotonic()
        for done in range(1, s.rehearsals + 1):
            ctx.rehearsed = {}
            compiled = deployment.jit_cpu()
            round_began = time.monotonic()
            try:
                s.run(ctx)
            except Exception as exc:  # noqa: BLE001 - the measured repeats will say more
                print(f"   rehearsal of {s.name} failed: {exc}"[:2000], flush=True)
                break
            rates += [f"{v:,.0f}" for k, v in ctx.rehearsed.items() if k.startswith("produce")][:1]
            if not compiled:  # no JIT compiler threads: not a JVM
                break
            share = deployment.jit_seconds_since(compiled) / (
                (time.monotonic() - round_began) * len(deployment.brokers)
            )
            jit.append(f"{share:.1%}")
            if (done > 1 and share <= JIT_QUIET) or time.monotonic() - first > REHEARSAL_LIMIT:
                break
        if s.rehearsals > 1:
            compilers = f", JIT {', '.join(jit)} of a core" if jit else ""
            rounds.append(f"{s.name} {done} times, produce {', '.join(rates)} records/s{compilers}")
    if rehearsed:
        names = ", ".join(s.name for s in rehearsed)
        again = f" ({', '.join(rounds)})" if rounds else ""
        print(f"   rehearsal of {names} · {deployment.system}: {time.monotonic() - began:.0f} s"
              f"{again}", flush=True)  # fmt: skip


def machine() -> dict:
    def git(*args: str) -> str:
        out = subprocess.run(["git", "-C", str(REPO), *args], capture_output=True, text=True)
        return out.stdout.strip()

    try:
        load = " ".join(f"{x:.1f}" for x in os.getloadavg())
    except OSError:
        load = "?"
    return {
        "date": dt.datetime.now(dt.UTC).strftime("%Y-%m-%d %H:%M UTC"),
        "commit": git("rev-parse", "--short", "HEAD") + (" (modified)" if git("status", "--porcelain", "--untracked-files=no") else ""),
        "confluent_kafka": importlib.metadata.version("confluent-kafka"),
        "librdkafka": libversion()[0],
        "kafka": "3.9.0",
        "cpus": os.cpu_count(),
        "platform": platform.platform(terse=True),
        "python": platform.python_version(),
        "load_at_start": load,
    }  # fmt: skip


def write(
    results: report.Results, folder: Path, meta: dict, plan: sc.Plan, began: float, *, final: bool
) -> None:
    """Write (or rewrite) the results folder; print the table when the run is over."""
    meta["minutes"] = round((time.monotonic() - began) / 60, 1)
    meta["plan"] = plan.__dict__
    header = (
        f"Odradek vs Apache Kafka {meta['kafka']} — {meta['date']}, commit {meta['commit']}, "
        f"{'quick' if plan.quick else 'full'} run of {meta['minutes']} min, {plan.repeats} "
        f"repeat(s): median (min–max). Client: confluent-kafka {meta['confluent_kafka']} "
        f"(librdkafka {meta['librdkafka']}). Machine: {meta['cpus']} CPUs, {meta['platform']}, "
        f"Python {meta['python']}, load average at start {meta['load_at_start']}; page cache "
        f"writeback: {meta.get('writeback', '?')}; free page reporting: "
        f"{meta.get('page_reporting', '?')}; DAMON reclaim: {meta.get('damon', '?')}; free "
        f"memory touched first: "
        f"{meta.get('memory_touched', 'no (quick run)')}. "
        "↑ higher is better, ↓ lower is better; a bold ratio is a row where Odradek is behind.\n"
    )
    written = report.write(results, folder, meta, header)
    if final:
        print()
        print(header + report.reference(results))
        print(report.table(results))
        for path in written:
            print(f"written {path.relative_to(REPO) if path.is_relative_to(REPO) else path}")


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description="Odradek vs Apache Kafka 3.9, side by side")
    parser.add_argument(
        "--quick", action="store_true", help="a smoke run: small phases, one repeat"
    )
    parser.add_argument("--repeats", type=int, help="repeats per measurement (5; quick: 1)")
    parser.add_argument("--only", action="append", default=[], metavar="NAME",
                        help="run this scenario (repeatable, or comma-separated)")  # fmt: skip
    parser.add_argument("--list", action="store_true", help="list the scenarios and exit")
    parser.add_argument("--phase-seconds", type=float,
                        help=f"seconds a produce phase sends ({sc.PHASE_SECONDS:g}; quick: 0.5)")  # fmt: skip
    parser.add_argument("--phase-mb", type=int,
                        help="MB of values in a consume row's topic (500; quick: 8)")  # fmt: skip
    parser.add_argument("--scale-topics", type=int,
                        help="topics of 1,000 partitions in partitions-scale (10; quick: 4 of 100)")  # fmt: skip
    parser.add_argument("--system", choices=SYSTEMS, help="measure one system only")
    parser.add_argument("--profile", action="store_true",
                        help="then run every scenario once more on Odradek with py-spy on its "
                             "brokers: flame graphs in the results folder's profiles/")  # fmt: skip
    parser.add_argument("--kafka-heap", default="1g")
    parser.add_argument("--results-dir", type=Path, default=HERE / "results")
    args = parser.parse_args(argv)
    if args.list:
        for s in SCENARIOS:
            extra = "" if s.in_quick else " (not in --quick unless named)"
            print(f"{s.name:<14} {s.summary}{extra}")
        return 0
    names = [n for item in args.only for n in item.split(",") if n]
    unknown = set(names) - {s.name for s in SCENARIOS}
    if unknown:
        parser.error(f"unknown scenario(s) {', '.join(sorted(unknown))}; see --list")
    chosen = [
        s for s in SCENARIOS if s.name in names or (not names and (s.in_quick or not args.quick))
    ]
    if shutil.which("java") is None:
        parser.error(
            "java is needed (Apache Kafka, ZooKeeper): apt-get install default-jre-headless"
        )
    if args.profile and args.system == "Kafka":
        parser.error("--profile profiles Odradek's brokers: not with --system Kafka")
    if args.profile and py_spy() is None:
        parser.error("--profile needs py-spy: pip install py-spy (the bench extra)")
    # Turn SIGTERM into SystemExit so the `finally` blocks stop the servers.
    signal.signal(signal.SIGTERM, lambda *_: sys.exit(143))
    plan = sc.Plan.make(args.quick, args.repeats, args.phase_mb, args.phase_seconds)
    if args.scale_topics:
        plan = replace(plan, scale_topics=args.scale_topics)
    meta = machine()
    systems = [args.system] if args.system else list(SYSTEMS)
    print(f"bench: {', '.join(s.name for s in chosen)}; {plan.repeats} repeat(s); "
          f"{'quick' if plan.quick else 'full'} mode; load average {meta['load_at_start']}",
          flush=True)  # fmt: skip
    results = report.Results()
    began = time.monotonic()
    folder = args.results_dir / dt.datetime.now().strftime("%Y-%m-%dT%H%M%S")
    restore_left_behind()
    stop_with_harness()
    try:
        with writeback_held(meta), page_reporting_held(meta), damon_held(meta):
            if not plan.quick:  # a smoke run's figures are not compared: about 25 s saved
                fault_in_free_memory(meta)
            for kind, group in deployments(chosen, plan.quick):
                run_kind(kind, group, systems, plan, results, args.kafka_heap,
                         folder / "profiles" if args.profile else None)  # fmt: skip
                write(results, folder, meta, plan, began, final=False)
    finally:
        # Also when interrupted: what was measured so far is kept.
        write(results, folder, meta, plan, began, final=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
