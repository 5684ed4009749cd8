"""Client quota configuration: entities, keys, validation and storage (Kafka's ZK layout).

An entity is a set of (type, name) components, `name=None` meaning that type's default:
{user}, {client-id}, {user, client-id} or {ip}. Stored as `/config/users/<u>`,
`/config/users/<u>/clients/<c>`, `/config/clients/<c>`, `/config/ips/<ip>` (names sanitized,
`<default>` for defaults), quota keys next to any other keys of the node (SCRAM credentials).
"""

from __future__ import annotations

import math
import threading
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from enum import IntEnum

from ..cluster import zk_data as zk
from ..cluster.kafka_zk import KafkaZk
from ..security.entity_config import update_entity_config

USER = "user"
CLIENT_ID = "client-id"
IP = "ip"

PRODUCER_BYTE_RATE = "producer_byte_rate"
CONSUMER_BYTE_RATE = "consumer_byte_rate"
REQUEST_PERCENTAGE = "request_percentage"
CONTROLLER_MUTATION_RATE = "controller_mutation_rate"
CONNECTION_CREATION_RATE = "connection_creation_rate"

CLIENT_KEYS = {
    PRODUCER_BYTE_RATE: int,
    CONSUMER_BYTE_RATE: int,
    REQUEST_PERCENTAGE: float,
    CONTROLLER_MUTATION_RATE: float,
}
IP_KEYS = {CONNECTION_CREATION_RATE: int}


class InvalidQuotaError(ValueError):
    """Answered with INVALID_REQUEST."""


class MatchType(IntEnum):
    EXACT = 0
    DEFAULT = 1
    SPECIFIED = 2


# (entity type, name or None for the default), sorted by type
Entity = tuple[tuple[str, str | None], ...]


def make_entity(components: Iterable[tuple[str, str | None]]) -> Entity:
    comps = list(components)
    types = [t for t, _ in comps]
    if len(set(types)) != len(types):
        raise InvalidQuotaError(f"Duplicate quota entity type in {types}")
    for t in types:
        if t not in (USER, CLIENT_ID, IP):
            raise InvalidQuotaError(f"Unhandled client quota entity type: {t}")
    if not comps or (IP in types and len(types) > 1):
        raise InvalidQuotaError(f"Invalid quota entity combination {sorted(types)}")
    return tuple(sorted(comps))


def entity_path(entity: Entity) -> tuple[str, str]:
    """(config entity type, sanitized znode name below it)."""

    def name(n: str | None) -> str:
        return zk.DEFAULT_ENTITY if n is None else zk.sanitize(n)

    d = dict(entity)
    if IP in d:
        return zk.IPS, name(d[IP])
    if USER in d and CLIENT_ID in d:
        return zk.USERS, f"{name(d[USER])}/clients/{name(d[CLIENT_ID])}"
    if USER in d:
        return zk.USERS, name(d[USER])
    return zk.CLIENTS, name(d[CLIENT_ID])


def validate_ops(entity: Entity, ops: Iterable[tuple[str, float | None]]) -> None:
    keys = IP_KEYS if any(t == IP for t, _ in entity) else CLIENT_KEYS
    seen = set()
    for key, value in ops:
        if key in seen:
            raise InvalidQuotaError(f"Duplicate quota key {key}")
        seen.add(key)
        if key not in keys:
            raise InvalidQuotaError(f"Invalid configuration key {key}")
        if value is None:
            continue
        if math.isnan(value) or math.isinf(value) or value <= 0:
            raise InvalidQuotaError(f"Quota {key} must be a positive number, not {value}")
        if keys[key] is int and value != int(value):
            raise InvalidQuotaError(f"Quota {key} must be a whole number, not {value}")


def _format(key: str, value: float) -> str:
    if key in CLIENT_KEYS and CLIENT_KEYS[key] is int or key in IP_KEYS:
        return str(int(value))
    return repr(float(value))


def quota_values(config: Mapping[str, str], ip: bool = False) -> dict[str, float]:
    keys = IP_KEYS if ip else CLIENT_KEYS
    out = {}
    for k, v in config.items():
        if k in keys:
            try:
                out[k] = float(v)
            except ValueError:
                continue
    return out


def alter_quotas(zkc: KafkaZk, entity: Entity, ops: Mapping[str, float | None]) -> None:
    """Set (value) or remove (None) quota keys of one entity, keeping its other keys."""
    entity_type, name = entity_path(entity)

    def change(config: dict[str, str]) -> dict[str, str]:
        for key, value in ops.items():
            if value is None:
                config.pop(key, None)
            else:
                config[key] = _format(key, value)
        return config

    update_entity_config(zkc, entity_type, name, change)


def _name(znode_name: str) -> str | None:
    return None if znode_name == zk.DEFAULT_ENTITY else zk.desanitize(znode_name)


def all_quotas(zkc: KafkaZk) -> dict[Entity, dict[str, float]]:
    """Every entity with at least one quota value."""
    out: dict[Entity, dict[str, float]] = {}

    def add(entity: Entity, config: Mapping[str, str], ip: bool = False) -> None:
        values = quota_values(config, ip)
        if values:
            out[entity] = values

    for u in zkc.children(zk.entity_type_path(zk.USERS)):
        add(((USER, _name(u)),), zkc.get_entity_config(zk.USERS, u))
        for c in zkc.children(f"{zk.entity_type_path(zk.USERS)}/{u}/clients"):
            config = zkc.get_entity_config(zk.USERS, f"{u}/clients/{c}")
            add(tuple(sorted(((USER, _name(u)), (CLIENT_ID, _name(c))))), config)
    for c in zkc.children(zk.entity_type_path(zk.CLIENTS)):
        add(((CLIENT_ID, _name(c)),), zkc.get_entity_config(zk.CLIENTS, c))
    for i in zkc.children(zk.entity_type_path(zk.IPS)):
        add(((IP, _name(i)),), zkc.get_entity_config(zk.IPS, i), ip=True)
    return out


@dataclass(frozen=True)
class Component:
    entity_type: str
    match_type: MatchType
    match: str | None = None


def validate_filter(components: Iterable[Component]) -> list[Component]:
    comps = list(components)
    types = [c.entity_type for c in comps]
    if len(set(types)) != len(types):
        raise InvalidQuotaError("Duplicate entity type in quota filter")
    for c in comps:
        if c.entity_type not in (USER, CLIENT_ID, IP):
            raise InvalidQuotaError(f"Unhandled client quota entity type: {c.entity_type}")
        if c.match_type == MatchType.EXACT and c.match is None:
            raise InvalidQuotaError(f"Exact match of {c.entity_type} needs a name")
    if IP in types and len(types) > 1:
        raise InvalidQuotaError("Invalid entity filter component combination, IP filter "
                                "component should not be used with user or clientId filter "
                                "component.")  # fmt: skip
    return comps


def filter_matches(entity: Entity, components: Iterable[Component], strict: bool) -> bool:
    comps = list(components)
    d = dict(entity)
    if strict and set(d) != {c.entity_type for c in comps}:
        return False
    for c in comps:
        if c.entity_type not in d:
            return False
        name = d[c.entity_type]
        if c.match_type == MatchType.EXACT and name != c.match:
            return False
        if c.match_type == MatchType.DEFAULT and name is not None:
            return False
        if c.match_type == MatchType.SPECIFIED and name is None:
            return False
    return True


def describe_quotas(
    zkc: KafkaZk, components: Iterable[Component], strict: bool
) -> dict[Entity, dict[str, float]]:
    comps = validate_filter(components)
    return {e: v for e, v in all_quotas(zkc).items() if filter_matches(e, comps, strict)}


class _Default:
    def __repr__(self) -> str:
        return "<default>"


DEFAULT = _Default()
# (user, client-id) part of a key: a name, DEFAULT, or None when the level has no such part;
# IP entities are keyed (_IP_KEY, address or DEFAULT).
Key = tuple[object, object]
_IP_KEY = object()


def ip_key(address: str) -> Key:
    """The key of one IP address's own quota (and of its connection-rate meter)."""
    return _IP_KEY, address


class QuotaConfigCache:
    """The quota values of every (user, client-id) entity, for Kafka's precedence lookups.
    Reloaded whole or per entity from the config-change listener (any thread)."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._values: dict[Key, dict[str, float]] = {}
        # Bumped by every update, so an answer derived from the values can be kept until then.
        self.version = 0

    @staticmethod
    def _key(entity: Entity) -> Key | None:
        d = dict(entity)
        if IP in d:
            return _IP_KEY, DEFAULT if d[IP] is None else d[IP]

        def part(t: str) -> object:
            if t not in d:
                return None
            return DEFAULT if d[t] is None else d[t]

        return part(USER), part(CLIENT_ID)

    def set(self, entity: Entity, values: Mapping[str, float]) -> None:
        key = self._key(entity)
        if key is None:
            return
        with self._lock:
            if values:
                self._values[key] = dict(values)
            else:
                self._values.pop(key, None)
            self.version += 1

    def replace_all(self, quotas: Mapping[Entity, Mapping[str, float]]) -> None:
        new = {}
        for entity, values in quotas.items():
            key = self._key(entity)
            if key is not None and values:
                new[key] = dict(values)
        with self._lock:
            self._values = new
            self.version += 1

    def reload_entity(self, zkc: KafkaZk, entity_type: str, name: str) -> None:
        """Blocking: re-read one entity named as in a config change (`users`, `u/clients/c`)."""
        if entity_type == zk.USERS:
            user, _, client = name.partition("/clients/")
            comps = [(USER, _name(user))]
            if client:
                comps.append((CLIENT_ID, _name(client)))
        elif entity_type == zk.CLIENTS:
            comps = [(CLIENT_ID, _name(name))]
        elif entity_type == zk.IPS:
            entity = make_entity([(IP, _name(name))])
            self.set(entity, quota_values(zkc.get_entity_config(entity_type, name), ip=True))
            return
        else:
            return
        self.set(make_entity(comps), quota_values(zkc.get_entity_config(entity_type, name)))

    def load(self, zkc: KafkaZk) -> None:
        self.replace_all(all_quotas(zkc))

    def find(self, user: str, client_id: str, key: str) -> tuple[float, Key] | None:
        """The applicable quota and the metric group sharing it, by Kafka's precedence:
        (u, c), (u, <default> c), u, (<default> u, c), (<default>, <default>), <default> u,
        c, <default> c."""
        values = self._values
        if not values:  # no quota configured (Kafka's quotasEnabled is off): nothing to look up
            return None
        levels: list[tuple[Key, Key]] = [
            ((user, client_id), (user, client_id)),
            ((user, DEFAULT), (user, client_id)),
            ((user, None), (user, "")),
            ((DEFAULT, client_id), (user, client_id)),
            ((DEFAULT, DEFAULT), (user, client_id)),
            ((DEFAULT, None), (user, "")),
            ((None, client_id), ("", client_id)),
            ((None, DEFAULT), ("", client_id)),
        ]
        for lookup, group in levels:
            found = values.get(lookup)
            if found is not None and key in found:
                return found[key], group
        return None

    def find_ip(self, address: str, key: str) -> float | None:
        """The quota of one IP address, else the default IP quota."""
        values = self._values
        for lookup in (ip_key(address), (_IP_KEY, DEFAULT)):
            found = values.get(lookup)
            if found is not None and key in found:
                return found[key]
        return None
