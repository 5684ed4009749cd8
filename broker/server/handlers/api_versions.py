"""ApiVersions (key 18): advertise exactly the versions this broker has handlers for."""

from __future__ import annotations

import re
from typing import Any

from ...protocol.api_keys import ApiKey
from ...protocol.errors import ErrorCode
from .registry import HANDLERS, RequestContext, handles

_SOFTWARE_RE = re.compile(r"[a-zA-Z0-9](?:[a-zA-Z0-9\-.]*[a-zA-Z0-9])?")


def advertised_versions() -> list[dict[str, int]]:
    return [
        {"api_key": key, "min_version": spec.versions.lo, "max_version": spec.versions.hi}
        for key, spec in sorted(HANDLERS.items())
    ]


@handles(ApiKey.API_VERSIONS, "0-4")
async def handle_api_versions(ctx: RequestContext, req: dict[str, Any]) -> dict[str, Any]:
    if ctx.version >= 3:
        name = req.get("client_software_name", "")
        version = req.get("client_software_version", "")
        if not _SOFTWARE_RE.fullmatch(name) or not _SOFTWARE_RE.fullmatch(version):
            return {"error_code": ErrorCode.INVALID_REQUEST, "api_keys": advertised_versions()}
    return {"error_code": ErrorCode.NONE, "api_keys": advertised_versions(), "throttle_time_ms": 0}
