"""DescribeClientQuotas (key 48): read quota values for user/client-id/ip entities."""

from ..schema import Api, F
from .common import ERROR, THROTTLE_TIME_MS

# An entity is a list of (type, name) pairs; a null name is the type's default entity.
_ENTITY = [
    F("entity_type", "string"),
    F("entity_name", "string", nullable="0+"),
]

API = Api(
    key=48,
    name="DescribeClientQuotas",
    versions="0-1",
    flexible="1+",
    request=[
        F(
            "components",
            [
                F("entity_type", "string"),
                # 0 exact name, 1 default entity, 2 any named entity.
                F("match_type", "int8"),
                F("match", "string", nullable="0+"),
            ],
        ),
        F("strict", "bool"),
    ],
    response=[
        THROTTLE_TIME_MS,
        *ERROR,
        F(
            "entries",
            [
                F("entity", _ENTITY),
                F(
                    "values",
                    [
                        F("key", "string"),
                        F("value", "float64"),
                    ],
                ),
            ],
            nullable="0+",
        ),
    ],
)
