"""bench/profiles.py (``bench/run.py --profile``): py-spy attached to running processes writes
one flame graph per process, naming the functions they spent their time in, also for a
process that exits before the recording ends (a broker its scenario restarts)."""

from __future__ import annotations

import subprocess
import sys
import time
from pathlib import Path

BENCH = Path(__file__).resolve().parents[2] / "bench"
sys.path.insert(0, str(BENCH))
import profiles  # noqa: E402

BUSY = """
import sys, time
def spin_for_the_flame_graph(seconds):
    end = time.monotonic() + seconds
    while time.monotonic() < end:
        sum(range(1000))
print("ready", flush=True)
spin_for_the_flame_graph(float(sys.argv[1]))
"""


def busy(seconds: float) -> subprocess.Popen[str]:
    proc = subprocess.Popen([sys.executable, "-c", BUSY, str(seconds)], stdout=subprocess.PIPE,
                            text=True)  # fmt: skip
    assert proc.stdout is not None and proc.stdout.readline() == "ready\n"
    return proc


def test_a_flame_graph_per_process_names_where_the_time_went(tmp_path: Path) -> None:
    long, short = busy(60), busy(0.5)  # `short` exits while it is recorded
    try:
        with profiles.recording({"broker 1": long.pid, "broker 2": short.pid}, tmp_path,
                                "single-produce") as written:  # fmt: skip
            time.sleep(1.5)
        assert short.wait(10) == 0
    finally:
        long.kill()
        long.wait()
    assert sorted(p.name for p in written) == [
        "single-produce-broker1.svg",
        "single-produce-broker2.svg",
    ]
    for path in written:
        assert "spin_for_the_flame_graph" in path.read_text()
