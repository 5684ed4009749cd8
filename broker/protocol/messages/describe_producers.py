"""DescribeProducers (key 61): active producer state per partition (for hanging transactions)."""

from ..schema import Api, F
from .common import PARTITION_ERROR, THROTTLE_TIME_MS, topic_partitions

API = Api(
    key=61,
    name="DescribeProducers",
    versions="0",
    flexible="0+",
    request=[
        F(
            "topics",
            [
                F("name", "string"),
                F("partition_indexes", "[]int32"),
            ],
        ),
    ],
    response=[
        THROTTLE_TIME_MS,
        topic_partitions(
            "topics",
            *PARTITION_ERROR,
            F("error_message", "string", nullable="0+", default=None),
            F(
                "active_producers",
                [
                    F("producer_id", "int64"),
                    F("producer_epoch", "int32"),
                    F("last_sequence", "int32", default=-1),
                    F("last_timestamp", "int64", default=-1),
                    F("coordinator_epoch", "int32"),
                    # -1 when the producer has no open transaction.
                    F("current_txn_start_offset", "int64", default=-1),
                ],
            ),
        ),
    ],
)
