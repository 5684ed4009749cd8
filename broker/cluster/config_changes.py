"""Applies dynamic configuration changes announced under /config/changes on this broker.

Kafka's protocol: the writer updates /config/<type>/<name>, then creates a sequential
`config_change_` node holding the entity path. Every broker watches the children, handles each
notification newer than the last one it processed (re-reading the config node: the
notification is only a trigger), and deletes notifications older than 15 minutes.
"""

from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import Awaitable, Callable
from concurrent.futures import Executor, ThreadPoolExecutor
from typing import Any

from ..config import BrokerConfig
from . import zk_data as zk
from .kafka_zk import KafkaZk
from .metadata_store import NoNodeError, WatchedEvent, run_blocking

log = logging.getLogger(__name__)

NOTIFICATION_EXPIRY_MS = 15 * 60 * 1000

TopicConfigHandler = Callable[[str, dict[str, str]], Awaitable[None] | None]
BrokerConfigHandler = Callable[[set[str]], Awaitable[None] | None]
EntityHandler = Callable[[str, str], Awaitable[None] | None]


async def _maybe_await(value: Awaitable[None] | None) -> None:
    if value is not None:
        await value


class ConfigChangeListener:
    def __init__(
        self,
        zk_client: KafkaZk,
        config: BrokerConfig,
        *,
        on_topic_config: TopicConfigHandler | None = None,
        on_broker_config: BrokerConfigHandler | None = None,
        on_entity_config: EntityHandler | None = None,
        executor: Executor | None = None,
        expiry_ms: int = NOTIFICATION_EXPIRY_MS,
    ) -> None:
        """Handlers: `on_topic_config(topic, overrides)` (LogConfig updates),
        `on_broker_config(changed names)` after `config` absorbed the dynamic layers,
        `on_entity_config(type, name)` for clients/users/ips (quotas, SCRAM)."""
        self.zk = zk_client
        self.config = config
        self.on_topic_config = on_topic_config
        self.on_broker_config = on_broker_config
        self.on_entity_config = on_entity_config
        self.expiry_ms = expiry_ms
        self._own_executor = executor is None
        self._executor = executor or ThreadPoolExecutor(1, thread_name_prefix="config-changes")
        self.last_sequence = -1
        self._loop: asyncio.AbstractEventLoop | None = None
        self._wake = asyncio.Event()
        self._task: asyncio.Task[None] | None = None
        self._watch = self._on_watch

    async def _io(self, fn: Callable[..., Any], *args: Any) -> Any:
        return await run_blocking(self._executor, fn, *args)

    async def start(self) -> None:
        """Load this broker's dynamic configs, process existing notifications, then watch."""
        self._loop = asyncio.get_running_loop()
        await self._reload_broker_configs()
        await self._process()
        self._task = asyncio.create_task(self._run(), name="config-change-listener")

    async def stop(self) -> None:
        if self._task is not None:
            self._task.cancel()
            try:
                await self._task
            except asyncio.CancelledError:
                pass
            self._task = None
        if self._own_executor and isinstance(self._executor, ThreadPoolExecutor):
            self._executor.shutdown(wait=True)

    def _on_watch(self, _event: WatchedEvent) -> None:
        loop = self._loop
        if loop is not None and not loop.is_closed():
            try:
                loop.call_soon_threadsafe(self._wake.set)
            except RuntimeError:
                pass

    async def _run(self) -> None:
        while True:
            await self._wake.wait()
            self._wake.clear()  # before processing: a change arriving meanwhile wakes us again
            try:
                await self._process()
            except Exception:
                log.exception("Processing config change notifications failed")

    async def _process(self) -> None:
        children = await self._io(self.zk.children, zk.CONFIG_CHANGES, self._watch)
        now = int(time.time() * 1000)
        for child in sorted(c for c in children if c.startswith(zk.CONFIG_CHANGE_PREFIX)):
            seq = zk.sequence_number(child)
            path = f"{zk.CONFIG_CHANGES}/{child}"
            if seq > self.last_sequence:
                found = await self._io(self.zk.get_data, path)
                if found is not None:
                    try:
                        await self._apply(zk.decode_config_change(found[0]))
                    except Exception:
                        log.exception("Could not apply config change %s", child)
                self.last_sequence = seq
            await self._purge(path, now)

    async def _purge(self, path: str, now: int) -> None:
        def purge() -> None:
            stat = self.zk.store.exists(path)
            if stat is not None and now - stat.ctime > self.expiry_ms:
                try:
                    self.zk.store.delete(path)
                except NoNodeError:
                    pass

        await self._io(purge)

    async def _apply(self, entity_path: str) -> None:
        entity_type, _, name = entity_path.partition("/")
        if entity_type == zk.TOPICS:
            overrides = await self._io(self.zk.get_entity_config, zk.TOPICS, name)
            log.info("Topic %s config changed: %s", name, overrides)
            if self.on_topic_config is not None:
                await _maybe_await(self.on_topic_config(name, overrides))
        elif entity_type == zk.BROKERS_ENTITY:
            if name in (zk.DEFAULT_ENTITY, str(self.config.broker_id)):
                await self._reload_broker_configs()
        elif self.on_entity_config is not None:
            await _maybe_await(self.on_entity_config(entity_type, name))

    async def _reload_broker_configs(self) -> None:
        default = await self._io(self.zk.get_entity_config, zk.BROKERS_ENTITY, zk.DEFAULT_ENTITY)
        own = await self._io(
            self.zk.get_entity_config, zk.BROKERS_ENTITY, str(self.config.broker_id)
        )
        changed = self.config.update_dynamic(broker=own, default=default)
        if changed:
            log.info("Dynamic broker configs changed: %s", sorted(changed))
            if self.on_broker_config is not None:
                await _maybe_await(self.on_broker_config(changed))
