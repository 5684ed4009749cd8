"""A clock that stands still until a test moves it."""

from __future__ import annotations


class Clock:
    """Milliseconds for the code under test: `now`, which only the test changes."""

    def __init__(self, now: int = 1_000_000) -> None:
        self.now = now

    def __call__(self) -> int:
        return self.now
