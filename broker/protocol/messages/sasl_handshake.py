"""SaslHandshake (key 17)."""

from ..schema import Api, F

API = Api(
    key=17,
    name="SaslHandshake",
    versions="0-1",
    flexible="none",
    request=[
        F("mechanism", "string"),
    ],
    response=[
        F("error_code", "int16"),
        F("mechanisms", "[]string"),
    ],
)
