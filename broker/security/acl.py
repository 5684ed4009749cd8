"""Kafka's ACL model and authorizer semantics (pure: no store, no I/O).

A binding is a resource pattern (type, name, LITERAL or PREFIXED) plus an entry (principal,
host, operation, ALLOW or DENY). Authorization follows Kafka's AclAuthorizer: super users pass;
a resource with no ACL at all is open only with `allow.everyone.if.no.acl.found`; any matching
DENY wins; otherwise a matching ALLOW is needed, where READ, WRITE, DELETE and ALTER imply
DESCRIBE and ALTER_CONFIGS implies DESCRIBE_CONFIGS.
"""

from __future__ import annotations

import threading
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from enum import IntEnum
from typing import TypeVar

from ..protocol.acl_types import (
    AclOperation,
    AclPatternType,
    AclPermissionType,
    AclResourceType,
    camel_name,
)

WILDCARD = "*"
WILDCARD_PRINCIPAL = "User:*"
CLUSTER_NAME = "kafka-cluster"

_E = TypeVar("_E", bound=IntEnum)


def _from_camel(cls: type[_E], name: str) -> _E:
    for m in cls:
        if camel_name(m).lower() == name.replace("_", "").lower():
            return m
    # Kafka's own type names: ResourceType, PatternType, AclOperation, AclPermissionType.
    kafka_name = {AclResourceType: "ResourceType", AclPatternType: "PatternType"}.get(
        cls, cls.__name__
    )
    raise ValueError(f"Unknown {kafka_name} {name!r}")


def resource_type_from_name(name: str) -> AclResourceType:
    return _from_camel(AclResourceType, name)


def operation_from_name(name: str) -> AclOperation:
    return _from_camel(AclOperation, name)


def permission_from_name(name: str) -> AclPermissionType:
    return _from_camel(AclPermissionType, name)


_O = AclOperation
SUPPORTED_OPERATIONS: dict[AclResourceType, frozenset[AclOperation]] = {
    AclResourceType.TOPIC: frozenset({_O.READ, _O.WRITE, _O.CREATE, _O.DESCRIBE, _O.DELETE,
                                   _O.ALTER, _O.DESCRIBE_CONFIGS, _O.ALTER_CONFIGS, _O.ALL}),
    AclResourceType.GROUP: frozenset({_O.READ, _O.DESCRIBE, _O.DELETE, _O.ALL}),
    AclResourceType.CLUSTER: frozenset({_O.CREATE, _O.CLUSTER_ACTION, _O.DESCRIBE_CONFIGS,
                                     _O.ALTER_CONFIGS, _O.IDEMPOTENT_WRITE, _O.ALTER,
                                     _O.DESCRIBE, _O.ALL}),
    AclResourceType.TRANSACTIONAL_ID: frozenset({_O.DESCRIBE, _O.WRITE, _O.ALL}),
    AclResourceType.DELEGATION_TOKEN: frozenset({_O.DESCRIBE, _O.ALL}),
    AclResourceType.USER: frozenset({_O.CREATE_TOKENS, _O.DESCRIBE_TOKENS, _O.ALL}),
}  # fmt: skip

# An ALLOW for any of these operations also allows the key operation.
_IMPLIED_BY: dict[AclOperation, frozenset[AclOperation]] = {
    _O.DESCRIBE: frozenset({_O.DESCRIBE, _O.READ, _O.WRITE, _O.DELETE, _O.ALTER}),
    _O.DESCRIBE_CONFIGS: frozenset({_O.DESCRIBE_CONFIGS, _O.ALTER_CONFIGS}),
}


class InvalidAclError(ValueError):
    """A binding or filter Kafka would refuse with INVALID_REQUEST."""


@dataclass(frozen=True, order=True)
class ResourcePattern:
    resource_type: AclResourceType
    name: str
    pattern_type: AclPatternType = AclPatternType.LITERAL


@dataclass(frozen=True, order=True)
class AccessControlEntry:
    principal: str
    host: str
    operation: AclOperation
    permission: AclPermissionType


@dataclass(frozen=True, order=True)
class AclBinding:
    pattern: ResourcePattern
    entry: AccessControlEntry


def parse_principal(principal: str) -> tuple[str, str]:
    """`Type:name` -> (type, name); Kafka refuses principals without a type."""
    kind, sep, name = principal.partition(":")
    if not sep or not kind:
        raise InvalidAclError(f"Invalid principal {principal!r}: expected 'Type:name'")
    return kind, name


def validate_binding(b: AclBinding) -> None:
    """Kafka's checks before an ACL is stored (CreateAcls answers INVALID_REQUEST)."""
    p, e = b.pattern, b.entry
    if p.resource_type in (AclResourceType.ANY, AclResourceType.UNKNOWN):
        raise InvalidAclError("Invalid resource type")
    if p.pattern_type not in (AclPatternType.LITERAL, AclPatternType.PREFIXED):
        raise InvalidAclError(f"Invalid resource pattern type {p.pattern_type.name}")
    if not p.name:
        raise InvalidAclError("Invalid empty resource name")
    if p.resource_type == AclResourceType.CLUSTER and p.name != CLUSTER_NAME:
        raise InvalidAclError(f"The only valid name for the CLUSTER resource is {CLUSTER_NAME}")
    if p.pattern_type == AclPatternType.PREFIXED and p.name == WILDCARD:
        raise InvalidAclError("A PREFIXED pattern cannot be the wildcard '*'")
    if e.operation in (AclOperation.ANY, AclOperation.UNKNOWN):
        raise InvalidAclError("Invalid operation")
    if e.permission not in (AclPermissionType.ALLOW, AclPermissionType.DENY):
        raise InvalidAclError("Invalid permission type")
    if e.operation not in SUPPORTED_OPERATIONS[p.resource_type]:
        raise InvalidAclError(
            f"ResourceType {camel_name(p.resource_type)} does not support operation "
            f"{camel_name(e.operation)}"
        )
    parse_principal(e.principal)
    if not e.host:
        raise InvalidAclError("Invalid empty host")


@dataclass(frozen=True)
class AclBindingFilter:
    """None and ANY match everything; MATCH (with a name) matches every pattern that would
    apply to a resource of that name: the literal name, the literal wildcard, covering prefixes."""

    resource_type: AclResourceType = AclResourceType.ANY
    name: str | None = None
    pattern_type: AclPatternType = AclPatternType.ANY
    principal: str | None = None
    host: str | None = None
    operation: AclOperation = AclOperation.ANY
    permission: AclPermissionType = AclPermissionType.ANY

    def validate(self) -> None:
        if AclResourceType.UNKNOWN == self.resource_type:
            raise InvalidAclError("Filter with unknown resource type")
        if AclPatternType.UNKNOWN == self.pattern_type:
            raise InvalidAclError("Filter with unknown pattern type")
        if AclOperation.UNKNOWN == self.operation:
            raise InvalidAclError("Filter with unknown operation")
        if AclPermissionType.UNKNOWN == self.permission:
            raise InvalidAclError("Filter with unknown permission type")

    def matches_pattern(self, p: ResourcePattern) -> bool:
        if self.resource_type != AclResourceType.ANY and self.resource_type != p.resource_type:
            return False
        if self.pattern_type not in (AclPatternType.ANY, AclPatternType.MATCH, p.pattern_type):
            return False
        if self.name is None:
            return True
        if self.pattern_type in (AclPatternType.ANY, p.pattern_type):
            return self.name == p.name
        if p.pattern_type == AclPatternType.LITERAL:
            return self.name == p.name or p.name == WILDCARD
        return self.name.startswith(p.name)

    def matches_entry(self, e: AccessControlEntry) -> bool:
        return (
            (self.principal is None or self.principal == e.principal)
            and (self.host is None or self.host == e.host)
            and self.operation in (AclOperation.ANY, e.operation)
            and self.permission in (AclPermissionType.ANY, e.permission)
        )

    def matches(self, b: AclBinding) -> bool:
        return self.matches_pattern(b.pattern) and self.matches_entry(b.entry)


def parse_super_users(value: str | None) -> frozenset[str]:
    """`super.users`: principals separated by semicolons (`User:admin;User:ops`)."""
    if not value:
        return frozenset()
    return frozenset(p.strip() for p in value.split(";") if p.strip())


class AclCache:
    """All ACLs of the cluster, by resource pattern. Written by the change listener (any
    thread), read by request handlers: each pattern's entries are replaced as a whole."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._literal: dict[tuple[AclResourceType, str], frozenset[AccessControlEntry]] = {}
        self._prefixed: dict[tuple[AclResourceType, str], frozenset[AccessControlEntry]] = {}

    def _table(self, pattern_type: AclPatternType) -> dict:
        return self._prefixed if pattern_type == AclPatternType.PREFIXED else self._literal

    def set(self, pattern: ResourcePattern, entries: Iterable[AccessControlEntry]) -> None:
        frozen = frozenset(entries)
        key = (pattern.resource_type, pattern.name)
        with self._lock:
            table = self._table(pattern.pattern_type)
            if frozen:
                table[key] = frozen
            else:
                table.pop(key, None)

    def replace_all(self, acls: Mapping[ResourcePattern, Iterable[AccessControlEntry]]) -> None:
        literal, prefixed = {}, {}
        for pattern, entries in acls.items():
            frozen = frozenset(entries)
            if frozen:
                table = prefixed if pattern.pattern_type == AclPatternType.PREFIXED else literal
                table[(pattern.resource_type, pattern.name)] = frozen
        with self._lock:
            self._literal, self._prefixed = literal, prefixed

    def get(self, pattern: ResourcePattern) -> frozenset[AccessControlEntry]:
        key = (pattern.resource_type, pattern.name)
        return self._table(pattern.pattern_type).get(key, frozenset())

    def bindings(self) -> list[AclBinding]:
        with self._lock:
            items = [
                (AclPatternType.LITERAL, self._literal),
                (AclPatternType.PREFIXED, self._prefixed),
            ]
            out = [
                AclBinding(ResourcePattern(rt, name, pt), e)
                for pt, table in items
                for (rt, name), entries in table.items()
                for e in entries
            ]
        return sorted(out)

    def matching(self, resource_type: AclResourceType, name: str) -> list[AccessControlEntry]:
        """Entries of every pattern that applies to this resource."""
        literal, prefixed = self._literal, self._prefixed
        out: list[AccessControlEntry] = []
        out.extend(literal.get((resource_type, name), ()))
        if name != WILDCARD:
            out.extend(literal.get((resource_type, WILDCARD), ()))
        if prefixed:
            for i in range(1, len(name) + 1):
                out.extend(prefixed.get((resource_type, name[:i]), ()))
        return out


class AclAuthorizer:
    def __init__(
        self,
        cache: AclCache | None = None,
        *,
        super_users: Iterable[str] = (),
        allow_everyone_if_no_acl_found: bool = False,
    ) -> None:
        self.cache = cache or AclCache()
        self.super_users = frozenset(super_users)
        self.allow_everyone_if_no_acl_found = allow_everyone_if_no_acl_found

    def authorize(
        self,
        principal: str,
        host: str,
        operation: AclOperation,
        resource_type: AclResourceType,
        name: str,
    ) -> bool:
        if principal in self.super_users:
            return True
        if resource_type == AclResourceType.CLUSTER:
            name = CLUSTER_NAME
        acls = self.cache.matching(resource_type, name)
        if not acls:
            return self.allow_everyone_if_no_acl_found
        principals = (principal, WILDCARD_PRINCIPAL)
        hosts = (host, WILDCARD)
        relevant = [a for a in acls if a.principal in principals and a.host in hosts]
        for a in relevant:
            if a.permission == AclPermissionType.DENY and a.operation in (operation, _O.ALL):
                return False
        allowed_by = _IMPLIED_BY.get(operation, frozenset({operation}))
        return any(
            a.permission == AclPermissionType.ALLOW
            and (a.operation == _O.ALL or a.operation in allowed_by)
            for a in relevant
        )

    def authorize_any(
        self, principal: str, host: str, operation: AclOperation, resource_type: AclResourceType
    ) -> bool:
        """Kafka's authorizeByResourceType: is `operation` allowed on at least one resource of
        this type (used for e.g. idempotent writes and transactional ids)? Denies on the
        literal wildcard or on prefixes shadow allows as Kafka's default implementation does."""
        if principal in self.super_users:
            return True
        principals = (principal, WILDCARD_PRINCIPAL)
        hosts = (host, WILDCARD)
        denied_literal, denied_prefix, allowed = set(), set(), []
        bindings = [b for b in self.cache.bindings() if b.pattern.resource_type == resource_type]
        for b in bindings:
            e = b.entry
            if e.principal not in principals or e.host not in hosts:
                continue
            if e.permission == AclPermissionType.DENY and e.operation in (operation, _O.ALL):
                if b.pattern.pattern_type == AclPatternType.LITERAL:
                    if b.pattern.name == WILDCARD:
                        return False
                    denied_literal.add(b.pattern.name)
                else:
                    denied_prefix.add(b.pattern.name)
        for b in bindings:
            e = b.entry
            if (
                e.principal in principals
                and e.host in hosts
                and e.permission == AclPermissionType.ALLOW
                and e.operation in (operation, _O.ALL)
            ):
                allowed.append(b.pattern)
        for p in allowed:
            if p.pattern_type == AclPatternType.LITERAL:
                if (
                    p.name == WILDCARD
                    or p.name not in denied_literal
                    and not any(p.name.startswith(d) for d in denied_prefix)
                ):
                    return True
            elif not any(p.name.startswith(d) for d in denied_prefix):
                return True
        if not bindings:
            return self.allow_everyone_if_no_acl_found
        return False
