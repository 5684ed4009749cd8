"""FindCoordinator (key 10): locate the group or transaction coordinator; v4+ looks up many keys."""

from ..schema import Api, F

API = Api(
    key=10,
    name="FindCoordinator",
    versions="0-6",
    flexible="3+",
    request=[
        F("key", "string", "0-3"),
        # 0 = consumer group, 1 = transactional id.
        F("key_type", "int8", "1+"),
        F("coordinator_keys", "[]string", "4+"),
    ],
    response=[
        F("throttle_time_ms", "int32", "1+"),
        F("error_code", "int16", "0-3"),
        F("error_message", "string", "1-3", nullable="1-3"),
        F("node_id", "int32", "0-3"),
        F("host", "string", "0-3"),
        F("port", "int32", "0-3"),
        F(
            "coordinators",
            [
                F("key", "string", "4+"),
                F("node_id", "int32", "4+"),
                F("host", "string", "4+"),
                F("port", "int32", "4+"),
                F("error_code", "int16", "4+"),
                F("error_message", "string", "4+", nullable="4+"),
            ],
            "4+",
        ),
    ],
)
