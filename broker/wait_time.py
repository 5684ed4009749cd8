"""How long a request was parked, measured where requests park.

Request quotas count the time the broker works on a request, not the time it waits (long polls,
acks=all, rebalances, metadata propagation), as Kafka counts only its request-handler threads.
The places that park (the replica manager's waits, the metadata cache's, the group
coordinator's) wrap their awaits in `waiting()`; the dispatcher runs each handler inside
`metered()` and subtracts what the meter saw. The meter travels in a context variable, so the
tasks a handler starts (asyncio.gather) report to it too; overlapping waits count once.
"""

from __future__ import annotations

import time
from collections.abc import Iterator
from contextlib import contextmanager
from contextvars import ContextVar


class WaitMeter:
    """The union of the waiting intervals of one request, in nanoseconds."""

    def __init__(self) -> None:
        self.ns = 0
        self._active = 0
        self._since = 0

    def _enter(self) -> None:
        if self._active == 0:
            self._since = time.perf_counter_ns()
        self._active += 1

    def _exit(self) -> None:
        self._active -= 1
        if self._active == 0:
            self.ns += time.perf_counter_ns() - self._since


_meter: ContextVar[WaitMeter | None] = ContextVar("odradek_wait_meter", default=None)


class metered:  # noqa: N801 - used as a function: `with metered() as meter:`
    """Run a request's handler with a fresh meter as the current one. A class, not a
    generator context manager: it is entered once per request."""

    __slots__ = ("_token",)

    def __enter__(self) -> WaitMeter:
        meter = WaitMeter()
        self._token = _meter.set(meter)
        return meter

    def __exit__(self, *exc: object) -> None:
        _meter.reset(self._token)


@contextmanager
def waiting() -> Iterator[None]:
    """Mark an await as a wait of the current request (a no-op outside one)."""
    meter = _meter.get()
    if meter is None:
        yield
        return
    meter._enter()
    try:
        yield
    finally:
        meter._exit()
