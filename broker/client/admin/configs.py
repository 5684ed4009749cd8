"""Configs of topics and brokers: DescribeConfigs, AlterConfigs, IncrementalAlterConfigs.

A broker resource that names a broker must go to that broker; every other one to any broker.
Both alter APIs share the resource list of their request and the reading of their response.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Mapping, Sequence
from dataclasses import dataclass, field
from enum import IntEnum
from typing import Any, TypeVar

from ...protocol.api_keys import ApiKey
from ...protocol.config_types import AlterConfigOpType, ConfigSource, ConfigType, ResourceType
from ...protocol.errors import ErrorCode, KafkaError
from ..cluster import error_of
from ..connection import BrokerConnection
from .base import AdminBase


@dataclass(frozen=True, slots=True)
class ConfigResource:
    type: ResourceType
    name: str  # topic name, broker id as text, or "" for the cluster-wide broker default

    @classmethod
    def topic(cls, name: str) -> ConfigResource:
        return cls(ResourceType.TOPIC, name)

    @classmethod
    def broker(cls, broker_id: int | str = "") -> ConfigResource:
        return cls(ResourceType.BROKER, str(broker_id))

    @property
    def pinned(self) -> bool:
        """A resource of one named broker, which only that broker can answer for."""
        return self.type in (ResourceType.BROKER, ResourceType.BROKER_LOGGER) and bool(self.name)


@dataclass(frozen=True, slots=True)
class AlterConfigOp:
    name: str
    value: str | None = None
    op: AlterConfigOpType = AlterConfigOpType.SET

    @classmethod
    def set(cls, name: str, value: str) -> AlterConfigOp:
        return cls(name, value, AlterConfigOpType.SET)

    @classmethod
    def delete(cls, name: str) -> AlterConfigOp:
        return cls(name, None, AlterConfigOpType.DELETE)


@dataclass(slots=True)
class ConfigSynonym:
    name: str
    value: str | None
    source: ConfigSource


@dataclass(slots=True)
class ConfigEntry:
    name: str
    value: str | None
    source: ConfigSource = ConfigSource.UNKNOWN
    read_only: bool = False
    is_sensitive: bool = False
    synonyms: list[ConfigSynonym] = field(default_factory=list)
    type: ConfigType = ConfigType.UNKNOWN
    documentation: str | None = None

    @property
    def is_default(self) -> bool:
        return self.source in (ConfigSource.DEFAULT_CONFIG, ConfigSource.STATIC_BROKER_CONFIG)


E = TypeVar("E", bound=IntEnum)


def _enum(cls: type[E], value: int) -> E:
    try:
        return cls(value)
    except ValueError:
        return cls(0)


def config_entry(c: dict, version: int) -> ConfigEntry:
    """A ConfigEntry from a DescribeConfigs (or CreateTopics v5+) config of that version."""
    if version == 0:
        source = ConfigSource.DEFAULT_CONFIG if c.get("is_default") else ConfigSource.UNKNOWN
    else:
        source = _enum(ConfigSource, c.get("config_source", 0))
    return ConfigEntry(
        name=c["name"],
        value=c["value"],
        source=source,
        read_only=c["read_only"],
        is_sensitive=c["is_sensitive"],
        synonyms=[
            ConfigSynonym(s["name"], s["value"], _enum(ConfigSource, s["source"]))
            for s in c.get("synonyms") or []
        ],
        type=_enum(ConfigType, c.get("config_type", 0)),
        documentation=c.get("documentation"),
    )


def _resource_of(r: dict) -> tuple[ConfigResource, KafkaError | None]:
    """The resource a response entry is about, and its error."""
    resource = ConfigResource(_enum(ResourceType, r["resource_type"]), r["resource_name"])
    kind = resource.type.name.lower()
    what = f"{kind} {resource.name!r}" if resource.name else kind
    return resource, error_of(r["error_code"], r.get("error_message"), what, resource.name)


def _alter_body(
    group: list[ConfigResource],
    configs: Callable[[ConfigResource], list[dict]],
    validate_only: bool,
) -> dict:
    """An AlterConfigs or IncrementalAlterConfigs request: `configs` gives each resource's."""
    return {
        "resources": [
            {"resource_type": int(r.type), "resource_name": r.name, "configs": configs(r)}
            for r in group
        ],
        "validate_only": validate_only,
    }


def _alter_results(resp: dict, group: list[ConfigResource]) -> dict:
    """Each resource's error (None: altered) from either alter API's response."""
    done: dict[ConfigResource, KafkaError | None] = {}
    for r in resp["responses"]:
        resource, error = _resource_of(r)
        done[resource] = error
    for res in group:
        if res not in done:
            raise KafkaError(ErrorCode.UNKNOWN_SERVER_ERROR, f"{res}: no result")
    return done


Send = Callable[[BrokerConnection, list[ConfigResource]], Awaitable[dict]]


class ConfigsAdmin(AdminBase):
    async def _connection_for(self, resource: ConfigResource) -> BrokerConnection:
        """Broker resources naming a broker must go to that broker; the rest to any broker."""
        if resource.pinned:
            try:
                node_id = int(resource.name)
            except ValueError:
                raise KafkaError(
                    ErrorCode.INVALID_REQUEST, f"broker id {resource.name!r} is not a number"
                ) from None
            if node_id not in self.cluster.brokers:
                await self.cluster.refresh_metadata([])
            return await self.cluster.connection(node_id)
        return await self.cluster.any_connection()

    async def _per_resource(
        self, resources: Sequence[ConfigResource], send: Send
    ) -> dict[ConfigResource, Any]:
        """Group resources by the broker they must go to and send one request per group."""
        groups: dict[tuple[ResourceType, str] | None, list[ConfigResource]] = {}
        for r in resources:
            groups.setdefault((r.type, r.name) if r.pinned else None, []).append(r)
        out: dict[ConfigResource, Any] = {}
        for group in groups.values():

            async def attempt(group: list[ConfigResource] = group) -> dict:
                conn = await self._connection_for(group[0])
                return await send(conn, group)

            resp = await self.cluster.retry(attempt, what="configs")
            out.update(resp)
        for value in out.values():
            if isinstance(value, KafkaError):
                raise value  # a resource's own error: final, not retried
        return out

    async def describe_configs(
        self,
        resources: Sequence[ConfigResource],
        *,
        keys: Sequence[str] | None = None,
        include_synonyms: bool = False,
        include_documentation: bool = False,
    ) -> dict[ConfigResource, dict[str, ConfigEntry]]:
        """Configs of topics and brokers, each name -> ConfigEntry (value, source, ...)."""

        async def send(conn: BrokerConnection, group: list[ConfigResource]) -> dict:
            version = conn.version_for(ApiKey.DESCRIBE_CONFIGS)
            body = {
                "resources": [
                    {
                        "resource_type": int(r.type),
                        "resource_name": r.name,
                        "configuration_keys": None if keys is None else list(keys),
                    }
                    for r in group
                ],
                "include_synonyms": include_synonyms,
                "include_documentation": include_documentation,
            }
            resp = await conn.request(ApiKey.DESCRIBE_CONFIGS, body, version)
            found: dict[ConfigResource, dict[str, ConfigEntry] | KafkaError] = {}
            for r in resp["results"]:
                res, error = _resource_of(r)
                found[res] = (
                    error
                    if error is not None
                    else {c["name"]: config_entry(c, version) for c in r["configs"]}
                )
            return found

        return await self._per_resource(resources, send)

    async def describe_topic_configs(self, topic: str) -> dict[str, ConfigEntry]:
        resource = ConfigResource.topic(topic)
        return (await self.describe_configs([resource]))[resource]

    async def alter_configs(
        self,
        configs: Mapping[ConfigResource, Mapping[str, str]],
        *,
        validate_only: bool = False,
    ) -> None:
        """Replace the whole dynamic config of each resource (legacy AlterConfigs): keys not
        given return to their defaults. Prefer incremental_alter_configs."""

        def entries(r: ConfigResource) -> list[dict]:
            return [{"name": k, "value": v} for k, v in configs[r].items()]

        await self._alter(ApiKey.ALTER_CONFIGS, list(configs), entries, validate_only)

    async def incremental_alter_configs(
        self,
        changes: Mapping[ConfigResource, Sequence[AlterConfigOp]],
        *,
        validate_only: bool = False,
    ) -> None:
        """Set, delete, append to or subtract from individual config keys."""

        def entries(r: ConfigResource) -> list[dict]:
            return [
                {"name": op.name, "config_operation": int(op.op), "value": op.value}
                for op in changes[r]
            ]

        await self._alter(ApiKey.INCREMENTAL_ALTER_CONFIGS, list(changes), entries, validate_only)

    async def _alter(
        self,
        api_key: int,
        resources: list[ConfigResource],
        entries: Callable[[ConfigResource], list[dict]],
        validate_only: bool,
    ) -> None:
        async def send(conn: BrokerConnection, group: list[ConfigResource]) -> dict:
            resp = await conn.request(api_key, _alter_body(group, entries, validate_only))
            return _alter_results(resp, group)

        await self._per_resource(resources, send)
