"""Side-by-side throughput benchmark: Apache Kafka 3.9 and Odradek on the same machine.

``make bench`` runs this script. It starts each server in turn (single node, 127.0.0.1, temporary
directories), runs the same scenarios against it with bench/loadgen.py in a separate process, stops
it, then prints one table and writes it to bench/results/<timestamp>.md and .json.
See bench/README.md for what is measured and how to read it.
"""

from __future__ import annotations

import argparse
import datetime as dt
import importlib.metadata
import json
import os
import platform
import shutil
import signal
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Protocol

from apache_kafka import ApacheKafka, free_port
from confluent_kafka import libversion
from odradek.broker.client.blocking import api_versions_probe

HERE = Path(__file__).resolve().parent
REPO = HERE.parent
LOADGEN = HERE / "loadgen.py"


@dataclass(frozen=True)
class Scenario:
    acks: str
    partitions: int

    @property
    def label(self) -> str:
        unit = "partition" if self.partitions == 1 else "partitions"
        return f"acks={self.acks}, {self.partitions} {unit}"


SCENARIOS = [Scenario(acks, parts) for parts in (1, 8) for acks in ("1", "all")]
# Transactional producer rows: records per transaction, partitions.
TXN_RECORDS = 100
TXN_PARTITIONS = (1, 8)


def txn_label(partitions: int) -> str:
    unit = "partition" if partitions == 1 else "partitions"
    return f"produce transactional ({TXN_RECORDS}/txn), {partitions} {unit}"


@dataclass
class Settings:
    records: int
    size: int
    duration: float
    linger_ms: int


class Server(Protocol):
    name: str

    def start(self) -> str: ...

    def stop(self) -> None: ...

    def tail_log(self) -> str: ...


class KafkaServer:
    """Apache Kafka through bench/apache_kafka.py."""

    name = "Kafka"

    def __init__(self, heap: str) -> None:
        self._kafka = ApacheKafka(heap=heap)

    def start(self) -> str:
        return self._kafka.start()

    def stop(self) -> None:
        self._kafka.stop()

    def tail_log(self) -> str:
        return self._kafka.tail_log()


def odradek_command() -> Path | None:
    """The ``odradek`` console script next to this interpreter, if the broker command exists yet."""
    for candidate in (Path(sys.executable).parent / "odradek", REPO / ".venv" / "bin" / "odradek"):
        if candidate.exists():
            probe = subprocess.run(
                [sys.executable, "-c", "from odradek.broker.cli import main"],
                capture_output=True,
            )
            return candidate if probe.returncode == 0 else None
    return None


class OdradekServer:
    """Odradek started with ``odradek broker`` and command-line overrides."""

    name = "Odradek"

    def __init__(self, command: Path, overrides: list[str]) -> None:
        self.command = command
        self.overrides = overrides
        self.workdir = Path(tempfile.mkdtemp(prefix="odradek-bench-"))
        self.port = free_port()
        self.proc: subprocess.Popen[bytes] | None = None
        self.log_path = self.workdir / "odradek.log"

    def start(self, timeout: float = 60.0) -> str:
        args = [
            str(self.command),
            "broker",
            "--override",
            f"listeners=PLAINTEXT://127.0.0.1:{self.port}",
            "--override",
            f"log.dirs={self.workdir / 'data'}",
        ]
        for item in self.overrides:
            args += ["--override", item]
        with open(self.log_path, "wb") as log:
            self.proc = subprocess.Popen(
                args, stdout=log, stderr=subprocess.STDOUT, start_new_session=True
            )
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            if self.proc.poll() is not None:
                raise RuntimeError(f"odradek exited with {self.proc.returncode}")
            if api_versions_probe("127.0.0.1", self.port):
                return f"127.0.0.1:{self.port}"
            time.sleep(0.2)
        raise TimeoutError(f"odradek did not answer ApiVersions within {timeout}s")

    def stop(self) -> None:
        if self.proc is not None and self.proc.poll() is None:
            self.proc.send_signal(signal.SIGTERM)
            try:
                self.proc.wait(30)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait()
        self.proc = None
        shutil.rmtree(self.workdir, ignore_errors=True)

    def tail_log(self, lines: int = 40) -> str:
        if not self.log_path.exists():
            return ""
        return "\n".join(self.log_path.read_text(errors="replace").splitlines()[-lines:])


def create_topic(bootstrap: str, partitions: int, settings: Settings) -> str:
    """Create a fresh topic (in a child process, like all client work) and return its name."""
    result = loadgen("create", bootstrap, f"bench-{partitions}p", settings, partitions=partitions)
    if not result.get("topic"):
        raise RuntimeError(result.get("error") or "topic creation failed")
    return result["topic"]


def loadgen(phase: str, bootstrap: str, topic: str, settings: Settings, **extra: object) -> dict:
    args = [
        sys.executable,
        str(LOADGEN),
        phase,
        "--bootstrap",
        bootstrap,
        "--topic",
        topic,
        "--size",
        str(settings.size),
        "--duration",
        str(settings.duration),
        "--linger-ms",
        str(settings.linger_ms),
    ]
    extra.setdefault("records", settings.records)
    for key, value in extra.items():
        args += [f"--{key.replace('_', '-')}", str(value)]
    out = subprocess.run(args, capture_output=True, text=True, timeout=3 * settings.duration + 120)
    if out.returncode != 0 or not out.stdout.strip():
        raise RuntimeError(f"loadgen {phase} failed ({out.returncode}):\n{out.stderr[-2000:]}")
    return json.loads(out.stdout.strip().splitlines()[-1])


def rates(result: dict) -> dict:
    seconds = result.get("seconds") or 0.0
    if seconds <= 0 or not result.get("records"):
        return {**result, "records_per_s": 0.0, "mb_per_s": 0.0}
    return {
        **result,
        "records_per_s": result["records"] / seconds,
        "mb_per_s": result["bytes"] / seconds / 1e6,
    }


@dataclass
class ServerRun:
    name: str
    skipped: str | None = None
    rows: dict[str, dict] = field(default_factory=dict)


def run_server(server: Server, settings: Settings) -> ServerRun:
    run = ServerRun(server.name)
    print(f"== {server.name}: starting", flush=True)
    try:
        bootstrap = server.start()
    except Exception as exc:  # noqa: BLE001 - report and carry on with the other server
        server.stop()
        run.skipped = f"failed to start: {exc}"
        print(f"{server.name} did not start: {exc}\n{server.tail_log()}", flush=True)
        return run
    try:
        # Warm-up (JIT, page cache, connection set-up); not reported.
        warm = Settings(min(settings.records, 50_000), settings.size, settings.duration, 5)
        try:
            topic = create_topic(bootstrap, 1, settings)
            loadgen("produce", bootstrap, topic, warm, acks="1")
            loadgen("consume", bootstrap, topic, warm, partitions=1)
        except Exception as exc:  # noqa: BLE001
            print(f"  warm-up failed: {exc}", flush=True)
        host, _, port = bootstrap.rpartition(":")
        for sc in SCENARIOS:
            prod_key, cons_key = f"produce {sc.label}", f"consume {sc.label}"
            if not api_versions_probe(host, int(port)):
                run.rows[prod_key] = run.rows[cons_key] = {"error": "server stopped answering"}
                continue
            try:
                topic = create_topic(bootstrap, sc.partitions, settings)
                prod = rates(loadgen("produce", bootstrap, topic, settings, acks=sc.acks))
                run.rows[prod_key] = prod
                cons = rates(
                    loadgen(
                        "consume",
                        bootstrap,
                        topic,
                        settings,
                        records=prod["records"],
                        partitions=sc.partitions,
                    )
                )
                run.rows[cons_key] = cons
            except Exception as exc:  # noqa: BLE001 - a failed scenario is a result too
                run.rows.setdefault(prod_key, {"error": str(exc)})
                run.rows.setdefault(cons_key, {"error": str(exc)})
            for key in (prod_key, cons_key):
                report(key, run.rows[key])
        for partitions in TXN_PARTITIONS:
            key = txn_label(partitions)
            try:
                topic = create_topic(bootstrap, partitions, settings)
                run.rows[key] = rates(
                    loadgen("txn-produce", bootstrap, topic, settings, txn_records=TXN_RECORDS)
                )
            except Exception as exc:  # noqa: BLE001 - a failed scenario is a result too
                run.rows[key] = {"error": str(exc)}
            report(key, run.rows[key])
    finally:
        server.stop()
        print(f"== {server.name}: stopped", flush=True)
    return run


def report(key: str, r: dict) -> None:
    note = f"  ({r['error']})" if r.get("error") else ""
    print(
        f"  {key:<48} {r.get('records', 0):>8} rec "
        f"{r.get('records_per_s', 0):>10.0f} rec/s {r.get('mb_per_s', 0):>8.1f} MB/s{note}",
        flush=True,
    )


def fmt_rate(row: dict | None, key: str, spec: str) -> str:
    if row is None:
        return "–"
    if row.get("error") and not row.get("records"):
        return "error"
    return format(row.get(key, 0.0), spec)


def render(runs: list[ServerRun], settings: Settings, meta: dict) -> str:
    kafka, odradek = runs
    lines = [
        f"# Odradek vs Apache Kafka — {meta['date']}",
        "",
        f"{settings.records} records of {settings.size} bytes per scenario (at most "
        f"{settings.duration:g} s per phase), linger.ms={settings.linger_ms}, no compression, "
        f"single node on 127.0.0.1. Client: confluent-kafka {meta['confluent_kafka']} "
        f"(librdkafka {meta['librdkafka']}). Machine: {meta['cpus']} CPUs, {meta['platform']}, "
        f"Python {meta['python']}. MB = 10^6 bytes of record values.",
        "",
        "| scenario | Kafka rec/s | Kafka MB/s | Odradek rec/s | Odradek MB/s | Odradek/Kafka |",
        "|---|---:|---:|---:|---:|---:|",
    ]
    notes: list[str] = []
    errors: dict[tuple[str, str], list[str]] = {}
    keys = list(dict.fromkeys([*kafka.rows, *odradek.rows]))
    for key in keys:
        k, o = kafka.rows.get(key), odradek.rows.get(key)
        ratio = "–"
        if k and o and k.get("records_per_s") and o.get("records_per_s"):
            ratio = f"{o['records_per_s'] / k['records_per_s']:.2f}"
        lines.append(
            f"| {key} | {fmt_rate(k, 'records_per_s', ',.0f')} | {fmt_rate(k, 'mb_per_s', '.1f')} "
            f"| {fmt_rate(o, 'records_per_s', ',.0f')} | {fmt_rate(o, 'mb_per_s', '.1f')} "
            f"| {ratio} |"
        )
        for run, row in ((kafka, k), (odradek, o)):
            if row and row.get("error"):
                message = " ".join(str(row["error"]).split())[:300]
                errors.setdefault((run.name, message), []).append(key)
            elif row and row.get("records", settings.records) < settings.records:
                notes.append(f"- {run.name}, {key}: {row['records']} records (time bound reached)")
    for (name, message), failed in errors.items():
        notes.append(f"- {name}, {'; '.join(failed)}: {message}")
    for run in runs:
        if run.skipped:
            notes.append(f"- {run.name} not measured: {run.skipped}")
    if notes:
        lines += ["", "Notes:", *notes]
    return "\n".join(lines) + "\n"


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description="Odradek vs Apache Kafka throughput")
    parser.add_argument("--records", type=int, default=200_000, help="records per scenario")
    parser.add_argument("--size", type=int, default=1024, help="value size in bytes")
    parser.add_argument("--duration", type=float, default=30.0, help="time bound per phase (s)")
    parser.add_argument("--linger-ms", type=int, default=5)
    parser.add_argument("--only", choices=["kafka", "odradek"], help="measure one server")
    parser.add_argument("--kafka-heap", default="1g")
    parser.add_argument(
        "--odradek-override",
        action="append",
        default=[],
        metavar="KEY=VALUE",
        help="extra broker property for Odradek (repeatable)",
    )
    parser.add_argument("--results-dir", type=Path, default=HERE / "results")
    parser.add_argument("--no-write", action="store_true", help="print only")
    args = parser.parse_args(argv)
    # Turn SIGTERM into SystemExit so the `finally` blocks stop the servers.
    signal.signal(signal.SIGTERM, lambda *_: sys.exit(143))
    settings = Settings(args.records, args.size, args.duration, args.linger_ms)

    now = dt.datetime.now()
    meta = {
        "date": now.strftime("%Y-%m-%d %H:%M"),
        "confluent_kafka": importlib.metadata.version("confluent-kafka"),
        "librdkafka": libversion()[0],
        "cpus": os.cpu_count(),
        "platform": platform.platform(terse=True),
        "python": platform.python_version(),
        "kafka": "3.9.0",
    }

    kafka_run = ServerRun("Kafka", skipped="not selected")
    odradek_run = ServerRun("Odradek", skipped="not selected")
    if args.only in (None, "kafka"):
        if shutil.which("java") is None or shutil.which("mvn") is None:
            kafka_run.skipped = "java or mvn not installed (needed to assemble Kafka 3.9)"
            print(f"SKIP Kafka: {kafka_run.skipped}", flush=True)
        else:
            kafka_run = run_server(KafkaServer(args.kafka_heap), settings)
    if args.only in (None, "odradek"):
        command = odradek_command()
        if command is None:
            odradek_run.skipped = (
                "`odradek broker` is not available yet (odradek.broker.cli.main does not import)"
            )
            print(f"SKIP Odradek: {odradek_run.skipped}", flush=True)
        else:
            odradek_run = run_server(OdradekServer(command, args.odradek_override), settings)

    runs = [kafka_run, odradek_run]
    table = render(runs, settings, meta)
    print()
    print(table)
    if not args.no_write:
        args.results_dir.mkdir(parents=True, exist_ok=True)
        stem = args.results_dir / now.strftime("%Y-%m-%dT%H%M%S")
        stem.with_suffix(".md").write_text(table)
        payload = {
            "meta": meta,
            "settings": settings.__dict__,
            "servers": {r.name: {"skipped": r.skipped, "results": r.rows} for r in runs},
        }
        stem.with_suffix(".json").write_text(json.dumps(payload, indent=2) + "\n")
        print(f"written {stem}.md and {stem}.json")
    return 0


if __name__ == "__main__":
    sys.exit(main())
