"""SCRAM credentials of every user, cached from /config/users so that authentication never
waits for the metadata store. Reloaded whole at start-up and per user on config changes."""

from __future__ import annotations

import threading
from collections.abc import Callable

from ..cluster import zk_data as zk
from ..cluster.kafka_zk import KafkaZk
from .scram import ScramCredential, ScramMechanism, credentials_from_config


class ScramCredentialCache:
    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._users: dict[str, dict[ScramMechanism, ScramCredential]] = {}

    def get(self, user: str, mechanism: ScramMechanism | str) -> ScramCredential | None:
        if isinstance(mechanism, str):
            mechanism = ScramMechanism.from_name(mechanism)
        return self._users.get(user, {}).get(mechanism)

    def lookup(self, mechanism: ScramMechanism | str) -> Callable[[str], ScramCredential | None]:
        """The `credentials` callable for a ScramServer of this mechanism."""
        return lambda user: self.get(user, mechanism)

    def set(self, user: str, creds: dict[ScramMechanism, ScramCredential]) -> None:
        with self._lock:
            if creds:
                self._users[user] = dict(creds)
            else:
                self._users.pop(user, None)

    def load(self, zkc: KafkaZk) -> None:
        """Blocking: read every user's credentials."""
        users = {}
        for name in zkc.children(zk.entity_type_path(zk.USERS)):
            if name == zk.DEFAULT_ENTITY:
                continue
            creds = credentials_from_config(zkc.get_entity_config(zk.USERS, name))
            if creds:
                users[zk.desanitize(name)] = creds
        with self._lock:
            self._users = users

    def reload_entity(self, zkc: KafkaZk, entity_type: str, name: str) -> None:
        """Blocking: apply one config change notification (`users`, sanitized name)."""
        if entity_type != zk.USERS or "/" in name or name == zk.DEFAULT_ENTITY:
            return
        config = zkc.get_entity_config(zk.USERS, name)
        self.set(zk.desanitize(name), credentials_from_config(config))
