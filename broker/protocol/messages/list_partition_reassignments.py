"""ListPartitionReassignments (key 46): the partition moves still in progress."""

from ..schema import Api, F
from .common import ERROR, THROTTLE_TIME_MS, topic_partitions

API = Api(
    key=46,
    name="ListPartitionReassignments",
    versions="0",
    flexible="0+",
    request=[
        F("timeout_ms", "int32", default=60000),
        # Null lists every ongoing reassignment.
        F(
            "topics",
            [
                F("name", "string"),
                F("partition_indexes", "[]int32"),
            ],
            nullable="0+",
            default=None,
        ),
    ],
    response=[
        THROTTLE_TIME_MS,
        *ERROR,
        topic_partitions(
            "topics",
            F("partition_index", "int32"),
            F("replicas", "[]int32"),
            F("adding_replicas", "[]int32"),
            F("removing_replicas", "[]int32"),
        ),
    ],
)
