"""ListOffsets (key 2): find an offset by timestamp (or earliest/latest/max-timestamp).

v0 answers with a list of old-style offsets; v1+ returns a single timestamp/offset pair.
"""

from ..schema import Api, F
from .common import PARTITION_ERROR, topic_partitions

API = Api(
    key=2,
    name="ListOffsets",
    versions="0-9",
    flexible="6+",
    request=[
        F("replica_id", "int32"),
        F("isolation_level", "int8", "2+"),
        topic_partitions(
            "topics",
            F("partition_index", "int32"),
            F("current_leader_epoch", "int32", "4+", default=-1),
            F("timestamp", "int64"),
            F("max_num_offsets", "int32", "0", default=1),
        ),
    ],
    response=[
        F("throttle_time_ms", "int32", "2+"),
        topic_partitions(
            "topics",
            *PARTITION_ERROR,
            F("old_style_offsets", "[]int64", "0"),
            F("timestamp", "int64", "1+", default=-1),
            F("offset", "int64", "1+", default=-1),
            F("leader_epoch", "int32", "4+", default=-1),
        ),
    ],
)
