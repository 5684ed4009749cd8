"""kopf handlers for User resources: one principal, User:<username>, with its SCRAM credential
and exactly the ACLs its spec declares.

The resource owns its principal: ACLs of that principal not in spec are removed, and deleting the
resource removes the principal's credentials and ACLs. Other principals are never read for
changes nor touched. The password lives in a Secret, generated (owned by the User, so the garbage
collector removes it) or named by spec; a changed Secret (new resourceVersion) re-sets the
credential on the next resync. In a generated Secret the password is the key a user may edit: the
other keys (sasl.jaas.config above all) are rewritten to follow it.
"""

from __future__ import annotations

import secrets
from collections.abc import Mapping
from typing import Any

import kubernetes
from odradek.broker.client import AdminClient, ErrorCode, KafkaError
from odradek.broker.client.admin import AclBinding, AclBindingFilter, ScramUpsertion

from .cluster_resource import ClusterResourceHandlers, Round
from .clusters import CLUSTER_LABEL, GROUP
from .kube_secrets import Secret, create_owned_secret, read_secret, update_secret
from .status import KAFKA_ERROR, PENDING, RECONCILED, Outcome
from .user_model import (
    USERS,
    Authentication,
    acl_rules,
    authentication_of,
    bindings_text,
    desired_bindings,
    generated_secret_data,
    principal,
    rule_bindings,
    username,
)

SECRET_NOT_FOUND = "SecretNotFound"
SECRET_CONFLICT = "SecretConflict"
USER_LABEL = f"{GROUP}/user"


async def scram_mechanisms(admin: AdminClient, user: str) -> set[int]:
    try:
        found = await admin.describe_user_scram_credentials([user])
    except KafkaError as e:
        if e.code == ErrorCode.RESOURCE_NOT_FOUND:
            return set()
        raise
    return {int(c.mechanism) for c in found.get(user, [])}


async def principal_acls(admin: AdminClient, principal_: str) -> set[AclBinding]:
    return set(await admin.describe_acls(AclBindingFilter(principal=principal_)))


def _exact(b: AclBinding) -> AclBindingFilter:
    return AclBindingFilter(
        b.resource_type, b.name, b.pattern_type, b.principal, b.host, b.operation, b.permission
    )


class UserHandlers(ClusterResourceHandlers):
    KIND = "User"
    PLURAL = USERS

    def claim(self, name: str, spec: Mapping[str, Any]) -> str:
        return f"principal {principal(name, spec)}"

    async def converge(self, admin: AdminClient, r: Round) -> Outcome:
        meta, spec = r.body["metadata"], r.body["spec"]
        user = username(meta["name"], spec)
        r.new["username"] = user
        # Credentials and ACLs are independent: a missing Secret does not hold back the ACLs.
        try:
            auth_problem = await self._credentials(admin, r, user)
        except kubernetes.client.ApiException as e:
            auth_problem = Outcome(
                False, SECRET_NOT_FOUND, f"reading the password Secret: {e.reason}", retriable=True
            )
        acl_problem = await self._acls(admin, r, principal(meta["name"], spec))
        problems = [p for p in (auth_problem, acl_problem) if p is not None]
        if problems:
            return Outcome(
                False,
                problems[0].reason,
                "; ".join(p.message for p in problems),
                retriable=any(p.retriable for p in problems),
            )
        auth = authentication_of(meta["name"], spec)
        what = f"{auth.mechanism} credential, " if auth else "no credential, "
        return Outcome(True, RECONCILED, f"User:{user}: {what}{r.new['acls']} ACL bindings")

    # -- credentials ----------------------------------------------------------------------

    async def _credentials(self, admin: AdminClient, r: Round, user: str) -> Outcome | None:
        body, status, new, drift_mode = r.body, r.status, r.new, r.drift_mode
        meta = body["metadata"]
        auth = authentication_of(meta["name"], body["spec"])
        existing = await scram_mechanisms(admin, user)
        if auth is None:
            new["credential"] = None
            if existing:
                await admin.alter_user_scram_credentials(deletions=[(user, m) for m in existing])
                self.acted(
                    body, "delete_credential", "CredentialDeleted",
                    f"User:{user}: SCRAM credentials removed (no spec.authentication)",
                    drift_mode,
                )  # fmt: skip
            return None
        secret, problem = await self._password_secret(body, auth, user)
        if secret is None:
            return problem
        password = secret.data.get(auth.secret_key)
        if not password:
            return Outcome(
                False,
                SECRET_NOT_FOUND,
                f"Secret {auth.secret_name!r} has no key {auth.secret_key!r}",
                retriable=True,
            )
        credential = {
            "mechanism": auth.mechanism,
            "secret": auth.secret_name,
            "secretResourceVersion": secret.resource_version,
        }
        new["credential"] = credential
        if int(auth.scram) not in existing or status.get("credential") != credential:
            await admin.alter_user_scram_credentials([ScramUpsertion(user, auth.scram, password)])
            self.acted(
                body, "set_credential", "CredentialSet",
                f"User:{user}: {auth.mechanism} credential set from Secret {auth.secret_name!r}",
                drift_mode and int(auth.scram) not in existing,
            )  # fmt: skip
        stale = [(user, m) for m in existing if m != int(auth.scram)]
        if stale:
            await admin.alter_user_scram_credentials(deletions=stale)
            self.acted(
                body, "delete_credential", "CredentialDeleted",
                f"User:{user}: credentials of other mechanisms removed", drift_mode,
            )  # fmt: skip
        return None

    async def _password_secret(
        self, body: Any, auth: Authentication, user: str
    ) -> tuple[Secret | None, Outcome | None]:
        meta = body["metadata"]
        namespace = meta["namespace"]
        secret = await read_secret(namespace, auth.secret_name)
        if not auth.generated:
            if secret is None:
                return None, Outcome(
                    False,
                    SECRET_NOT_FOUND,
                    f"Secret {auth.secret_name!r} (spec.authentication.password) not found",
                    retriable=True,
                )
            return secret, None
        if secret is None:
            data = generated_secret_data(user, secrets.token_urlsafe(24), auth.mechanism)
            labels = {
                "app.kubernetes.io/managed-by": "odradek-operator",
                CLUSTER_LABEL: body["spec"]["cluster"],
                USER_LABEL: meta["name"],
            }
            secret = await create_owned_secret(namespace, auth.secret_name, data, body, labels)
            if secret is None:
                return None, Outcome(False, PENDING, "Secret vanished", retriable=True)
            self.acted(
                body, "create_secret", "SecretCreated",
                f"password for User:{user} generated into Secret {auth.secret_name!r}", False,
            )  # fmt: skip
        if meta["uid"] in secret.owner_uids:
            return await self._follow_password(body, auth, user, secret)
        if (self.KIND, meta["name"]) in secret.owners:
            return None, Outcome(
                False,
                PENDING,
                f"Secret {auth.secret_name!r} still belongs to an earlier User "
                f"{meta['name']!r}; waiting for the garbage collector",
                retriable=True,
            )
        return None, Outcome(
            False,
            SECRET_CONFLICT,
            f"Secret {auth.secret_name!r} exists and is not owned by this User; delete it, set "
            "spec.authentication.secretName, or name it in spec.authentication.password",
            retriable=True,
        )

    async def _follow_password(
        self, body: Any, auth: Authentication, user: str, secret: Secret
    ) -> tuple[Secret | None, Outcome | None]:
        """Rewrite the keys of a generated Secret that no longer match its password (edited by
        the user), the username or the mechanism; returns the Secret as it then is."""
        password = secret.data.get(auth.secret_key)
        if not password:
            return secret, None  # reported by the caller
        want = generated_secret_data(user, password, auth.mechanism)
        stale = {k: v for k, v in want.items() if secret.data.get(k) != v}
        if not stale:
            return secret, None
        namespace = body["metadata"]["namespace"]
        updated = await update_secret(namespace, secret.name, stale, secret.resource_version)
        if updated is None:
            return None, Outcome(
                False,
                PENDING,
                f"Secret {secret.name!r} changed while being updated",
                retriable=True,
            )
        self.acted(
            body, "update_secret", "SecretUpdated",
            f"Secret {secret.name!r}: {', '.join(sorted(stale))} rewritten to follow its password",
            False,
        )  # fmt: skip
        return updated, None

    # -- ACLs -----------------------------------------------------------------------------

    async def _acls(self, admin: AdminClient, r: Round, principal_: str) -> Outcome | None:
        body, new, drift_mode = r.body, r.new, r.drift_mode
        spec = body["spec"]
        desired = desired_bindings(principal_, spec)
        actual = await principal_acls(admin, principal_)
        refused: list[str] = []
        created: list[AclBinding] = []
        for i, rule in enumerate(acl_rules(spec)):
            missing = [b for b in rule_bindings(principal_, rule) if b not in actual]
            if not missing:
                continue
            try:
                await admin.create_acls(missing)
                created += missing
            except KafkaError as e:
                if e.retriable:
                    raise
                refused.append(f"spec.authorization.acls[{i}] refused by the brokers: {e}")
        if created:
            self.acted(
                body, "create_acls", "AclsCreated",
                f"{principal_}: created {bindings_text(created)}", drift_mode,
            )  # fmt: skip
        extra = actual - desired
        if extra:
            await admin.delete_acls([_exact(b) for b in sorted(extra, key=repr)])
            self.acted(
                body, "delete_acls", "AclsDeleted",
                f"{principal_}: deleted {bindings_text(extra)}", drift_mode,
            )  # fmt: skip
        actual = await principal_acls(admin, principal_) if created or extra else actual
        new["acls"] = len(actual & desired)
        if refused:
            return Outcome(False, KAFKA_ERROR, "; ".join(refused))
        if actual != desired:
            left = (desired - actual) | (actual - desired)
            return Outcome(
                False,
                PENDING,
                f"waiting for the brokers to show the ACLs: {bindings_text(left)}",
                retriable=True,
            )
        return None

    # -- deletion -------------------------------------------------------------------------

    async def remove(self, admin: AdminClient, body: Any) -> str:
        meta, spec = body["metadata"], body["spec"]
        user, principal_ = username(meta["name"], spec), principal(meta["name"], spec)
        existing = await scram_mechanisms(admin, user)
        if existing:
            await admin.alter_user_scram_credentials(deletions=[(user, m) for m in existing])
        deleted = await admin.delete_acls([AclBindingFilter(principal=principal_)])
        count = sum(len(d) for d in deleted)
        return f"{principal_}: {len(existing)} SCRAM credentials and {count} ACL bindings removed"
