"""CreateDelegationToken (key 38): issue a token that can later authenticate via SCRAM."""

from ..schema import Api, F
from .common import THROTTLE_TIME_MS

API = Api(
    key=38,
    name="CreateDelegationToken",
    versions="0-3",
    flexible="2+",
    request=[
        # v3 lets a privileged caller create a token for someone else; null = the caller.
        F("owner_principal_type", "string", "3+", nullable="3+"),
        F("owner_principal_name", "string", "3+", nullable="3+"),
        F(
            "renewers",
            [
                F("principal_type", "string"),
                F("principal_name", "string"),
            ],
        ),
        # -1 picks the broker's configured maximum.
        F("max_lifetime_ms", "int64"),
    ],
    response=[
        F("error_code", "int16"),
        F("principal_type", "string"),
        F("principal_name", "string"),
        F("token_requester_principal_type", "string", "3+"),
        F("token_requester_principal_name", "string", "3+"),
        F("issue_timestamp_ms", "int64"),
        F("expiry_timestamp_ms", "int64"),
        F("max_timestamp_ms", "int64"),
        F("token_id", "string"),
        F("hmac", "bytes"),
        THROTTLE_TIME_MS,
    ],
)
