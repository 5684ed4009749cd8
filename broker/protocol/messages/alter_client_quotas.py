"""AlterClientQuotas (key 49): set or remove quota values per entity."""

from ..schema import Api, F

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
        F("throttle_time_ms", "int32"),
        F(
            "entries",
            [
                F("error_code", "int16"),
                F("error_message", "string", nullable="0+"),
                F("entity", _ENTITY),
            ],
        ),
    ],
)
