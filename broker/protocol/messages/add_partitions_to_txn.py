"""AddPartitionsToTxn (key 24): enlist partitions in a transaction.

v4+ is the broker-to-coordinator batched form (many transactional ids, verify-only checks);
v0-3 carry a single transaction in the `v3_and_below_*` fields.
"""

from ..schema import Api, F
from .common import THROTTLE_TIME_MS

_TOPIC = [
    F("name", "string"),
    F("partitions", "[]int32"),
]

_TOPIC_RESULT = [
    F("name", "string"),
    F(
        "results_by_partition",
        [
            F("partition_index", "int32"),
            F("partition_error_code", "int16"),
        ],
    ),
]

API = Api(
    key=24,
    name="AddPartitionsToTxn",
    versions="0-5",
    flexible="3+",
    request=[
        F(
            "transactions",
            [
                F("transactional_id", "string", "4+"),
                F("producer_id", "int64", "4+"),
                F("producer_epoch", "int16", "4+"),
                F("verify_only", "bool", "4+"),
                F("topics", _TOPIC, "4+"),
            ],
            "4+",
        ),
        F("v3_and_below_transactional_id", "string", "0-3"),
        F("v3_and_below_producer_id", "int64", "0-3"),
        F("v3_and_below_producer_epoch", "int16", "0-3"),
        F("v3_and_below_topics", _TOPIC, "0-3"),
    ],
    response=[
        THROTTLE_TIME_MS,
        F("error_code", "int16", "4+"),
        F(
            "results_by_transaction",
            [
                F("transactional_id", "string", "4+"),
                F("topic_results", _TOPIC_RESULT, "4+"),
            ],
            "4+",
        ),
        F("results_by_topic_v3_and_below", _TOPIC_RESULT, "0-3"),
    ],
)
