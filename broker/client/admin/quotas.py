"""Client quotas (byte rates, request percentage) per user and client id:
DescribeClientQuotas and AlterClientQuotas."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from enum import IntEnum

from ...protocol.api_keys import ApiKey
from ..cluster import error_of, raise_first
from .base import AdminBase


class QuotaMatchType(IntEnum):
    EXACT = 0
    DEFAULT = 1
    SPECIFIED = 2


class QuotasAdmin(AdminBase):
    async def describe_client_quotas(
        self,
        components: Sequence[tuple[str, int, str | None]] = (),
        *,
        strict: bool = False,
    ) -> dict[tuple[tuple[str, str | None], ...], dict[str, float]]:
        """Quotas by entity. `components`: (entity type, QuotaMatchType, name); entities are
        sorted tuples of (type, name), name None for a default entity."""
        body = {
            "components": [
                {"entity_type": t, "match_type": m, "match": n} for t, m, n in components
            ],
            "strict": strict,
        }
        resp = await self._request_any(ApiKey.DESCRIBE_CLIENT_QUOTAS, body, "DescribeClientQuotas")
        return {
            tuple(sorted((e["entity_type"], e["entity_name"]) for e in entry["entity"])): {
                v["key"]: v["value"] for v in entry["values"]
            }
            for entry in resp["entries"] or []
        }

    async def alter_client_quotas(
        self,
        alterations: Mapping[tuple[tuple[str, str | None], ...], Mapping[str, float | None]],
        *,
        validate_only: bool = False,
    ) -> None:
        """Set quota values (None removes a key) per entity, e.g.
        `{(("client-id", "app"),): {"producer_byte_rate": 1048576}}`."""
        body = {
            "entries": [
                {
                    "entity": [{"entity_type": t, "entity_name": n} for t, n in entity],
                    "ops": [
                        {"key": k, "value": 0.0 if v is None else float(v), "remove": v is None}
                        for k, v in ops.items()
                    ],
                }
                for entity, ops in alterations.items()
            ],
            "validate_only": validate_only,
        }
        resp = await self.cluster.retry(
            lambda: self.cluster.request_any(ApiKey.ALTER_CLIENT_QUOTAS, body),
            what="AlterClientQuotas",
        )
        raise_first(
            error_of(r["error_code"], r.get("error_message"), "AlterClientQuotas")
            for r in resp["entries"]
        )
