"""EndTxn (key 26): the producer asks its coordinator to commit or abort."""

from ..schema import Api, F
from .common import THROTTLE_TIME_MS, TXN_PRODUCER

API = Api(
    key=26,
    name="EndTxn",
    versions="0-4",
    flexible="3+",
    request=[
        *TXN_PRODUCER,
        F("committed", "bool"),
    ],
    response=[
        THROTTLE_TIME_MS,
        F("error_code", "int16"),
    ],
)
