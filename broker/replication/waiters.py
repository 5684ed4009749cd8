"""Requests parked on a partition until it changes: fetches waiting for new data, acks=all
produces waiting for the high watermark. One future can wait on several partitions at once."""

from __future__ import annotations

import asyncio
from collections.abc import Iterable

from ..wait_time import waiting


class Waiters:
    """The futures parked on one kind of change of one partition; `wake` releases them all."""

    def __init__(self) -> None:
        self._futures: list[asyncio.Future[None]] = []

    def add(self, fut: asyncio.Future[None]) -> None:
        self._futures.append(fut)

    def discard(self, fut: asyncio.Future[None]) -> None:
        if fut in self._futures:
            self._futures.remove(fut)

    def wake(self) -> None:
        futures, self._futures = self._futures, []
        for fut in futures:
            if not fut.done():
                fut.set_result(None)


async def wait_for_any(groups: Iterable[Waiters], timeout_s: float) -> None:
    """Return when one of `groups` is woken, or after `timeout_s` (time counted as waiting).

    The waker's `set_result` resumes this task in the loop's next round: a parked request is
    on the path of every acks=all answer and long-polled fetch, and `wait_for(shield(...))`
    took three rounds to get there (the shield's callback, the wait's, the task's), each
    behind whatever I/O the busy loop picked up meanwhile."""
    groups = list(groups)
    loop = asyncio.get_running_loop()
    fut: asyncio.Future[None] = loop.create_future()
    for g in groups:
        g.add(fut)
    timer = loop.call_later(timeout_s, _release, fut)
    try:
        with waiting():
            await fut
    finally:
        timer.cancel()
        for g in groups:
            g.discard(fut)


def _release(fut: asyncio.Future[None]) -> None:
    if not fut.done():
        fut.set_result(None)
