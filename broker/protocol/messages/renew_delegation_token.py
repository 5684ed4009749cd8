"""RenewDelegationToken (key 39): push a token's expiry forward."""

from ..schema import Api, F
from .common import THROTTLE_TIME_MS

API = Api(
    key=39,
    name="RenewDelegationToken",
    versions="0-2",
    flexible="2+",
    request=[
        F("hmac", "bytes"),
        F("renew_period_ms", "int64"),
    ],
    response=[
        F("error_code", "int16"),
        F("expiry_timestamp_ms", "int64"),
        THROTTLE_TIME_MS,
    ],
)
