"""DeleteAcls (key 31): remove the ACL bindings matching each filter."""

from ..schema import Api, F
from .common import ACL_ACCESS, ACL_FILTER, ERROR, RESOURCE, THROTTLE_TIME_MS

API = Api(
    key=31,
    name="DeleteAcls",
    versions="0-3",
    flexible="2+",
    request=[
        F("filters", list(ACL_FILTER)),
    ],
    response=[
        THROTTLE_TIME_MS,
        F(
            "filter_results",
            [
                *ERROR,
                F(
                    "matching_acls",
                    [
                        *ERROR,
                        *RESOURCE,
                        F("pattern_type", "int8", "1+", default=3),
                        *ACL_ACCESS,
                    ],
                ),
            ],
        ),
    ],
)
