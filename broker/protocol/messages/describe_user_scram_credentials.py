"""DescribeUserScramCredentials (key 50): which SCRAM mechanisms each user has (no secrets)."""

from ..schema import Api, F

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
        F("throttle_time_ms", "int32"),
        F("error_code", "int16"),
        F("error_message", "string", nullable="0+"),
        F(
            "results",
            [
                F("user", "string"),
                F("error_code", "int16"),
                F("error_message", "string", nullable="0+"),
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
