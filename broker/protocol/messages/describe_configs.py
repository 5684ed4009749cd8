"""DescribeConfigs (key 32): read broker, topic and other resource configurations."""

from ..schema import Api, F
from .common import ERROR, RESOURCE, THROTTLE_TIME_MS

API = Api(
    key=32,
    name="DescribeConfigs",
    versions="0-4",
    flexible="4+",
    request=[
        F(
            "resources",
            [
                *RESOURCE,
                # null asks for every key.
                F("configuration_keys", "[]string", nullable="0+"),
            ],
        ),
        F("include_synonyms", "bool", "1+"),
        F("include_documentation", "bool", "3+"),
    ],
    response=[
        THROTTLE_TIME_MS,
        F(
            "results",
            [
                *ERROR,
                *RESOURCE,
                F(
                    "configs",
                    [
                        F("name", "string"),
                        F("value", "string", nullable="0+"),
                        F("read_only", "bool"),
                        # v0 has a flag; v1+ replaced it with config_source.
                        F("is_default", "bool", "0"),
                        F("config_source", "int8", "1+", default=-1),
                        F("is_sensitive", "bool"),
                        F(
                            "synonyms",
                            [
                                F("name", "string", "1+"),
                                F("value", "string", "1+", nullable="1+"),
                                F("source", "int8", "1+"),
                            ],
                            "1+",
                        ),
                        F("config_type", "int8", "3+"),
                        F("documentation", "string", "3+", nullable="3+"),
                    ],
                ),
            ],
        ),
    ],
)
