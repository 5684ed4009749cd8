"""AlterPartition (key 56): a partition leader asks the controller to change the ISR."""

from ..schema import Api, F
from .common import PARTITION_ERROR, THROTTLE_TIME_MS

API = Api(
    key=56,
    name="AlterPartition",
    versions="0-3",
    flexible="0+",
    request=[
        F("broker_id", "int32"),
        F("broker_epoch", "int64", default=-1),
        F(
            "topics",
            [
                # Topics are named up to v1 and identified by id from v2.
                F("topic_name", "string", "0-1"),
                F("topic_id", "uuid", "2+"),
                F(
                    "partitions",
                    [
                        F("partition_index", "int32"),
                        F("leader_epoch", "int32"),
                        F("new_isr", "[]int32", "0-2"),
                        F(
                            "new_isr_with_epochs",
                            [
                                F("broker_id", "int32", "3+"),
                                # -1 when the broker cannot check epochs.
                                F("broker_epoch", "int64", "3+", default=-1),
                            ],
                            "3+",
                        ),
                        F("leader_recovery_state", "int8", "1+"),
                        F("partition_epoch", "int32"),
                    ],
                ),
            ],
        ),
    ],
    response=[
        THROTTLE_TIME_MS,
        F("error_code", "int16"),
        F(
            "topics",
            [
                F("topic_name", "string", "0-1"),
                F("topic_id", "uuid", "2+"),
                F(
                    "partitions",
                    [
                        *PARTITION_ERROR,
                        F("leader_id", "int32"),
                        F("leader_epoch", "int32"),
                        F("isr", "[]int32"),
                        F("leader_recovery_state", "int8", "1+"),
                        F("partition_epoch", "int32"),
                    ],
                ),
            ],
        ),
    ],
)
