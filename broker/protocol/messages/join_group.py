"""JoinGroup (key 11): first phase of a classic group rebalance."""

from ..schema import Api, F

API = Api(
    key=11,
    name="JoinGroup",
    versions="0-9",
    flexible="6+",
    request=[
        F("group_id", "string"),
        F("session_timeout_ms", "int32"),
        # Before v1 the coordinator uses the session timeout for rebalances too.
        F("rebalance_timeout_ms", "int32", "1+", default=-1),
        F("member_id", "string"),
        F("group_instance_id", "string", "5+", nullable="5+", default=None),
        F("protocol_type", "string"),
        F(
            "protocols",
            [
                F("name", "string"),
                F("metadata", "bytes"),
            ],
        ),
        F("reason", "string", "8+", nullable="8+", default=None),
    ],
    response=[
        F("throttle_time_ms", "int32", "2+"),
        F("error_code", "int16"),
        F("generation_id", "int32", default=-1),
        F("protocol_type", "string", "7+", nullable="7+", default=None),
        F("protocol_name", "string", nullable="7+"),
        F("leader", "string"),
        F("skip_assignment", "bool", "9+"),
        F("member_id", "string"),
        F(
            "members",
            [
                F("member_id", "string"),
                F("group_instance_id", "string", "5+", nullable="5+", default=None),
                F("metadata", "bytes"),
            ],
        ),
    ],
)
