"""CreateAcls (key 30): add ACL bindings."""

from ..schema import Api, F

API = Api(
    key=30,
    name="CreateAcls",
    versions="0-3",
    flexible="2+",
    request=[
        F(
            "creations",
            [
                F("resource_type", "int8"),
                F("resource_name", "string"),
                # Absent before v1, where every binding is a literal name (3).
                F("resource_pattern_type", "int8", "1+", default=3),
                F("principal", "string"),
                F("host", "string"),
                F("operation", "int8"),
                F("permission_type", "int8"),
            ],
        ),
    ],
    response=[
        F("throttle_time_ms", "int32"),
        F(
            "results",
            [
                F("error_code", "int16"),
                F("error_message", "string", nullable="0+"),
            ],
        ),
    ],
)
