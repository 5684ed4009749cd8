"""AlterUserScramCredentials (key 51): delete or upsert SCRAM credentials (client salts and hashes)."""

from ..schema import Api, F
from .common import ERROR, THROTTLE_TIME_MS

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
        THROTTLE_TIME_MS,
        F(
            "results",
            [
                F("user", "string"),
                *ERROR,
            ],
        ),
    ],
)
