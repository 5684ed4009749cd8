"""Turn-taking between the systems' threads of one repeat: one runs at a time, and hands over
when it starts its next phase after a measurement (scenarios.Ctx.before_phase), so the two
systems' phases of a row run seconds apart.

With whole turns one after the other, a row's two phases were a minute or more apart while the
machine's speed drifts over minutes here (the same slice of reference work took 76 to 118 ms
within one run). Taking turns at every phase keeps a slow stretch from landing on one system's
phases only; it did not narrow the pairs' ratios (0.68 to 1.58 on one row in the run of
2026-11-26 17:05): most of the noise is within each phase.
"""

from __future__ import annotations

import threading


class Abandoned(BaseException):
    """The run was interrupted: a thread waiting for its turn gives up (a BaseException, so
    the scenarios' `except Exception` lets it through and no further phase starts)."""


class Baton:
    """Held by one of `holders` at a time, the first to begin with."""

    def __init__(self, holders: list[str]) -> None:
        self._order = list(holders)
        self._running = set(holders)  # those that have not finished their turn
        self._holder = self._order[0] if self._order else ""
        self._abandoned = False
        self._changed = threading.Condition()

    def take(self, me: str) -> None:
        """Wait until `me` holds the baton."""
        with self._changed:
            while self._holder != me:
                if self._abandoned:
                    raise Abandoned
                self._changed.wait(1.0)

    def pass_on(self, me: str) -> None:
        """Hand the baton to the next holder still running (if any), and wait for it back."""
        with self._changed:
            self._holder = self._next(me)
            self._changed.notify_all()
        self.take(me)

    def finish(self, me: str) -> None:
        """`me` is done: the others run on without it."""
        with self._changed:
            self._running.discard(me)
            if self._holder == me:
                self._holder = self._next(me)
            self._changed.notify_all()

    def abandon(self) -> None:
        with self._changed:
            self._abandoned = True
            self._changed.notify_all()

    def _next(self, me: str) -> str:
        at = self._order.index(me)
        for step in range(1, len(self._order) + 1):
            name = self._order[(at + step) % len(self._order)]
            if name in self._running:
                return name
        return ""
