"""The short chaos schedule of `make test`: a partition leader cut off from ZooKeeper and the
other brokers (clients still reach it), then kill -9 of a leader, under idempotent acks=all
producers and a consumer group. `make chaos` runs every schedule for a minute each."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest
from netns import require_tools
from schedules import SHORT

RUNNER = Path(__file__).with_name("runner.py")


@pytest.mark.timeout(900)
def test_short_schedule_loses_nothing(tmp_path: Path) -> None:
    require_tools()
    results = tmp_path / "results.json"
    proc = subprocess.run(
        [sys.executable, str(RUNNER), "--schedule", SHORT, "--duration", "30", "--seed", "16",
         "--out", str(tmp_path / "run"), "--json", str(results)],
        capture_output=True,
        text=True,
        timeout=850,
    )  # fmt: skip
    output = "\n".join(line for line in proc.stdout.splitlines() if not line.startswith("%"))
    assert results.exists(), (
        f"the runner wrote no results ({proc.returncode})\n{output}\n{proc.stderr[-3000:]}"
    )
    (run,) = json.loads(results.read_text())
    detail = f"{output}\n{run['summary']}\nlogs: {tmp_path / 'run'}"
    assert run["error"] is None, detail
    assert [f.split(" ")[0] for f in run["faults"]] == ["partition:leader-isolated", "kill:leader"]
    assert run["acked"] > 0, detail
    assert (run["lost"], run["duplicated"], run["reordered"], run["other"]) == (0, 0, 0, {}), detail
    assert run["ok"] and proc.returncode == 0, detail
