"""DescribeLogDirs (key 35): sizes and lag of replicas per log directory."""

from ..schema import Api, F
from .common import THROTTLE_TIME_MS, topic_partitions

API = Api(
    key=35,
    name="DescribeLogDirs",
    versions="0-4",
    flexible="2+",
    request=[
        # null means every topic.
        F(
            "topics",
            [
                F("topic", "string"),
                F("partitions", "[]int32"),
            ],
            nullable="0+",
        ),
    ],
    response=[
        THROTTLE_TIME_MS,
        F("error_code", "int16", "3+"),
        F(
            "results",
            [
                F("error_code", "int16"),
                F("log_dir", "string"),
                topic_partitions(
                    "topics",
                    F("partition_index", "int32"),
                    F("partition_size", "int64"),
                    F("offset_lag", "int64"),
                    F("is_future_key", "bool"),
                ),
                # -1 when the volume size is unknown.
                F("total_bytes", "int64", "4+", default=-1),
                F("usable_bytes", "int64", "4+", default=-1),
            ],
        ),
    ],
)
