"""UpdateMetadata (key 6): controller -> broker, push live brokers and partition leadership.

v0-4 send a flat partition list; v5+ group it by topic. v0 describes each broker with one
plaintext host/port, v1+ with a list of endpoints (v3+ named by listener).
"""

from ..schema import Api, F, Field


def _partition_state() -> list[Field]:
    """Fields of one partition's state, shared by the flat (v0-4) and per-topic (v5+) lists."""
    return [
        F("topic_name", "string", "0-4"),
        F("partition_index", "int32"),
        F("controller_epoch", "int32"),
        F("leader", "int32"),
        F("leader_epoch", "int32"),
        F("isr", "[]int32"),
        F("zk_version", "int32"),
        F("replicas", "[]int32"),
        F("offline_replicas", "[]int32", "4+"),
    ]


API = Api(
    key=6,
    name="UpdateMetadata",
    versions="0-8",
    flexible="6+",
    request=[
        F("controller_id", "int32"),
        F("is_kraft_controller", "bool", "8+"),
        F("type", "int8", "8+", tag=0, tagged="8+"),
        F("controller_epoch", "int32"),
        F("broker_epoch", "int64", "5+", default=-1),
        F("ungrouped_partition_states", _partition_state(), "0-4"),
        F(
            "topic_states",
            [
                F("topic_name", "string", "5+"),
                F("topic_id", "uuid", "7+"),
                F("partition_states", _partition_state(), "5+"),
            ],
            "5+",
        ),
        F(
            "live_brokers",
            [
                F("id", "int32"),
                F("v0_host", "string", "0"),
                F("v0_port", "int32", "0"),
                F(
                    "endpoints",
                    [
                        F("port", "int32", "1+"),
                        F("host", "string", "1+"),
                        F("listener", "string", "3+"),
                        F("security_protocol", "int16", "1+"),
                    ],
                    "1+",
                ),
                F("rack", "string", "2+", nullable="2+"),
            ],
        ),
    ],
    response=[
        F("error_code", "int16"),
    ],
)
