"""DeleteTopics (key 20): delete topics by name (v0-5) or by name-or-id (v6+)."""

from ..schema import Api, F

API = Api(
    key=20,
    name="DeleteTopics",
    versions="0-6",
    flexible="4+",
    request=[
        F(
            "topics",
            [
                F("name", "string", "6+", nullable="6+", default=None),
                F("topic_id", "uuid", "6+"),
            ],
            "6+",
        ),
        F("topic_names", "[]string", "0-5"),
        F("timeout_ms", "int32"),
    ],
    response=[
        F("throttle_time_ms", "int32", "1+"),
        F(
            "responses",
            [
                F("name", "string", nullable="6+"),
                F("topic_id", "uuid", "6+"),
                F("error_code", "int16"),
                F("error_message", "string", "5+", nullable="5+", default=None),
            ],
        ),
    ],
)
