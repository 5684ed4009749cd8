"""SaslAuthenticate (key 36): carries SASL tokens once SaslHandshake v1 picked a mechanism."""

from ..schema import Api, F
from .common import ERROR

API = Api(
    key=36,
    name="SaslAuthenticate",
    versions="0-2",
    flexible="2+",
    request=[
        F("auth_bytes", "bytes"),
    ],
    response=[
        *ERROR,
        F("auth_bytes", "bytes"),
        # 0 means the session does not expire.
        F("session_lifetime_ms", "int64", "1+"),
    ],
)
