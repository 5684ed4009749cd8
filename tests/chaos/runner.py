"""Run chaos schedules against a fresh cluster each and check what the clients saw.

    python tests/chaos/runner.py [--schedule NAME[,NAME...]|all] [--seed N] [--duration S]

(`make chaos SEED=... SCHEDULE=...` calls it.) Each schedule gets its own three ZooKeeper
servers and three brokers in network namespaces (environment.py), the workload of workload.py,
and its faults (schedules.py) for `--duration` seconds; then every fault is healed, the run waits
until the cluster has recovered (every broker registered, every partition led with its whole
ISR, an acks=all write accepted by each partition), lets the consumers catch up, reads every
partition back and hands the history to the checker. One table row per schedule; the exit
status is 1 when any run lost, duplicated or reordered records (or failed to run).

The runner moves itself into a private mount namespace first (`unshare --mount`), with its own
/run/netns: its network namespaces and tmpfs log directories then vanish with it however it
ends, and its children get SIGKILL when it dies (PR_SET_PDEATHSIG).
"""

from __future__ import annotations

import argparse
import faulthandler
import json
import logging
import os
import random
import signal
import subprocess
import sys
import threading
import time
import traceback
from dataclasses import asdict, dataclass, field
from pathlib import Path

HERE = Path(__file__).resolve().parent
REPO = HERE.parents[1]
for _path in (HERE, REPO / "tests" / "integration"):
    if str(_path) not in sys.path:
        sys.path.insert(0, str(_path))

from checker import Report, check  # noqa: E402
from environment import ChaosCluster, wait_for  # noqa: E402
from history import ACK, FAULT, History  # noqa: E402
from netns import NETNS_DIR, missing_tools, sweep  # noqa: E402
from schedules import SCHEDULES, SHORT, Schedule  # noqa: E402
from workload import TOPIC, Workload, end_offsets, probe, read_all  # noqa: E402

log = logging.getLogger("chaos")

PARTITIONS = 3
UNSHARED = "ODRADEK_CHAOS_UNSHARED"
SETTLE_TIMEOUT = 90.0  # cluster up, topic created, first acknowledgement
RECOVERY_TIMEOUT = 240.0
CATCH_UP_TIMEOUT = 180.0


@dataclass
class Result:
    schedule: str
    seed: int
    faults: list[str] = field(default_factory=list)
    acked: int = 0
    lost: int = 0
    duplicated: int = 0
    reordered: int = 0
    other: dict[str, int] = field(default_factory=dict)
    leader_changes: int = 0
    recovery_s: float | None = None
    crashes: dict[int, int | None] = field(default_factory=dict)
    seconds: float = 0.0
    error: str | None = None
    summary: str = ""

    @property
    def ok(self) -> bool:
        return (
            self.error is None
            and not self.lost
            and not self.duplicated
            and not self.reordered
            and not any(self.other.values())
        )

    def take(self, report: Report) -> None:
        self.acked = report.acked
        self.lost = report.count("lost")
        self.duplicated = report.count("duplicated")
        self.reordered = report.count("reordered")
        self.other = {
            k: v for k, v in report.counts.items() if k not in ("lost", "duplicated", "reordered")
        }
        self.summary = report.summary()


class StallWatch(threading.Thread):
    """Dumps every thread's stack to `path` when the harness stops running Python for
    `seconds` (something holding the GIL), via faulthandler's own C thread."""

    def __init__(self, path: Path, seconds: float = 5.0) -> None:
        super().__init__(name="stall-watch", daemon=True)
        self.file = open(path, "a")  # noqa: SIM115 - open for the watch's whole life
        self.seconds = seconds
        self.stopping = threading.Event()

    def run(self) -> None:
        while not self.stopping.is_set():
            faulthandler.dump_traceback_later(self.seconds, file=self.file)
            self.stopping.wait(1.0)
        faulthandler.cancel_dump_traceback_later()
        self.file.close()


class LeaderPoller(threading.Thread):
    """Counts leader changes of the workload's partitions, sampling the metadata each second."""

    def __init__(self, env: ChaosCluster) -> None:
        super().__init__(name="leader-poller", daemon=True)
        self.env = env
        self.changes = 0
        self.last: dict[int, int] = {}
        self.stopping = threading.Event()

    def run(self) -> None:
        while not self.stopping.wait(1.0):
            try:
                leaders = self.env.leaders(TOPIC)
            except Exception:  # noqa: BLE001 - no broker answers right now
                continue
            for p, (leader, _) in leaders.items():
                if leader < 0:
                    continue
                if p in self.last and self.last[p] != leader:
                    self.changes += 1
                self.last[p] = leader


def run_nemesis(
    schedule: Schedule,
    env: ChaosCluster,
    rng: random.Random,
    history: History,
    duration: float,
    result: Result,
) -> None:
    """Cycles of quiet, fault, heal until `duration` seconds have passed."""
    end = time.monotonic() + duration
    turn = 0
    while True:
        quiet = rng.uniform(*schedule.quiet_s)
        length = rng.uniform(*schedule.fault_s)
        if time.monotonic() + quiet + min(length, schedule.fault_s[0]) > end:
            break
        time.sleep(quiet)
        make = schedule.faults[turn % len(schedule.faults)] if schedule.in_order else (
            rng.choice(schedule.faults))  # fmt: skip
        turn += 1
        fault = make()
        detail = fault.start(env, rng)
        history.add(FAULT, name=fault.name, phase="start", detail=detail)
        log.info("fault %s: %s", fault.name, detail)
        result.faults.append(f"{fault.name} ({detail})")
        time.sleep(max(0.0, min(length, end - time.monotonic())))
        fault.stop(env)
        history.add(FAULT, name=fault.name, phase="stop", detail=detail)
        log.info("healed %s", fault.name)
    time.sleep(max(0.0, end - time.monotonic()))


def full_isr(env: ChaosCluster) -> bool:
    states = env.zk_partition_states(TOPIC)
    ids = set(env.broker_ids)
    return len(states) == PARTITIONS and all(
        s["leader"] in ids and set(s["isr"]) == ids for s in states.values()
    )


def recovered(env: ChaosCluster, history: History) -> bool:
    """Every server back, every partition led with its whole ISR, the brokers agreeing, and
    an acks=all record accepted by each partition."""
    modes = [s.mode() for s in env.zk.servers]
    if None in modes or modes.count("leader") != 1:
        return False
    if env.c.registered() != set(env.broker_ids):
        return False
    if not full_isr(env):
        return False
    offsets = env.zk_partition_states("__consumer_offsets")
    if any(s["leader"] not in env.broker_ids for s in offsets.values()):
        return False
    if not env.c.converged([TOPIC]):
        return False
    return probe(env.bootstrap, PARTITIONS, history, timeout=20.0)


def run_one(schedule: Schedule, seed: int, duration: float, out: Path) -> Result:
    rng = random.Random(f"{seed}/{schedule.name}")
    result = Result(schedule.name, seed)
    out.mkdir(parents=True, exist_ok=True)
    env = ChaosCluster(out)
    history = History()
    workload: Workload | None = None
    poller: LeaderPoller | None = None
    started = time.monotonic()
    watch = StallWatch(out / "stalls.txt")
    watch.start()
    try:
        env.start()
        env.c.create_topic(TOPIC, PARTITIONS, 3)
        if not wait_for(lambda: full_isr(env), SETTLE_TIMEOUT):
            raise RuntimeError(f"{TOPIC} never had its whole ISR")
        workload = Workload(history, env.bootstrap, PARTITIONS, rng)
        poller = LeaderPoller(env)
        poller.start()
        workload.start()
        if not wait_for(lambda: history.of(ACK), SETTLE_TIMEOUT):
            raise RuntimeError("no record was acknowledged before the faults")
        run_nemesis(schedule, env, rng, history, duration, result)
        result.crashes = env.crashed()
        env.heal_all()
        healed = time.monotonic()
        history.add(FAULT, name="all", phase="healed", detail="")
        workload.stop_producers(timeout=120.0)
        if wait_for(lambda: recovered(env, history), RECOVERY_TIMEOUT, interval=1.0):
            result.recovery_s = time.monotonic() - healed
        else:
            # A liveness failure: the run fails, and what the clients saw is still checked.
            result.error = f"the cluster did not recover within {RECOVERY_TIMEOUT:.0f}s"
            (out / "error.txt").write_text(result.error + "\n" + env.log_tails())
        ends = _ends(env)
        if not wait_for(lambda: workload.caught_up(ends), CATCH_UP_TIMEOUT, interval=1.0):
            log.warning("consumers did not catch up with %s", ends)
        workload.stop_consumers(timeout=60.0)
        workload.observer.observe_once(env.bootstrap)
        history.final = read_all(env.bootstrap, PARTITIONS)
        result.take(check(history))
        errors = workload.errors()
        if errors:
            failed = "client threads failed: " + "; ".join(errors)
            result.error = f"{result.error}; {failed}" if result.error else failed
    except Exception as e:  # noqa: BLE001 - the run fails, the suite goes on
        result.error = f"{type(e).__name__}: {e}"
        (out / "error.txt").write_text(traceback.format_exc() + "\n" + env.log_tails())
    finally:
        watch.stopping.set()
        if poller is not None:
            poller.stopping.set()
            result.leader_changes = poller.changes
        if workload is not None:
            workload.stop_producers(timeout=5.0)
            workload.stop_consumers(timeout=5.0)
        history.dump(out / "history.jsonl")
        if not result.ok:
            try:
                env.keep_data()
            except Exception:  # noqa: BLE001 - a post-mortem aid only
                log.exception("could not copy the brokers' data")
        env.close()
        result.seconds = time.monotonic() - started
        (out / "result.json").write_text(json.dumps(asdict(result), indent=1))
    return result


def _ends(env: ChaosCluster) -> dict[int, int]:
    from confluent_kafka import Consumer

    consumer = Consumer({"bootstrap.servers": env.bootstrap, "group.id": "chaos-ends"})
    try:
        return end_offsets(consumer, PARTITIONS)
    finally:
        consumer.close()


def table(results: list[Result]) -> str:
    head = ("| schedule | faults | acked | lost | duplicated | reordered | other anomalies "
            "| leader changes | recovery s | crashes | result |")  # fmt: skip
    rows = [head, "|" + "---|" * 11]
    for r in results:
        other = ", ".join(f"{k} {v}" for k, v in sorted(r.other.items()) if v) or "0"
        crashes = ", ".join(f"b{b} ({code})" for b, code in sorted(r.crashes.items())) or "-"
        faults = "; ".join(r.faults).replace("|", "\\|") if r.faults else "-"
        recovery = f"{r.recovery_s:.1f}" if r.recovery_s is not None else "-"
        verdict = "ok" if r.ok else ("ERROR: " + r.error if r.error else "FAIL")
        rows.append(
            f"| {r.schedule} | {faults} | {r.acked} | {r.lost} | {r.duplicated} | "
            f"{r.reordered} | {other} | {r.leader_changes} | {recovery} | {crashes} | {verdict} |"
        )
    return "\n".join(rows)


def enter_private_namespaces() -> None:
    """Re-run this process under `unshare --mount` with a tmpfs of its own on /run/netns."""
    if os.environ.get(UNSHARED) == "1":
        NETNS_DIR.mkdir(parents=True, exist_ok=True)
        subprocess.run(["mount", "-t", "tmpfs", "-o", "size=1m", "odradek-chaos", str(NETNS_DIR)],
                       check=True)  # fmt: skip
        return
    NETNS_DIR.mkdir(parents=True, exist_ok=True)
    os.environ[UNSHARED] = "1"
    argv = ["unshare", "--mount", "--propagation", "private", "--", sys.executable, *sys.argv]
    os.execvp("unshare", argv)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawTextHelpFormatter
    )
    parser.add_argument("--schedule", default="all", help="names, comma-separated, or 'all'")
    parser.add_argument("--seed", type=int, default=None)
    parser.add_argument("--duration", type=float, default=60.0, help="seconds of faults per run")
    parser.add_argument("--out", type=Path, default=None, help="where logs and histories go")
    parser.add_argument("--list", action="store_true", help="list the schedules and exit")
    parser.add_argument("--json", type=Path, default=None, help="write the results here too")
    args = parser.parse_args(argv)
    if args.list:
        for s in SCHEDULES.values():
            print(f"{s.name:28} {s.description}")
        return 0
    names = list(SCHEDULES) if args.schedule == "all" else args.schedule.split(",")
    unknown = [n for n in names if n not in SCHEDULES]
    if unknown:
        parser.error(f"unknown schedules {unknown}; --list shows them (the short one is {SHORT})")
    missing = missing_tools()
    if missing:
        print(
            f"chaos: missing {', '.join(missing)} (scripts/install-chaos-deps.sh)", file=sys.stderr
        )
        return 2
    enter_private_namespaces()
    logging.basicConfig(level=logging.INFO, format="%(asctime)s %(levelname)s %(message)s")
    for name in ("kazoo", "kazoo.client", "kazoo.protocol.connection"):
        logging.getLogger(name).setLevel(logging.WARNING)
    signal.signal(signal.SIGTERM, lambda *_: sys.exit(143))
    for stale in sweep():
        log.info("removed stale namespace %s", stale)
    seed = args.seed if args.seed is not None else random.randrange(1 << 31)
    out = args.out or REPO / "build" / "chaos" / time.strftime("%Y%m%d-%H%M%S")
    print(f"chaos: seed {seed}, {len(names)} schedule(s) of {args.duration:g}s, logs in {out}",
          flush=True)  # fmt: skip
    results = []
    started = time.monotonic()
    for name in names:
        result = run_one(SCHEDULES[name], seed, args.duration, out / name)
        results.append(result)
        verdict = "ok" if result.ok else "FAILED"
        print(f"chaos: {name} {verdict} in {result.seconds:.0f}s: acked {result.acked}, "
              f"lost {result.lost}, duplicated {result.duplicated}, reordered {result.reordered}"
              f"{', ' + result.error if result.error else ''}", flush=True)  # fmt: skip
        if not result.ok:
            print(result.summary, flush=True)
            print(f"chaos: replay with: make chaos SEED={seed} SCHEDULE={name}", flush=True)
    report = table(results)
    total = time.monotonic() - started
    print(f"\n{report}\n\nchaos: {len(results)} schedule(s) in {total / 60:.1f} min, seed {seed}")
    (out / "table.md").write_text(report + "\n")
    if args.json:
        args.json.write_text(json.dumps([asdict(r) | {"ok": r.ok} for r in results], indent=1))
    return 0 if all(r.ok for r in results) else 1


if __name__ == "__main__":
    sys.exit(main())
