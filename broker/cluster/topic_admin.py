"""Admin operations behind CreateTopics, DeleteTopics, CreatePartitions, (Incremental)AlterConfigs
and DescribeConfigs, with Kafka's validation order, error codes and messages.

These only write znodes (as Kafka's AdminZkClient does); the controller reacts to them. A
handler that must wait for the result (CreateTopics waits for leaders, DeleteTopics for the
topic to disappear) waits on the MetadataCache. Every method raises `KafkaError` for a per-topic
or per-resource error, which the handler puts into that entry of its response.
"""

from __future__ import annotations

import logging
import random
import uuid
from collections.abc import Callable, Mapping, Sequence
from concurrent.futures import Executor
from dataclasses import dataclass

from ..config import (
    TOPIC_CONFIGS,
    BrokerConfig,
    ConfigEntry,
    ConfigError,
    UnknownConfigError,
    default_string,
    list_config_type,
    validate_dynamic_broker_configs,
    validate_topic_configs,
)
from ..protocol.config_types import AlterConfigOpType as AlterOp
from ..protocol.config_types import ResourceType
from ..protocol.errors import ErrorCode, KafkaError
from . import zk_data as zk
from .kafka_zk import KafkaZk
from .metadata_store import NodeExistsError, StoreCalls
from .replica_placement import assign_replicas, check_assignment
from .topic_names import (
    CLUSTER_METADATA_TOPIC,
    collides,
    could_exist,
    has_collision_chars,
    validate_topic_name,
)

log = logging.getLogger(__name__)

# Called with the number of partitions a change creates or deletes, right before it is made;
# raises a KafkaError to refuse it (the server's controller-mutation quota).
Admit = Callable[[int], None]


@dataclass(frozen=True)
class AlterConfigOp:
    name: str
    op: AlterOp
    value: str | None = None


@dataclass(frozen=True)
class CreatedTopic:
    """CreateTopics result data (v5+ fields: partitions, replication factor, configs)."""

    name: str
    topic_id: uuid.UUID  # zero when validate_only
    num_partitions: int
    replication_factor: int
    assignment: dict[int, tuple[int, ...]]
    configs: list[ConfigEntry]


def _resource(rtype: ResourceType, name: str) -> str:
    return f"ConfigResource(type={rtype.name}, name='{name}')"


def _config_error(rtype: ResourceType, name: str, e: ConfigError) -> KafkaError:
    if isinstance(e, UnknownConfigError):
        return _refused(rtype, name, str(e))
    return _refused(rtype, name, f"Invalid config value for resource {_resource(rtype, name)}: {e}")


def _refused(rtype: ResourceType, name: str, message: str) -> KafkaError:
    """INVALID_CONFIG for a config the broker will not take, with a log line saying which."""
    log.info("refused a config of %s %r: %s", rtype.name.lower(), name, message)
    return KafkaError(ErrorCode.INVALID_CONFIG, message)


class TopicAdmin:
    """Admin operations on one cluster, as seen from broker `config.broker_id`."""

    def __init__(
        self,
        zk_client: KafkaZk,
        config: BrokerConfig,
        *,
        executor: Executor | None = None,
        rng: random.Random | None = None,
    ) -> None:
        self.zk = zk_client
        self.config = config
        self._io = StoreCalls(executor, "topic-admin")
        self._rng = rng or random.Random()

    def _broker_racks(self) -> dict[int, str | None]:
        """Every registered broker and its `broker.rack` (None when unset)."""
        return {b: reg.rack for b, reg in self.zk.get_all_brokers().items()}

    # -- topics

    async def create_topic(
        self,
        name: str,
        num_partitions: int = -1,
        replication_factor: int = -1,
        assignments: Mapping[int, Sequence[int]] | None = None,
        configs: Mapping[str, str | None] | None = None,
        validate_only: bool = False,
        admit: Admit | None = None,
    ) -> CreatedTopic:
        """CreateTopics for one topic. -1 partitions / replication factor take the broker
        defaults (num.partitions, default.replication.factor)."""
        return await self._io(
            self._create_topic, name, num_partitions, replication_factor, assignments,
            configs or {}, validate_only, admit,
        )  # fmt: skip

    def _create_topic(
        self,
        name: str,
        num_partitions: int,
        replication_factor: int,
        assignments: Mapping[int, Sequence[int]] | None,
        configs: Mapping[str, str | None],
        validate_only: bool,
        admit: Admit | None,
    ) -> CreatedTopic:
        if name == CLUSTER_METADATA_TOPIC:
            raise KafkaError(ErrorCode.TOPIC_AUTHORIZATION_FAILED, "Authorization failed.")
        validate_topic_name(name)  # before any lookup: an illegal name is no valid znode name
        if self.zk.topic_exists(name):
            raise KafkaError(ErrorCode.TOPIC_ALREADY_EXISTS, f"Topic '{name}' already exists.")
        nulls = [k for k, v in configs.items() if v is None]
        if nulls:
            raise KafkaError(
                ErrorCode.INVALID_CONFIG,
                f"Null value not supported for topic configs: {','.join(nulls)}",
            )
        if (num_partitions != -1 or replication_factor != -1) and assignments:
            raise KafkaError(
                ErrorCode.INVALID_REQUEST,
                "Both numPartitions or replicationFactor and replicasAssignments were set. "
                "Both cannot be used at the same time.",
            )
        if assignments:
            assignment = {int(p): tuple(r) for p, r in assignments.items()}
        else:
            partitions = self.config.num_partitions if num_partitions == -1 else num_partitions
            rf = (
                self.config.default_replication_factor
                if replication_factor == -1
                else replication_factor
            )
            racks = self._broker_racks()
            assignment = assign_replicas(list(racks), partitions, rf, racks=racks, rng=self._rng)
        # AdminZkClient.validateTopicCreate
        validate_topic_name(name)
        if self.zk.is_topic_marked_for_deletion(name):
            raise KafkaError(
                ErrorCode.TOPIC_ALREADY_EXISTS, f"Topic '{name}' is marked for deletion."
            )
        if has_collision_chars(name):
            existing = self.zk.get_all_topics()
            if name in existing:
                raise KafkaError(ErrorCode.TOPIC_ALREADY_EXISTS, f"Topic '{name}' already exists.")
            colliding = [t for t in existing if collides(name, t)]
            if colliding:
                raise KafkaError(
                    ErrorCode.INVALID_TOPIC_EXCEPTION,
                    f"Topic '{name}' collides with existing topics: {', '.join(colliding)}",
                )
        check_assignment(assignment)
        props: dict[str, str] = {k: v for k, v in configs.items() if v is not None}
        try:
            validate_topic_configs(props, self.config)
        except ConfigError as e:
            raise _refused(ResourceType.TOPIC, name, str(e)) from None
        topic_id = zk.ZERO_UUID
        if not validate_only:
            if admit is not None:
                admit(len(assignment))
            topic_id = zk.new_uuid()
            self.zk.set_entity_config(zk.TOPICS, name, props)
            try:
                self.zk.create_topic_assignment(name, topic_id, assignment)
            except NodeExistsError:
                raise KafkaError(
                    ErrorCode.TOPIC_ALREADY_EXISTS, f"Topic '{name}' already exists."
                ) from None
            log.info("Created topic %s (%d partitions) %s", name, len(assignment), props or "")
        return CreatedTopic(
            name=name,
            topic_id=topic_id,
            num_partitions=len(assignment),
            replication_factor=len(assignment[0]),
            assignment=assignment,
            configs=self.config.describe_topic(props),
        )

    async def delete_topic(self, name: str, admit: Admit | None = None) -> None:
        """Mark a topic for deletion (the controller completes it). Marking twice is fine.
        TOPIC_DELETION_DISABLED when delete.topic.enable=false (DeleteTopics v0-2 answer
        INVALID_REQUEST instead, as Kafka)."""
        await self._io(self._delete_topic, name, admit)

    def _delete_topic(self, name: str, admit: Admit | None) -> None:
        if not self.config.delete_topic_enable:
            raise KafkaError(ErrorCode.TOPIC_DELETION_DISABLED)
        found = self.zk.get_topic_assignment(name) if could_exist(name) else None
        if found is None:
            raise KafkaError(ErrorCode.UNKNOWN_TOPIC_OR_PARTITION)
        if admit is not None:
            admit(len(found[0].partitions))
        if self.zk.mark_topic_for_deletion(name):
            log.info("Topic %s marked for deletion", name)

    async def create_partitions(
        self,
        name: str,
        count: int,
        assignments: Sequence[Sequence[int]] | None = None,
        validate_only: bool = False,
        admit: Admit | None = None,
    ) -> dict[int, tuple[int, ...]]:
        """Grow a topic to `count` partitions; returns the full new assignment."""
        return await self._io(
            self._create_partitions, name, count, assignments, validate_only, admit
        )

    def _create_partitions(
        self,
        name: str,
        count: int,
        assignments: Sequence[Sequence[int]] | None,
        validate_only: bool,
        admit: Admit | None,
    ) -> dict[int, tuple[int, ...]]:
        if not could_exist(name):
            raise KafkaError(
                ErrorCode.UNKNOWN_TOPIC_OR_PARTITION, f"The topic '{name}' does not exist."
            )
        if self.zk.is_topic_marked_for_deletion(name):
            raise KafkaError(ErrorCode.INVALID_TOPIC_EXCEPTION, "The topic is queued for deletion.")
        found = self.zk.get_topic_assignment(name)
        if found is None or not found[0].partitions:
            raise KafkaError(
                ErrorCode.UNKNOWN_TOPIC_OR_PARTITION, f"The topic '{name}' does not exist."
            )
        current, _version = found
        if any(a.being_reassigned for a in current.partitions.values()):
            raise KafkaError(
                ErrorCode.REASSIGNMENT_IN_PROGRESS,
                f"A partition reassignment is in progress for the topic '{name}'.",
            )
        old = len(current.partitions)
        increase = count - old
        if increase < 0:
            raise KafkaError(
                ErrorCode.INVALID_PARTITIONS,
                f"Topic currently has {old} partitions, which is higher than the requested {count}.",
            )
        if increase == 0:
            raise KafkaError(ErrorCode.INVALID_PARTITIONS, f"Topic already has {old} partitions.")
        racks = self._broker_racks()
        brokers = list(racks)
        first = current.partitions[0].replicas
        rf = len(first)
        if assignments is not None:
            unknown = sorted({b for r in assignments for b in r} - set(brokers))
            if unknown:
                raise KafkaError(
                    ErrorCode.INVALID_REPLICA_ASSIGNMENT,
                    f"Unknown broker(s) in replica assignment: {', '.join(map(str, unknown))}.",
                )
            if len(assignments) != increase:
                raise KafkaError(
                    ErrorCode.INVALID_REPLICA_ASSIGNMENT,
                    f"Increasing the number of partitions by {increase} but "
                    f"{len(assignments)} assignments provided.",
                )
            added = {old + i: tuple(r) for i, r in enumerate(assignments)}
            for p, replicas in added.items():
                if not replicas:
                    raise KafkaError(
                        ErrorCode.INVALID_REPLICA_ASSIGNMENT,
                        f"Cannot have replication factor of 0 for partition id {p}.",
                    )
                if len(set(replicas)) != len(replicas):
                    raise KafkaError(
                        ErrorCode.INVALID_REPLICA_ASSIGNMENT,
                        f"Duplicate brokers not allowed in replica assignment: "
                        f"{', '.join(map(str, replicas))} for partition id {p}.",
                    )
            bad = {p: r for p, r in added.items() if len(r) != rf}
            if bad:
                raise KafkaError(
                    ErrorCode.INVALID_REPLICA_ASSIGNMENT,
                    f"Inconsistent replication factor between partitions, partition 0 has {rf} "
                    f"while partitions [{', '.join(map(str, bad))}] have replication factors "
                    f"[{', '.join(str(len(r)) for r in bad.values())}], respectively.",
                )
        else:
            # Kafka starts at the first broker (by id) not below partition 0's leader.
            start = next((i for i, b in enumerate(sorted(brokers)) if b >= first[0]), 0)
            added = assign_replicas(
                brokers,
                increase,
                rf,
                racks=racks,
                start_index=start,
                start_partition=old,
                rng=self._rng,
            )
        full = {p: a.replicas for p, a in current.partitions.items()}
        full.update(added)
        if not validate_only:
            if admit is not None:
                admit(len(added))
            merged = {
                **current.partitions,
                **{p: zk.ReplicaAssignment(r) for p, r in added.items()},
            }
            self.zk.set_topic_assignment(name, current.topic_id, merged)
            log.info("Topic %s: partitions %d -> %d", name, old, count)
        return full

    # -- configs

    async def topic_overrides(self, topic: str) -> dict[str, str]:
        return await self._io(self.zk.get_entity_config, zk.TOPICS, topic)

    async def alter_configs(
        self,
        resource_type: ResourceType | int,
        resource_name: str,
        configs: Mapping[str, str | None],
        validate_only: bool = False,
    ) -> None:
        """Legacy AlterConfigs: the given entries replace every override of the resource."""
        props = {k: v for k, v in configs.items() if v is not None}
        await self._io(
            self._alter, ResourceType(resource_type), resource_name, props, validate_only
        )

    async def incremental_alter_configs(
        self,
        resource_type: ResourceType | int,
        resource_name: str,
        ops: Sequence[AlterConfigOp],
        validate_only: bool = False,
    ) -> None:
        """IncrementalAlterConfigs: SET/DELETE any key, APPEND/SUBTRACT list-typed keys."""
        await self._io(
            self._incremental, ResourceType(resource_type), resource_name, list(ops), validate_only
        )

    def _incremental(
        self, rtype: ResourceType, name: str, ops: list[AlterConfigOp], validate_only: bool
    ) -> None:
        names = [op.name for op in ops]
        if len(set(names)) != len(names):
            raise KafkaError(ErrorCode.INVALID_REQUEST, "Error due to duplicate config keys")
        if rtype is ResourceType.TOPIC:
            if not name:
                raise KafkaError(
                    ErrorCode.INVALID_REQUEST, "Default topic resources are not allowed."
                )
            if not could_exist(name):
                raise KafkaError(
                    ErrorCode.UNKNOWN_TOPIC_OR_PARTITION, f"The topic '{name}' does not exist."
                )
            current = self.zk.get_entity_config(zk.TOPICS, name)
        elif rtype is ResourceType.BROKER:
            current = self.zk.get_entity_config(zk.BROKERS_ENTITY, self._broker_entity(name))
        else:
            raise KafkaError(
                ErrorCode.INVALID_REQUEST,
                f"AlterConfigs is only supported for topics and brokers, but resource type is "
                f"{rtype.name}",
            )
        topic = rtype is ResourceType.TOPIC
        props = dict(current)
        for op in ops:
            if op.op is AlterOp.SET:
                if op.value is None:
                    raise KafkaError(
                        ErrorCode.INVALID_REQUEST, f"Null value not supported for : {op.name}"
                    )
                props[op.name] = op.value
            elif op.op is AlterOp.DELETE:
                props.pop(op.name, None)
            else:
                verb = "append" if op.op is AlterOp.APPEND else "subtract"
                if topic and op.name not in TOPIC_CONFIGS:
                    raise _refused(rtype, name, f"Unknown topic config name: {op.name}")
                if not list_config_type(op.name, topic=topic):
                    raise KafkaError(
                        ErrorCode.INVALID_REQUEST,
                        f"Config value {verb} is not allowed for config key: {op.name}",
                    )
                base = props.get(op.name)
                if base is None:
                    base = default_string(op.name, topic=topic) or ""
                old = base.split(",") if base else []
                given = (op.value or "").split(",")
                if op.op is AlterOp.APPEND:
                    merged = list(dict.fromkeys(old + given))
                else:
                    merged = [v for v in old if v not in given]
                props[op.name] = ",".join(merged)
        self._alter(rtype, name, props, validate_only)

    def _alter(
        self, rtype: ResourceType, name: str, props: dict[str, str], validate_only: bool
    ) -> None:
        if rtype is ResourceType.TOPIC:
            if not name:
                raise KafkaError(
                    ErrorCode.INVALID_REQUEST, "Default topic resources are not allowed."
                )
            if not could_exist(name) or not self.zk.topic_exists(name):
                raise KafkaError(
                    ErrorCode.UNKNOWN_TOPIC_OR_PARTITION, f"The topic '{name}' does not exist."
                )
            try:
                validate_topic_configs(props, self.config)
            except ConfigError as e:
                raise _config_error(rtype, name, e) from None
            if not validate_only:
                self.zk.change_entity_config(zk.TOPICS, name, props)
                log.info("Topic %s configuration is now %s", name, props)
            return
        if rtype is ResourceType.BROKER:
            entity = self._broker_entity(name)
            try:
                validate_dynamic_broker_configs(props, per_broker=entity != zk.DEFAULT_ENTITY)
            except ConfigError as e:
                raise _config_error(rtype, name, e) from None
            if not validate_only:
                self.zk.change_entity_config(zk.BROKERS_ENTITY, entity, props)
                log.info("Broker config %s is now %s", entity, props)
            return
        raise KafkaError(
            ErrorCode.INVALID_REQUEST,
            f"AlterConfigs is only supported for topics and brokers, but resource type is {rtype.name}",
        )

    @staticmethod
    def _broker_entity(name: str) -> str:
        if not name:
            return zk.DEFAULT_ENTITY
        try:
            return str(int(name))
        except ValueError:
            raise KafkaError(
                ErrorCode.INVALID_REQUEST, f"Broker id must be an integer, but it is: {name}"
            ) from None

    async def describe_topic_configs(
        self,
        topic: str,
        names: Sequence[str] | None = None,
        *,
        include_synonyms: bool = False,
        include_documentation: bool = False,
    ) -> list[ConfigEntry]:
        validate_topic_name(topic)

        def read() -> dict[str, str] | None:
            if not self.zk.topic_exists(topic):
                return None
            return self.zk.get_entity_config(zk.TOPICS, topic)

        overrides = await self._io(read)
        if overrides is None:
            raise KafkaError(ErrorCode.UNKNOWN_TOPIC_OR_PARTITION, f"Topic {topic} does not exist.")
        return self.config.describe_topic(
            overrides,
            names=names,
            include_synonyms=include_synonyms,
            include_documentation=include_documentation,
        )

    def describe_broker_configs(
        self,
        resource_name: str,
        names: Sequence[str] | None = None,
        *,
        include_synonyms: bool = False,
        include_documentation: bool = False,
    ) -> list[ConfigEntry]:
        """This broker's configs (`resource_name` = its id) or the cluster defaults ("")."""
        if resource_name:
            try:
                requested = int(resource_name)
            except ValueError:
                requested = None
            if requested != self.config.broker_id:
                raise KafkaError(
                    ErrorCode.INVALID_REQUEST,
                    f"Unexpected broker id, expected {self.config.broker_id} or empty string, "
                    f"but received {resource_name}",
                )
        return self.config.describe_broker(
            per_broker=bool(resource_name),
            names=names,
            include_synonyms=include_synonyms,
            include_documentation=include_documentation,
        )

    def close(self) -> None:
        self._io.close()


__all__ = [
    "AlterConfigOp",
    "AlterOp",
    "CreatedTopic",
    "ResourceType",
    "TopicAdmin",
]
