"""`make help` names every target of the Makefile, one line each, so none is undocumented."""

from __future__ import annotations

import re
import shutil
import subprocess
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]


def makefile_targets() -> list[str]:
    """Explicit targets (`name:` at the start of a line), not special ones or files."""
    names = []
    for line in (ROOT / "Makefile").read_text().splitlines():
        m = re.match(r"([a-zA-Z0-9_-]+)\s*:(?!=)", line)
        if m:
            names.append(m.group(1))
    return names


@pytest.mark.skipif(shutil.which("make") is None, reason="make is not installed")
def test_make_help_lists_every_target_once() -> None:
    out = subprocess.run(
        ["make", "--no-print-directory", "help"],
        cwd=ROOT,
        capture_output=True,
        text=True,
        check=True,
    ).stdout
    listed = [line.split()[1] for line in out.splitlines()]
    assert all(line.startswith("  make ") and len(line.split()) > 2 for line in out.splitlines())
    assert sorted(listed) == sorted(set(makefile_targets())), out
    assert "help" in listed and "run" in listed
