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


def fake_python(path: Path, script: str) -> Path:
    path.write_text("#!/bin/sh\n" + script)
    path.chmod(0o755)
    return path


@pytest.mark.skipif(shutil.which("make") is None, reason="make is not installed")
@pytest.mark.parametrize(
    ("script", "message"),
    [
        (
            'case "$*" in -V) echo "Python 3.9.2";; *version_info*) exit 1;; esac\n',
            "make: Odradek needs Python 3.11 or newer, and {python} is Python 3.9.2 (choose "
            "another with make PYTHON=python3.11 ...)",
        ),
        (
            'case "$*" in *ensurepip*) exit 1;; esac\n',
            "make: {python} cannot create a virtualenv, its venv module has no ensurepip "
            "(Debian and Ubuntu: apt-get install python3-venv)",
        ),
    ],
    ids=["too-old", "no-ensurepip"],
)
def test_make_install_says_what_is_wrong_with_python(
    tmp_path: Path, script: str, message: str
) -> None:
    python = fake_python(tmp_path / "python3", script)
    proc = subprocess.run(
        ["make", "--no-print-directory", "install", f"PYTHON={python}", f"VENV={tmp_path / 'v'}"],
        cwd=ROOT,
        capture_output=True,
        text=True,
        check=False,
    )
    assert proc.returncode != 0
    assert proc.stderr.splitlines()[0] == message.format(python=python)
    assert not (tmp_path / "v").exists()
    # The README's Troubleshooting section quotes it (for python3, a 3.10).
    quoted = message.format(python="python3").replace("3.9.2", "3.10.12")
    assert quoted in (ROOT / "README.md").read_text()
