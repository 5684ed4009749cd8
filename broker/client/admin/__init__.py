"""AdminClient: topics, configs, offsets and records, log dirs and reassignments, ACLs and
credentials, quotas, groups and transactions over the Kafka API.

Every method returns plain dataclasses. Failures raise `KafkaError` with the broker's error code
and message (naming the topic or resource). Methods that act on several items accept
`raise_errors=False` to get every item's outcome instead: each result then carries `error`.

Each area lives in its own module as a mixin over AdminBase; AdminClient is all of them.
"""

from __future__ import annotations

from ...protocol.acl_types import AclOperation, AclPatternType, AclPermissionType, AclResourceType
from ...protocol.config_types import ConfigSource, ConfigType
from ..cluster import PartitionMetadata
from ..offsets import ListedOffset, OffsetSpec
from .acls import (
    AclBinding,
    AclBindingFilter,
    AclsAdmin,
    ScramCredentialInfo,
    ScramMechanism,
    ScramUpsertion,
)
from .configs import (
    AlterConfigOp,
    AlterConfigOpType,
    ConfigEntry,
    ConfigResource,
    ConfigsAdmin,
    ConfigSynonym,
    ResourceType,
)
from .groups import (
    CommittedOffset,
    GroupDescription,
    GroupListing,
    GroupMember,
    GroupsAdmin,
    parse_consumer_assignment,
)
from .placement import (
    ClusterDescription,
    LogDirDescription,
    PartitionReassignment,
    PlacementAdmin,
    ReplicaLogDirInfo,
)
from .quotas import QuotaMatchType, QuotasAdmin
from .records import RecordsAdmin
from .topics import (
    CreateTopicResult,
    NewTopic,
    TopicDescription,
    TopicResult,
    TopicsAdmin,
)
from .transactions import TransactionDescription, TransactionListing, TransactionsAdmin

__all__ = [
    "AclBinding",
    "AclBindingFilter",
    "AclOperation",
    "AclPatternType",
    "AclPermissionType",
    "AclResourceType",
    "AdminClient",
    "AlterConfigOp",
    "AlterConfigOpType",
    "ClusterDescription",
    "CommittedOffset",
    "ConfigEntry",
    "ConfigResource",
    "ConfigSource",
    "ConfigSynonym",
    "ConfigType",
    "CreateTopicResult",
    "GroupDescription",
    "GroupListing",
    "GroupMember",
    "ListedOffset",
    "LogDirDescription",
    "NewTopic",
    "OffsetSpec",
    "PartitionMetadata",
    "PartitionReassignment",
    "QuotaMatchType",
    "ReplicaLogDirInfo",
    "ResourceType",
    "ScramCredentialInfo",
    "ScramMechanism",
    "ScramUpsertion",
    "TopicDescription",
    "TopicResult",
    "TransactionDescription",
    "TransactionListing",
    "parse_consumer_assignment",
]


class AdminClient(
    TopicsAdmin,
    ConfigsAdmin,
    PlacementAdmin,
    RecordsAdmin,
    AclsAdmin,
    QuotasAdmin,
    GroupsAdmin,
    TransactionsAdmin,
):
    """Kafka admin operations. `async with AdminClient("host:9092") as admin: ...`

    Pass `cluster=` to share connections and metadata with a producer or consumer.
    """
