"""Offline-load benchmark: pipelines/offline_load.py bulk-loading a 1M-record topic into Parquet,
from Apache Kafka 3.9 and from Odradek on the same machine.

``make bench`` runs this after bench/run.py. For each server in turn: start it (as bench/run.py
does), create a topic, fill it with bench/loadgen.py (acks=1, not measured), then run the job
with spark-submit in local mode, as a user would, and read its summary. The rate is the job's
own clock (planning, the Spark job, publishing, committing), so the JVM's start-up is left out;
the wall time of the whole spark-submit is reported next to it.

    bench/offline_load.py [--records N] [--size BYTES] [--partitions P] [--only kafka|odradek]
"""

from __future__ import annotations

import argparse
import datetime as dt
import json
import os
import shutil
import signal
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from run import (
    HERE,
    REPO,
    KafkaServer,
    OdradekServer,
    Server,
    Settings,
    create_topic,
    loadgen,
    odradek_command,
)

JOB = REPO / "pipelines" / "offline_load.py"
CONNECTOR = REPO / "scripts" / "install-spark-connector.sh"
SCENARIO = "offline load into Parquet"


def connector_jars() -> str:
    out = subprocess.run(
        ["bash", str(CONNECTOR), "--list"], check=True, stdout=subprocess.PIPE, text=True
    ).stdout
    return out.strip().splitlines()[-1]


def run_job(bootstrap: str, topic: str, workdir: Path, jars: str) -> dict:
    """spark-submit the job once over the whole topic; its summary plus the wall time."""
    summary = workdir / "summary.json"
    cmd = [
        str(Path(sys.executable).parent / "spark-submit"),
        "--master", "local[*]",
        "--driver-memory", "2g",
        "--jars", jars,
        "--conf", "spark.ui.enabled=false",
        "--conf", "spark.ui.showConsoleProgress=false",
        "--conf", f"spark.local.dir={workdir / 'spark-local'}",
        "--conf", "spark.driver.host=127.0.0.1",
        "--conf", "spark.driver.bindAddress=127.0.0.1",
        str(JOB),
        "--bootstrap-servers", bootstrap,
        "--topics", topic,
        "--output", str(workdir / "parquet"),
        "--summary-json", str(summary),
    ]  # fmt: skip
    env = {**os.environ, "PYSPARK_PYTHON": sys.executable, "SPARK_LOCAL_IP": "127.0.0.1"}
    began = time.monotonic()
    proc = subprocess.run(cmd, capture_output=True, text=True, env=env, timeout=3600)
    wall = time.monotonic() - began
    if proc.returncode != 0:
        raise RuntimeError(f"offline load failed ({proc.returncode}):\n{proc.stderr[-3000:]}")
    result = json.loads(summary.read_text())
    return {
        "records": result["records"],
        "bytes": result["bytes"],
        "seconds": result["seconds"],
        "wall_seconds": wall,
        "records_per_s": result["records"] / result["seconds"],
        "mb_per_s": result["bytes"] / result["seconds"] / 1e6,
    }


def measure(server: Server, settings: Settings, partitions: int, jars: str) -> dict:
    print(f"== {server.name}: starting", flush=True)
    workdir = Path(tempfile.mkdtemp(prefix="odradek-bench-load-"))
    try:
        bootstrap = server.start()
        topic = create_topic(bootstrap, partitions, settings)
        filled = loadgen("produce", bootstrap, topic, settings, acks="1")
        if filled.get("records", 0) < settings.records:
            raise RuntimeError(f"filled only {filled.get('records')} of {settings.records} records")
        print(f"  {settings.records} records in {topic}; loading", flush=True)
        row = run_job(bootstrap, topic, workdir, jars)
        print(
            f"  {row['records']} records, {row['records_per_s']:,.0f} rec/s, "
            f"{row['mb_per_s']:.1f} MB/s ({row['wall_seconds']:.0f} s with spark-submit)",
            flush=True,
        )
        return row
    except Exception as exc:  # noqa: BLE001 - a failed run is a result too
        print(f"  {server.name} failed: {exc}\n{server.tail_log()}", flush=True)
        return {"error": str(exc)}
    finally:
        server.stop()
        shutil.rmtree(workdir, ignore_errors=True)
        print(f"== {server.name}: stopped", flush=True)


def render(rows: dict[str, dict], settings: Settings, partitions: int, date: str) -> str:
    def cell(row: dict | None, key: str, spec: str) -> str:
        if not row:
            return "–"
        return "error" if row.get("error") else format(row[key], spec)

    k, o = rows.get("Kafka"), rows.get("Odradek")
    ratio = "–"
    if k and o and not k.get("error") and not o.get("error"):
        ratio = f"{o['records_per_s'] / k['records_per_s']:.2f}"
    lines = [
        f"# Offline load: Odradek vs Apache Kafka — {date}",
        "",
        f"pipelines/offline_load.py (spark-submit, local[*]) loading a topic of "
        f"{settings.records} records of {settings.size} bytes in {partitions} partitions into "
        f"Parquet; rate from the job's own clock (Spark start-up excluded). "
        f"Machine: {os.cpu_count()} CPUs.",
        "",
        "| scenario | Kafka rec/s | Kafka MB/s | Odradek rec/s | Odradek MB/s | Odradek/Kafka |",
        "|---|---:|---:|---:|---:|---:|",
        f"| {SCENARIO} | {cell(k, 'records_per_s', ',.0f')} | {cell(k, 'mb_per_s', '.1f')} "
        f"| {cell(o, 'records_per_s', ',.0f')} | {cell(o, 'mb_per_s', '.1f')} | {ratio} |",
    ]
    notes = [f"- {name}: {row['error'][:300]}" for name, row in rows.items() if row.get("error")]
    if notes:
        lines += ["", "Notes:", *notes]
    return "\n".join(lines) + "\n"


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description="offline load (Spark into Parquet) benchmark")
    parser.add_argument("--records", type=int, default=1_000_000)
    parser.add_argument("--size", type=int, default=200, help="value size in bytes")
    parser.add_argument("--partitions", type=int, default=4)
    parser.add_argument("--only", choices=["kafka", "odradek"])
    parser.add_argument("--kafka-heap", default="1g")
    parser.add_argument("--results-dir", type=Path, default=HERE / "results")
    parser.add_argument("--no-write", action="store_true", help="print only")
    args = parser.parse_args(argv)
    signal.signal(signal.SIGTERM, lambda *_: sys.exit(143))
    # The fill is not measured: give it all the time it needs.
    settings = Settings(args.records, args.size, 1800.0, 5)
    jars = connector_jars()

    rows: dict[str, dict] = {}
    if args.only in (None, "kafka"):
        rows["Kafka"] = measure(KafkaServer(args.kafka_heap), settings, args.partitions, jars)
    if args.only in (None, "odradek"):
        command = odradek_command()
        if command is None:
            rows["Odradek"] = {"error": "`odradek broker` is not available"}
        else:
            rows["Odradek"] = measure(OdradekServer(command, []), settings, args.partitions, jars)

    now = dt.datetime.now()
    table = render(rows, settings, args.partitions, now.strftime("%Y-%m-%d %H:%M"))
    print()
    print(table)
    if not args.no_write:
        args.results_dir.mkdir(parents=True, exist_ok=True)
        stem = args.results_dir / now.strftime("%Y-%m-%dT%H%M%S-offline-load")
        stem.with_suffix(".md").write_text(table)
        payload = {"settings": settings.__dict__, "partitions": args.partitions, "servers": rows}
        stem.with_suffix(".json").write_text(json.dumps(payload, indent=2) + "\n")
        print(f"written {stem}.md and {stem}.json")
    return 0


if __name__ == "__main__":
    sys.exit(main())
