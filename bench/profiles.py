"""Flame graphs of Odradek's brokers while a scenario runs (``bench/run.py --profile``).

py-spy samples each broker process from outside (no change to the broker, no restart) and
writes an SVG flame graph when it is interrupted. The sampling pauses the broker for every
stack it reads, so a profiled turn is never one of the measured ones.
"""

from __future__ import annotations

import shutil
import signal
import subprocess
import sys
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

RATE = 100  # samples a second: py-spy's default


def py_spy() -> str | None:
    """The py-spy next to this Python (the bench extra installs it there), else on PATH."""
    beside = Path(sys.executable).parent / "py-spy"
    return str(beside) if beside.exists() else shutil.which("py-spy")


@contextmanager
def recording(pids: dict[str, int], folder: Path, stem: str) -> Iterator[list[Path]]:
    """py-spy on every process of `pids` (name -> pid) for the block; yields the list of SVG
    files (<folder>/<stem>-<name without spaces>.svg), filled once the block is over. A
    process that exits during the block (a broker restarted by its scenario) is profiled
    until then."""
    spy = py_spy()
    if spy is None:
        raise RuntimeError("py-spy is needed for profiles: pip install py-spy (the bench extra)")
    folder.mkdir(parents=True, exist_ok=True)
    outputs = {name: folder / f"{stem}-{name.replace(' ', '')}.svg" for name in pids}
    procs = {
        name: subprocess.Popen(
            [
                spy,
                "record",
                "--rate",
                str(RATE),
                "--format",
                "flamegraph",
                "--output",
                str(outputs[name]),
                "--pid",
                str(pid),
                # the broker's worker processes too (the log cleaner cleans in one)
                "--subprocesses",
            ],
            stdout=subprocess.DEVNULL,
            stderr=subprocess.PIPE,
            text=True,
        )  # fmt: skip
        for name, pid in pids.items()
    }
    written: list[Path] = []
    try:
        yield written
    finally:
        for proc in procs.values():
            if proc.poll() is None:
                proc.send_signal(signal.SIGINT)  # py-spy writes its output when interrupted
        for name, proc in procs.items():
            try:
                _, err = proc.communicate(timeout=60)
            except subprocess.TimeoutExpired:
                proc.kill()
                _, err = proc.communicate()
            if outputs[name].exists():
                written.append(outputs[name])
            else:
                print(f"   no profile of {name}: {(err or '').strip()[-500:]}", flush=True)
