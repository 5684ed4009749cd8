"""TxnOffsetCommit (key 28): offsets committed as part of a transaction, visible on commit."""

from ..schema import Api, F
from .common import PARTITION_ERROR, THROTTLE_TIME_MS, topic_partitions

API = Api(
    key=28,
    name="TxnOffsetCommit",
    versions="0-4",
    flexible="3+",
    request=[
        F("transactional_id", "string"),
        F("group_id", "string"),
        F("producer_id", "int64"),
        F("producer_epoch", "int16"),
        F("generation_id", "int32", "3+", default=-1),
        F("member_id", "string", "3+"),
        F("group_instance_id", "string", "3+", nullable="3+", default=None),
        topic_partitions(
            "topics",
            F("partition_index", "int32"),
            F("committed_offset", "int64"),
            F("committed_leader_epoch", "int32", "2+", default=-1),
            F("committed_metadata", "string", nullable="0+"),
        ),
    ],
    response=[
        THROTTLE_TIME_MS,
        topic_partitions(
            "topics",
            *PARTITION_ERROR,
        ),
    ],
)
