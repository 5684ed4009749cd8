"""DescribeGroups (key 15): state, protocol and members of classic groups."""

from ..schema import Api, F

# Kafka's "not requested" marker for authorized-operation bitfields (INT32_MIN).
_OPERATIONS_UNKNOWN = -(2**31)

API = Api(
    key=15,
    name="DescribeGroups",
    versions="0-5",
    flexible="5+",
    request=[
        F("groups", "[]string"),
        F("include_authorized_operations", "bool", "3+"),
    ],
    response=[
        F("throttle_time_ms", "int32", "1+"),
        F(
            "groups",
            [
                F("error_code", "int16"),
                F("group_id", "string"),
                F("group_state", "string"),
                F("protocol_type", "string"),
                F("protocol_data", "string"),
                F(
                    "members",
                    [
                        F("member_id", "string"),
                        F("group_instance_id", "string", "4+", nullable="4+", default=None),
                        F("client_id", "string"),
                        F("client_host", "string"),
                        F("member_metadata", "bytes"),
                        F("member_assignment", "bytes"),
                    ],
                ),
                F("authorized_operations", "int32", "3+", default=_OPERATIONS_UNKNOWN),
            ],
        ),
    ],
)
