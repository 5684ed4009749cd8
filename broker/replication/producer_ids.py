"""Producer ids handed out by this broker, from blocks claimed in the metadata store.

Every broker claims blocks of 1000 consecutive ids (/latest_producer_id_block, as Kafka) and
serves InitProducerId from its current block; the next block is fetched in the background once
90% of the current one is used, so a request rarely waits for the store.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Awaitable, Callable
from typing import Protocol

logger = logging.getLogger(__name__)

PREFETCH_FRACTION = 0.9


class ProducerIdsUnavailable(Exception):
    """No block of producer ids could be claimed (the metadata store failed)."""


class IdBlock(Protocol):
    block_start: int
    block_end: int


class ProducerIdManager:
    def __init__(self, allocate_block: Callable[[], Awaitable[IdBlock]]) -> None:
        self._allocate_block = allocate_block
        self._next = 0
        self._end = -1  # inclusive end of the current block; empty until the first claim
        self._prefetch_at = 0
        self._ready: IdBlock | None = None
        self._fetching: asyncio.Task[None] | None = None
        self._error: Exception | None = None

    async def generate(self) -> int:
        """The next producer id; raises whatever the store raises if no block can be claimed."""
        while True:
            if self._next <= self._end:
                pid = self._next
                self._next += 1
                if self._next >= self._prefetch_at and self._ready is None:
                    self._start_fetch()
                return pid
            if self._ready is not None:
                self._use(self._ready)
                self._ready = None
                continue
            await asyncio.shield(self._start_fetch())
            if self._ready is None:
                raise ProducerIdsUnavailable("no block of producer ids") from self._error

    def _use(self, block: IdBlock) -> None:
        self._next = block.block_start
        self._end = block.block_end
        size = block.block_end - block.block_start + 1
        self._prefetch_at = block.block_start + int(size * PREFETCH_FRACTION)

    def _start_fetch(self) -> asyncio.Task[None]:
        if self._fetching is None or self._fetching.done():
            self._fetching = asyncio.get_running_loop().create_task(self._fetch())
        return self._fetching

    async def _fetch(self) -> None:
        # Never raises: a prefetch nobody awaits must not leave an unretrieved exception.
        try:
            block = await self._allocate_block()
        except Exception as exc:
            logger.warning("could not claim a block of producer ids: %s", exc)
            self._error = exc
            return
        logger.info("claimed producer ids %d-%d", block.block_start, block.block_end)
        self._error = None
        self._ready = block
