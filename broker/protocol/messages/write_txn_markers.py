"""WriteTxnMarkers (key 27): coordinator-to-leader request to append commit/abort markers."""

from ..schema import Api, F
from .common import PARTITION_ERROR, topic_partitions

API = Api(
    key=27,
    name="WriteTxnMarkers",
    versions="0-1",
    flexible="1+",
    request=[
        F(
            "markers",
            [
                F("producer_id", "int64"),
                F("producer_epoch", "int16"),
                # True writes a COMMIT marker, false an ABORT marker.
                F("transaction_result", "bool"),
                F(
                    "topics",
                    [
                        F("name", "string"),
                        F("partition_indexes", "[]int32"),
                    ],
                ),
                F("coordinator_epoch", "int32"),
            ],
        ),
    ],
    response=[
        F(
            "markers",
            [
                F("producer_id", "int64"),
                topic_partitions(
                    "topics",
                    *PARTITION_ERROR,
                ),
            ],
        ),
    ],
)
