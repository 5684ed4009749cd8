"""LeaveGroup (key 13): members depart a group; v3+ removes several (static) members at once."""

from ..schema import Api, F

API = Api(
    key=13,
    name="LeaveGroup",
    versions="0-5",
    flexible="4+",
    request=[
        F("group_id", "string"),
        F("member_id", "string", "0-2"),
        F(
            "members",
            [
                F("member_id", "string", "3+"),
                F("group_instance_id", "string", "3+", nullable="3+", default=None),
                F("reason", "string", "5+", nullable="5+", default=None),
            ],
            "3+",
        ),
    ],
    response=[
        F("throttle_time_ms", "int32", "1+"),
        F("error_code", "int16"),
        F(
            "members",
            [
                F("member_id", "string", "3+"),
                F("group_instance_id", "string", "3+", nullable="3+"),
                F("error_code", "int16", "3+"),
            ],
            "3+",
        ),
    ],
)
