"""OffsetFetch (key 9): read committed positions; v8+ batches several groups in one request."""

from ..schema import Api, F

API = Api(
    key=9,
    name="OffsetFetch",
    versions="0-9",
    flexible="6+",
    request=[
        F("group_id", "string", "0-7"),
        # A null topic list (v2+) asks for every partition the group has committed.
        F(
            "topics",
            [
                F("name", "string", "0-7"),
                F("partition_indexes", "[]int32", "0-7"),
            ],
            "0-7",
            nullable="2-7",
        ),
        F(
            "groups",
            [
                F("group_id", "string", "8+"),
                F("member_id", "string", "9+", nullable="9+", default=None),
                F("member_epoch", "int32", "9+", default=-1),
                F(
                    "topics",
                    [
                        F("name", "string", "8+"),
                        F("partition_indexes", "[]int32", "8+"),
                    ],
                    "8+",
                    nullable="8+",
                ),
            ],
            "8+",
        ),
        F("require_stable", "bool", "7+"),
    ],
    response=[
        F("throttle_time_ms", "int32", "3+"),
        F(
            "topics",
            [
                F("name", "string", "0-7"),
                F(
                    "partitions",
                    [
                        F("partition_index", "int32", "0-7"),
                        F("committed_offset", "int64", "0-7"),
                        F("committed_leader_epoch", "int32", "5-7", default=-1),
                        F("metadata", "string", "0-7", nullable="0-7"),
                        F("error_code", "int16", "0-7"),
                    ],
                    "0-7",
                ),
            ],
            "0-7",
        ),
        F("error_code", "int16", "2-7"),
        F(
            "groups",
            [
                F("group_id", "string", "8+"),
                F(
                    "topics",
                    [
                        F("name", "string", "8+"),
                        F(
                            "partitions",
                            [
                                F("partition_index", "int32", "8+"),
                                F("committed_offset", "int64", "8+"),
                                F("committed_leader_epoch", "int32", "8+", default=-1),
                                F("metadata", "string", "8+", nullable="8+"),
                                F("error_code", "int16", "8+"),
                            ],
                            "8+",
                        ),
                    ],
                    "8+",
                ),
                F("error_code", "int16", "8+"),
            ],
            "8+",
        ),
    ],
)
