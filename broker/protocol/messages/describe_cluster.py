"""DescribeCluster (key 60): cluster id, controller and brokers, as the admin client sees them."""

from ..schema import Api, F
from .common import THROTTLE_TIME_MS

# Sentinel for "authorized operations not requested".
_OPS_OMITTED = -(2**31)

API = Api(
    key=60,
    name="DescribeCluster",
    versions="0-1",
    flexible="0+",
    request=[
        F("include_cluster_authorized_operations", "bool"),
        # 1 brokers, 2 controllers.
        F("endpoint_type", "int8", "1+", default=1),
    ],
    response=[
        THROTTLE_TIME_MS,
        F("error_code", "int16"),
        F("error_message", "string", nullable="0+", default=None),
        F("endpoint_type", "int8", "1+", default=1),
        F("cluster_id", "string"),
        F("controller_id", "int32", default=-1),
        F(
            "brokers",
            [
                F("broker_id", "int32"),
                F("host", "string"),
                F("port", "int32"),
                F("rack", "string", nullable="0+", default=None),
            ],
        ),
        F("cluster_authorized_operations", "int32", default=_OPS_OMITTED),
    ],
)
