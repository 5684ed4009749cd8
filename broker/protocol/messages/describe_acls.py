"""DescribeAcls (key 29): list the ACLs matching a filter."""

from ..schema import Api, F
from .common import ACL_ACCESS, ACL_FILTER, ERROR, RESOURCE, THROTTLE_TIME_MS

API = Api(
    key=29,
    name="DescribeAcls",
    versions="0-3",
    flexible="2+",
    request=list(ACL_FILTER),
    response=[
        THROTTLE_TIME_MS,
        *ERROR,
        F(
            "resources",
            [
                *RESOURCE,
                F("pattern_type", "int8", "1+", default=3),
                F("acls", list(ACL_ACCESS)),
            ],
        ),
    ],
)
