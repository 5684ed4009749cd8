"""IncrementalAlterConfigs (key 44): set/delete/append/subtract individual config entries."""

from ..schema import Api, F
from .common import ERROR, RESOURCE, THROTTLE_TIME_MS

API = Api(
    key=44,
    name="IncrementalAlterConfigs",
    versions="0-1",
    flexible="1+",
    request=[
        F(
            "resources",
            [
                *RESOURCE,
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
        THROTTLE_TIME_MS,
        F(
            "responses",
            [
                *ERROR,
                *RESOURCE,
            ],
        ),
    ],
)
