"""EndTxn (key 26): the producer asks its coordinator to commit or abort."""

from ..schema import Api, F
from .common import THROTTLE_TIME_MS

API = Api(
    key=26,
    name="EndTxn",
    versions="0-4",
    flexible="3+",
    request=[
        F("transactional_id", "string"),
        F("producer_id", "int64"),
        F("producer_epoch", "int16"),
        F("committed", "bool"),
    ],
    response=[
        THROTTLE_TIME_MS,
        F("error_code", "int16"),
    ],
)
