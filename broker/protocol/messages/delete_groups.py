"""DeleteGroups (key 42): remove empty consumer groups and their committed offsets."""

from ..schema import Api, F
from .common import THROTTLE_TIME_MS

API = Api(
    key=42,
    name="DeleteGroups",
    versions="0-2",
    flexible="2+",
    request=[
        F("groups_names", "[]string"),
    ],
    response=[
        THROTTLE_TIME_MS,
        F(
            "results",
            [
                F("group_id", "string"),
                F("error_code", "int16"),
            ],
        ),
    ],
)
