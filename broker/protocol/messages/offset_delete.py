"""OffsetDelete (key 47): drop a group's committed offsets for partitions it no longer reads."""

from ..schema import Api, F
from .common import PARTITION_ERROR, THROTTLE_TIME_MS, topic_partitions

API = Api(
    key=47,
    name="OffsetDelete",
    versions="0",
    flexible="none",
    request=[
        F("group_id", "string"),
        F(
            "topics",
            [
                F("name", "string"),
                F("partitions", [F("partition_index", "int32")]),
            ],
        ),
    ],
    response=[
        F("error_code", "int16"),
        THROTTLE_TIME_MS,
        topic_partitions(
            "topics",
            *PARTITION_ERROR,
        ),
    ],
)
