"""Log compaction, side by side: how fast Apache Kafka 3.9's cleaner and Odradek's clean the same
log, and what producers see meanwhile (the `compaction` scenario of bench/run.py).

On a broker started with log.cleaner.backoff.ms=1000:

1. `fill`: a topic with cleanup.policy=delete and segments of a sixteenth of the data (64 MiB
   for 1 GB; the active segment is never cleaned) gets `megabytes` of records
   (1 KiB values) whose keys repeat so that `unique` (10%) of them are distinct; nothing is
   cleaned yet.
2. `probe`: another process measures produce latency (acks=1, linger.ms=0, `rate` records/s)
   for a few seconds, then switches the big topic to cleanup.policy=compact and goes on measuring
   until told to stop.
3. The runner waits for the cleaner's own report in the server log (both log "cleaned log ...
   MB of log processed in ... seconds") and stops the probe.

`fill` and `probe` run in their own processes: ``compaction.py fill|probe --bootstrap ...``.
"""

from __future__ import annotations

import argparse
import json
import os
import random
import re
import shutil
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path

from loadgen import percentile

HERE = Path(__file__).resolve().parent
BACKOFF = {"log.cleaner.backoff.ms": "1000"}
# Both cleaners' report: "cleaned log <name> (dirty section = [a, b])[:] <n> MB of log
# processed in <s> seconds (<r> MB/sec)". The rate is read as printed: the seconds have one
# decimal, 7% of a 1.4 s clean, while the rate is worked out from the exact time.
REPORT = re.compile(
    r"cleaned log (\S+) \(dirty section = \[(\d+), (\d+)\]\)\W+([\d,.]+) MB of log processed "
    r"in ([\d,.]+) seconds \(([\d,.]+) MB/sec\)"
)


# -- client phases (each in its own process) ----------------------------------------------------


def segment_bytes(megabytes: int) -> int:
    return max(1 << 20, (megabytes << 20) // 16)


def fill(args: argparse.Namespace) -> dict:
    from confluent_kafka import Producer
    from confluent_kafka.admin import AdminClient, NewTopic

    admin = AdminClient({"bootstrap.servers": args.bootstrap})
    config = {"cleanup.policy": "delete", "segment.bytes": str(segment_bytes(args.megabytes)),
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
    return {"count": len(s), "p50": percentile(s, 0.5), "p99": percentile(s, 0.99), "max": s[-1]}


def probe(args: argparse.Namespace) -> dict:
    from confluent_kafka import Producer
    from confluent_kafka.admin import AdminClient, AlterConfigOpType, ConfigEntry, ConfigResource

    producer = Producer({"bootstrap.servers": args.bootstrap, "acks": "1", "linger.ms": 0})
    # Warm before the clock, as every produce phase is (loadgen.py): connected, the topic's
    # metadata known, one record acknowledged. Until stop 44 the first records waited for that
    # here, and a start of 100 ms set the p99 of the 5 s before cleaning on its own.
    producer.produce(args.topic + "-latency", b"x" * 100)
    if producer.flush(30):
        raise RuntimeError("the probe's first record was not acknowledged within 30 s")
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


def measure(bootstrap: str, log_text: Callable[[], str], args: argparse.Namespace) -> dict:
    """Fill, probe, wait for the cleaner's report; raises when the cleaner does not report."""
    work = Path(tempfile.mkdtemp(prefix="odradek-bench-compaction-"))
    topic = f"compact-{int(time.time())}"
    try:
        out = subprocess.run(child("fill", bootstrap, topic, args), capture_output=True,
                             text=True, timeout=3600)  # fmt: skip
        if out.returncode != 0:
            raise RuntimeError(f"fill failed: {out.stderr[-2000:]}")
        filled = last_json(out.stdout)
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
            for m in REPORT.finditer(log_text()):
                if m.group(1) == f"{topic}-0":
                    report = m
                    break
        stop_file.write_text("stop")
        probe_out, _ = proc.communicate(timeout=120)
        probed = last_json(probe_out)
        if report is None:
            raise RuntimeError("no cleaner report in the log")
        mb, secs, rate = (float(report.group(i).replace(",", "")) for i in (4, 5, 6))
        return {"topic": topic, "filled": filled, "probe": probed, "clean_mb": mb, "clean_seconds": secs,
                "clean_mb_per_s": rate}  # fmt: skip
    finally:
        shutil.rmtree(work, ignore_errors=True)


def options(megabytes: int, max_seconds: float, before: float) -> argparse.Namespace:
    """The runner's settings: `megabytes` of 1 KiB records, 10% distinct keys, 200 records/s
    of latency probe, `before` seconds of it before the switch to compact, at most
    `max_seconds` of waiting for the cleaner."""
    return argparse.Namespace(megabytes=megabytes, unique=0.1, size=1024, rate=200,
                              before_seconds=before, max_seconds=max_seconds)  # fmt: skip


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("phase", choices=["fill", "probe"])
    parser.add_argument("--bootstrap", required=True)
    parser.add_argument("--topic", required=True)
    parser.add_argument("--stop-file")
    parser.add_argument("--before-seconds", type=float, default=5.0)
    parser.add_argument("--max-seconds", type=float, default=900.0)
    parser.add_argument("--megabytes", type=int, default=1024)
    parser.add_argument("--unique", type=float, default=0.1)
    parser.add_argument("--size", type=int, default=1024)
    parser.add_argument("--rate", type=int, default=200, help="latency probe records/s")
    args = parser.parse_args(argv)
    print(json.dumps(fill(args) if args.phase == "fill" else probe(args)))
    return 0


if __name__ == "__main__":
    sys.exit(main())
