"""AlterUserScramCredentials (key 51): delete or upsert SCRAM credentials (client salts and hashes)."""

from ..schema import Api, F

API = Api(
    key=51,
    name="AlterUserScramCredentials",
    versions="0",
    flexible="0+",
    request=[
        F(
            "deletions",
            [
                F("name", "string"),
                F("mechanism", "int8"),
            ],
        ),
        F(
            "upsertions",
            [
                F("name", "string"),
                F("mechanism", "int8"),
                F("iterations", "int32"),
                F("salt", "bytes"),
                F("salted_password", "bytes"),
            ],
        ),
    ],
    response=[
        F("throttle_time_ms", "int32"),
        F(
            "results",
            [
                F("user", "string"),
                F("error_code", "int16"),
                F("error_message", "string", nullable="0+"),
            ],
        ),
    ],
)
