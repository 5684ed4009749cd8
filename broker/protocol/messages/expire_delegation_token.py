"""ExpireDelegationToken (key 40): shorten a token's life (a negative period expires it now)."""

from ..schema import Api, F
from .common import THROTTLE_TIME_MS

API = Api(
    key=40,
    name="ExpireDelegationToken",
    versions="0-2",
    flexible="2+",
    request=[
        F("hmac", "bytes"),
        F("expiry_time_period_ms", "int64"),
    ],
    response=[
        F("error_code", "int16"),
        F("expiry_timestamp_ms", "int64"),
        THROTTLE_TIME_MS,
    ],
)
