"""kopf handlers for Quota resources: one client-quota entity (user, client-id, both, or the
defaults) whose quota values are exactly the spec's; values set on that entity by other means are
reverted on the next resync, and deleting the resource removes the entity's quotas."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from odradek.broker.client import AdminClient

from .cluster_resource import ClusterResourceHandlers, Round
from .quota_model import (
    QUOTAS,
    Entity,
    as_spec_fields,
    change_text,
    changes,
    desired_values,
    entity_of,
    entity_text,
    strict_filter,
)
from .status import PENDING, RECONCILED, Outcome


async def read_quotas(admin: AdminClient, entity: Entity) -> dict[str, float]:
    found = await admin.describe_client_quotas(strict_filter(entity), strict=True)
    return dict(found.get(entity, {}))


class QuotaHandlers(ClusterResourceHandlers):
    KIND = "Quota"
    PLURAL = QUOTAS

    def claim(self, name: str, spec: Mapping[str, Any]) -> str:
        return f"quota entity {entity_text(entity_of(spec))}"

    async def converge(self, admin: AdminClient, r: Round) -> Outcome:
        body, new = r.body, r.new
        entity = entity_of(body["spec"])
        text = entity_text(entity)
        new["entity"] = text
        desired = desired_values(body["spec"])
        actual = await read_quotas(admin, entity)
        ops = changes(desired, actual)
        if ops:
            await admin.alter_client_quotas({entity: ops})
            self.acted(
                body, "alter_quotas", "QuotasSet", f"{text}: {change_text(ops)}", r.drift_mode
            )
            actual = await read_quotas(admin, entity)
        new["quotas"] = as_spec_fields(actual)
        left = changes(desired, actual)
        if left:
            return Outcome(
                False,
                PENDING,
                f"waiting for the brokers to show {text}: {change_text(left)}",
                retriable=True,
            )
        values = change_text(desired) or "no quotas"
        return Outcome(True, RECONCILED, f"{text}: {values}")

    async def remove(self, admin: AdminClient, body: Any) -> str:
        entity = entity_of(body["spec"])
        actual = await read_quotas(admin, entity)
        if actual:
            await admin.alter_client_quotas({entity: dict.fromkeys(actual)})
            return f"quotas of {entity_text(entity)} removed ({', '.join(sorted(actual))})"
        return f"{entity_text(entity)} had no quotas left"
