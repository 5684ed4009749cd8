"""Heartbeat (key 12): keeps a classic group member alive and signals pending rebalances."""

from ..schema import Api, F
from .common import GROUP_MEMBER

API = Api(
    key=12,
    name="Heartbeat",
    versions="0-4",
    flexible="4+",
    request=list(GROUP_MEMBER),
    response=[
        F("throttle_time_ms", "int32", "1+"),
        F("error_code", "int16"),
    ],
)
