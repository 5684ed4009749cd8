"""CreatePartitions (key 37): grow the partition count of existing topics."""

from ..schema import Api, F
from .common import THROTTLE_TIME_MS

API = Api(
    key=37,
    name="CreatePartitions",
    versions="0-3",
    flexible="2+",
    request=[
        F(
            "topics",
            [
                F("name", "string"),
                F("count", "int32"),
                # null lets the controller place the new replicas.
                F("assignments", [F("broker_ids", "[]int32")], nullable="0+"),
            ],
        ),
        F("timeout_ms", "int32"),
        F("validate_only", "bool"),
    ],
    response=[
        THROTTLE_TIME_MS,
        F(
            "results",
            [
                F("name", "string"),
                F("error_code", "int16"),
                F("error_message", "string", nullable="0+", default=None),
            ],
        ),
    ],
)
