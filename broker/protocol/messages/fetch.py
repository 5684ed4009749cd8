"""Fetch (key 1): read record batches, for consumers and follower replicas alike.

Milestones: v4 isolation level + aborted transactions, v7 incremental fetch sessions, v12 flexible
with tagged divergence/leader/snapshot hints, v13 topic ids replace names, v15 the replica's
identity moves into a tagged struct.
"""

from ..schema import Api, F, Struct
from .common import PARTITION_ERROR

API = Api(
    key=1,
    name="Fetch",
    versions="0-17",
    flexible="12+",
    request=[
        F("cluster_id", "string", "12+", nullable="12+", tag=0, tagged="12+", default=None),
        F("replica_id", "int32", "0-14", default=-1),
        F(
            "replica_state",
            Struct(
                F("replica_id", "int32", "15+", default=-1),
                F("replica_epoch", "int64", "15+", default=-1),
            ),
            "15+",
            tag=1,
            tagged="15+",
        ),
        F("max_wait_ms", "int32"),
        F("min_bytes", "int32"),
        F("max_bytes", "int32", "3+", default=0x7FFFFFFF),
        F("isolation_level", "int8", "4+"),
        F("session_id", "int32", "7+"),
        F("session_epoch", "int32", "7+", default=-1),
        F(
            "topics",
            [
                F("topic", "string", "0-12"),
                F("topic_id", "uuid", "13+"),
                F(
                    "partitions",
                    [
                        F("partition", "int32"),
                        F("current_leader_epoch", "int32", "9+", default=-1),
                        F("fetch_offset", "int64"),
                        F("last_fetched_epoch", "int32", "12+", default=-1),
                        F("log_start_offset", "int64", "5+", default=-1),
                        F("partition_max_bytes", "int32"),
                        F("replica_directory_id", "uuid", "17+", tag=0, tagged="17+"),
                    ],
                ),
            ],
        ),
        F(
            "forgotten_topics_data",
            [
                F("topic", "string", "7-12"),
                F("topic_id", "uuid", "13+"),
                F("partitions", "[]int32", "7+"),
            ],
            "7+",
        ),
        F("rack_id", "string", "11+"),
    ],
    response=[
        F("throttle_time_ms", "int32", "1+"),
        F("error_code", "int16", "7+"),
        F("session_id", "int32", "7+"),
        F(
            "responses",
            [
                F("topic", "string", "0-12"),
                F("topic_id", "uuid", "13+"),
                F(
                    "partitions",
                    [
                        *PARTITION_ERROR,
                        F("high_watermark", "int64"),
                        F("last_stable_offset", "int64", "4+", default=-1),
                        F("log_start_offset", "int64", "5+", default=-1),
                        F(
                            "diverging_epoch",
                            Struct(
                                F("epoch", "int32", "12+", default=-1),
                                F("end_offset", "int64", "12+", default=-1),
                            ),
                            "12+",
                            tag=0,
                            tagged="12+",
                        ),
                        F(
                            "current_leader",
                            Struct(
                                F("leader_id", "int32", "12+", default=-1),
                                F("leader_epoch", "int32", "12+", default=-1),
                            ),
                            "12+",
                            tag=1,
                            tagged="12+",
                        ),
                        F(
                            "snapshot_id",
                            Struct(
                                F("end_offset", "int64", default=-1),
                                F("epoch", "int32", default=-1),
                            ),
                            "12+",
                            tag=2,
                            tagged="12+",
                        ),
                        F(
                            "aborted_transactions",
                            [
                                F("producer_id", "int64", "4+"),
                                F("first_offset", "int64", "4+"),
                            ],
                            "4+",
                            nullable="4+",
                        ),
                        F("preferred_read_replica", "int32", "11+", default=-1),
                        F("records", "records", nullable="0+"),
                    ],
                ),
            ],
        ),
        F(
            "node_endpoints",
            [
                F("node_id", "int32", "16+"),
                F("host", "string", "16+"),
                F("port", "int32", "16+"),
                F("rack", "string", "16+", nullable="16+", default=None),
            ],
            "16+",
            tag=0,
            tagged="16+",
        ),
    ],
)
