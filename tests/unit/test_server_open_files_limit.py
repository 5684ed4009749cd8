"""The broker raises its soft open files limit to the hard one at start-up, as the JVM does."""

from __future__ import annotations

import resource
import subprocess
import sys

SCRIPT = """
import logging, resource, sys
logging.basicConfig(level=logging.INFO, stream=sys.stderr, format="%(message)s")
resource.setrlimit(resource.RLIMIT_NOFILE, (256, resource.getrlimit(resource.RLIMIT_NOFILE)[1]))
from odradek.broker.server.main import raise_open_files_limit
print(raise_open_files_limit(), resource.getrlimit(resource.RLIMIT_NOFILE)[0])
"""


def test_the_soft_open_files_limit_is_raised_to_the_hard_limit() -> None:
    hard = resource.getrlimit(resource.RLIMIT_NOFILE)[1]
    proc = subprocess.run(
        [sys.executable, "-c", SCRIPT], capture_output=True, text=True, timeout=60, check=True
    )
    if hard == resource.RLIM_INFINITY:  # left alone: the soft limit cannot be infinite
        assert proc.stdout.split() == ["256", "256"]
        return
    assert proc.stdout.split() == [str(hard), str(hard)]
    assert f"open files limit: {hard} (hard limit {hard})" in proc.stderr
