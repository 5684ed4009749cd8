"""Pure User logic: the principal, its SCRAM mechanism, and the ACL bindings its spec declares.

ACL rules in spec use Kafka's own words (Read, IdempotentWrite, ...); here they become the admin
client's AclBinding values, one binding per operation, so the desired and the actual ACLs of the
principal compare as plain sets.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from odradek.broker.client.admin import (
    AclBinding,
    AclOperation,
    AclPatternType,
    AclPermissionType,
    AclResourceType,
    ScramMechanism,
)
from odradek.broker.protocol.acl_types import camel_name

USERS = "users"
CLUSTER_RESOURCE_NAME = "kafka-cluster"  # Kafka's only name for the CLUSTER resource

MECHANISMS = {
    "scram-sha-512": ScramMechanism.SCRAM_SHA_512,
    "scram-sha-256": ScramMechanism.SCRAM_SHA_256,
}
SASL_MECHANISM = {"scram-sha-512": "SCRAM-SHA-512", "scram-sha-256": "SCRAM-SHA-256"}
RESOURCE_TYPES = {
    "topic": AclResourceType.TOPIC,
    "group": AclResourceType.GROUP,
    "cluster": AclResourceType.CLUSTER,
    "transactionalId": AclResourceType.TRANSACTIONAL_ID,
}
PATTERN_TYPES = {"literal": AclPatternType.LITERAL, "prefix": AclPatternType.PREFIXED}
PERMISSIONS = {"allow": AclPermissionType.ALLOW, "deny": AclPermissionType.DENY}
# Kafka's operation names (Read, ClusterAction, ...), as the User CRD's rules spell them.
OPERATIONS = {
    camel_name(op): op for op in AclOperation if op not in (AclOperation.UNKNOWN, AclOperation.ANY)
}


def username(name: str, spec: Mapping[str, Any]) -> str:
    return spec.get("username") or name


def principal(name: str, spec: Mapping[str, Any]) -> str:
    return f"User:{username(name, spec)}"


@dataclass(frozen=True, slots=True)
class Authentication:
    mechanism: str  # scram-sha-512 | scram-sha-256
    secret_name: str  # where the password is (generated or given)
    secret_key: str
    generated: bool  # the operator makes and owns the Secret

    @property
    def scram(self) -> ScramMechanism:
        return MECHANISMS[self.mechanism]


def authentication_of(name: str, spec: Mapping[str, Any]) -> Authentication | None:
    auth = spec.get("authentication")
    if not auth:
        return None
    ref = ((auth.get("password") or {}).get("valueFrom") or {}).get("secretKeyRef")
    if ref:
        return Authentication(auth["type"], ref["name"], ref.get("key") or "password", False)
    return Authentication(auth["type"], auth.get("secretName") or name, "password", True)


def rule_bindings(principal_: str, rule: Mapping[str, Any]) -> list[AclBinding]:
    """The bindings of one spec.authorization.acls[] rule, one per operation."""
    resource = rule["resource"]
    kind = resource["type"]
    name = CLUSTER_RESOURCE_NAME if kind == "cluster" else resource["name"]
    pattern = "literal" if kind == "cluster" else resource.get("patternType") or "literal"
    return [
        AclBinding(
            RESOURCE_TYPES[kind],
            name,
            PATTERN_TYPES[pattern],
            principal_,
            rule.get("host") or "*",
            OPERATIONS[op],
            PERMISSIONS[rule.get("type") or "allow"],
        )
        for op in rule["operations"]
    ]


def acl_rules(spec: Mapping[str, Any]) -> list[Mapping[str, Any]]:
    return list(((spec.get("authorization") or {}).get("acls")) or [])


def desired_bindings(principal_: str, spec: Mapping[str, Any]) -> set[AclBinding]:
    return {b for rule in acl_rules(spec) for b in rule_bindings(principal_, rule)}


_NAMES = {
    "type": {v: k for k, v in RESOURCE_TYPES.items()},
    "pattern": {v: k for k, v in PATTERN_TYPES.items()},
    "permission": {v: k for k, v in PERMISSIONS.items()},
    "operation": {v: k for k, v in OPERATIONS.items()},
}


def binding_text(b: AclBinding) -> str:
    """For events and messages: "allow Read topic:orders (literal) from *"."""
    kind = _NAMES["type"].get(b.resource_type, str(b.resource_type))
    pattern = _NAMES["pattern"].get(b.pattern_type, str(b.pattern_type))
    return (
        f"{_NAMES['permission'].get(b.permission, b.permission)} "
        f"{_NAMES['operation'].get(b.operation, b.operation)} {kind}:{b.name} ({pattern}) "
        f"from {b.host}"
    )


def bindings_text(bindings: set[AclBinding] | list[AclBinding], limit: int = 10) -> str:
    shown = sorted(binding_text(b) for b in bindings)
    more = f" and {len(shown) - limit} more" if len(shown) > limit else ""
    return "; ".join(shown[:limit]) + more


def generated_secret_data(user: str, password: str, mechanism: str) -> dict[str, str]:
    """Every key of a generated password Secret. All follow from the password, the one key a
    user may edit there (to set a password of their choosing)."""
    return {
        "username": user,
        "password": password,
        "mechanism": SASL_MECHANISM[mechanism],
        "sasl.jaas.config": jaas_config(user, password),
    }


def jaas_config(user: str, password: str) -> str:
    """What a Java client puts in sasl.jaas.config (kept in the generated Secret); the same
    login module serves both SCRAM mechanisms."""
    escaped = password.replace("\\", "\\\\").replace('"', '\\"')
    return (
        "org.apache.kafka.common.security.scram.ScramLoginModule required "
        f'username="{user}" password="{escaped}";'
    )
