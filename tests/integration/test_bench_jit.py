"""bench/systems.py: the CPU of a deployment's JIT compiler threads, which decides how long a JVM
rehearses before the measured repeats (bench/run.py rehearse); a process that is not a JVM,
like an Odradek broker, has none and rehearses once."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path
from types import SimpleNamespace

sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "bench"))

from odradek.broker.testing.processes import process_usage  # noqa: E402
from systems import Deployment  # noqa: E402


def test_a_jvms_compiler_threads_are_found_and_counted(zk_ensemble, tmp_path: Path) -> None:
    # A real JVM: the session's ZooKeeper servers (C1 only: -XX:TieredStopAtLevel=1).
    jvms = [SimpleNamespace(pid=s.proc.pid) for s in zk_ensemble.servers]
    deployment = Deployment("Kafka", jvms, tmp_path)  # type: ignore[arg-type]
    seconds = deployment.jit_cpu()
    assert len(seconds) >= len(jvms), seconds  # a compiler thread in each JVM at least
    for tid in seconds:
        name = Path(f"/proc/{jvms[0].pid}/task/{tid}/comm")
        if name.exists():
            assert name.read_text().startswith("C1 CompilerThre")
    # Each JVM compiled while starting: since nothing, the whole of it; the compiler threads'
    # share of their process's CPU, not the process's (its main thread, its GC...).
    assert deployment.jit_seconds_since({}) >= sum(seconds.values()) > 0
    processes = sum(process_usage(j.pid).cpu_seconds for j in jvms)
    assert sum(seconds.values()) < processes
    assert 0 <= deployment.jit_seconds_since(seconds) < 60


def test_a_python_process_or_a_stopped_broker_has_no_compiler(tmp_path: Path) -> None:
    proc = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(60)"])
    try:
        brokers = [SimpleNamespace(pid=proc.pid), SimpleNamespace(pid=None)]
        deployment = Deployment("Odradek", brokers, tmp_path)  # type: ignore[arg-type]
        assert deployment.jit_cpu() == {}
        assert deployment.jit_seconds_since({}) == 0
    finally:
        proc.kill()
        proc.wait()
