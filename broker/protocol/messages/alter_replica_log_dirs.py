"""AlterReplicaLogDirs (key 34): move replicas between a broker's log directories."""

from ..schema import Api, F

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
        F("throttle_time_ms", "int32"),
        F(
            "results",
            [
                F("topic_name", "string"),
                F(
                    "partitions",
                    [
                        F("partition_index", "int32"),
                        F("error_code", "int16"),
                    ],
                ),
            ],
        ),
    ],
)
