"""Applies dynamic configuration changes announced under /config/changes on this broker.

Kafka's protocol: the writer updates /config/<type>/<name>, then creates a sequential
`config_change_` node holding the entity path (see change_notifications for how they are
followed); the config node is re-read for each.
"""

from __future__ import annotations

import logging
from collections.abc import Awaitable, Callable
from concurrent.futures import Executor

from ..config import BrokerConfig
from . import zk_data as zk
from .change_notifications import NOTIFICATION_EXPIRY_MS, ChangeNotificationListener
from .kafka_zk import KafkaZk
from .metadata_store import StoreCalls

log = logging.getLogger(__name__)

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
        self._io = StoreCalls(executor, "config-changes")
        self.notifications = ChangeNotificationListener(
            zk_client,
            zk.CONFIG_CHANGES,
            zk.CONFIG_CHANGE_PREFIX,
            self._on_notification,
            what="config change",
            executor=self._io.executor,
            expiry_ms=expiry_ms,
        )

    @property
    def last_sequence(self) -> int:
        return self.notifications.last_sequence

    async def start(self) -> None:
        """Load this broker's dynamic configs, process existing notifications, then watch."""
        await self._reload_broker_configs()
        await self.notifications.start()

    async def stop(self) -> None:
        await self.notifications.stop()
        self._io.close()

    async def _on_notification(self, data: bytes) -> None:
        await self._apply(zk.decode_config_change(data))

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
