"""UpdateFeatures (key 57): change finalized feature levels (e.g. metadata.version)."""

from ..schema import Api, F
from .common import ERROR, THROTTLE_TIME_MS

API = Api(
    key=57,
    name="UpdateFeatures",
    versions="0-1",
    flexible="0+",
    request=[
        F("timeout_ms", "int32", default=60000),
        F(
            "feature_updates",
            [
                F("feature", "string"),
                F("max_version_level", "int16"),
                # v0's downgrade flag became upgrade_type in v1 (1 upgrade, 2 safe, 3 unsafe).
                F("allow_downgrade", "bool", "0"),
                F("upgrade_type", "int8", "1+", default=1),
            ],
        ),
        F("validate_only", "bool", "1+"),
    ],
    response=[
        THROTTLE_TIME_MS,
        *ERROR,
        F(
            "results",
            [
                F("feature", "string"),
                *ERROR,
            ],
        ),
    ],
)
