"""The systems under test, as deployments the scenarios run against: one broker or three, of
Odradek or of Apache Kafka 3.9, on 127.0.0.1 in a temporary directory.

Processes are started, waited for, stopped and killed by odradek.broker.testing (the module the
integration tests use too). Kafka's jars come from scripts/install-kafka.sh and ZooKeeper's from
scripts/install-zookeeper.sh (Maven Central, cached after the first run).
"""

from __future__ import annotations

import os
import re
import shutil
import subprocess
import tempfile
import time
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from pathlib import Path

from confluent_kafka.admin import AdminClient
from odradek.broker.testing.processes import (
    KafkaProcess,
    OdradekProcess,
    ServerProcess,
    Usage,
    free_port,
    thread_cpu,
)
from odradek.broker.testing.zookeeper import ZkEnsemble

REPO = Path(__file__).resolve().parent.parent
JIT_THREADS = ("C1 CompilerThre", "C2 CompilerThre")
START_TIMEOUT = 180.0  # a loaded two-core machine starting a JVM, or 1,000 partitions

# Same settings on both sides where the defaults differ or where one broker needs them.
ODRADEK_SINGLE = {
    "offsets.topic.replication.factor": "1",
    "offsets.topic.num.partitions": "1",
    "transaction.state.log.replication.factor": "1",
    "transaction.state.log.min.isr": "1",
    "group.initial.rebalance.delay.ms": "0",
}
CLUSTER = {
    "offsets.topic.replication.factor": "3",
    "offsets.topic.num.partitions": "4",
    "transaction.state.log.replication.factor": "3",
    "transaction.state.log.min.isr": "2",
    "group.initial.rebalance.delay.ms": "0",
}
SYSTEMS = ("Kafka", "Odradek")
# Every server's command line names its deployment's directory (its config, logs or data),
# whose name starts with this: the servers this harness process started, and no other run's.
RUN_TAG = f"odradek-bench-{os.getpid()}-"


def stop_with_harness() -> subprocess.Popen:
    """A watchdog, in a session of its own, that kills every server of this harness once the
    harness is gone, however it went, and removes their directories: a SIGKILL runs no
    `finally`, and the JVMs and brokers it started would otherwise serve on, and their logs
    stay on the disk (gigabytes), until removed by hand. `tail --pid` polls the harness once a
    second; after a normal end it finds nothing left. The tag goes in the environment, not the
    command line, so that pkill does not match the watchdog itself."""
    return subprocess.Popen(
        ["sh", "-c", 'tail --pid="$1" -f /dev/null; pkill -KILL -f -- "$RUN_TAG"; sleep 1; '
         'exec rm -rf -- "$RUN_DIRS/$RUN_TAG"*', "odradek-bench-watchdog", str(os.getpid())],
        env={**os.environ, "RUN_TAG": RUN_TAG, "RUN_DIRS": tempfile.gettempdir()},
        start_new_session=True, stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )  # fmt: skip


def install(script: str) -> Path:
    """Run one of scripts/install-*.sh (a no-op once cached) and return the directory it
    prints last (the jars)."""
    out = subprocess.run(
        ["bash", str(REPO / "scripts" / script)], check=True, stdout=subprocess.PIPE, text=True
    ).stdout
    return Path(out.strip().splitlines()[-1])


@dataclass
class Deployment:
    """Started servers of one system; `brokers` are the processes that serve clients."""

    system: str
    brokers: list[ServerProcess]
    workdir: Path
    zookeeper: ZkEnsemble | None = None
    settings: dict[str, str] = field(default_factory=dict)  # the same on both systems

    @property
    def bootstrap(self) -> str:
        return ",".join(b.bootstrap for b in self.brokers)

    def usage(self) -> list[Usage]:
        return [b.usage() for b in self.brokers]

    def cpu_seconds(self) -> float:
        return sum(u.cpu_seconds for u in self.usage())

    def jit_cpu(self) -> dict[int, float]:
        """CPU seconds of each JIT compiler thread of the brokers, by thread id (none for
        Odradek): how warm a JVM is. HotSpot names them "C1 CompilerThread0" and so on, which
        /proc cuts to 15 characters."""
        seconds: dict[int, float] = {}
        for broker in self.brokers:
            if broker.pid is not None:
                seconds |= thread_cpu(broker.pid, JIT_THREADS)
        return seconds

    def jit_seconds_since(self, before: dict[int, float]) -> float:
        """CPU seconds the brokers' JIT compilers used since `before` (a `jit_cpu`)."""
        return sum(t - before.get(tid, 0.0) for tid, t in self.jit_cpu().items())

    def wait_removed(self, topics: list[str], timeout: float = 45.0) -> None:
        """Until no broker's log directory holds a partition of `topics`, live or renamed for
        deletion, where the deployment removes deleted logs soon (log.segment.delete.delay.ms):
        a timed phase's gigabytes then leave the disk and the page cache before the next
        phase, not a second into it (removing 2 GB of cached file takes 0.1 to 0.5 s here,
        which fell on whichever phase, of either system, ran then). Kafka's first pass over
        deleted logs comes 30 s after it starts, hence the timeout."""
        if "log.segment.delete.delay.ms" not in self.settings:
            return
        names = "|".join(re.escape(t) for t in topics)
        partition_dir = re.compile(rf"(?:{names})-\d+(?:\.[0-9a-f]+-delete)?")
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            dirs = [b.data_dir for b in self.brokers]  # type: ignore[attr-defined]
            if not any(partition_dir.fullmatch(e.name) for d in dirs for e in os.scandir(d)):
                return
            time.sleep(0.05)
        print(f"  {self.system} still holds files of {topics} after {timeout:.0f} s", flush=True)

    def log_tail(self, lines: int = 40) -> str:
        return "\n".join(f"--- {b.name}\n{b.log_tail(lines)}" for b in self.brokers)

    def start(self) -> Deployment:
        # Prepared side by side: a Kafka node's storage format is a JVM start of its own (1.1 to
        # 1.3 s each here), which one after the other delayed a three-node start by as much.
        with ThreadPoolExecutor(len(self.brokers)) as pool:
            list(pool.map(lambda b: b.prepare(), self.brokers))
        for b in self.brokers:
            b.launch()
        for b in self.brokers:
            b.wait_serving(START_TIMEOUT)
        return self

    def stop(self) -> None:
        """Kill every process (nothing is measured after this) and remove the directory."""
        for b in self.brokers:
            b.kill()
        if self.zookeeper is not None:
            self.zookeeper.stop()
        shutil.rmtree(self.workdir, ignore_errors=True)


def wait_registered(bootstrap: str, brokers: int, timeout: float = 60.0) -> None:
    """Until Metadata names every broker: a topic of replication factor `brokers` is refused
    while one has not registered (or, in KRaft, is still fenced)."""
    admin = AdminClient({"bootstrap.servers": bootstrap})
    deadline = time.monotonic() + timeout
    while len(admin.list_topics(timeout=10).brokers) < brokers:
        if time.monotonic() > deadline:
            raise RuntimeError(f"fewer than {brokers} brokers registered after {timeout:.0f} s")
        time.sleep(0.1)


def deploy(
    system: str,
    brokers: int = 1,
    *,
    settings: dict[str, str] | None = None,
    kafka_heap: str = "1g",
) -> Deployment:
    """A started deployment: one broker, or three brokers with replication between them (Odradek
    with one ZooKeeper server, Kafka as three KRaft nodes that are brokers and controllers)."""
    if system not in SYSTEMS:
        raise ValueError(f"unknown system {system!r}: one of {', '.join(SYSTEMS)}")
    workdir = Path(tempfile.mkdtemp(prefix=f"{RUN_TAG}{system.lower()}-"))
    extra = dict(settings or {})
    if system == "Kafka":
        libs = install("install-kafka.sh")
        voters = {i: free_port() for i in range(1, brokers + 1)}
        cluster_id = None
        nodes: list[ServerProcess] = []
        for i in voters:
            node = KafkaProcess(
                libs,
                workdir / f"kafka{i}",
                node_id=i,
                voters=voters,
                cluster_id=cluster_id,
                heap=kafka_heap,
                settings={**(CLUSTER if brokers > 1 else {}), **extra},
            )
            cluster_id = node.cluster_id
            nodes.append(node)
        deployment = Deployment(system, nodes, workdir, settings=extra)
    else:
        ensemble = None
        common = dict(ODRADEK_SINGLE)
        if brokers > 1:
            ensemble = ZkEnsemble(workdir / "zookeeper", str(install("install-zookeeper.sh")), 1)
            ensemble.start()
            common = {**CLUSTER, "zookeeper.connect": ensemble.connect_string("/bench")}
        nodes = [
            OdradekProcess(
                workdir / f"broker{i}" / "data",
                workdir / f"broker{i}" / "logs",
                {"broker.id": str(i), **common, **extra},
                name=f"odradek {i}",
            )
            for i in range(1, brokers + 1)
        ]
        deployment = Deployment(system, nodes, workdir, ensemble, extra)
    try:
        deployment.start()
        if brokers > 1:
            wait_registered(deployment.bootstrap, brokers)
    except BaseException as exc:
        tails = deployment.log_tail()
        deployment.stop()
        if not isinstance(exc, Exception):
            raise
        # The cause first (a failed storage format leaves no process log to show).
        raise RuntimeError(f"{system} did not start: {str(exc)[:1500]}\n{tails}") from None
    return deployment
