"""Heartbeat (key 12): keeps a classic group member alive and signals pending rebalances."""

from ..schema import Api, F

API = Api(
    key=12,
    name="Heartbeat",
    versions="0-4",
    flexible="4+",
    request=[
        F("group_id", "string"),
        F("generation_id", "int32"),
        F("member_id", "string"),
        F("group_instance_id", "string", "3+", nullable="3+", default=None),
    ],
    response=[
        F("throttle_time_ms", "int32", "1+"),
        F("error_code", "int16"),
    ],
)
