"""ElectLeaders (key 43): trigger preferred (0) or unclean (1) leader election."""

from ..schema import Api, F
from .common import ERROR, THROTTLE_TIME_MS

API = Api(
    key=43,
    name="ElectLeaders",
    versions="0-2",
    flexible="2+",
    request=[
        F("election_type", "int8", "1+"),
        # Null means every partition in the cluster.
        F(
            "topic_partitions",
            [
                F("topic", "string"),
                F("partitions", "[]int32"),
            ],
            nullable="0+",
        ),
        F("timeout_ms", "int32", default=60000),
    ],
    response=[
        THROTTLE_TIME_MS,
        F("error_code", "int16", "1+"),
        F(
            "replica_election_results",
            [
                F("topic", "string"),
                F(
                    "partition_result",
                    [
                        F("partition_id", "int32"),
                        *ERROR,
                    ],
                ),
            ],
        ),
    ],
)
