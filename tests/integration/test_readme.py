"""The README's quick start, run as written: the blocks after a `<!-- readme-test: ... -->` comment.

- `background`: started first and left running (`make run`: the broker);
- `run`: shell blocks run in one bash session in the repository root, in order (so the venv a
  block activates stays active), python blocks are fed to `python -` in that session;
- `output`: lines the preceding `run` block must print (in any order).

Nothing is rewritten: the commands talk to 127.0.0.1:9092 as the README says, inside a network
namespace of their own (unshare), so no other broker on this machine is in the way and nothing
reaches the network; the Kafka tools' jars come from the cache `kafka_libs` fills first. Only the
data directory is fresh: DATA (a make variable) is set in the environment.
"""

from __future__ import annotations

import os
import re
import shutil
import signal
import subprocess
from dataclasses import dataclass
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
TIMEOUT = 600
MARKER = re.compile(r"<!-- readme-test: (background|run|output) -->")
FENCE = re.compile(r"```(\w*)\n(.*?)```", re.S)


@dataclass
class Block:
    kind: str  # background, run or output
    language: str  # sh, python, text
    text: str
    line: int  # in README.md, for messages


def readme_blocks(readme: str) -> list[Block]:
    """Every marked fenced block, in order; a marker must be followed by a fence."""
    blocks = []
    for m in MARKER.finditer(readme):
        fence = FENCE.match(readme, m.end() + 1)
        line = readme.count("\n", 0, m.start()) + 1
        assert fence is not None, f"README.md:{line}: {m.group(0)} is not followed by a code block"
        blocks.append(Block(m.group(1), fence.group(1), fence.group(2), line))
    return blocks


def driver_script(blocks: list[Block], log: Path) -> str:
    """One bash script: start the background blocks, wait for the broker, run the rest in order,
    printing a separator line before each."""
    lines = [
        "set -euo pipefail",
        "ip link set lo up",
        f"cd {ROOT}",
        "cleanup() { kill -TERM -- -$BACKGROUND 2>/dev/null || true; wait || true; }",
        "trap cleanup EXIT",
    ]
    for i, b in enumerate(blocks):
        if b.kind == "background":
            lines.append(f"setsid bash -c {shlex_quote(b.text)} >{log} 2>&1 & BACKGROUND=$!")
            lines.append(
                "for _ in $(seq 1200); do (exec 3<>/dev/tcp/127.0.0.1/9092) 2>/dev/null && break;"
                f" kill -0 $BACKGROUND 2>/dev/null || {{ cat {log}; exit 1; }}; sleep 0.1; done"
            )
        elif b.kind == "run":
            lines.append(f"echo '@@@ block {i}'")
            if b.language == "python":
                lines.append(f"python - <<'README_PYTHON'\n{b.text}README_PYTHON")
            else:
                assert b.language == "sh", f"README.md:{b.line}: cannot run a {b.language} block"
                lines.append(b.text)
    lines.append("echo '@@@ end'")
    return "\n".join(lines) + "\n"


def shlex_quote(text: str) -> str:
    return "'" + text.replace("'", "'\\''") + "'"


def network_namespace() -> list[str]:
    if shutil.which("unshare") is None or shutil.which("ip") is None:
        pytest.fail("the README test needs unshare and ip (util-linux, iproute2)", pytrace=False)
    return ["unshare", "--net"] if os.geteuid() == 0 else ["unshare", "--map-root-user", "--net"]


def test_readme_quick_start_runs_as_written(kafka_libs: Path, tmp_path: Path) -> None:
    blocks = readme_blocks((ROOT / "README.md").read_text())
    assert [b.kind for b in blocks][:2] == ["background", "run"], "make run, then the commands"
    assert any(b.language == "python" for b in blocks)
    # `make run` installs when pyproject.toml changed: do that here, where the network is.
    subprocess.run(["make", "--no-print-directory", "install"], cwd=ROOT, check=True)
    log = tmp_path / "make-run.log"
    env = {
        k: v
        for k, v in os.environ.items()
        if k not in ("VIRTUAL_ENV", "PYTHONPATH") and not k.startswith("PYTEST")
    }
    # The shell a newcomer has: the venv's bin is not on PATH until the README activates it.
    env["PATH"] = os.pathsep.join(
        p for p in env["PATH"].split(os.pathsep) if not p.startswith(str(ROOT))
    )
    env["DATA"] = str(tmp_path / "data")
    proc = subprocess.Popen(
        [*network_namespace(), "bash", "-c", driver_script(blocks, log)],
        cwd=ROOT,
        env=env,
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
        start_new_session=True,
    )
    try:
        out, _ = proc.communicate(timeout=TIMEOUT)
    except subprocess.TimeoutExpired:
        proc.send_signal(signal.SIGTERM)  # the driver's trap stops the broker
        out, _ = proc.communicate(timeout=60)
        pytest.fail(f"the README's blocks did not finish in {TIMEOUT}s\n{out[-5000:]}")
    broker_log = log.read_text() if log.exists() else ""
    outputs = {}
    for part in out.split("@@@ block ")[1:]:
        index, _, text = part.partition("\n")
        outputs[int(index)] = text
    ran = "\n".join(f"--- block at README.md:{blocks[i].line} ---\n{t}" for i, t in outputs.items())
    assert proc.returncode == 0 and "@@@ end" in out, (
        f"a README block failed (the last one shown):\n{ran[-6000:]}\n"
        f"--- make run ---\n{broker_log[-3000:]}"
    )
    # What make run printed before the broker's log: the activation line the README relies on.
    assert f"To use the odradek command in another terminal:  . {ROOT}/.venv/bin/activate" in (
        broker_log
    )
    assert "Starting one broker on 127.0.0.1:9092, data in" in broker_log
    for i, b in enumerate(blocks):
        if b.kind != "output":
            continue
        previous = max(j for j in outputs if j < i)
        printed = {line.strip() for line in outputs[previous].splitlines()}
        for expected in b.text.splitlines():
            assert expected.strip() in printed, (
                f"README.md:{b.line}: {expected!r} not printed by the block before it:\n"
                f"{outputs[previous]}"
            )
