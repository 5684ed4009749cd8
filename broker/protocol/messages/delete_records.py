"""DeleteRecords (key 21): advance partitions' log start offsets (truncate from the head)."""

from ..schema import Api, F
from .common import THROTTLE_TIME_MS, topic_partitions

API = Api(
    key=21,
    name="DeleteRecords",
    versions="0-2",
    flexible="2+",
    request=[
        topic_partitions(
            "topics",
            F("partition_index", "int32"),
            F("offset", "int64"),
        ),
        F("timeout_ms", "int32"),
    ],
    response=[
        THROTTLE_TIME_MS,
        topic_partitions(
            "topics",
            F("partition_index", "int32"),
            F("low_watermark", "int64"),
            F("error_code", "int16"),
        ),
    ],
)
