"""CreateAcls (key 30): add ACL bindings."""

from ..schema import Api, F
from .common import ACL_ACCESS, ERROR, RESOURCE, THROTTLE_TIME_MS

API = Api(
    key=30,
    name="CreateAcls",
    versions="0-3",
    flexible="2+",
    request=[
        F(
            "creations",
            [
                *RESOURCE,
                # Absent before v1, where every binding is a literal name (3).
                F("resource_pattern_type", "int8", "1+", default=3),
                *ACL_ACCESS,
            ],
        ),
    ],
    response=[
        THROTTLE_TIME_MS,
        F("results", list(ERROR)),
    ],
)
