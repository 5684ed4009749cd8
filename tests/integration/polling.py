"""Polling for a condition in tests that drive real processes (containers, API servers)."""

from __future__ import annotations

import time
from collections.abc import Callable
from typing import Any

import pytest


def wait_until(
    check: Callable[[], Any], timeout: float = 60.0, interval: float = 0.3, what: str = ""
) -> Any:
    """Poll `check` until it returns something truthy and return that; fail the test with
    `what` and the last value when `timeout` seconds pass first."""
    deadline = time.monotonic() + timeout
    last: Any = None
    while time.monotonic() < deadline:
        last = check()
        if last:
            return last
        time.sleep(interval)
    pytest.fail(
        f"timed out after {timeout}s waiting for {what or check}; last: {last!r}", pytrace=False
    )
