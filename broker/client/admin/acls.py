"""Who may do what: ACL bindings (CreateAcls, DescribeAcls, DeleteAcls) and SCRAM credentials
(DescribeUserScramCredentials, AlterUserScramCredentials). Wire values are Kafka's."""

from __future__ import annotations

import hashlib
import os
from collections.abc import Sequence
from dataclasses import dataclass, field
from enum import IntEnum

from ...protocol.acl_types import AclOperation, AclPatternType, AclPermissionType, AclResourceType
from ...protocol.api_keys import ApiKey
from ..cluster import error_of, raise_first
from .base import AdminBase


@dataclass(frozen=True)
class AclBinding:
    resource_type: int
    name: str
    pattern_type: int
    principal: str
    host: str
    operation: int
    permission: int


@dataclass(frozen=True)
class AclBindingFilter:
    """None matches any name, principal or host."""

    resource_type: int = AclResourceType.ANY
    name: str | None = None
    pattern_type: int = AclPatternType.ANY
    principal: str | None = None
    host: str | None = None
    operation: int = AclOperation.ANY
    permission: int = AclPermissionType.ANY


def _acl_creation(b: AclBinding) -> dict:
    return {
        "resource_type": int(b.resource_type), "resource_name": b.name,
        "resource_pattern_type": int(b.pattern_type), "principal": b.principal,
        "host": b.host, "operation": int(b.operation), "permission_type": int(b.permission),
    }  # fmt: skip


def _acl_filter_body(f: AclBindingFilter) -> dict:
    return {
        "resource_type_filter": int(f.resource_type), "resource_name_filter": f.name,
        "pattern_type_filter": int(f.pattern_type), "principal_filter": f.principal,
        "host_filter": f.host, "operation": int(f.operation),
        "permission_type": int(f.permission),
    }  # fmt: skip


def _binding(resource: dict, acl: dict) -> AclBinding:
    """A binding from a DescribeAcls resource and one of its ACLs, or (both the same dict) a
    DeleteAcls matching ACL."""
    return AclBinding(
        resource["resource_type"], resource["resource_name"], resource["pattern_type"],
        acl["principal"], acl["host"], acl["operation"], acl["permission_type"],
    )  # fmt: skip


class ScramMechanism(IntEnum):
    SCRAM_SHA_256 = 1
    SCRAM_SHA_512 = 2


@dataclass(frozen=True)
class ScramCredentialInfo:
    mechanism: int
    iterations: int


@dataclass(frozen=True)
class ScramUpsertion:
    """A user's password for one mechanism; salted and hashed on the client (RFC 5802 Hi)."""

    user: str
    mechanism: int
    password: str
    iterations: int = 4096
    salt: bytes = field(default_factory=lambda: os.urandom(32))

    def to_body(self) -> dict:
        digest = {1: "sha256", 2: "sha512"}.get(int(self.mechanism), "sha256")
        salted = hashlib.pbkdf2_hmac(digest, self.password.encode(), self.salt, self.iterations)
        return {
            "name": self.user, "mechanism": int(self.mechanism), "iterations": self.iterations,
            "salt": self.salt, "salted_password": salted,
        }  # fmt: skip


class AclsAdmin(AdminBase):
    async def create_acls(self, bindings: Sequence[AclBinding]) -> None:
        """Create ACL bindings (CreateAcls); raises the first binding's error."""
        body = {"creations": [_acl_creation(b) for b in bindings]}
        resp = await self.cluster.retry(
            lambda: self.cluster.request_any(ApiKey.CREATE_ACLS, body, min_version=1),
            what="CreateAcls",
        )
        raise_first(
            error_of(r["error_code"], r.get("error_message"), "CreateAcls") for r in resp["results"]
        )

    async def describe_acls(self, acl_filter: AclBindingFilter) -> list[AclBinding]:
        body = _acl_filter_body(acl_filter)
        resp = await self._request_any(ApiKey.DESCRIBE_ACLS, body, "DescribeAcls", min_version=1)
        return [_binding(r, a) for r in resp["resources"] for a in r["acls"]]

    async def delete_acls(self, filters: Sequence[AclBindingFilter]) -> list[list[AclBinding]]:
        """Delete the bindings matching each filter; returns what each filter deleted."""
        body = {"filters": [_acl_filter_body(f) for f in filters]}
        resp = await self.cluster.retry(
            lambda: self.cluster.request_any(ApiKey.DELETE_ACLS, body, min_version=1),
            what="DeleteAcls",
        )
        out = []
        for r in resp["filter_results"]:
            error = error_of(r["error_code"], r.get("error_message"), "DeleteAcls")
            if error is not None:
                raise error
            out.append([_binding(m, m) for m in r["matching_acls"]])
        return out

    # -- SCRAM credentials ----------------------------------------------------------------

    async def describe_user_scram_credentials(
        self, users: Sequence[str] | None = None
    ) -> dict[str, list[ScramCredentialInfo]]:
        """Mechanisms and iterations per user (all users with credentials when `users` is
        None). Raises RESOURCE_NOT_FOUND for a named user without credentials."""
        body = {"users": None if users is None else [{"name": u} for u in users]}
        resp = await self._request_any(
            ApiKey.DESCRIBE_USER_SCRAM_CREDENTIALS, body, "DescribeUserScram"
        )
        out = {}
        for r in resp["results"]:
            error = error_of(r["error_code"], r.get("error_message"), f"user {r['user']!r}")
            if error is not None:
                raise error
            out[r["user"]] = [
                ScramCredentialInfo(c["mechanism"], c["iterations"]) for c in r["credential_infos"]
            ]
        return out

    async def alter_user_scram_credentials(
        self,
        upsertions: Sequence[ScramUpsertion] = (),
        deletions: Sequence[tuple[str, int]] = (),
    ) -> None:
        """Create or replace credentials (the password is salted and hashed here; only the
        salted password travels) and delete (user, mechanism) pairs. Sent to the controller."""
        body = {
            "deletions": [{"name": u, "mechanism": m} for u, m in deletions],
            "upsertions": [u.to_body() for u in upsertions],
        }
        resp = await self.cluster.retry(
            lambda: self.cluster.request_controller(ApiKey.ALTER_USER_SCRAM_CREDENTIALS, body),
            what="AlterUserScramCredentials",
        )
        raise_first(
            error_of(r["error_code"], r.get("error_message"), f"user {r['user']!r}")
            for r in resp["results"]
        )
