"""bench/systems.py: the servers a bench harness started are killed when the harness is killed
with SIGKILL (no `finally` of its runs), and no other run's servers are."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from pathlib import Path

BENCH = Path(__file__).resolve().parents[2] / "bench"

HARNESS = f"""
import subprocess, sys, time
sys.path.insert(0, {str(BENCH)!r})
import systems
systems.stop_with_harness()
def server(directory):  # a command line naming the deployment's directory, as the servers' do
    return subprocess.Popen([sys.executable, "-c", "import time; time.sleep(300)",
                             f"/tmp/{{directory}}/broker1/server.properties"])
ours = server(systems.RUN_TAG + "kafka-abc")
other_run = server("odradek-bench-0-kafka-abc")
print(ours.pid, other_run.pid, flush=True)
time.sleep(300)
"""


def gone(pid: int) -> bool:
    """Exited (a zombie not reaped yet counts as exited)."""
    try:
        return Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0] == "Z"
    except (FileNotFoundError, ProcessLookupError):
        return True


def test_a_killed_harness_takes_its_servers_along(tmp_path: Path) -> None:
    harness = subprocess.Popen([sys.executable, "-c", HARNESS], stdout=subprocess.PIPE, text=True)
    assert harness.stdout is not None
    ours, other_run = map(int, harness.stdout.readline().split())
    try:
        time.sleep(0.5)
        assert not gone(ours)
        harness.send_signal(signal.SIGKILL)
        harness.wait()
        deadline = time.monotonic() + 20
        while not gone(ours) and time.monotonic() < deadline:
            time.sleep(0.1)
        assert gone(ours), "the killed harness's server still runs"
        assert not gone(other_run), "another run's server was killed"
    finally:
        for pid in (ours, other_run):
            try:
                os.kill(pid, signal.SIGKILL)
            except ProcessLookupError:
                pass
