"""Metadata (key 3): brokers, controller and partition leadership for some or all topics.

A null topic list (v1+) means "all topics"; v0 uses an empty list for that. v10 adds topic ids,
v11 drops the cluster-wide authorized operations.
"""

from ..schema import Api, F

_UNKNOWN_OPERATIONS = -(2**31)  # "authorized operations not requested"

API = Api(
    key=3,
    name="Metadata",
    versions="0-12",
    flexible="9+",
    request=[
        F(
            "topics",
            [
                F("topic_id", "uuid", "10+"),
                F("name", "string", nullable="10+"),
            ],
            nullable="1+",
        ),
        F("allow_auto_topic_creation", "bool", "4+", default=True),
        F("include_cluster_authorized_operations", "bool", "8-10"),
        F("include_topic_authorized_operations", "bool", "8+"),
    ],
    response=[
        F("throttle_time_ms", "int32", "3+"),
        F(
            "brokers",
            [
                F("node_id", "int32"),
                F("host", "string"),
                F("port", "int32"),
                F("rack", "string", "1+", nullable="1+", default=None),
            ],
        ),
        F("cluster_id", "string", "2+", nullable="2+", default=None),
        F("controller_id", "int32", "1+", default=-1),
        F(
            "topics",
            [
                F("error_code", "int16"),
                F("name", "string", nullable="12+"),
                F("topic_id", "uuid", "10+"),
                F("is_internal", "bool", "1+"),
                F(
                    "partitions",
                    [
                        F("error_code", "int16"),
                        F("partition_index", "int32"),
                        F("leader_id", "int32"),
                        F("leader_epoch", "int32", "7+", default=-1),
                        F("replica_nodes", "[]int32"),
                        F("isr_nodes", "[]int32"),
                        F("offline_replicas", "[]int32", "5+"),
                    ],
                ),
                F("topic_authorized_operations", "int32", "8+", default=_UNKNOWN_OPERATIONS),
            ],
        ),
        F("cluster_authorized_operations", "int32", "8-10", default=_UNKNOWN_OPERATIONS),
    ],
)
