"""LeaderAndIsr (key 4): controller -> broker, become leader or follower for partitions.

v0-1 send a flat list of partition states (each naming its topic); v2+ group them by topic, and
v5+ add topic ids and a full/incremental request type.
"""

from ..schema import Api, F, Field
from .common import PARTITION_ERROR


def _partition_state() -> list[Field]:
    """Fields of one partition's state, shared by the flat (v0-1) and per-topic (v2+) lists."""
    return [
        F("topic_name", "string", "0-1"),
        F("partition_index", "int32"),
        F("controller_epoch", "int32"),
        F("leader", "int32"),
        F("leader_epoch", "int32"),
        F("isr", "[]int32"),
        F("partition_epoch", "int32"),
        F("replicas", "[]int32"),
        F("adding_replicas", "[]int32", "3+"),
        F("removing_replicas", "[]int32", "3+"),
        F("is_new", "bool", "1+"),
        F("leader_recovery_state", "int8", "6+"),
    ]


def _partition_error() -> list[Field]:
    """Fields of one partition's result, shared by the flat (v0-4) and per-topic (v5+) lists."""
    return [
        F("topic_name", "string", "0-4"),
        *PARTITION_ERROR,
    ]


API = Api(
    key=4,
    name="LeaderAndIsr",
    versions="0-7",
    flexible="4+",
    request=[
        F("controller_id", "int32"),
        F("is_kraft_controller", "bool", "7+"),
        F("controller_epoch", "int32"),
        F("broker_epoch", "int64", "2+", default=-1),
        F("type", "int8", "5+"),
        F("ungrouped_partition_states", _partition_state(), "0-1"),
        F(
            "topic_states",
            [
                F("topic_name", "string", "2+"),
                F("topic_id", "uuid", "5+"),
                F("partition_states", _partition_state(), "2+"),
            ],
            "2+",
        ),
        F(
            "live_leaders",
            [
                F("broker_id", "int32"),
                F("host_name", "string"),
                F("port", "int32"),
            ],
        ),
    ],
    response=[
        F("error_code", "int16"),
        F("partition_errors", _partition_error(), "0-4"),
        F(
            "topics",
            [
                F("topic_id", "uuid", "5+"),
                F("partition_errors", _partition_error(), "5+"),
            ],
            "5+",
        ),
    ],
)
