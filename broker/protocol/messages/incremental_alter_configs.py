"""IncrementalAlterConfigs (key 44): set/delete/append/subtract individual config entries."""

from ..schema import Api, F

API = Api(
    key=44,
    name="IncrementalAlterConfigs",
    versions="0-1",
    flexible="1+",
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
                        # 0 SET, 1 DELETE, 2 APPEND, 3 SUBTRACT.
                        F("config_operation", "int8"),
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
