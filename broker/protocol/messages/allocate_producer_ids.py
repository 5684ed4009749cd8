"""AllocateProducerIds (key 67): a broker asks the controller for a block of producer ids."""

from ..schema import Api, F
from .common import THROTTLE_TIME_MS

API = Api(
    key=67,
    name="AllocateProducerIds",
    versions="0",
    flexible="0+",
    request=[
        F("broker_id", "int32"),
        F("broker_epoch", "int64", default=-1),
    ],
    response=[
        THROTTLE_TIME_MS,
        F("error_code", "int16"),
        F("producer_id_start", "int64"),
        F("producer_id_len", "int32"),
    ],
)
