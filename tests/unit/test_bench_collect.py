"""bench/scenarios.py collect: a load-generator client that has printed its result but does
not exit (a group member whose consumer close() never returned) is killed at the time bound,
and its result still counts; a client that exits without a result fails the phase, and no
client is left running either way."""

from __future__ import annotations

import subprocess
import sys
import time
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "bench"))

from scenarios import collect  # noqa: E402

PRINTS_THEN_HANGS = (
    'import json, time; print(json.dumps({"records": 7}), flush=True); time.sleep(300)'
)
PRINTS_AND_EXITS = 'import json; print(json.dumps({"records": 5}))'
EXITS_SILENT = "import sys; sys.exit(3)"
SLEEPS = "import time; time.sleep(300)"


def client(code: str) -> subprocess.Popen[str]:
    return subprocess.Popen([sys.executable, "-c", code], stdout=subprocess.PIPE, text=True)


def test_a_client_that_outlives_the_bound_is_killed_and_its_result_kept() -> None:
    procs = [client(PRINTS_AND_EXITS), client(PRINTS_THEN_HANGS)]
    began = time.monotonic()
    results = collect(procs, 3.0)
    assert [r["records"] for r in results] == [5, 7]
    assert time.monotonic() - began < 60
    assert all(p.poll() is not None for p in procs)


def test_a_client_without_a_result_fails_and_the_others_are_stopped() -> None:
    procs = [client(EXITS_SILENT), client(SLEEPS)]
    with pytest.raises(RuntimeError, match="exited with 3"):
        collect(procs, 30.0)
    assert all(p.poll() is not None for p in procs)
