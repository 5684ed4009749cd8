"""AlterReplicaLogDirs (key 34): move replicas between a broker's log directories."""

from ..schema import Api, F
from .common import PARTITION_ERROR, THROTTLE_TIME_MS

API = Api(
    key=34,
    name="AlterReplicaLogDirs",
    versions="0-2",
    flexible="2+",
    request=[
        F(
            "dirs",
            [
                F("path", "string"),
                F(
                    "topics",
                    [
                        F("name", "string"),
                        F("partitions", "[]int32"),
                    ],
                ),
            ],
        ),
    ],
    response=[
        THROTTLE_TIME_MS,
        F(
            "results",
            [
                F("topic_name", "string"),
                F("partitions", list(PARTITION_ERROR)),
            ],
        ),
    ],
)
