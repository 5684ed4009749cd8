"""SyncGroup (key 14): second rebalance phase; the leader hands out assignments."""

from ..schema import Api, F
from .common import GROUP_MEMBER

API = Api(
    key=14,
    name="SyncGroup",
    versions="0-5",
    flexible="4+",
    request=[
        *GROUP_MEMBER,
        F("protocol_type", "string", "5+", nullable="5+", default=None),
        F("protocol_name", "string", "5+", nullable="5+", default=None),
        F(
            "assignments",
            [
                F("member_id", "string"),
                F("assignment", "bytes"),
            ],
        ),
    ],
    response=[
        F("throttle_time_ms", "int32", "1+"),
        F("error_code", "int16"),
        F("protocol_type", "string", "5+", nullable="5+", default=None),
        F("protocol_name", "string", "5+", nullable="5+", default=None),
        F("assignment", "bytes"),
    ],
)
