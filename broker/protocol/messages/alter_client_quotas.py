"""AlterClientQuotas (key 49): set or remove quota values per entity."""

from ..schema import Api, F
from .common import ERROR, THROTTLE_TIME_MS

# A null entity name addresses the default entity of that type.
_ENTITY = [
    F("entity_type", "string"),
    F("entity_name", "string", nullable="0+"),
]

API = Api(
    key=49,
    name="AlterClientQuotas",
    versions="0-1",
    flexible="1+",
    request=[
        F(
            "entries",
            [
                F("entity", _ENTITY),
                F(
                    "ops",
                    [
                        F("key", "string"),
                        F("value", "float64"),
                        F("remove", "bool"),
                    ],
                ),
            ],
        ),
        F("validate_only", "bool"),
    ],
    response=[
        THROTTLE_TIME_MS,
        F(
            "entries",
            [
                *ERROR,
                F("entity", _ENTITY),
            ],
        ),
    ],
)
