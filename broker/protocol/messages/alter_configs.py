"""AlterConfigs (key 33): replace the whole config of each resource (non-incremental)."""

from ..schema import Api, F
from .common import ERROR, RESOURCE, THROTTLE_TIME_MS

API = Api(
    key=33,
    name="AlterConfigs",
    versions="0-2",
    flexible="2+",
    request=[
        F(
            "resources",
            [
                *RESOURCE,
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
