"""What the request path needs of the broker process, as an interface.

The request handlers, the dispatcher, the SASL authenticator, the metrics collector and the
marker sender are handed the broker as a `BrokerServices`; none of them imports the broker
module. Dependencies then point one way: broker -> dispatcher -> handlers -> services, and the
broker process (broker.py) is the only place that knows how the pieces are built and started.
`led_partition` and `partition_error` are the partition checks many requests make through it.
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable, Container
from concurrent.futures import Executor
from typing import Any, Protocol, TypeVar

from ..client.security import ClientSecurity
from ..cluster.control import (
    LeaderAndIsrRequest,
    PartitionErrors,
    StopReplicaRequest,
    UpdateMetadataRequest,
)
from ..cluster.controller import Controller
from ..cluster.kafka_zk import KafkaZk
from ..cluster.metadata_cache import MetadataCache
from ..cluster.metadata_store import MetadataStore
from ..cluster.topic_admin import TopicAdmin
from ..config import BrokerConfig
from ..coordinator.group import GroupCoordinator
from ..coordinator.transaction import TransactionCoordinator
from ..protocol.errors import ErrorCode
from ..replication.partition import Partition
from ..replication.producer_ids import ProducerIdManager
from ..replication.replica_manager import ReplicaManager
from ..security.service import SecurityService
from ..storage.log_manager import LogManager
from .fetch_session import FetchSessionCache
from .network import SocketServer

T = TypeVar("T")


class RequestMetrics(Protocol):
    """The request-path side of the broker's metrics."""

    @property
    def enabled(self) -> bool: ...

    def record_request(self, api_key: int, version: int, elapsed_ms: float) -> None: ...

    def record_produce(self, topic: str, records: int, size: int) -> None: ...

    def record_fetch(self, sizes: dict[str, int]) -> None: ...


class BrokerServices(Protocol):
    """The broker's components and state, as the request path sees them."""

    config: BrokerConfig
    broker_id: int
    cluster_id: str
    broker_epoch: int
    # The highest controller epoch seen in a control request (STALE_CONTROLLER_EPOCH).
    controller_epoch_seen: int
    executor: Executor
    store: MetadataStore | None
    zk: KafkaZk | None
    metadata_cache: MetadataCache
    log_manager: LogManager
    replica_manager: ReplicaManager
    group_coordinator: GroupCoordinator
    txn_coordinator: TransactionCoordinator
    producer_ids: ProducerIdManager
    fetch_sessions: FetchSessionCache
    security: SecurityService | None
    topic_admin: TopicAdmin | None
    controller: Controller | None
    server: SocketServer
    metrics: RequestMetrics
    inter_broker_security: ClientSecurity | None
    ready: asyncio.Event

    @property
    def zk_fenced(self) -> bool:
        """The broker cannot vouch for the leadership it knows of (ZooKeeper session)."""
        ...

    async def run_io(self, fn: Callable[..., T], *args: Any) -> T:
        """Run a blocking metadata-store call on the broker's executor."""
        ...

    async def wait_ready(self) -> None:
        """Hold a client request until this broker knows the cluster (bounded)."""
        ...

    async def leader_and_isr(self, request: LeaderAndIsrRequest) -> PartitionErrors: ...

    async def stop_replica(self, request: StopReplicaRequest) -> PartitionErrors: ...

    async def update_metadata(self, request: UpdateMetadataRequest) -> ErrorCode: ...


def led_partition(
    broker: BrokerServices, topic: str, index: int, current_leader_epoch: int = -1
) -> Partition:
    """Our leader replica of `topic`-`index`, or the KafkaError a client gets instead (the
    metadata cache tells an unknown partition from one led elsewhere)."""
    known = broker.metadata_cache.get_partition(topic, index) is not None
    return broker.replica_manager.leader_partition(topic, index, known, current_leader_epoch)


def partition_error(
    broker: BrokerServices, tp: tuple[str, int], authorized: Container[str]
) -> ErrorCode | None:
    """Why a request may not touch partition `tp`: its topic is not among the `authorized`
    ones, or the partition is unknown to the metadata cache; None when it may."""
    if tp[0] not in authorized:
        return ErrorCode.TOPIC_AUTHORIZATION_FAILED
    if broker.metadata_cache.get_partition(*tp) is None:
        return ErrorCode.UNKNOWN_TOPIC_OR_PARTITION
    return None
