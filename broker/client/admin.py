"""AdminClient: topics, partitions, configs, offsets, records and log dirs over the Kafka API.

Every method returns plain dataclasses. Failures raise `KafkaError` with the broker's error code
and message (naming the topic or resource). Methods that act on several items accept
`raise_errors=False` to get every item's outcome instead: each result then carries `error`.
"""

from __future__ import annotations

import hashlib
import os
import struct
import uuid
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from enum import IntEnum
from typing import Any, TypeVar

from ..protocol.acl_types import AclOperation, AclPatternType, AclPermissionType, AclResourceType
from ..protocol.api_keys import ApiKey
from ..protocol.config_types import ConfigSource, ConfigType
from ..protocol.errors import ErrorCode, KafkaError
from .cluster import (
    ZERO_UUID,
    BrokerNode,
    ClusterClient,
    TopicMetadata,
    TopicPartition,
    error_of,
)
from .connection import BrokerConnection
from .security import ClientSecurity

__all__ = [
    "CommittedOffset",
    "GroupDescription",
    "GroupListing",
    "GroupMember",
    "AclBinding",
    "AclBindingFilter",
    "AclOperation",
    "AclPatternType",
    "AclPermissionType",
    "AclResourceType",
    "QuotaMatchType",
    "ScramCredentialInfo",
    "ScramMechanism",
    "ScramUpsertion",
    "AdminClient",
    "AlterConfigOp",
    "AlterConfigOpType",
    "ClusterDescription",
    "ConfigEntry",
    "ConfigResource",
    "ConfigSource",
    "ConfigSynonym",
    "ConfigType",
    "CreateTopicResult",
    "LogDirDescription",
    "NewTopic",
    "OffsetSpec",
    "ListedOffset",
    "PartitionDescription",
    "ReplicaLogDirInfo",
    "ResourceType",
    "TopicDescription",
    "TopicResult",
    "TransactionDescription",
    "TransactionListing",
]


class ResourceType(IntEnum):
    """Config resource types (Kafka's ConfigResource.Type wire values)."""

    UNKNOWN = 0
    TOPIC = 2
    BROKER = 4
    BROKER_LOGGER = 8
    CLIENT_METRICS = 16
    GROUP = 32


class AlterConfigOpType(IntEnum):
    SET = 0
    DELETE = 1
    APPEND = 2
    SUBTRACT = 3


class OffsetSpec(IntEnum):
    """Special timestamps for list_offsets; any other int is a timestamp in ms."""

    LATEST = -1
    EARLIEST = -2
    MAX_TIMESTAMP = -3
    EARLIEST_LOCAL = -4
    LATEST_TIERED = -5


# ListOffsets version needed for each special timestamp.
_OFFSET_SPEC_MIN_VERSION = {
    OffsetSpec.MAX_TIMESTAMP: 7,
    OffsetSpec.EARLIEST_LOCAL: 8,
    OffsetSpec.LATEST_TIERED: 9,
}


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
class NewTopic:
    """A topic to create. -1 partitions / replication factor: the broker's defaults.

    `assignments` (partition -> broker ids) replaces both counts when given.
    """

    name: str
    num_partitions: int = -1
    replication_factor: int = -1
    configs: dict[str, str] = field(default_factory=dict)
    assignments: dict[int, list[int]] | None = None


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


@dataclass(slots=True)
class TopicResult:
    """Outcome of an operation on one topic (delete, create_partitions)."""

    name: str
    error: KafkaError | None = None
    topic_id: uuid.UUID = ZERO_UUID


@dataclass(slots=True)
class CreateTopicResult:
    name: str
    topic_id: uuid.UUID = ZERO_UUID
    num_partitions: int = -1
    replication_factor: int = -1
    configs: dict[str, ConfigEntry] = field(default_factory=dict)
    error: KafkaError | None = None


@dataclass(slots=True)
class PartitionDescription:
    partition: int
    leader: int
    leader_epoch: int
    replicas: list[int]
    isr: list[int]
    offline_replicas: list[int] = field(default_factory=list)
    error: ErrorCode = ErrorCode.NONE


@dataclass(slots=True)
class TopicDescription:
    name: str
    topic_id: uuid.UUID
    is_internal: bool
    partitions: list[PartitionDescription]

    @property
    def replication_factor(self) -> int:
        return len(self.partitions[0].replicas) if self.partitions else 0


@dataclass(slots=True)
class PartitionReassignment:
    """A reassignment in progress (KIP-455): the full target replica list and its delta."""

    replicas: list[int]
    adding_replicas: list[int]
    removing_replicas: list[int]


@dataclass(slots=True)
class ClusterDescription:
    cluster_id: str | None
    controller_id: int
    brokers: list[BrokerNode]


@dataclass(slots=True)
class ListedOffset:
    offset: int
    timestamp: int = -1
    leader_epoch: int = -1


@dataclass(slots=True)
class ReplicaLogDirInfo:
    size: int
    offset_lag: int
    is_future: bool


@dataclass(slots=True)
class LogDirDescription:
    path: str
    error: ErrorCode
    replicas: dict[TopicPartition, ReplicaLogDirInfo] = field(default_factory=dict)
    total_bytes: int = -1
    usable_bytes: int = -1


ResultT = TypeVar("ResultT")


def _raise_first(results: Iterable[Any]) -> None:
    for r in results:
        if r.error is not None:
            raise r.error


def _config_entry(c: dict, version: int) -> ConfigEntry:
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


E = TypeVar("E", bound=IntEnum)


def _enum(cls: type[E], value: int) -> E:
    try:
        return cls(value)
    except ValueError:
        return cls(0)


def _resource_error(r: dict, resource: ConfigResource) -> KafkaError | None:
    kind = _enum(ResourceType, r["resource_type"]).name.lower()
    what = f"{kind} {resource.name!r}" if resource.name else kind
    return error_of(r["error_code"], r.get("error_message"), what, resource.name)


class AdminClient:
    """Kafka admin operations. `async with AdminClient("host:9092") as admin: ...`

    Pass `cluster=` to share connections and metadata with a producer or consumer.
    """

    def __init__(
        self,
        bootstrap_servers: str | Sequence[str] | None = None,
        *,
        cluster: ClusterClient | None = None,
        client_id: str = "odradek-admin",
        request_timeout: float = 30.0,
        operation_timeout: float = 30.0,
        retry_timeout: float = 30.0,
        security: ClientSecurity | None = None,
    ) -> None:
        if cluster is None:
            if bootstrap_servers is None:
                raise ValueError("bootstrap_servers or cluster is required")
            cluster = ClusterClient(
                bootstrap_servers,
                client_id=client_id,
                request_timeout=request_timeout,
                retry_timeout=retry_timeout,
                security=security,
            )
            self._owns_cluster = True
        else:
            self._owns_cluster = False
        self.cluster = cluster
        self.operation_timeout = operation_timeout

    async def start(self) -> AdminClient:
        await self.cluster.start()
        return self

    async def close(self) -> None:
        if self._owns_cluster:
            await self.cluster.close()

    async def __aenter__(self) -> AdminClient:
        return await self.start()

    async def __aexit__(self, *exc: object) -> None:
        await self.close()

    @property
    def _timeout_ms(self) -> int:
        return int(self.operation_timeout * 1000)

    # -- topics ---------------------------------------------------------------------------

    async def create_topics(
        self,
        topics: Sequence[NewTopic],
        *,
        validate_only: bool = False,
        raise_errors: bool = True,
    ) -> dict[str, CreateTopicResult]:
        """Create topics (through the controller). Results carry the broker's effective
        partition count, replication factor and configs (CreateTopics v5+)."""
        pending = {t.name: t for t in topics}
        results: dict[str, CreateTopicResult] = {}

        async def attempt() -> None:
            body = {
                "topics": [_new_topic_body(t) for t in pending.values()],
                "timeout_ms": self._timeout_ms,
                "validate_only": validate_only,
            }
            conn = await self.cluster.controller_connection()
            version = conn.version_for(ApiKey.CREATE_TOPICS)
            if validate_only and version < 1:
                raise KafkaError(ErrorCode.UNSUPPORTED_VERSION, "validate_only needs v1+")
            resp = await conn.request(ApiKey.CREATE_TOPICS, body, version)
            retry: KafkaError | None = None
            for t in resp["topics"]:
                error = error_of(
                    t["error_code"], t.get("error_message"), f"topic {t['name']!r}", t["name"]
                )
                if error is not None and error.code == ErrorCode.NOT_CONTROLLER:
                    retry = error
                    continue
                configs = {c["name"]: _config_entry(c, 1) for c in t.get("configs") or []}
                results[t["name"]] = CreateTopicResult(
                    t["name"],
                    t.get("topic_id") or ZERO_UUID,
                    t.get("num_partitions", -1),
                    t.get("replication_factor", -1),
                    configs,
                    error,
                )
                pending.pop(t["name"], None)
            if retry is not None:
                self.cluster.mark_stale()
                raise retry

        if pending:
            await self.cluster.retry(attempt, what="CreateTopics")
        for name in pending:
            results[name] = CreateTopicResult(
                name, error=KafkaError(ErrorCode.UNKNOWN_SERVER_ERROR, f"topic {name!r}: no result")
            )
        if not validate_only and any(r.error is None for r in results.values()):
            self.cluster.mark_stale()
        if raise_errors:
            _raise_first(results.values())
        return results

    async def create_topic(
        self,
        name: str,
        num_partitions: int = -1,
        replication_factor: int = -1,
        configs: Mapping[str, str] | None = None,
        *,
        validate_only: bool = False,
    ) -> CreateTopicResult:
        topic = NewTopic(name, num_partitions, replication_factor, dict(configs or {}))
        return (await self.create_topics([topic], validate_only=validate_only))[name]

    async def delete_topics(
        self, names: Sequence[str], *, raise_errors: bool = True
    ) -> dict[str, TopicResult]:
        """Delete topics by name (through the controller)."""
        pending = list(dict.fromkeys(names))
        results: dict[str, TopicResult] = {}

        async def attempt() -> None:
            body = {
                "topics": [{"name": n, "topic_id": ZERO_UUID} for n in pending],
                "topic_names": pending,
                "timeout_ms": self._timeout_ms,
            }
            resp = await self.cluster.request_controller(ApiKey.DELETE_TOPICS, body)
            retry: KafkaError | None = None
            for t in resp["responses"]:
                name = t["name"]
                error = error_of(t["error_code"], t.get("error_message"), f"topic {name!r}", name)
                if error is not None and error.code == ErrorCode.NOT_CONTROLLER:
                    retry = error
                    continue
                results[name] = TopicResult(name, error, t.get("topic_id") or ZERO_UUID)
                if name in pending:
                    pending.remove(name)
            if retry is not None:
                self.cluster.mark_stale()
                raise retry

        if pending:
            await self.cluster.retry(attempt, what="DeleteTopics")
        for name in pending:
            results[name] = TopicResult(
                name, KafkaError(ErrorCode.UNKNOWN_SERVER_ERROR, f"topic {name!r}: no result")
            )
        self.cluster.mark_stale()
        if raise_errors:
            _raise_first(results.values())
        return results

    async def list_topics(self, *, include_internal: bool = False) -> list[str]:
        """Names of all topics, sorted."""
        resp = await self.cluster.retry(
            lambda: self.cluster.refresh_metadata(None), what="Metadata"
        )
        return sorted(
            t["name"]
            for t in resp["topics"]
            if t["name"] is not None and (include_internal or not t["is_internal"])
        )

    async def describe_topics(
        self, names: Sequence[str] | None = None
    ) -> dict[str, TopicDescription]:
        """Partitions, leaders, replicas and ISR of `names` (None: every topic)."""
        resp = await self.cluster.retry(
            lambda: self.cluster.refresh_metadata(None if names is None else list(names)),
            what="Metadata",
        )
        out: dict[str, TopicDescription] = {}
        for t in resp["topics"]:
            name = t["name"]
            error = error_of(t["error_code"], None, f"topic {name!r}")
            if error is not None:
                raise error
            tm: TopicMetadata = self.cluster.topics[name]
            partitions = [
                PartitionDescription(
                    p.partition,
                    p.leader,
                    p.leader_epoch,
                    p.replicas,
                    p.isr,
                    p.offline_replicas,
                    p.error,
                )
                for p in sorted(tm.partitions.values(), key=lambda p: p.partition)
            ]
            out[name] = TopicDescription(name, tm.topic_id, tm.is_internal, partitions)
        if names is not None:
            for name in names:
                if name not in out:
                    raise KafkaError(ErrorCode.UNKNOWN_TOPIC_OR_PARTITION, f"topic {name!r}")
            return {name: out[name] for name in names}
        return dict(sorted(out.items()))

    async def describe_topic(self, name: str) -> TopicDescription:
        return (await self.describe_topics([name]))[name]

    async def create_partitions(
        self,
        new_totals: Mapping[str, int],
        *,
        assignments: Mapping[str, Sequence[Sequence[int]]] | None = None,
        validate_only: bool = False,
        raise_errors: bool = True,
    ) -> dict[str, TopicResult]:
        """Grow topics to `new_totals[name]` partitions; `assignments` places the new ones."""
        body = {
            "topics": [
                {
                    "name": name,
                    "count": count,
                    "assignments": (
                        [{"broker_ids": list(ids)} for ids in assignments[name]]
                        if assignments and name in assignments
                        else None
                    ),
                }
                for name, count in new_totals.items()
            ],
            "timeout_ms": self._timeout_ms,
            "validate_only": validate_only,
        }
        results: dict[str, TopicResult] = {}

        async def attempt() -> None:
            resp = await self.cluster.request_controller(ApiKey.CREATE_PARTITIONS, body)
            for r in resp["results"]:
                error = error_of(
                    r["error_code"], r.get("error_message"), f"topic {r['name']!r}", r["name"]
                )
                if error is not None and error.code == ErrorCode.NOT_CONTROLLER:
                    self.cluster.mark_stale()
                    raise error
                results[r["name"]] = TopicResult(r["name"], error)

        await self.cluster.retry(attempt, what="CreatePartitions")
        self.cluster.mark_stale()
        if raise_errors:
            _raise_first(results.values())
        return results

    # -- configs --------------------------------------------------------------------------

    async def _connection_for(self, resource: ConfigResource) -> BrokerConnection:
        """Broker resources naming a broker must go to that broker; the rest to any broker."""
        if resource.type in (ResourceType.BROKER, ResourceType.BROKER_LOGGER) and resource.name:
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
        self,
        resources: Sequence[ConfigResource],
        send: Any,
    ) -> dict[ConfigResource, Any]:
        """Group resources by the broker they must go to and send one request per group."""
        groups: dict[tuple[ResourceType, str] | None, list[ConfigResource]] = {}
        for r in resources:
            pinned = r.type in (ResourceType.BROKER, ResourceType.BROKER_LOGGER) and r.name
            groups.setdefault((r.type, r.name) if pinned else None, []).append(r)
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
                res = ConfigResource(_enum(ResourceType, r["resource_type"]), r["resource_name"])
                error = _resource_error(r, res)
                found[res] = (
                    error
                    if error is not None
                    else {c["name"]: _config_entry(c, version) for c in r["configs"]}
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

        async def send(conn: BrokerConnection, group: list[ConfigResource]) -> dict:
            body = {
                "resources": [
                    {
                        "resource_type": int(r.type),
                        "resource_name": r.name,
                        "configs": [{"name": k, "value": v} for k, v in configs[r].items()],
                    }
                    for r in group
                ],
                "validate_only": validate_only,
            }
            resp = await conn.request(ApiKey.ALTER_CONFIGS, body)
            return self._check_alter(resp, group)

        await self._per_resource(list(configs), send)

    async def incremental_alter_configs(
        self,
        changes: Mapping[ConfigResource, Sequence[AlterConfigOp]],
        *,
        validate_only: bool = False,
    ) -> None:
        """Set, delete, append to or subtract from individual config keys."""

        async def send(conn: BrokerConnection, group: list[ConfigResource]) -> dict:
            body = {
                "resources": [
                    {
                        "resource_type": int(r.type),
                        "resource_name": r.name,
                        "configs": [
                            {"name": op.name, "config_operation": int(op.op), "value": op.value}
                            for op in changes[r]
                        ],
                    }
                    for r in group
                ],
                "validate_only": validate_only,
            }
            resp = await conn.request(ApiKey.INCREMENTAL_ALTER_CONFIGS, body)
            return self._check_alter(resp, group)

        await self._per_resource(list(changes), send)

    @staticmethod
    def _check_alter(resp: dict, group: list[ConfigResource]) -> dict:
        done: dict[ConfigResource, KafkaError | None] = {}
        for r in resp["responses"]:
            res = ConfigResource(_enum(ResourceType, r["resource_type"]), r["resource_name"])
            done[res] = _resource_error(r, res)
        for res in group:
            if res not in done:
                raise KafkaError(ErrorCode.UNKNOWN_SERVER_ERROR, f"{res}: no result")
        return done

    # -- cluster --------------------------------------------------------------------------

    async def describe_cluster(self) -> ClusterDescription:
        """Cluster id, controller and brokers (DescribeCluster, or Metadata on old brokers)."""

        async def attempt() -> ClusterDescription:
            conn = await self.cluster.any_connection()
            if conn.supports(ApiKey.DESCRIBE_CLUSTER):
                resp = await conn.request(
                    ApiKey.DESCRIBE_CLUSTER, {"include_cluster_authorized_operations": False}
                )
                error = error_of(resp["error_code"], resp.get("error_message"), "DescribeCluster")
                if error is not None:
                    raise error
                brokers = [
                    BrokerNode(b["broker_id"], b["host"], b["port"], b["rack"])
                    for b in resp["brokers"]
                ]
                return ClusterDescription(
                    resp["cluster_id"], resp["controller_id"], sorted(brokers, key=_node_key)
                )
            await self.cluster.refresh_metadata([])
            return ClusterDescription(
                self.cluster.cluster_id,
                self.cluster.controller_id,
                sorted(self.cluster.brokers.values(), key=_node_key),
            )

        return await self.cluster.retry(attempt, what="DescribeCluster")

    # -- offsets and records --------------------------------------------------------------

    async def list_offsets(
        self,
        specs: Mapping[TopicPartition, int],
        *,
        isolation_level: int = 0,
    ) -> dict[TopicPartition, ListedOffset]:
        """Offsets by OffsetSpec (EARLIEST, LATEST, MAX_TIMESTAMP) or timestamp (ms), sent to
        each partition's leader. A timestamp later than every record gives offset -1."""
        min_version = max(
            (_OFFSET_SPEC_MIN_VERSION.get(int(ts), 0) for ts in specs.values()), default=0
        )
        if isolation_level:
            min_version = max(min_version, 2)

        async def send(
            conn: BrokerConnection, part: dict[TopicPartition, int]
        ) -> dict[TopicPartition, ListedOffset | KafkaError]:
            return await list_offsets_request(conn, part, isolation_level, min_version)

        outcome = await self.cluster.route_to_leaders(specs, send, what="ListOffsets")
        return _unwrap(outcome)

    async def delete_records(
        self, before: Mapping[TopicPartition, int]
    ) -> dict[TopicPartition, int]:
        """Delete records below the given offsets (-1: the high watermark); returns each
        partition's new low watermark."""

        async def send(
            conn: BrokerConnection, part: dict[TopicPartition, int]
        ) -> dict[TopicPartition, int | KafkaError]:
            body = {
                "topics": [
                    {
                        "name": topic,
                        "partitions": [
                            {"partition_index": tp.partition, "offset": off}
                            for tp, off in part.items()
                            if tp.topic == topic
                        ],
                    }
                    for topic in {tp.topic for tp in part}
                ],
                "timeout_ms": self._timeout_ms,
            }
            resp = await conn.request(ApiKey.DELETE_RECORDS, body)
            out: dict[TopicPartition, int | KafkaError] = {}
            for t in resp["topics"]:
                for p in t["partitions"]:
                    tp = TopicPartition(t["name"], p["partition_index"])
                    error = error_of(p["error_code"], None, f"partition {tp}")
                    out[tp] = error if error is not None else p["low_watermark"]
            return out

        outcome = await self.cluster.route_to_leaders(before, send, what="DeleteRecords")
        return _unwrap(outcome)

    async def describe_log_dirs(
        self,
        broker_ids: Sequence[int] | None = None,
        topics: Mapping[str, Sequence[int]] | None = None,
    ) -> dict[int, list[LogDirDescription]]:
        """Log directories of each broker (default: all) with the sizes of their replicas;
        `topics` (name -> partitions) narrows the replicas reported."""
        if broker_ids is None:
            await self.cluster.retry(lambda: self.cluster.refresh_metadata([]), what="Metadata")
            broker_ids = sorted(self.cluster.brokers)
        body = {
            "topics": None
            if topics is None
            else [{"topic": t, "partitions": list(ps)} for t, ps in topics.items()]
        }
        out: dict[int, list[LogDirDescription]] = {}
        for node_id in broker_ids:
            resp = await self.cluster.retry(
                lambda n=node_id: self.cluster.request_node(n, ApiKey.DESCRIBE_LOG_DIRS, body),
                what="DescribeLogDirs",
            )
            error = error_of(resp.get("error_code", 0), None, f"broker {node_id}")
            if error is not None:
                raise error
            dirs = []
            for r in resp["results"]:
                d = LogDirDescription(
                    r["log_dir"],
                    ErrorCode.of(r["error_code"]),
                    total_bytes=r.get("total_bytes", -1),
                    usable_bytes=r.get("usable_bytes", -1),
                )
                for t in r["topics"]:
                    for p in t["partitions"]:
                        d.replicas[TopicPartition(t["name"], p["partition_index"])] = (
                            ReplicaLogDirInfo(
                                p["partition_size"], p["offset_lag"], p["is_future_key"]
                            )
                        )
                dirs.append(d)
            out[node_id] = dirs
        return out

    async def alter_replica_log_dirs(
        self, moves: Mapping[tuple[TopicPartition, int], str]
    ) -> dict[tuple[TopicPartition, int], KafkaError | None]:
        """Move replicas, given as (partition, broker id), to a log dir of their broker
        (AlterReplicaLogDirs). Returns each one's error, None when the broker took it (the
        copy then runs in the background; describe_log_dirs shows its future replica).
        REPLICA_NOT_AVAILABLE: the broker does not host it yet, and will create it there."""
        by_broker: dict[int, dict[str, dict[str, list[int]]]] = {}
        for (tp, broker), path in moves.items():
            topics = by_broker.setdefault(broker, {}).setdefault(path, {})
            topics.setdefault(tp.topic, []).append(tp.partition)
        out: dict[tuple[TopicPartition, int], KafkaError | None] = {}
        for broker, dirs in by_broker.items():
            body = {
                "dirs": [
                    {"path": path,
                     "topics": [{"name": t, "partitions": ps} for t, ps in topics.items()]}
                    for path, topics in dirs.items()
                ]
            }  # fmt: skip
            resp = await self.cluster.retry(
                lambda b=broker, body=body: self.cluster.request_node(
                    b, ApiKey.ALTER_REPLICA_LOG_DIRS, body
                ),
                what="AlterReplicaLogDirs",
            )
            for t in resp["results"]:
                for p in t["partitions"]:
                    tp = TopicPartition(t["topic_name"], p["partition_index"])
                    out[(tp, broker)] = error_of(
                        p["error_code"], None, f"replica of {tp} on broker {broker}"
                    )
        return out

    # -- ACLs -----------------------------------------------------------------------------

    async def create_acls(self, bindings: Sequence[AclBinding]) -> None:
        """Create ACL bindings (CreateAcls); raises the first binding's error."""
        body = {"creations": [_acl_creation(b) for b in bindings]}
        resp = await self.cluster.retry(
            lambda: self._any_request(ApiKey.CREATE_ACLS, body, min_version=1),
            what="CreateAcls",
        )
        _raise_any(
            error_of(r["error_code"], r.get("error_message"), "CreateAcls") for r in resp["results"]
        )

    async def describe_acls(self, acl_filter: AclBindingFilter) -> list[AclBinding]:
        body = _acl_filter_body(acl_filter)
        resp = await self.cluster.retry(
            lambda: self._any_request(ApiKey.DESCRIBE_ACLS, body, min_version=1),
            what="DescribeAcls",
        )
        error = error_of(resp["error_code"], resp.get("error_message"), "DescribeAcls")
        if error is not None:
            raise error
        return [
            AclBinding(
                r["resource_type"],
                r["resource_name"],
                r["pattern_type"],
                a["principal"],
                a["host"],
                a["operation"],
                a["permission_type"],
            )  # fmt: skip
            for r in resp["resources"]
            for a in r["acls"]
        ]

    async def delete_acls(self, filters: Sequence[AclBindingFilter]) -> list[list[AclBinding]]:
        """Delete the bindings matching each filter; returns what each filter deleted."""
        body = {"filters": [_acl_filter_body(f) for f in filters]}
        resp = await self.cluster.retry(
            lambda: self._any_request(ApiKey.DELETE_ACLS, body, min_version=1),
            what="DeleteAcls",
        )
        out = []
        for r in resp["filter_results"]:
            error = error_of(r["error_code"], r.get("error_message"), "DeleteAcls")
            if error is not None:
                raise error
            out.append(
                [
                    AclBinding(
                        m["resource_type"],
                        m["resource_name"],
                        m["pattern_type"],
                        m["principal"],
                        m["host"],
                        m["operation"],
                        m["permission_type"],
                    )  # fmt: skip
                    for m in r["matching_acls"]
                ]
            )
        return out

    # -- partition reassignment (KIP-455) -----------------------------------------------

    async def alter_partition_reassignments(
        self, targets: Mapping[TopicPartition, Sequence[int] | None]
    ) -> dict[TopicPartition, KafkaError | None]:
        """Move each (topic, partition) to its target replicas (None cancels its reassignment);
        returns each partition's error, None where the controller accepted it."""
        by_topic: dict[str, list[dict]] = {}
        for (topic, partition), replicas in targets.items():
            by_topic.setdefault(topic, []).append(
                {
                    "partition_index": partition,
                    "replicas": None if replicas is None else list(replicas),
                }
            )
        body = {
            "timeout_ms": self._timeout_ms,
            "topics": [{"name": t, "partitions": ps} for t, ps in by_topic.items()],
        }
        results: dict[TopicPartition, KafkaError | None] = {}

        async def attempt() -> None:
            resp = await self._controller_request(
                ApiKey.ALTER_PARTITION_REASSIGNMENTS, body, "reassignment"
            )
            for t in resp["responses"]:
                for p in t["partitions"]:
                    where = f"partition {t['name']}-{p['partition_index']}"
                    results[TopicPartition(t["name"], p["partition_index"])] = error_of(
                        p["error_code"], p.get("error_message"), where
                    )

        await self.cluster.retry(attempt, what="AlterPartitionReassignments")
        self.cluster.mark_stale()
        return results

    async def list_partition_reassignments(
        self, partitions: Iterable[TopicPartition] | None = None
    ) -> dict[TopicPartition, PartitionReassignment]:
        """Reassignments in progress, of `partitions` or (None) of every topic."""
        topics: list[dict] | None = None
        if partitions is not None:
            wanted: dict[str, list[int]] = {}
            for topic, partition in partitions:
                wanted.setdefault(topic, []).append(partition)
            topics = [{"name": t, "partition_indexes": ps} for t, ps in wanted.items()]
        body = {"timeout_ms": self._timeout_ms, "topics": topics}

        resp = await self.cluster.retry(
            lambda: self._controller_request(
                ApiKey.LIST_PARTITION_REASSIGNMENTS, body, "reassignments"
            ),
            what="ListPartitionReassignments",
        )
        return {
            TopicPartition(t["name"], p["partition_index"]): PartitionReassignment(
                list(p["replicas"]), list(p["adding_replicas"]), list(p["removing_replicas"])
            )
            for t in resp["topics"]
            for p in t["partitions"]
        }

    async def _controller_request(self, api_key: int, body: dict, what: str) -> dict:
        """A request to the controller whose top-level error is raised (NOT_CONTROLLER also
        marks the metadata stale, so a retry finds the new controller)."""
        resp = await self.cluster.request_controller(api_key, body)
        error = error_of(resp["error_code"], resp.get("error_message"), what)
        if error is not None:
            if error.code == ErrorCode.NOT_CONTROLLER:
                self.cluster.mark_stale()
            raise error
        return resp

    async def _any_request(self, api_key: int, body: dict, *, min_version: int = 0) -> dict:
        conn = await self.cluster.any_connection()
        return await conn.request(api_key, body, min_version=min_version)

    # -- SCRAM credentials ----------------------------------------------------------------

    async def describe_user_scram_credentials(
        self, users: Sequence[str] | None = None
    ) -> dict[str, list[ScramCredentialInfo]]:
        """Mechanisms and iterations per user (all users with credentials when `users` is
        None). Raises RESOURCE_NOT_FOUND for a named user without credentials."""
        body = {"users": None if users is None else [{"name": u} for u in users]}
        resp = await self.cluster.retry(
            lambda: self._any_request(ApiKey.DESCRIBE_USER_SCRAM_CREDENTIALS, body),
            what="DescribeUserScramCredentials",
        )
        error = error_of(resp["error_code"], resp.get("error_message"), "DescribeUserScram")
        if error is not None:
            raise error
        out = {}
        for r in resp["results"]:
            error = error_of(r["error_code"], r.get("error_message"), f"user {r['user']!r}")
            if error is not None:
                raise error
            out[r["user"]] = [
                ScramCredentialInfo(c["mechanism"], c["iterations"]) for c in r["credential_infos"]
            ]
        return out

    async def alter_user_scram_credentials(
        self,
        upsertions: Sequence[ScramUpsertion] = (),
        deletions: Sequence[tuple[str, int]] = (),
    ) -> None:
        """Create or replace credentials (the password is salted and hashed here; only the
        salted password travels) and delete (user, mechanism) pairs. Sent to the controller."""
        body = {
            "deletions": [{"name": u, "mechanism": m} for u, m in deletions],
            "upsertions": [u.to_body() for u in upsertions],
        }

        async def attempt() -> dict:
            conn = await self.cluster.controller_connection()
            return await conn.request(ApiKey.ALTER_USER_SCRAM_CREDENTIALS, body)

        resp = await self.cluster.retry(attempt, what="AlterUserScramCredentials")
        _raise_any(
            error_of(r["error_code"], r.get("error_message"), f"user {r['user']!r}")
            for r in resp["results"]
        )

    # -- client quotas --------------------------------------------------------------------

    async def describe_client_quotas(
        self,
        components: Sequence[tuple[str, int, str | None]] = (),
        *,
        strict: bool = False,
    ) -> dict[tuple[tuple[str, str | None], ...], dict[str, float]]:
        """Quotas by entity. `components`: (entity type, QuotaMatchType, name); entities are
        sorted tuples of (type, name), name None for a default entity."""
        body = {
            "components": [
                {"entity_type": t, "match_type": m, "match": n} for t, m, n in components
            ],
            "strict": strict,
        }
        resp = await self.cluster.retry(
            lambda: self._any_request(ApiKey.DESCRIBE_CLIENT_QUOTAS, body),
            what="DescribeClientQuotas",
        )
        error = error_of(resp["error_code"], resp.get("error_message"), "DescribeClientQuotas")
        if error is not None:
            raise error
        return {
            tuple(sorted((e["entity_type"], e["entity_name"]) for e in entry["entity"])): {
                v["key"]: v["value"] for v in entry["values"]
            }
            for entry in resp["entries"] or []
        }

    async def alter_client_quotas(
        self,
        alterations: Mapping[tuple[tuple[str, str | None], ...], Mapping[str, float | None]],
        *,
        validate_only: bool = False,
    ) -> None:
        """Set quota values (None removes a key) per entity, e.g.
        `{(("client-id", "app"),): {"producer_byte_rate": 1048576}}`."""
        body = {
            "entries": [
                {
                    "entity": [{"entity_type": t, "entity_name": n} for t, n in entity],
                    "ops": [
                        {"key": k, "value": 0.0 if v is None else float(v), "remove": v is None}
                        for k, v in ops.items()
                    ],
                }
                for entity, ops in alterations.items()
            ],
            "validate_only": validate_only,
        }
        resp = await self.cluster.retry(
            lambda: self._any_request(ApiKey.ALTER_CLIENT_QUOTAS, body),
            what="AlterClientQuotas",
        )
        _raise_any(
            error_of(r["error_code"], r.get("error_message"), "AlterClientQuotas")
            for r in resp["entries"]
        )

    # -- consumer groups ------------------------------------------------------------------

    async def find_group_coordinator(self, group_id: str) -> int:
        """Node id of the group's coordinator (retried while none is available yet)."""
        return await self._find_coordinator(group_id, 0, f"group {group_id!r}")

    async def find_transaction_coordinator(self, transactional_id: str) -> int:
        """Node id of the transactional id's coordinator (retried while none is available)."""
        return await self._find_coordinator(
            transactional_id, 1, f"transactional id {transactional_id!r}"
        )

    async def _find_coordinator(self, key: str, key_type: int, what: str) -> int:
        async def attempt() -> int:
            conn = await self.cluster.any_connection()
            version = conn.version_for(ApiKey.FIND_COORDINATOR, min_version=1 if key_type else 0)
            if version >= 4:
                body = {"key_type": key_type, "coordinator_keys": [key]}
                result = (await conn.request(ApiKey.FIND_COORDINATOR, body, version))[
                    "coordinators"
                ][0]
            else:
                body = {"key": key, "key_type": key_type}
                result = await conn.request(ApiKey.FIND_COORDINATOR, body, version)
            error = error_of(result["error_code"], result.get("error_message"), what)
            if error is not None:
                raise error
            if result["node_id"] not in self.cluster.brokers:
                await self.cluster.refresh_metadata([])
            return result["node_id"]

        return await self.cluster.retry(attempt, what="FindCoordinator")

    async def _group_request(self, group_id: str, api_key: int, body: dict, what: str) -> dict:
        """Send to the group's coordinator, finding it again when it moved or was loading."""

        async def attempt() -> dict:
            node = await self.find_group_coordinator(group_id)
            resp = await self.cluster.request_node(node, api_key, body)
            code = _group_error_code(resp)
            if code in _COORDINATOR_ERRORS:
                raise KafkaError(code, f"group {group_id!r}")
            return resp

        return await self.cluster.retry(attempt, what=what)

    async def list_groups(self, states: Sequence[str] | None = None) -> list[GroupListing]:
        """Groups of every broker's coordinator, optionally only those in `states`."""
        await self.cluster.retry(lambda: self.cluster.refresh_metadata([]), what="Metadata")
        found: dict[str, GroupListing] = {}
        for node_id in sorted(self.cluster.brokers):

            async def attempt(n: int = node_id) -> dict:
                conn = await self.cluster.connection(n)
                version = conn.version_for(ApiKey.LIST_GROUPS, min_version=4 if states else 0)
                resp = await conn.request(
                    ApiKey.LIST_GROUPS, {"states_filter": list(states or []), "types_filter": []},
                    version,
                )  # fmt: skip
                error = error_of(resp["error_code"], None, f"ListGroups on broker {n}")
                if error is not None:
                    raise error
                return resp

            resp = await self.cluster.retry(attempt, what="ListGroups")
            for g in resp["groups"]:
                found[g["group_id"]] = GroupListing(
                    g["group_id"], g["protocol_type"], g.get("group_state", "")
                )
        return [found[g] for g in sorted(found)]

    async def describe_groups(self, group_ids: Sequence[str]) -> dict[str, GroupDescription]:
        """State, protocol and members (with their decoded assignments) of each group."""
        out: dict[str, GroupDescription] = {}
        for group_id in dict.fromkeys(group_ids):
            resp = await self._group_request(
                group_id,
                ApiKey.DESCRIBE_GROUPS,
                {"groups": [group_id], "include_authorized_operations": False},
                "DescribeGroups",
            )
            (g,) = resp["groups"]
            error = error_of(g["error_code"], None, f"group {group_id!r}")
            if error is not None:
                raise error
            consumer = g["protocol_type"] == "consumer"
            members = [
                GroupMember(
                    m["member_id"],
                    m.get("group_instance_id"),
                    m["client_id"],
                    m["client_host"],
                    parse_consumer_assignment(m["member_assignment"]) if consumer else [],
                )
                for m in g["members"]
            ]
            out[group_id] = GroupDescription(
                group_id, g["group_state"], g["protocol_type"], g["protocol_data"], members
            )
        return out

    async def delete_groups(
        self, group_ids: Sequence[str], *, raise_errors: bool = True
    ) -> dict[str, KafkaError | None]:
        """Delete empty groups and their committed offsets."""
        out: dict[str, KafkaError | None] = {}
        for group_id in dict.fromkeys(group_ids):
            resp = await self._group_request(
                group_id, ApiKey.DELETE_GROUPS, {"groups_names": [group_id]}, "DeleteGroups"
            )
            (r,) = resp["results"]
            out[group_id] = error_of(r["error_code"], None, f"group {group_id!r}")
        if raise_errors:
            _raise_any(out.values())
        return out

    # -- transactions ---------------------------------------------------------------------

    async def list_transactions(
        self,
        states: Sequence[str] | None = None,
        producer_ids: Sequence[int] | None = None,
        min_duration_ms: int = -1,
    ) -> list[TransactionListing]:
        """The transactional ids every broker coordinates, optionally only those in `states`,
        of `producer_ids`, or open longer than `min_duration_ms`."""
        await self.cluster.retry(lambda: self.cluster.refresh_metadata([]), what="Metadata")
        found: list[TransactionListing] = []
        for node_id in sorted(self.cluster.brokers):

            async def attempt(n: int = node_id) -> dict:
                conn = await self.cluster.connection(n)
                version = conn.version_for(
                    ApiKey.LIST_TRANSACTIONS, min_version=1 if min_duration_ms >= 0 else 0
                )
                body = {
                    "state_filters": list(states or []),
                    "producer_id_filters": list(producer_ids or []),
                    "duration_filter": min_duration_ms,
                }
                resp = await conn.request(ApiKey.LIST_TRANSACTIONS, body, version)
                error = error_of(resp["error_code"], None, f"ListTransactions on broker {n}")
                if error is not None:
                    raise error
                return resp

            resp = await self.cluster.retry(attempt, what="ListTransactions")
            for t in resp["transaction_states"]:
                found.append(
                    TransactionListing(
                        t["transactional_id"], t["producer_id"], t["transaction_state"], node_id
                    )
                )
        return sorted(found, key=lambda t: t.transactional_id)

    async def describe_transactions(
        self, transactional_ids: Sequence[str]
    ) -> dict[str, TransactionDescription]:
        """State, producer, timeout and partitions of each transactional id, from its
        coordinator."""
        out: dict[str, TransactionDescription] = {}
        for txn_id in dict.fromkeys(transactional_ids):

            async def attempt(txn_id: str = txn_id) -> TransactionDescription:
                node = await self.find_transaction_coordinator(txn_id)
                resp = await self.cluster.request_node(
                    node, ApiKey.DESCRIBE_TRANSACTIONS, {"transactional_ids": [txn_id]}
                )
                (t,) = resp["transaction_states"]
                error = error_of(t["error_code"], None, f"transactional id {txn_id!r}")
                if error is not None:
                    raise error
                return TransactionDescription(
                    txn_id,
                    node,
                    t["transaction_state"],
                    t["producer_id"],
                    t["producer_epoch"],
                    t["transaction_timeout_ms"],
                    t["transaction_start_time_ms"],
                    sorted(
                        TopicPartition(topic["topic"], p)
                        for topic in t["topics"]
                        for p in topic["partitions"]
                    ),
                )

            out[txn_id] = await self.cluster.retry(attempt, what="DescribeTransactions")
        return out

    async def list_consumer_group_offsets(
        self, group_id: str, partitions: Sequence[TopicPartition] | None = None
    ) -> dict[TopicPartition, CommittedOffset]:
        """Committed offsets of a group (all of them when `partitions` is None)."""
        topics: dict[str, list[int]] = {}
        for tp in partitions or []:
            topics.setdefault(tp.topic, []).append(tp.partition)
        body = {
            "group_id": group_id,
            "topics": None
            if partitions is None
            else [{"name": t, "partition_indexes": ps} for t, ps in topics.items()],
            "groups": [
                {
                    "group_id": group_id,
                    "topics": None
                    if partitions is None
                    else [{"name": t, "partition_indexes": ps} for t, ps in topics.items()],
                }
            ],
            "require_stable": False,
        }
        resp = await self._group_request(group_id, ApiKey.OFFSET_FETCH, body, "OffsetFetch")
        result = resp["groups"][0] if "groups" in resp and resp["groups"] else resp
        error = error_of(result.get("error_code", 0), None, f"group {group_id!r}")
        if error is not None:
            raise error
        out: dict[TopicPartition, CommittedOffset] = {}
        for t in result["topics"]:
            for p in t["partitions"]:
                tp = TopicPartition(t["name"], p["partition_index"])
                error = error_of(p["error_code"], None, f"group {group_id!r} partition {tp}")
                if error is not None:
                    raise error
                out[tp] = CommittedOffset(
                    p["committed_offset"], p.get("committed_leader_epoch", -1), p["metadata"]
                )
        return out


def _node_key(node: BrokerNode) -> int:
    return node.node_id


def _unwrap(
    outcome: Mapping[TopicPartition, ResultT | KafkaError],
) -> dict[TopicPartition, ResultT]:
    out: dict[TopicPartition, ResultT] = {}
    for tp, r in outcome.items():
        if isinstance(r, KafkaError):
            raise r
        out[tp] = r
    return out


def _new_topic_body(t: NewTopic) -> dict:
    if t.assignments:
        assignments = [
            {"partition_index": p, "broker_ids": list(ids)}
            for p, ids in sorted(t.assignments.items())
        ]
        num_partitions, replication_factor = -1, -1
    else:
        assignments, num_partitions, replication_factor = (
            [],
            t.num_partitions,
            t.replication_factor,
        )
    return {
        "name": t.name,
        "num_partitions": num_partitions,
        "replication_factor": replication_factor,
        "assignments": assignments,
        "configs": [{"name": k, "value": v} for k, v in t.configs.items()],
    }


async def list_offsets_request(
    conn: BrokerConnection,
    part: Mapping[TopicPartition, int],
    isolation_level: int = 0,
    min_version: int = 0,
) -> dict[TopicPartition, ListedOffset | KafkaError]:
    """One ListOffsets request to a leader; per-partition results or errors."""
    version = conn.version_for(ApiKey.LIST_OFFSETS, min_version=min_version)
    topics: dict[str, list[dict]] = {}
    for tp, ts in part.items():
        topics.setdefault(tp.topic, []).append(
            {"partition_index": tp.partition, "timestamp": int(ts), "max_num_offsets": 1}
        )
    body = {
        "replica_id": -1,
        "isolation_level": isolation_level,
        "topics": [{"name": n, "partitions": ps} for n, ps in topics.items()],
    }
    resp = await conn.request(ApiKey.LIST_OFFSETS, body, version)
    out: dict[TopicPartition, ListedOffset | KafkaError] = {}
    for t in resp["topics"]:
        for p in t["partitions"]:
            tp = TopicPartition(t["name"], p["partition_index"])
            error = error_of(p["error_code"], None, f"partition {tp}")
            if error is not None:
                out[tp] = error
            elif version == 0:
                olds = p["old_style_offsets"]
                out[tp] = ListedOffset(olds[0] if olds else -1)
            else:
                out[tp] = ListedOffset(p["offset"], p["timestamp"], p["leader_epoch"])
    return out


# -- ACL, SCRAM and quota types (wire values as Kafka's) --------------------------------------


@dataclass(frozen=True)
class AclBinding:
    resource_type: int
    name: str
    pattern_type: int
    principal: str
    host: str
    operation: int
    permission: int


@dataclass(frozen=True)
class AclBindingFilter:
    """None matches any name, principal or host."""

    resource_type: int = AclResourceType.ANY
    name: str | None = None
    pattern_type: int = AclPatternType.ANY
    principal: str | None = None
    host: str | None = None
    operation: int = AclOperation.ANY
    permission: int = AclPermissionType.ANY


def _acl_creation(b: AclBinding) -> dict:
    return {
        "resource_type": int(b.resource_type), "resource_name": b.name,
        "resource_pattern_type": int(b.pattern_type), "principal": b.principal,
        "host": b.host, "operation": int(b.operation), "permission_type": int(b.permission),
    }  # fmt: skip


def _acl_filter_body(f: AclBindingFilter) -> dict:
    return {
        "resource_type_filter": int(f.resource_type), "resource_name_filter": f.name,
        "pattern_type_filter": int(f.pattern_type), "principal_filter": f.principal,
        "host_filter": f.host, "operation": int(f.operation),
        "permission_type": int(f.permission),
    }  # fmt: skip


class ScramMechanism(IntEnum):
    SCRAM_SHA_256 = 1
    SCRAM_SHA_512 = 2


@dataclass(frozen=True)
class ScramCredentialInfo:
    mechanism: int
    iterations: int


@dataclass(frozen=True)
class ScramUpsertion:
    """A user's password for one mechanism; salted and hashed on the client (RFC 5802 Hi)."""

    user: str
    mechanism: int
    password: str
    iterations: int = 4096
    salt: bytes = field(default_factory=lambda: os.urandom(32))

    def to_body(self) -> dict:
        digest = {1: "sha256", 2: "sha512"}.get(int(self.mechanism), "sha256")
        salted = hashlib.pbkdf2_hmac(digest, self.password.encode(), self.salt, self.iterations)
        return {
            "name": self.user, "mechanism": int(self.mechanism), "iterations": self.iterations,
            "salt": self.salt, "salted_password": salted,
        }  # fmt: skip


def _raise_any(errors: Iterable[KafkaError | None]) -> None:
    for error in errors:
        if error is not None:
            raise error


class QuotaMatchType(IntEnum):
    EXACT = 0
    DEFAULT = 1
    SPECIFIED = 2


# -- consumer groups ---------------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class GroupListing:
    group_id: str
    protocol_type: str  # "consumer" for consumer groups, "" for commit-only groups
    state: str  # "" from brokers without ListGroups v4


@dataclass(slots=True)
class GroupMember:
    member_id: str
    group_instance_id: str | None
    client_id: str
    client_host: str
    assignment: list[TopicPartition]


@dataclass(slots=True)
class GroupDescription:
    group_id: str
    state: str
    protocol_type: str
    protocol: str
    members: list[GroupMember]


@dataclass(frozen=True, slots=True)
class CommittedOffset:
    offset: int  # -1: nothing committed
    leader_epoch: int = -1
    metadata: str | None = ""


# -- transactions ------------------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class TransactionListing:
    transactional_id: str
    producer_id: int
    state: str
    coordinator: int


@dataclass(slots=True)
class TransactionDescription:
    transactional_id: str
    coordinator: int
    state: str
    producer_id: int
    producer_epoch: int
    timeout_ms: int
    start_time_ms: int  # -1: no transaction started yet
    partitions: list[TopicPartition]


# Coordinator moved, not there yet, or still loading: find it again and retry.
_COORDINATOR_ERRORS = frozenset(
    {
        ErrorCode.NOT_COORDINATOR,
        ErrorCode.COORDINATOR_NOT_AVAILABLE,
        ErrorCode.COORDINATOR_LOAD_IN_PROGRESS,
    }
)


def _group_error_code(resp: dict) -> int:
    """The coordinator-level error of a group response (first group / top level)."""
    if resp.get("groups"):
        return resp["groups"][0].get("error_code", 0)
    if resp.get("results"):
        return resp["results"][0].get("error_code", 0)
    return resp.get("error_code", 0)


def parse_consumer_assignment(data: bytes | memoryview | None) -> list[TopicPartition]:
    """Partitions of a ConsumerProtocolAssignment (any version begins with them); [] when
    empty or unreadable."""
    if not data or len(data) < 6:
        return []
    buf = bytes(data)
    out: list[TopicPartition] = []
    try:
        pos = 2
        (n_topics,) = struct.unpack_from(">i", buf, pos)
        pos += 4
        for _ in range(max(n_topics, 0)):
            (n,) = struct.unpack_from(">h", buf, pos)
            pos += 2
            topic = buf[pos : pos + n].decode()
            pos += n
            (n_parts,) = struct.unpack_from(">i", buf, pos)
            pos += 4
            parts = struct.unpack_from(f">{max(n_parts, 0)}i", buf, pos)
            pos += 4 * max(n_parts, 0)
            out.extend(TopicPartition(topic, p) for p in parts)
    except (struct.error, UnicodeDecodeError):
        return []
    return out
