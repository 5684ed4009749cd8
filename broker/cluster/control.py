"""What the controller tells brokers: LeaderAndIsr, StopReplica and UpdateMetadata.

The controller talks to every broker, itself included, through a `BrokerControl`. In
single-broker mode the local broker implements it directly; in a cluster, a `BrokerControl`
per remote broker sends the matching RPCs (keys 4, 5, 6) and returns their per-partition
errors. The dataclasses mirror those RPCs' fields, so an RPC adapter is a field-by-field copy.

Implementations must not wait for controller events (the controller awaits their replies from
its per-broker sender tasks, not from its event loop, but deletion waits for StopReplica).
"""

from __future__ import annotations

import uuid
from dataclasses import dataclass, field
from typing import Protocol

from ..protocol.errors import ErrorCode
from .zk_data import BrokerRegistration

TopicPartition = tuple[str, int]

# StopReplica's leader epoch when the partition is deleted with its topic.
EPOCH_DURING_DELETE = -2


@dataclass(frozen=True)
class LeaderAndIsrPartition:
    topic: str
    topic_id: uuid.UUID | None
    partition: int
    controller_epoch: int
    leader: int
    leader_epoch: int
    isr: tuple[int, ...]
    partition_epoch: int
    replicas: tuple[int, ...]
    adding_replicas: tuple[int, ...] = ()
    removing_replicas: tuple[int, ...] = ()
    is_new: bool = False
    leader_recovery_state: int = 0


@dataclass(frozen=True)
class LeaderAndIsrRequest:
    controller_id: int
    controller_epoch: int
    broker_epoch: int  # the receiving broker's epoch (czxid of its registration)
    partitions: tuple[LeaderAndIsrPartition, ...]
    live_leaders: tuple[BrokerRegistration, ...]


@dataclass(frozen=True)
class StopReplicaPartition:
    topic: str
    partition: int
    leader_epoch: int  # EPOCH_DURING_DELETE when the topic is being deleted
    delete: bool


@dataclass(frozen=True)
class StopReplicaRequest:
    controller_id: int
    controller_epoch: int
    broker_epoch: int
    partitions: tuple[StopReplicaPartition, ...]


@dataclass(frozen=True)
class UpdateMetadataPartition:
    topic: str
    topic_id: uuid.UUID | None
    partition: int
    controller_epoch: int
    leader: int  # -2 (LEADER_DURING_DELETE): the topic is being deleted, drop it
    leader_epoch: int
    isr: tuple[int, ...]
    zk_version: int
    replicas: tuple[int, ...]
    offline_replicas: tuple[int, ...] = ()


@dataclass(frozen=True)
class UpdateMetadataRequest:
    controller_id: int
    controller_epoch: int
    broker_epoch: int
    partitions: tuple[UpdateMetadataPartition, ...]
    live_brokers: tuple[BrokerRegistration, ...]


@dataclass
class PartitionErrors:
    """Reply to LeaderAndIsr/StopReplica: a top-level error and per-partition errors."""

    error: ErrorCode = ErrorCode.NONE
    partitions: dict[TopicPartition, ErrorCode] = field(default_factory=dict)

    def error_for(self, tp: TopicPartition) -> ErrorCode:
        if self.error != ErrorCode.NONE:
            return self.error
        return self.partitions.get(tp, ErrorCode.NONE)


class BrokerControl(Protocol):
    """A broker as the controller sees it. Raising means "unreachable": the request is
    retried (in order) until the broker is removed from the live set."""

    async def leader_and_isr(self, request: LeaderAndIsrRequest) -> PartitionErrors:
        """Become leader or follower of these partitions (create logs when `is_new`)."""
        ...

    async def stop_replica(self, request: StopReplicaRequest) -> PartitionErrors:
        """Stop serving these partitions; delete their logs when `delete`."""
        ...

    async def update_metadata(self, request: UpdateMetadataRequest) -> ErrorCode:
        """Replace the live-broker list and upsert (or, leader -2, drop) partition states."""
        ...
