"""bench/systems.py: the servers a bench harness started are killed, and their directories
removed, when the harness is killed with SIGKILL (no `finally` of its runs); no other run's
servers or directories are touched."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from pathlib import Path

BENCH = Path(__file__).resolve().parents[2] / "bench"

HARNESS = f"""
import os, subprocess, sys, tempfile, time
sys.path.insert(0, {str(BENCH)!r})
import systems
systems.stop_with_harness()
def server(directory):  # a command line naming the deployment's directory, as the servers' do
    path = os.path.join(tempfile.gettempdir(), directory)
    os.makedirs(os.path.join(path, "broker1"))
    return subprocess.Popen([sys.executable, "-c", "import time; time.sleep(300)",
                             os.path.join(path, "broker1", "server.properties")])
ours = server(systems.RUN_TAG + "kafka-abc")
other_run = server("odradek-bench-0-kafka-abc")
print(ours.pid, other_run.pid, systems.RUN_TAG, flush=True)
time.sleep(300)
"""


def gone(pid: int) -> bool:
    """Exited (a zombie not reaped yet counts as exited)."""
    try:
        return Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0] == "Z"
    except (FileNotFoundError, ProcessLookupError):
        return True


def test_a_killed_harness_takes_its_servers_along(tmp_path: Path) -> None:
    harness = subprocess.Popen([sys.executable, "-c", HARNESS], stdout=subprocess.PIPE,
                               text=True, env={**os.environ, "TMPDIR": str(tmp_path)})  # fmt: skip
    assert harness.stdout is not None
    ours_pid, other_pid, tag = harness.stdout.readline().split()
    ours, other_run = int(ours_pid), int(other_pid)
    try:
        time.sleep(0.5)
        assert not gone(ours)
        assert (tmp_path / f"{tag}kafka-abc").is_dir()
        harness.send_signal(signal.SIGKILL)
        harness.wait()
        deadline = time.monotonic() + 20
        while (tmp_path / f"{tag}kafka-abc").exists() and time.monotonic() < deadline:
            time.sleep(0.1)
        assert gone(ours), "the killed harness's server still runs"
        assert not (tmp_path / f"{tag}kafka-abc").exists(), "its directory is still there"
        assert not gone(other_run), "another run's server was killed"
        assert (tmp_path / "odradek-bench-0-kafka-abc").is_dir(), "another run's directory went"
    finally:
        for pid in (ours, other_run):
            try:
                os.kill(pid, signal.SIGKILL)
            except ProcessLookupError:
                pass
