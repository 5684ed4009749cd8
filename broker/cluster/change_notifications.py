"""Kafka's change-notification pattern on the metadata store, written once.

A writer updates the real node (a config, an ACL, a token), then creates a sequential child
`<prefix>NNNNNNNNNN` under a notification root naming what changed. Every broker watches the
root, hands each child newer than the last one it handled to its handler (the notification is
only a trigger: handlers re-read the real node) and deletes children older than the expiry
(Kafka's ZkNodeChangeNotificationListener, 15 minutes by default). After a ZooKeeper session
expiry, which drops the watch, the listener reads the root again and watches anew.
"""

from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import Awaitable, Callable
from concurrent.futures import Executor
from typing import Any

from . import zk_data as zk
from .kafka_zk import KafkaZk
from .metadata_store import NoNodeError, WatchedEvent, run_blocking

log = logging.getLogger(__name__)

NOTIFICATION_EXPIRY_MS = 15 * 60 * 1000

NotificationHandler = Callable[[bytes], Awaitable[None]]


def _now_ms() -> int:
    return int(time.time() * 1000)


class ChangeNotificationListener:
    """Follows one notification root. Watches fire on store threads; the handler runs on the
    loop, one notification at a time and in sequence order."""

    def __init__(
        self,
        zkc: KafkaZk,
        root: str,
        prefix: str,
        handle: NotificationHandler,
        *,
        what: str,
        executor: Executor | None = None,
        expiry_ms: int = NOTIFICATION_EXPIRY_MS,
        clock_ms: Callable[[], int] = _now_ms,
    ) -> None:
        self.zk = zkc
        self.root = root
        self.prefix = prefix
        self.handle = handle
        self.what = what
        self.expiry_ms = expiry_ms
        self.clock_ms = clock_ms
        self.last_sequence = -1
        self._executor = executor
        self._loop: asyncio.AbstractEventLoop | None = None
        self._wake = asyncio.Event()
        self._task: asyncio.Task[None] | None = None
        self._watch = self._on_watch

    async def _io(self, fn: Callable[..., Any], *args: Any) -> Any:
        return await run_blocking(self._executor, fn, *args)

    async def skip_existing(self) -> None:
        """For owners that load everything at start: what is announced so far is already in."""
        await self._io(self.zk.store.ensure_path, self.root)
        children = await self._io(self.zk.children, self.root)
        seqs = [zk.sequence_number(c) for c in children if c.startswith(self.prefix)]
        self.last_sequence = max(seqs, default=-1)

    async def start(self) -> None:
        """Handle the pending notifications, then follow new ones."""
        self._loop = asyncio.get_running_loop()
        self.zk.store.add_session_listener(on_new_session=self._on_new_session)
        await self.process()
        self._task = asyncio.create_task(self._run(), name=f"{self.what}-listener")

    async def stop(self) -> None:
        if self._task is not None:
            self._task.cancel()
            try:
                await self._task
            except asyncio.CancelledError:
                pass
            self._task = None

    def _on_new_session(self, _session_id: int) -> None:
        self._wake_up()

    def _on_watch(self, _event: WatchedEvent) -> None:
        self._wake_up()

    def _wake_up(self) -> None:
        """Any thread: have the loop task process the notifications."""
        loop = self._loop
        if loop is not None and not loop.is_closed():
            try:
                loop.call_soon_threadsafe(self._wake.set)
            except RuntimeError:
                pass  # the loop closed between the check and the call

    async def _run(self) -> None:
        while True:
            await self._wake.wait()
            self._wake.clear()  # before processing: a change arriving meanwhile wakes us again
            try:
                await self.process()
            except Exception:
                log.exception("Processing %s notifications failed", self.what)

    async def process(self) -> None:
        """Handle every notification newer than the last one handled; re-arm the watch."""
        children = await self._io(self.zk.children, self.root, self._watch)
        now = self.clock_ms()
        for child in sorted(c for c in children if c.startswith(self.prefix)):
            seq = zk.sequence_number(child)
            path = f"{self.root}/{child}"
            if seq > self.last_sequence:
                found = await self._io(self.zk.get_data, path)
                if found is not None:
                    try:
                        await self.handle(bytes(found[0]))
                    except Exception:
                        log.exception("Could not apply %s notification %s", self.what, path)
                self.last_sequence = seq
            await self._io(self._purge, path, now)

    def _purge(self, path: str, now: int) -> None:
        stat = self.zk.store.exists(path)
        if stat is not None and now - stat.ctime > self.expiry_ms:
            try:
                self.zk.store.delete(path)
            except NoNodeError:
                pass  # another broker purged it first
