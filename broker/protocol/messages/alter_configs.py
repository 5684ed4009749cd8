"""AlterConfigs (key 33): replace the whole config of each resource (non-incremental)."""

from ..schema import Api, F

API = Api(
    key=33,
    name="AlterConfigs",
    versions="0-2",
    flexible="2+",
    request=[
        F(
            "resources",
            [
                F("resource_type", "int8"),
                F("resource_name", "string"),
                F(
                    "configs",
                    [
                        F("name", "string"),
                        F("value", "string", nullable="0+"),
                    ],
                ),
            ],
        ),
        F("validate_only", "bool"),
    ],
    response=[
        F("throttle_time_ms", "int32"),
        F(
            "responses",
            [
                F("error_code", "int16"),
                F("error_message", "string", nullable="0+"),
                F("resource_type", "int8"),
                F("resource_name", "string"),
            ],
        ),
    ],
)
