"""The broker's view of the cluster, fed only by the controller's UpdateMetadata requests.

Answers Metadata, FindCoordinator, DescribeCluster and the leadership checks of produce/fetch
without touching the metadata store. Updated and read on the broker's event loop thread.
"""

from __future__ import annotations

import asyncio
import time
import uuid
from collections.abc import Callable, Hashable, Iterable
from dataclasses import dataclass, field
from typing import TypeVar

from ..config import INTERNAL_TOPICS, Endpoint
from ..wait_time import waiting
from .control import UpdateMetadataPartition, UpdateMetadataRequest
from .zk_data import LEADER_DURING_DELETE, BrokerRegistration

T = TypeVar("T")


@dataclass(frozen=True)
class PartitionMetadata:
    topic: str
    partition: int
    leader: int
    leader_epoch: int
    isr: tuple[int, ...]
    replicas: tuple[int, ...]
    offline_replicas: tuple[int, ...]
    partition_epoch: int
    controller_epoch: int


@dataclass
class TopicMetadata:
    name: str
    topic_id: uuid.UUID | None
    partitions: dict[int, PartitionMetadata] = field(default_factory=dict)

    @property
    def is_internal(self) -> bool:
        return self.name in INTERNAL_TOPICS


class MetadataCache:
    def __init__(self, broker_id: int, cluster_id: str | None = None) -> None:
        self.broker_id = broker_id
        self.cluster_id = cluster_id
        self.controller_id: int | None = None
        self.controller_epoch = -1
        self._brokers: dict[int, BrokerRegistration] = {}
        self._topics: dict[str, TopicMetadata] = {}
        self._ids: dict[uuid.UUID, str] = {}
        self._changed: asyncio.Event | None = None
        self.version = 0  # bumped on every update
        self._derived: dict[Hashable, object] = {}  # `derived` answers of this version

    # -- updates

    def update(self, request: UpdateMetadataRequest) -> list[str]:
        """Apply an UpdateMetadata; returns the topics dropped (leader -2)."""
        self.controller_id = request.controller_id
        self.controller_epoch = request.controller_epoch
        self._brokers = {b.id: b for b in request.live_brokers}
        deleted: list[str] = []
        for p in request.partitions:
            if p.leader == LEADER_DURING_DELETE:
                if self._remove_partition(p.topic, p.partition):
                    deleted.append(p.topic)
            else:
                self._put_partition(p)
        self.version += 1
        self._derived = {}
        if self._changed is not None:
            self._changed.set()
            self._changed = None
        return deleted

    def _put_partition(self, p: UpdateMetadataPartition) -> None:
        topic = self._topics.get(p.topic)
        if topic is None:
            topic = self._topics[p.topic] = TopicMetadata(p.topic, p.topic_id)
        if p.topic_id is not None and topic.topic_id != p.topic_id:
            if topic.topic_id is not None:
                self._ids.pop(topic.topic_id, None)
            topic.topic_id = p.topic_id
        if topic.topic_id is not None:
            self._ids[topic.topic_id] = p.topic
        topic.partitions[p.partition] = PartitionMetadata(
            topic=p.topic,
            partition=p.partition,
            leader=p.leader,
            leader_epoch=p.leader_epoch,
            isr=p.isr,
            replicas=p.replicas,
            offline_replicas=p.offline_replicas,
            partition_epoch=p.zk_version,
            controller_epoch=p.controller_epoch,
        )

    def _remove_partition(self, topic_name: str, partition: int) -> bool:
        """Drop a partition; True when that removed the topic's last one."""
        topic = self._topics.get(topic_name)
        if topic is None:
            return False
        topic.partitions.pop(partition, None)
        if topic.partitions:
            return False
        del self._topics[topic_name]
        if topic.topic_id is not None:
            self._ids.pop(topic.topic_id, None)
        return True

    def derived(self, key: Hashable, build: Callable[[], T]) -> T:
        """`build()`, computed once per version of the cache: for answers that depend on
        nothing else (a topic's partitions as Metadata lists them), which clients ask for
        far more often than the controller changes them. Callers must not mutate it."""
        try:
            return self._derived[key]  # type: ignore[return-value]
        except KeyError:
            value = self._derived[key] = build()
            return value

    # -- brokers

    def alive_brokers(self) -> list[BrokerRegistration]:
        return [self._brokers[b] for b in sorted(self._brokers)]

    def get_broker(self, broker_id: int) -> BrokerRegistration | None:
        return self._brokers.get(broker_id)

    def is_alive(self, broker_id: int) -> bool:
        return broker_id in self._brokers

    def endpoint(self, broker_id: int, listener: str) -> Endpoint | None:
        """The broker's endpoint on `listener` (clients get addresses on the listener they
        connected to, as Kafka does)."""
        broker = self._brokers.get(broker_id)
        return broker.endpoint(listener) if broker else None

    # -- topics

    def topic_names(self) -> list[str]:
        return sorted(self._topics)

    def contains(self, topic: str) -> bool:
        return topic in self._topics

    def get_topic(self, topic: str) -> TopicMetadata | None:
        return self._topics.get(topic)

    def topic_id(self, topic: str) -> uuid.UUID | None:
        t = self._topics.get(topic)
        return t.topic_id if t else None

    def topic_name(self, topic_id: uuid.UUID) -> str | None:
        return self._ids.get(topic_id)

    def get_partition(self, topic: str, partition: int) -> PartitionMetadata | None:
        t = self._topics.get(topic)
        return t.partitions.get(partition) if t else None

    def partition_count(self, topic: str) -> int | None:
        t = self._topics.get(topic)
        return len(t.partitions) if t else None

    def leader_of(self, topic: str, partition: int) -> int | None:
        p = self.get_partition(topic, partition)
        return p.leader if p is not None and p.leader >= 0 else None

    def has_leaders(self, topic: str, partitions: Iterable[int] | None = None) -> bool:
        """Whether the topic is known and each of its (given) partitions has a live leader."""
        t = self._topics.get(topic)
        if t is None:
            return False
        wanted = list(partitions) if partitions is not None else list(t.partitions)
        return all(
            (p := t.partitions.get(i)) is not None and p.leader >= 0 and p.leader in self._brokers
            for i in wanted
        )

    # -- waiting (CreateTopics/DeleteTopics/CreatePartitions purgatories)

    async def wait_for(self, predicate: Callable[[], bool], timeout: float) -> bool:
        """Wait until `predicate()` holds after some update, or `timeout` seconds pass."""
        deadline = time.monotonic() + timeout
        while not predicate():
            remaining = deadline - time.monotonic()
            if remaining <= 0:
                return False
            if self._changed is None:
                self._changed = asyncio.Event()
            try:
                with waiting():
                    await asyncio.wait_for(self._changed.wait(), remaining)
            except TimeoutError:
                return predicate()
        return True
