"""AlterPartitionReassignments (key 45): start or cancel (null replicas) partition moves."""

from ..schema import Api, F

API = Api(
    key=45,
    name="AlterPartitionReassignments",
    versions="0",
    flexible="0+",
    request=[
        F("timeout_ms", "int32", default=60000),
        F(
            "topics",
            [
                F("name", "string"),
                F(
                    "partitions",
                    [
                        F("partition_index", "int32"),
                        F("replicas", "[]int32", nullable="0+", default=None),
                    ],
                ),
            ],
        ),
    ],
    response=[
        F("throttle_time_ms", "int32"),
        F("error_code", "int16"),
        F("error_message", "string", nullable="0+"),
        F(
            "responses",
            [
                F("name", "string"),
                F(
                    "partitions",
                    [
                        F("partition_index", "int32"),
                        F("error_code", "int16"),
                        F("error_message", "string", nullable="0+"),
                    ],
                ),
            ],
        ),
    ],
)
