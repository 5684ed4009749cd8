"""DescribeUserScramCredentials (key 50): which SCRAM mechanisms each user has (no secrets)."""

from ..schema import Api, F
from .common import ERROR, THROTTLE_TIME_MS

API = Api(
    key=50,
    name="DescribeUserScramCredentials",
    versions="0",
    flexible="0+",
    request=[
        # null or empty describes every user.
        F("users", [F("name", "string")], nullable="0+"),
    ],
    response=[
        THROTTLE_TIME_MS,
        *ERROR,
        F(
            "results",
            [
                F("user", "string"),
                *ERROR,
                F(
                    "credential_infos",
                    [
                        F("mechanism", "int8"),
                        F("iterations", "int32"),
                    ],
                ),
            ],
        ),
    ],
)
