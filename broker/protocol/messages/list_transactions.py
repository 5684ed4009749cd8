"""ListTransactions (key 66): transactional ids known to a coordinator, filterable."""

from ..schema import Api, F
from .common import THROTTLE_TIME_MS

API = Api(
    key=66,
    name="ListTransactions",
    versions="0-1",
    flexible="0+",
    request=[
        F("state_filters", "[]string"),
        F("producer_id_filters", "[]int64"),
        # Negative: no minimum running time.
        F("duration_filter", "int64", "1+", default=-1),
    ],
    response=[
        THROTTLE_TIME_MS,
        F("error_code", "int16"),
        F("unknown_state_filters", "[]string"),
        F(
            "transaction_states",
            [
                F("transactional_id", "string"),
                F("producer_id", "int64"),
                F("transaction_state", "string"),
            ],
        ),
    ],
)
