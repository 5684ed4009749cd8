"""AlterPartitionReassignments (key 45): start or cancel (null replicas) partition moves."""

from ..schema import Api, F
from .common import ERROR, THROTTLE_TIME_MS, topic_partitions

API = Api(
    key=45,
    name="AlterPartitionReassignments",
    versions="0",
    flexible="0+",
    request=[
        F("timeout_ms", "int32", default=60000),
        topic_partitions(
            "topics",
            F("partition_index", "int32"),
            F("replicas", "[]int32", nullable="0+", default=None),
        ),
    ],
    response=[
        THROTTLE_TIME_MS,
        *ERROR,
        topic_partitions(
            "responses",
            F("partition_index", "int32"),
            *ERROR,
        ),
    ],
)
