"""OffsetForLeaderEpoch (key 23): the end offset of a leader epoch, used by followers and
consumers to detect log divergence after a leader change.
"""

from ..schema import Api, F

API = Api(
    key=23,
    name="OffsetForLeaderEpoch",
    versions="0-4",
    flexible="4+",
    request=[
        # -2 marks a consumer (debug) request, as opposed to a follower's broker id.
        F("replica_id", "int32", "3+", default=-2),
        F(
            "topics",
            [
                F("topic", "string"),
                F(
                    "partitions",
                    [
                        F("partition", "int32"),
                        F("current_leader_epoch", "int32", "2+", default=-1),
                        F("leader_epoch", "int32"),
                    ],
                ),
            ],
        ),
    ],
    response=[
        F("throttle_time_ms", "int32", "2+"),
        F(
            "topics",
            [
                F("topic", "string"),
                F(
                    "partitions",
                    [
                        F("error_code", "int16"),
                        F("partition", "int32"),
                        F("leader_epoch", "int32", "1+", default=-1),
                        F("end_offset", "int64", default=-1),
                    ],
                ),
            ],
        ),
    ],
)
