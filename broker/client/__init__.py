"""Asyncio Kafka client on the project's protocol and records layers: admin, producer, consumer.

Used by the CLI, the operator, the benchmarks and the tests. It never imports broker internals.
"""

from ..protocol.errors import ErrorCode, KafkaError
from .admin import (
    AdminClient,
    AlterConfigOp,
    AlterConfigOpType,
    ClusterDescription,
    ConfigEntry,
    ConfigResource,
    ConfigSource,
    CreateTopicResult,
    ListedOffset,
    LogDirDescription,
    NewTopic,
    OffsetSpec,
    PartitionReassignment,
    ResourceType,
    TopicDescription,
    TopicResult,
)
from .cluster import BrokerNode, ClusterClient, PartitionMetadata, TopicPartition
from .connection import BrokerConnection
from .consumer import Consumer, ConsumerRecord
from .errors import BrokerConnectionError, RequestTimeoutError, UnsupportedVersionError
from .producer import Producer, RecordMetadata
from .security import ClientConfigError, ClientSecurity

__all__ = [
    "AdminClient",
    "AlterConfigOp",
    "AlterConfigOpType",
    "BrokerConnection",
    "BrokerConnectionError",
    "BrokerNode",
    "ClientConfigError",
    "ClientSecurity",
    "ClusterClient",
    "ClusterDescription",
    "ConfigEntry",
    "ConfigResource",
    "ConfigSource",
    "Consumer",
    "ConsumerRecord",
    "CreateTopicResult",
    "ErrorCode",
    "KafkaError",
    "ListedOffset",
    "LogDirDescription",
    "NewTopic",
    "OffsetSpec",
    "PartitionMetadata",
    "PartitionReassignment",
    "Producer",
    "RecordMetadata",
    "RequestTimeoutError",
    "ResourceType",
    "TopicDescription",
    "TopicPartition",
    "TopicResult",
    "UnsupportedVersionError",
]
