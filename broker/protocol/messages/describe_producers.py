"""DescribeProducers (key 61): active producer state per partition (for hanging transactions)."""

from ..schema import Api, F

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
        F("throttle_time_ms", "int32"),
        F(
            "topics",
            [
                F("name", "string"),
                F(
                    "partitions",
                    [
                        F("partition_index", "int32"),
                        F("error_code", "int16"),
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
                    ],
                ),
            ],
        ),
    ],
)
