"""ControlledShutdown (key 7): broker -> controller, move leadership away before shutting down;
the response lists partitions still led by the broker.
"""

from ..schema import Api, F

API = Api(
    key=7,
    name="ControlledShutdown",
    versions="0-3",
    flexible="3+",
    request=[
        F("broker_id", "int32"),
        F("broker_epoch", "int64", "2+", default=-1),
    ],
    response=[
        F("error_code", "int16"),
        F(
            "remaining_partitions",
            [
                F("topic_name", "string"),
                F("partition_index", "int32"),
            ],
        ),
    ],
)
