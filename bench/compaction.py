"""Log compaction, side by side: how fast Apache Kafka 3.9's cleaner and Odradek's clean the same
log, and what producers see meanwhile.

For each server in turn (single node, 127.0.0.1, temporary directories, log.cleaner.backoff.ms
1000 on both):

1. `fill`: a topic with cleanup.policy=delete and 64 MiB segments gets `--megabytes` of records
   (default 1024 MB of 1 KiB values) whose keys repeat so that `--unique` (default 10%) of them
   are distinct; nothing is cleaned yet.
2. `probe`: another process measures produce latency (acks=1, linger.ms=0, `--rate` records/s)
   for a few seconds, then switches the big topic to cleanup.policy=compact and goes on measuring
   until told to stop.
3. The runner waits for the cleaner's own report in the server log (both log "cleaned log ...
   MB of log processed in ... seconds") and stops the probe.

The table gives the cleaner's time and MB/s (as each cleaner reports them, for the first round,
which covers every inactive segment) and the produce latency percentiles before and during the
cleaning. Results go to bench/results/<timestamp>-compaction.md and .json.

    bench/compaction.py [--megabytes 1024] [--unique 0.1] [--size 1024] [--only kafka|odradek]
"""

from __future__ import annotations

import argparse
import datetime as dt
import json
import os
import random
import re
import shutil
import signal
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from apache_kafka import ApacheKafka
from run import OdradekServer, odradek_command

HERE = Path(__file__).resolve().parent
SEGMENT_BYTES = 64 << 20
BACKOFF = {"log.cleaner.backoff.ms": "1000"}
# Both cleaners' report: "cleaned log <name> (dirty section = [a, b])[:] <n> MB of log
# processed in <s> seconds (<r> MB/sec)".
REPORT = re.compile(
    r"cleaned log (\S+) \(dirty section = \[(\d+), (\d+)\]\)\W+([\d,.]+) MB of log processed "
    r"in ([\d,.]+) seconds"
)


# -- client phases (each in its own process) ----------------------------------------------------


def fill(args: argparse.Namespace) -> dict:
    from confluent_kafka import Producer
    from confluent_kafka.admin import AdminClient, NewTopic

    admin = AdminClient({"bootstrap.servers": args.bootstrap})
    config = {"cleanup.policy": "delete", "segment.bytes": str(SEGMENT_BYTES),
              "min.cleanable.dirty.ratio": "0.5", "retention.ms": "-1"}  # fmt: skip
    for name, cfg in ((args.topic, config), (args.topic + "-latency", {})):
        admin.create_topics([NewTopic(name, 1, 1, config=cfg)])[name].result(60)
    time.sleep(1)
    records = args.megabytes * 1_000_000 // args.size
    keys = max(int(records * args.unique), 1)
    pool = [os.urandom(args.size) for _ in range(64)]
    producer = Producer({"bootstrap.servers": args.bootstrap, "acks": "1", "linger.ms": 20,
                         "batch.size": 1 << 20, "queue.buffering.max.kbytes": 512 * 1024,
                         "compression.type": "none"})  # fmt: skip
    failed = []
    started = time.monotonic()
    for i in range(records):
        key = b"key-%09d" % random.randrange(keys) if i >= keys else b"key-%09d" % i
        while True:
            try:
                producer.produce(args.topic, pool[i % len(pool)], key,
                                 on_delivery=lambda e, m: failed.append(e) if e else None)  # fmt: skip
                break
            except BufferError:
                producer.poll(0.01)
        if i % 1000 == 0:
            producer.poll(0)
    producer.flush(600)
    return {"records": records, "keys": keys, "bytes": records * args.size,
            "seconds": time.monotonic() - started, "errors": len(failed)}  # fmt: skip


def _percentiles(samples: list[float]) -> dict:
    if not samples:
        return {"count": 0}
    s = sorted(samples)
    pick = lambda q: s[min(int(q * len(s)), len(s) - 1)]  # noqa: E731
    return {"count": len(s), "p50": pick(0.5), "p99": pick(0.99), "max": s[-1]}


def probe(args: argparse.Namespace) -> dict:
    from confluent_kafka import Producer
    from confluent_kafka.admin import AdminClient, AlterConfigOpType, ConfigEntry, ConfigResource

    producer = Producer({"bootstrap.servers": args.bootstrap, "acks": "1", "linger.ms": 0})
    phase = {"name": "before"}
    latencies: dict[str, list[float]] = {"before": [], "during": []}

    def send() -> None:
        sent = time.monotonic()
        which = phase["name"]

        def done(err, _msg) -> None:
            if err is None:
                latencies[which].append((time.monotonic() - sent) * 1000)

        producer.produce(args.topic + "-latency", b"x" * 100, on_delivery=done)

    interval = 1.0 / args.rate
    end_before = time.monotonic() + args.before_seconds
    stop_file = Path(args.stop_file)
    altered_at = None
    deadline = time.monotonic() + args.max_seconds
    next_send = time.monotonic()
    while time.monotonic() < deadline:
        now = time.monotonic()
        if altered_at is None and now >= end_before:
            producer.flush(10)
            admin = AdminClient({"bootstrap.servers": args.bootstrap})
            compact = ConfigEntry(
                "cleanup.policy", "compact", incremental_operation=AlterConfigOpType.SET
            )
            res = ConfigResource("topic", args.topic, incremental_configs=[compact])
            admin.incremental_alter_configs([res])[res].result(30)
            altered_at = time.time()
            phase["name"] = "during"
            Path(args.stop_file + ".altered").write_text(str(altered_at))
        if altered_at is not None and stop_file.exists():
            break
        if now >= next_send:
            send()
            next_send += interval
        producer.poll(min(max(next_send - time.monotonic(), 0), 0.005))
    producer.flush(10)
    return {"altered_at": altered_at, **{k: _percentiles(v) for k, v in latencies.items()}}


def child(phase: str, bootstrap: str, topic: str, args: argparse.Namespace, **extra) -> list:
    cmd = [sys.executable, str(Path(__file__)), phase, "--bootstrap", bootstrap, "--topic", topic,
           "--megabytes", str(args.megabytes), "--unique", str(args.unique),
           "--size", str(args.size), "--rate", str(args.rate)]  # fmt: skip
    for k, v in extra.items():
        cmd += [f"--{k.replace('_', '-')}", str(v)]
    return cmd


def last_json(out: str) -> dict:
    return json.loads(out.strip().splitlines()[-1])


# -- the runner -----------------------------------------------------------------------------------


def measure(name: str, start, stop, log_path, args: argparse.Namespace) -> dict:
    print(f"== {name}: starting", flush=True)
    bootstrap = start()
    work = Path(tempfile.mkdtemp(prefix="odradek-bench-compaction-"))
    topic = f"compact-{int(time.time())}"
    try:
        out = subprocess.run(child("fill", bootstrap, topic, args), capture_output=True,
                             text=True, timeout=3600)  # fmt: skip
        if out.returncode != 0:
            raise RuntimeError(f"fill failed: {out.stderr[-2000:]}")
        filled = last_json(out.stdout)
        print(f"  filled {filled['bytes'] / 1e6:,.0f} MB ({filled['keys']:,} keys) in "
              f"{filled['seconds']:.1f} s", flush=True)  # fmt: skip
        stop_file = work / "stop"
        proc = subprocess.Popen(
            child("probe", bootstrap, topic, args, stop_file=stop_file,
                  before_seconds=args.before_seconds, max_seconds=args.max_seconds),
            stdout=subprocess.PIPE, text=True,
        )  # fmt: skip
        report = None
        deadline = time.monotonic() + args.max_seconds
        while report is None and time.monotonic() < deadline and proc.poll() is None:
            time.sleep(0.5)
            if not Path(str(stop_file) + ".altered").exists():
                continue
            for m in REPORT.finditer(log_path().read_text(errors="replace")):
                if m.group(1) == f"{topic}-0":
                    report = m
                    break
        altered = float(Path(str(stop_file) + ".altered").read_text() or 0)
        wall = time.time() - altered
        stop_file.write_text("stop")
        probe_out, _ = proc.communicate(timeout=120)
        probed = last_json(probe_out)
        if report is None:
            return {"filled": filled, "probe": probed, "error": "no cleaner report in the log"}
        mb, secs = (float(report.group(i).replace(",", "")) for i in (4, 5))
        result = {"filled": filled, "probe": probed, "clean_mb": mb, "clean_seconds": secs,
                  "clean_mb_per_s": mb / secs if secs else 0.0, "wall_seconds": wall}  # fmt: skip
        print(f"  cleaned {mb:,.0f} MB in {secs:.1f} s ({result['clean_mb_per_s']:.1f} MB/s); "
              f"produce p99 {probed['before'].get('p99', 0):.1f} ms before, "
              f"{probed['during'].get('p99', 0):.1f} ms during", flush=True)  # fmt: skip
        return result
    finally:
        stop()
        shutil.rmtree(work, ignore_errors=True)
        print(f"== {name}: stopped", flush=True)


def cell(result: dict | None, path: tuple[str, ...], spec: str) -> str:
    value: object = result
    for key in path:
        if not isinstance(value, dict) or key not in value:
            return "–"
        value = value[key]
    return format(value, spec)


def render(results: dict[str, dict | None], args: argparse.Namespace, date: str) -> str:
    k, o = results.get("Kafka"), results.get("Odradek")
    rows = [
        ("cleaner time (s)", ("clean_seconds",), ".1f", "lower"),
        ("cleaner throughput (MB/s)", ("clean_mb_per_s",), ".1f", "higher"),
        ("produce latency p50 before cleaning (ms)", ("probe", "before", "p50"), ".1f", "lower"),
        ("produce latency p99 before cleaning (ms)", ("probe", "before", "p99"), ".1f", "lower"),
        ("produce latency p50 while cleaning (ms)", ("probe", "during", "p50"), ".1f", "lower"),
        ("produce latency p99 while cleaning (ms)", ("probe", "during", "p99"), ".1f", "lower"),
        ("produce latency max while cleaning (ms)", ("probe", "during", "max"), ".1f", "lower"),
    ]
    lines = [
        f"# Log compaction: Odradek vs Apache Kafka — {date}",
        "",
        f"Clean {args.megabytes} MB of {args.size}-byte records with {args.unique:.0%} distinct "
        f"keys (64 MiB segments, one cleaner thread, default dedupe buffer), single node on "
        f"127.0.0.1, {os.cpu_count()} CPUs. Latency: acks=1, linger.ms=0, {args.rate} records/s "
        "to another topic of the same broker.",
        "",
        "| | Kafka | Odradek | Odradek/Kafka |",
        "|---|---:|---:|---:|",
    ]
    for label, path, spec, _ in rows:
        ratio = "–"
        kv, ov = cell(k, path, ".6f"), cell(o, path, ".6f")
        if kv != "–" and ov != "–" and float(kv):
            ratio = f"{float(ov) / float(kv):.2f}"
        lines.append(f"| {label} | {cell(k, path, spec)} | {cell(o, path, spec)} | {ratio} |")
    notes = [f"- {n}: {r['error']}" for n, r in results.items() if r and r.get("error")]
    notes += [f"- {n} not measured" for n, r in results.items() if r is None]
    if notes:
        lines += ["", "Notes:", *notes]
    return "\n".join(lines) + "\n"


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("phase", nargs="?", choices=["fill", "probe"], help=argparse.SUPPRESS)
    parser.add_argument("--bootstrap", help=argparse.SUPPRESS)
    parser.add_argument("--topic", help=argparse.SUPPRESS)
    parser.add_argument("--stop-file", help=argparse.SUPPRESS)
    parser.add_argument("--before-seconds", type=float, default=5.0)
    parser.add_argument("--max-seconds", type=float, default=900.0)
    parser.add_argument("--megabytes", type=int, default=1024)
    parser.add_argument("--unique", type=float, default=0.1)
    parser.add_argument("--size", type=int, default=1024)
    parser.add_argument("--rate", type=int, default=200, help="latency probe records/s")
    parser.add_argument("--only", choices=["kafka", "odradek"])
    parser.add_argument("--kafka-heap", default="1g")
    parser.add_argument("--results-dir", type=Path, default=HERE / "results")
    parser.add_argument("--no-write", action="store_true")
    args = parser.parse_args(argv)
    if args.phase == "fill":
        print(json.dumps(fill(args)))
        return 0
    if args.phase == "probe":
        print(json.dumps(probe(args)))
        return 0
    signal.signal(signal.SIGTERM, lambda *_: sys.exit(143))
    results: dict[str, dict | None] = {"Kafka": None, "Odradek": None}
    if args.only in (None, "kafka") and shutil.which("java"):
        kafka = ApacheKafka(heap=args.kafka_heap, extra_props=BACKOFF)
        results["Kafka"] = measure("Kafka", kafka.start, kafka.stop, lambda: kafka.log_path, args)
    if args.only in (None, "odradek") and (command := odradek_command()) is not None:
        server = OdradekServer(command, [f"{k}={v}" for k, v in BACKOFF.items()])
        results["Odradek"] = measure(
            "Odradek", server.start, server.stop, lambda: server.log_path, args
        )
    now = dt.datetime.now()
    table = render(results, args, now.strftime("%Y-%m-%d %H:%M"))
    print()
    print(table)
    if not args.no_write:
        args.results_dir.mkdir(parents=True, exist_ok=True)
        stem = args.results_dir / (now.strftime("%Y-%m-%dT%H%M%S") + "-compaction")
        stem.with_suffix(".md").write_text(table)
        stem.with_suffix(".json").write_text(json.dumps(results, indent=2) + "\n")
        print(f"written {stem}.md and {stem}.json")
    return 0


if __name__ == "__main__":
    sys.exit(main())
