"""OffsetCommit (key 8): a consumer group member stores its positions with the coordinator."""

from ..schema import Api, F
from .common import PARTITION_ERROR, topic_partitions

API = Api(
    key=8,
    name="OffsetCommit",
    versions="0-9",
    flexible="8+",
    request=[
        F("group_id", "string"),
        # Classic protocol: generation id; KIP-848 consumer protocol: member epoch.
        F("generation_id_or_member_epoch", "int32", "1+", default=-1),
        F("member_id", "string", "1+"),
        F("group_instance_id", "string", "7+", nullable="7+", default=None),
        F("retention_time_ms", "int64", "2-4", default=-1),
        topic_partitions(
            "topics",
            F("partition_index", "int32"),
            F("committed_offset", "int64"),
            F("committed_leader_epoch", "int32", "6+", default=-1),
            F("commit_timestamp", "int64", "1", default=-1),
            F("committed_metadata", "string", nullable="0+"),
        ),
    ],
    response=[
        F("throttle_time_ms", "int32", "3+"),
        topic_partitions(
            "topics",
            *PARTITION_ERROR,
        ),
    ],
)
