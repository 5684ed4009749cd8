"""Produce (key 0): append record batches to partition logs.

v3 adds the transactional id (and requires record format v2), v9 turns flexible, and v10 lets a
leader that moved tell the producer where it went (tagged current leader + node endpoints).
"""

from ..schema import Api, F, Struct
from .common import topic_partitions

API = Api(
    key=0,
    name="Produce",
    versions="0-11",
    flexible="9+",
    request=[
        F("transactional_id", "string", "3+", nullable="3+", default=None),
        F("acks", "int16"),
        F("timeout_ms", "int32"),
        topic_partitions(
            "topic_data",
            F("index", "int32"),
            F("records", "records", nullable="0+"),
            partitions="partition_data",
        ),
    ],
    response=[
        topic_partitions(
            "responses",
            F("index", "int32"),
            F("error_code", "int16"),
            F("base_offset", "int64"),
            F("log_append_time_ms", "int64", "2+", default=-1),
            F("log_start_offset", "int64", "5+", default=-1),
            F(
                "record_errors",
                [
                    F("batch_index", "int32", "8+"),
                    F(
                        "batch_index_error_message",
                        "string",
                        "8+",
                        nullable="8+",
                        default=None,
                    ),
                ],
                "8+",
            ),
            F("error_message", "string", "8+", nullable="8+", default=None),
            F(
                "current_leader",
                Struct(
                    F("leader_id", "int32", "10+", default=-1),
                    F("leader_epoch", "int32", "10+", default=-1),
                ),
                "10+",
                tag=0,
                tagged="10+",
            ),
            partitions="partition_responses",
        ),
        F("throttle_time_ms", "int32", "1+"),
        F(
            "node_endpoints",
            [
                F("node_id", "int32", "10+"),
                F("host", "string", "10+"),
                F("port", "int32", "10+"),
                F("rack", "string", "10+", nullable="10+", default=None),
            ],
            "10+",
            tag=0,
            tagged="10+",
        ),
    ],
)
