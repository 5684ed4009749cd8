"""AddOffsetsToTxn (key 25): ties a consumer group's offset commits to a transaction."""

from ..schema import Api, F
from .common import THROTTLE_TIME_MS, TXN_PRODUCER

API = Api(
    key=25,
    name="AddOffsetsToTxn",
    versions="0-4",
    flexible="3+",
    request=[
        *TXN_PRODUCER,
        F("group_id", "string"),
    ],
    response=[
        THROTTLE_TIME_MS,
        F("error_code", "int16"),
    ],
)
