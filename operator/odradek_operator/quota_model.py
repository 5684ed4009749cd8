"""Pure Quota logic: the entity a Quota names, its desired values, and the changes to make.

An entity is Kafka's: a sorted tuple of (entity type, name) pairs, name None for the default
entity of that type, exactly as the admin client's describe/alter_client_quotas use it.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from odradek.broker.client.admin import QuotaMatchType

QUOTAS = "quotas"
USER, CLIENT_ID = "user", "client-id"

# spec field -> Kafka quota key
QUOTA_KEYS = {
    "producerByteRate": "producer_byte_rate",
    "consumerByteRate": "consumer_byte_rate",
    "requestPercentage": "request_percentage",
    "controllerMutationRate": "controller_mutation_rate",
}
SPEC_FIELDS = {v: k for k, v in QUOTA_KEYS.items()}

Entity = tuple[tuple[str, str | None], ...]


def entity_of(spec: Mapping[str, Any]) -> Entity:
    """spec.user / spec.clientId ({name: x} or {default: true}) as a Kafka quota entity."""
    parts: list[tuple[str, str | None]] = []
    for field, entity_type in (("user", USER), ("clientId", CLIENT_ID)):
        part = spec.get(field)
        if part:
            parts.append((entity_type, None if part.get("default") else str(part["name"])))
    return tuple(sorted(parts))


def entity_text(entity: Entity) -> str:
    """For messages and status: "user=alice,client-id=<default>"."""
    return ",".join(f"{t}={'<default>' if n is None else n}" for t, n in entity)


def strict_filter(entity: Entity) -> list[tuple[str, int, str | None]]:
    """DescribeClientQuotas components that match exactly this entity (with strict=True)."""
    return [
        (t, QuotaMatchType.DEFAULT if n is None else QuotaMatchType.EXACT, n) for t, n in entity
    ]


def desired_values(spec: Mapping[str, Any]) -> dict[str, float]:
    return {key: float(spec[f]) for f, key in QUOTA_KEYS.items() if spec.get(f) is not None}


def changes(desired: Mapping[str, float], actual: Mapping[str, float]) -> dict[str, float | None]:
    """Kafka keys to set (value) or remove (None) so the entity holds exactly `desired`."""
    out: dict[str, float | None] = {k: v for k, v in sorted(desired.items()) if actual.get(k) != v}
    out.update({k: None for k in sorted(set(actual) - set(desired))})
    return out


def as_spec_fields(values: Mapping[str, float]) -> dict[str, float | int]:
    """Broker values keyed like spec (for status); whole numbers shown as integers."""
    return {
        SPEC_FIELDS.get(k, k): int(v) if float(v).is_integer() else v
        for k, v in sorted(values.items())
    }


def change_text(ops: Mapping[str, float | None]) -> str:
    shown = [
        f"{SPEC_FIELDS.get(k, k)} removed" if v is None else f"{SPEC_FIELDS.get(k, k)}={v:g}"
        for k, v in ops.items()
    ]
    return ", ".join(shown)
