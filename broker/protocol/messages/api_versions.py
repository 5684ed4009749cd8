"""ApiVersions (key 18): the version ranges and features this broker supports.

The response to any version is always sent with a v0 response header (so a client that asked with
a version we do not support can still read the error); v3+ carries feature data as tagged fields.
"""

from ..schema import Api, F

API = Api(
    key=18,
    name="ApiVersions",
    versions="0-4",
    flexible="3+",
    request=[
        F("client_software_name", "string", "3+"),
        F("client_software_version", "string", "3+"),
    ],
    response=[
        F("error_code", "int16"),
        F(
            "api_keys",
            [
                F("api_key", "int16"),
                F("min_version", "int16"),
                F("max_version", "int16"),
            ],
        ),
        F("throttle_time_ms", "int32", "1+"),
        F(
            "supported_features",
            [
                F("name", "string", "3+"),
                F("min_version", "int16", "3+"),
                F("max_version", "int16", "3+"),
            ],
            "3+",
            tag=0,
            tagged="3+",
        ),
        F("finalized_features_epoch", "int64", "3+", tag=1, tagged="3+", default=-1),
        F(
            "finalized_features",
            [
                F("name", "string", "3+"),
                F("max_version_level", "int16", "3+"),
                F("min_version_level", "int16", "3+"),
            ],
            "3+",
            tag=2,
            tagged="3+",
        ),
        F("zk_migration_ready", "bool", "3+", tag=3, tagged="3+"),
    ],
)
