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
    """Return when one of `groups` is woken, or after `timeout_s` (time counted as waiting)."""
    groups = list(groups)
    fut: asyncio.Future[None] = asyncio.get_running_loop().create_future()
    for g in groups:
        g.add(fut)
    try:
        with waiting():
            await asyncio.wait_for(asyncio.shield(fut), timeout_s)
    except TimeoutError:
        pass
    finally:
        for g in groups:
            g.discard(fut)
