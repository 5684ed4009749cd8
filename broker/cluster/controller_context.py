"""The active controller's in-memory picture of the cluster (Kafka's ControllerContext)."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from . import zk_data as zk
from .control import TopicPartition


class NotControllerError(Exception):
    """An admin operation reached a broker that is not (or no longer) the controller."""


def raise_not_controller() -> None:
    raise NotControllerError


_Decision = tuple[int, tuple[int, ...], int]  # leader, ISR, leader recovery state


@dataclass
class _Context:
    """The active controller's in-memory picture (Kafka's ControllerContext)."""

    live: dict[int, zk.BrokerRegistration] = field(default_factory=dict)
    topic_ids: dict[str, Any] = field(default_factory=dict)
    assignments: dict[str, dict[int, zk.ReplicaAssignment]] = field(default_factory=dict)
    states: dict[TopicPartition, zk.PartitionState] = field(default_factory=dict)
    to_delete: set[str] = field(default_factory=set)
    # topic -> replicas (partition, broker) whose StopReplica(delete) has not succeeded yet
    deleting: dict[str, set[tuple[int, int]]] = field(default_factory=dict)
    # brokers in controlled shutdown: never elected leader nor kept in an ISR
    shutting_down: set[int] = field(default_factory=set)
    # replicas in a failed log dir of a live broker (Kafka's replicasOnOfflineDirs)
    offline_replicas: dict[int, set[TopicPartition]] = field(default_factory=dict)

    def replica_online(self, broker: int, tp: TopicPartition) -> bool:
        """The broker is alive and its replica of `tp` is not in a failed log dir."""
        return broker in self.live and tp not in self.offline_replicas.get(broker, ())

    def remove_topic(self, topic: str) -> None:
        for p in self.assignments.pop(topic, {}):
            self.states.pop((topic, p), None)
        self.topic_ids.pop(topic, None)
        self.to_delete.discard(topic)
        self.deleting.pop(topic, None)

    def replicas(self, tp: TopicPartition) -> tuple[int, ...]:
        a = self.assignments.get(tp[0], {}).get(tp[1])
        return a.replicas if a else ()

    def all_partitions(self) -> list[TopicPartition]:
        return sorted((t, p) for t, parts in self.assignments.items() for p in parts)
