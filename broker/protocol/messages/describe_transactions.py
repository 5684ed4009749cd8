"""DescribeTransactions (key 65): coordinator-side state of given transactional ids."""

from ..schema import Api, F
from .common import THROTTLE_TIME_MS

API = Api(
    key=65,
    name="DescribeTransactions",
    versions="0",
    flexible="0+",
    request=[
        F("transactional_ids", "[]string"),
    ],
    response=[
        THROTTLE_TIME_MS,
        F(
            "transaction_states",
            [
                F("error_code", "int16"),
                F("transactional_id", "string"),
                F("transaction_state", "string"),
                F("transaction_timeout_ms", "int32"),
                F("transaction_start_time_ms", "int64"),
                F("producer_id", "int64"),
                F("producer_epoch", "int16"),
                F(
                    "topics",
                    [
                        F("topic", "string"),
                        F("partitions", "[]int32"),
                    ],
                ),
            ],
        ),
    ],
)
