"""InitProducerId (key 22): allocate a producer id/epoch, or bump the epoch (v3+) of an
existing one, for idempotent and transactional producers.
"""

from ..schema import Api, F
from .common import THROTTLE_TIME_MS

API = Api(
    key=22,
    name="InitProducerId",
    versions="0-5",
    flexible="2+",
    request=[
        F("transactional_id", "string", nullable="0+"),
        F("transaction_timeout_ms", "int32"),
        F("producer_id", "int64", "3+", default=-1),
        F("producer_epoch", "int16", "3+", default=-1),
    ],
    response=[
        THROTTLE_TIME_MS,
        F("error_code", "int16"),
        F("producer_id", "int64", default=-1),
        F("producer_epoch", "int16"),
    ],
)
