"""StopReplica (key 5): controller -> broker, stop replicating (and maybe delete) partitions.

The partition list changed shape twice: flat (v0), per topic (v1-2), per topic with a leader
epoch and delete flag per partition (v3+).
"""

from ..schema import Api, F
from .common import PARTITION_ERROR

API = Api(
    key=5,
    name="StopReplica",
    versions="0-4",
    flexible="2+",
    request=[
        F("controller_id", "int32"),
        F("is_kraft_controller", "bool", "4+"),
        F("controller_epoch", "int32"),
        F("broker_epoch", "int64", "1+", default=-1),
        F("delete_partitions", "bool", "0-2"),
        F(
            "ungrouped_partitions",
            [
                F("topic_name", "string", "0"),
                F("partition_index", "int32", "0"),
            ],
            "0",
        ),
        F(
            "topics",
            [
                F("name", "string", "1-2"),
                F("partition_indexes", "[]int32", "1-2"),
            ],
            "1-2",
        ),
        F(
            "topic_states",
            [
                F("topic_name", "string", "3+"),
                F(
                    "partition_states",
                    [
                        F("partition_index", "int32", "3+"),
                        F("leader_epoch", "int32", "3+", default=-1),
                        F("delete_partition", "bool", "3+"),
                    ],
                    "3+",
                ),
            ],
            "3+",
        ),
    ],
    response=[
        F("error_code", "int16"),
        F(
            "partition_errors",
            [
                F("topic_name", "string"),
                *PARTITION_ERROR,
            ],
        ),
    ],
)
