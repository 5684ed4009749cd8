"""DescribeDelegationToken (key 41): list tokens, optionally by owner."""

from ..schema import Api, F
from .common import THROTTLE_TIME_MS

API = Api(
    key=41,
    name="DescribeDelegationToken",
    versions="0-3",
    flexible="2+",
    request=[
        # null describes every token the caller may see.
        F(
            "owners",
            [
                F("principal_type", "string"),
                F("principal_name", "string"),
            ],
            nullable="0+",
        ),
    ],
    response=[
        F("error_code", "int16"),
        F(
            "tokens",
            [
                F("principal_type", "string"),
                F("principal_name", "string"),
                F("token_requester_principal_type", "string", "3+"),
                F("token_requester_principal_name", "string", "3+"),
                F("issue_timestamp", "int64"),
                F("expiry_timestamp", "int64"),
                F("max_timestamp", "int64"),
                F("token_id", "string"),
                F("hmac", "bytes"),
                F(
                    "renewers",
                    [
                        F("principal_type", "string"),
                        F("principal_name", "string"),
                    ],
                ),
            ],
        ),
        THROTTLE_TIME_MS,
    ],
)
