"""The User operator against a real API server and a broker with SASL SCRAM and ACLs.

confluent-kafka clients log in on the broker's SASL_PLAINTEXT listener with the password from
the User's Secret; the operator and these tests administer through the PLAINTEXT listener, whose
anonymous principal is a super user there (see kube_harness.Broker).
"""

from __future__ import annotations

import base64
import json
from typing import Any

import pytest
from authz_clients import consume, produce_errors
from confluent_kafka import KafkaError, KafkaException
from confluent_kafka.admin import AdminClient as ConfluentAdmin
from kube_harness import (
    Broker,
    ControlPlane,
    Operator,
    admin_call,
    condition,
    event_reasons,
    events,
    rejected,
    resource,
    wait_ready,
    wait_reason,
    wait_until,
)
from odradek.broker.client import AdminClient
from odradek.broker.client.admin import (
    AclBinding,
    AclBindingFilter,
    AclOperation,
    AclPatternType,
    AclPermissionType,
    AclResourceType,
    ScramMechanism,
)

pytestmark = pytest.mark.timeout(600)

TAF = KafkaError.TOPIC_AUTHORIZATION_FAILED
T, G = AclResourceType.TOPIC, AclResourceType.GROUP
LIT, PRE = AclPatternType.LITERAL, AclPatternType.PREFIXED
ALLOW, DENY = AclPermissionType.ALLOW, AclPermissionType.DENY
Op = AclOperation


def user(name: str, *, bootstrap: str | None, cluster: str = "main", **spec: Any) -> dict:
    return resource("User", name, bootstrap=bootstrap, cluster=cluster, **spec)


def rule(kind: str, name: str, *ops: str, pattern: str = "literal", type_: str = "allow") -> dict:
    return {
        "type": type_,
        "resource": {"type": kind, "name": name, "patternType": pattern},
        "operations": list(ops),
    }


def secret_data(kube: ControlPlane, ns: str, name: str) -> dict[str, str]:
    obj = kube.get("secret", name, ns)
    assert obj is not None, f"no Secret {ns}/{name}"
    return {k: base64.b64decode(v).decode() for k, v in obj["data"].items()}


def put_secret(kube: ControlPlane, ns: str, name: str, password: str) -> None:
    kube.apply(
        {
            "apiVersion": "v1",
            "kind": "Secret",
            "metadata": {"name": name},
            "stringData": {"password": password},
        },
        ns,
    )


# -- the broker, through the project's admin client ------------------------------------------


def acls_of(bootstrap: str, principal: str) -> set[tuple]:
    """(type, name, pattern, host, operation, permission) of every binding of `principal`."""
    found = admin_call(bootstrap, lambda a: a.describe_acls(AclBindingFilter(principal=principal)))
    return {
        (b.resource_type, b.name, b.pattern_type, b.host, b.operation, b.permission) for b in found
    }


def scram_of(bootstrap: str, username: str) -> set[int]:
    async def go(admin: AdminClient) -> set[int]:
        try:
            found = await admin.describe_user_scram_credentials([username])
        except Exception as e:  # RESOURCE_NOT_FOUND: no credentials
            if "RESOURCE_NOT_FOUND" in str(e):
                return set()
            raise
        return {int(c.mechanism) for c in found.get(username, [])}

    return admin_call(bootstrap, go)


def add_acl(bootstrap: str, principal: str, kind: int, name: str, op: int) -> None:
    binding = AclBinding(kind, name, LIT, principal, "*", op, ALLOW)
    admin_call(bootstrap, lambda a: a.create_acls([binding]))


def create_topics(bootstrap: str, *names: str) -> None:
    async def go(admin: AdminClient) -> None:
        for name in names:
            await admin.create_topic(name, 1, 1, {})

    admin_call(bootstrap, go)


# -- clients on the SASL listener -----------------------------------------------------------


def sasl(broker: Broker, username: str, password: str, mechanism: str = "SCRAM-SHA-512") -> dict:
    assert broker.sasl_bootstrap
    return {
        "bootstrap.servers": broker.sasl_bootstrap,
        "security.protocol": "SASL_PLAINTEXT",
        "sasl.mechanism": mechanism,
        "sasl.username": username,
        "sasl.password": password,
    }


def authenticates(conf: dict) -> bool:
    admin = ConfluentAdmin({**conf, "error_cb": lambda e: None})
    try:
        admin.list_topics(timeout=8)
        return True
    except KafkaException:
        return False


# -- tests ---------------------------------------------------------------------------------


def test_user_logs_in_and_its_acls_allow_and_deny_exactly(
    kube: ControlPlane, secure_broker: Broker, operator: Operator, namespace: str
) -> None:
    b, p = secure_broker, namespace
    username = f"app-{p}"
    out, inbound, open_, locked = f"{p}-out", f"{p}-in-1", f"{p}-all-open", f"{p}-all-locked"
    create_topics(b.bootstrap, out, inbound, open_, locked)
    assert produce_errors({"bootstrap.servers": b.bootstrap}, inbound, 3) == []
    rules = [
        rule("topic", out, "Write", "Describe"),
        rule("topic", f"{p}-in", "Read", "Describe", pattern="prefix"),
        rule("group", f"{p}-", "Read", pattern="prefix"),
        rule("topic", f"{p}-all-", "All", pattern="prefix"),
        rule("topic", locked, "Write", type_="deny"),
    ]
    kube.apply(
        user(
            "app",
            bootstrap=b.bootstrap,
            username=username,
            authentication={"type": "scram-sha-512"},
            authorization={"acls": rules},
        ),
        namespace,
    )
    obj = wait_ready(kube, "user", namespace, "app")
    status = obj["status"]
    assert status["username"] == username
    assert status["credential"]["mechanism"] == "scram-sha-512"
    assert status["credential"]["secret"] == "app"
    assert status["acls"] == 7
    assert condition(obj)["reason"] == "Reconciled"
    assert "kafka.odradek.io/finalizer" in obj["metadata"]["finalizers"]
    assert obj["spec"]["authorization"]["acls"][0]["resource"]["patternType"] == "literal"
    assert obj["spec"]["authorization"]["acls"][0]["host"] == "*"

    # the generated Secret: owned by the User, holds what a client needs
    secret = kube.get("secret", "app", namespace)
    assert [(r["kind"], r["uid"]) for r in secret["metadata"]["ownerReferences"]] == [
        ("User", obj["metadata"]["uid"])
    ]
    data = secret_data(kube, namespace, "app")
    password = data["password"]
    assert len(password) >= 24
    assert data["username"] == username and data["mechanism"] == "SCRAM-SHA-512"
    assert f'username="{username}"' in data["sasl.jaas.config"]

    # on the broker: the credential and exactly the declared bindings
    assert scram_of(b.bootstrap, username) == {ScramMechanism.SCRAM_SHA_512}
    assert acls_of(b.bootstrap, f"User:{username}") == {
        (T, out, LIT, "*", Op.WRITE, ALLOW),
        (T, out, LIT, "*", Op.DESCRIBE, ALLOW),
        (T, f"{p}-in", PRE, "*", Op.READ, ALLOW),
        (T, f"{p}-in", PRE, "*", Op.DESCRIBE, ALLOW),
        (G, f"{p}-", PRE, "*", Op.READ, ALLOW),
        (T, f"{p}-all-", PRE, "*", Op.ALL, ALLOW),
        (T, locked, LIT, "*", Op.WRITE, DENY),
    }

    # a confluent-kafka client logs in with the Secret's password; ACLs decide the rest
    conf = sasl(b, username, password)
    assert authenticates(conf)
    assert not authenticates(sasl(b, username, password + "x"))
    wait_until(lambda: produce_errors(conf, out) == [], 60, what="Write on the literal topic")
    assert produce_errors(conf, inbound) == [TAF]  # Read only
    wait_until(lambda: produce_errors(conf, open_) == [], 60, what="All on the prefix")
    wait_until(lambda: produce_errors(conf, locked) == [TAF], 60, what="deny beats allow")
    got, errors = consume(conf, inbound, f"{p}-readers", 3)
    assert got == [b"m0", b"m1", b"m2"], errors
    got, errors = consume(conf, out, f"{p}-readers-2", 1)
    assert got == [] and TAF in errors  # Write and Describe only

    assert {"SecretCreated", "CredentialSet", "AclsCreated", "Ready"} <= event_reasons(
        kube, namespace, "app"
    )
    table = kube.kubectl("get", "users", "-n", namespace).stdout.splitlines()
    assert table[0].split() == [
        "NAME",
        "CLUSTER",
        "USERNAME",
        "AUTHENTICATION",
        "SECRET",
        "ACLS",
        "READY",
        "REASON",
        "AGE",
    ]
    assert table[1].split()[:7] == ["app", "main", username, "scram-sha-512", "app", "7", "True"]


def test_acl_changes_drift_and_deletion_leave_other_principals_alone(
    kube_gc: ControlPlane, secure_broker: Broker, operator: Operator, namespace: str
) -> None:
    kube, b, p = kube_gc, secure_broker, namespace
    username = f"svc-{p}"
    principal, bystander = f"User:{username}", f"User:bystander-{p}"
    add_acl(b.bootstrap, bystander, T, f"{p}-a", Op.READ)
    add_acl(b.bootstrap, principal, T, f"{p}-stray", Op.READ)  # made before the User: not in spec
    spec: dict[str, Any] = {
        "username": username,
        "authentication": {"type": "scram-sha-512"},
        "authorization": {
            "acls": [rule("topic", f"{p}-a", "Read"), rule("topic", f"{p}-b", "Write")]
        },
    }
    kube.apply(user("svc", bootstrap=b.bootstrap, **spec), namespace)
    wait_ready(kube, "user", namespace, "svc")
    a_read = (T, f"{p}-a", LIT, "*", Op.READ, ALLOW)
    b_write = (T, f"{p}-b", LIT, "*", Op.WRITE, ALLOW)
    assert acls_of(b.bootstrap, principal) == {a_read, b_write}

    # changed behind the operator's back: reverted on the next resync
    admin_call(
        b.bootstrap,
        lambda a: a.delete_acls([AclBindingFilter(T, f"{p}-b", LIT, principal)]),
    )
    add_acl(b.bootstrap, principal, G, f"{p}-sneaky", Op.READ)
    admin_call(
        b.bootstrap,
        lambda a: a.alter_user_scram_credentials(
            deletions=[(username, ScramMechanism.SCRAM_SHA_512)]
        ),
    )
    wait_until(
        lambda: (
            acls_of(b.bootstrap, principal) == {a_read, b_write}
            and scram_of(b.bootstrap, username) == {ScramMechanism.SCRAM_SHA_512}
        ),
        60,
        what="ACLs and credential restored",
    )
    assert "DriftReverted" in event_reasons(kube, namespace, "svc")
    assert operator.metric("odradek_operator_drift_detected_total", kind="User") >= 1

    # a rule removed, another added
    spec["authorization"]["acls"] = [
        rule("topic", f"{p}-a", "Read"),
        rule("topic", f"{p}-c", "Read", type_="deny"),
    ]
    kube.apply(user("svc", bootstrap=b.bootstrap, **spec), namespace)
    obj = wait_ready(kube, "user", namespace, "svc")
    assert obj["metadata"]["generation"] == 2
    assert acls_of(b.bootstrap, principal) == {a_read, (T, f"{p}-c", LIT, "*", Op.READ, DENY)}
    assert "AclsDeleted" in event_reasons(kube, namespace, "svc")

    kube.kubectl("delete", "user", "svc", "-n", namespace, "--timeout=60s")
    assert acls_of(b.bootstrap, principal) == set()
    assert scram_of(b.bootstrap, username) == set()
    assert acls_of(b.bootstrap, bystander) == {(T, f"{p}-a", LIT, "*", Op.READ, ALLOW)}
    assert "Deleted" in event_reasons(kube, namespace, "svc")
    wait_until(lambda: kube.get("secret", "svc", namespace) is None, 120, what="Secret collected")


def test_password_edited_in_the_generated_secret(
    kube: ControlPlane, secure_broker: Broker, operator: Operator, namespace: str
) -> None:
    """The password is the one key of the generated Secret a user may edit: the credential on
    the brokers and the Secret's sasl.jaas.config follow it, and the old password stops working."""
    b = secure_broker
    username = f"edit-{namespace}"
    spec = {"username": username, "authentication": {"type": "scram-sha-512"}}
    kube.apply(user("edit", bootstrap=b.bootstrap, **spec), namespace)
    wait_ready(kube, "user", namespace, "edit")
    old = secret_data(kube, namespace, "edit")["password"]
    assert authenticates(sasl(b, username, old))

    kube.kubectl(
        "patch", "secret", "edit", "-n", namespace, "--type=merge",
        "-p", json.dumps({"stringData": {"password": 'new "pass" \\ word'}}),
    )  # fmt: skip

    def followed() -> dict[str, str] | None:
        data = secret_data(kube, namespace, "edit")
        escaped = 'password="new \\"pass\\" \\\\ word";'
        return data if data["sasl.jaas.config"].endswith(escaped) else None

    data = wait_until(followed, 60, what="sasl.jaas.config following the edited password")
    assert data["password"] == 'new "pass" \\ word'
    assert data["username"] == username and data["mechanism"] == "SCRAM-SHA-512"
    assert f'username="{username}"' in data["sasl.jaas.config"]
    new = sasl(b, username, data["password"])
    wait_until(lambda: authenticates(new), 60, what="the edited password accepted")
    assert not authenticates(sasl(b, username, old))
    assert {"SecretUpdated", "CredentialSet"} <= event_reasons(kube, namespace, "edit")

    # settled at the version the operator wrote: its own update of the Secret does not count as
    # another password change (one credential set for the creation, one for the edit)
    def settled() -> bool:
        obj = kube.get("user", "edit", namespace)
        version = kube.get("secret", "edit", namespace)["metadata"]["resourceVersion"]
        return obj["status"]["credential"]["secretResourceVersion"] == version

    wait_until(settled, 60, what="status.credential at the Secret's resourceVersion")
    sets = [e for e in events(kube, namespace, "edit") if e["reason"] == "CredentialSet"]
    assert sum(e.get("count") or 1 for e in sets) == 2, sets


def test_password_taken_from_a_secret_and_rotated(
    kube: ControlPlane, secure_broker: Broker, operator: Operator, namespace: str
) -> None:
    b = secure_broker
    username = f"ext-{namespace}"
    kube.apply(
        user(
            "ext",
            bootstrap=b.bootstrap,
            username=username,
            authentication={
                "type": "scram-sha-256",
                "password": {"valueFrom": {"secretKeyRef": {"name": "ext-pw"}}},
            },
        ),
        namespace,
    )
    obj = wait_reason(kube, "user", namespace, "ext", "SecretNotFound")
    assert "ext-pw" in condition(obj)["message"]
    wait_until(
        lambda: (kube.get("user", "ext", namespace).get("status") or {}).get("retry"),
        60,
        what="the missing Secret retried with back-off",
    )
    put_secret(kube, namespace, "ext-pw", "first-password")
    obj = wait_ready(kube, "user", namespace, "ext")
    assert obj["status"]["credential"]["secret"] == "ext-pw"
    assert "retry" not in obj["status"]
    assert scram_of(b.bootstrap, username) == {ScramMechanism.SCRAM_SHA_256}
    assert authenticates(sasl(b, username, "first-password", "SCRAM-SHA-256"))
    assert not authenticates(sasl(b, username, "first-password"))  # no SHA-512 credential
    # the user's Secret is not taken over
    assert not kube.get("secret", "ext-pw", namespace)["metadata"].get("ownerReferences")

    put_secret(kube, namespace, "ext-pw", "second-password")
    wait_until(
        lambda: authenticates(sasl(b, username, "second-password", "SCRAM-SHA-256")),
        90,
        what="the rotated password accepted",
    )
    assert not authenticates(sasl(b, username, "first-password", "SCRAM-SHA-256"))
    kube.kubectl("delete", "user", "ext", "-n", namespace, "--timeout=60s")
    assert scram_of(b.bootstrap, username) == set()
    assert kube.get("secret", "ext-pw", namespace) is not None


def test_invalid_users_are_refused_and_others_still_served(
    kube: ControlPlane, secure_broker: Broker, operator: Operator, namespace: str
) -> None:
    b, p = secure_broker, namespace

    def refused(**spec: Any) -> str:
        return rejected(kube, namespace, user("bad", bootstrap=None, **spec))

    acl = {"resource": {"type": "group"}, "operations": ["Read"]}
    assert "resource.name is required" in refused(authorization={"acls": [acl]})
    acl = {"resource": {"type": "cluster", "name": "other"}, "operations": ["Create"]}
    assert "kafka-cluster" in refused(authorization={"acls": [acl]})
    acl = rule("topic", "*", "Read", pattern="prefix")
    assert "prefix pattern cannot be '*'" in refused(authorization={"acls": [acl]})
    acl = {"resource": {"type": "topic", "name": "x"}, "operations": []}
    assert "operations" in refused(authorization={"acls": [acl]})
    acl = {"resource": {"type": "topic", "name": "x"}, "operations": ["Fly"]}
    assert "Fly" in refused(authorization={"acls": [acl]})
    assert "scram-sha-512" in refused(authentication={"type": "plain"})
    both = {
        "type": "scram-sha-512",
        "secretName": "s",
        "password": {"valueFrom": {"secretKeyRef": {"name": "s"}}},
    }
    assert "secretName" in refused(authentication=both)

    # accepted by the API server, refused by the brokers: NotReady, the valid rule still applied
    kube.apply(
        user(
            "half",
            bootstrap=b.bootstrap,
            username=f"half-{p}",
            authorization={
                "acls": [
                    rule("topic", f"{p}-ok", "Read"),
                    rule("topic", f"{p}-odd", "ClusterAction"),
                ]
            },
        ),
        namespace,
    )
    kube.apply(
        user(
            "fine",
            bootstrap=b.bootstrap,
            username=f"fine-{p}",
            authorization={"acls": [rule("group", f"{p}-g", "Read")]},
        ),
        namespace,
    )
    obj = wait_reason(kube, "user", namespace, "half", "KafkaError")
    message = condition(obj)["message"]
    assert "acls[1]" in message and "ClusterAction" in message, message
    assert acls_of(b.bootstrap, f"User:half-{p}") == {(T, f"{p}-ok", LIT, "*", Op.READ, ALLOW)}
    obj = wait_ready(kube, "user", namespace, "fine")
    assert obj["status"].get("credential") is None  # no authentication: ACLs only
    assert acls_of(b.bootstrap, f"User:fine-{p}") == {(G, f"{p}-g", LIT, "*", Op.READ, ALLOW)}

    # username cannot change once set
    kube.apply(user("named", bootstrap=None, username=f"named-{p}"), namespace)
    err = rejected(kube, namespace, user("named", bootstrap=None, username=f"other-{p}"))
    assert "spec.username cannot be" in err


def test_two_users_for_one_principal_the_older_wins(
    kube: ControlPlane, secure_broker: Broker, operator: Operator, namespace: str
) -> None:
    b, p = secure_broker, namespace
    username = f"shared-{p}"

    def reader(name: str, topic: str) -> dict:
        """A User of the shared principal that may read `topic`."""
        acls = [rule("topic", topic, "Read")]
        return user(name, bootstrap=b.bootstrap, username=username, authorization={"acls": acls})

    kube.apply(reader("first", f"{p}-1"), namespace)
    wait_ready(kube, "user", namespace, "first")
    kube.apply(reader("second", f"{p}-2"), namespace)
    obj = wait_reason(kube, "user", namespace, "second", "ResourceConflict")
    assert f"{namespace}/first" in condition(obj)["message"]
    kube.kubectl("delete", "user", "second", "-n", namespace, "--timeout=60s")
    assert acls_of(b.bootstrap, f"User:{username}") == {(T, f"{p}-1", LIT, "*", Op.READ, ALLOW)}


def test_explain_describes_user_fields(kube: ControlPlane) -> None:
    text = kube.kubectl("explain", "users.spec.authorization.acls.resource.patternType").stdout
    assert "prefix" in text and "literal" in text
    text = kube.kubectl("explain", "users.spec.authentication.secretName").stdout
    assert "generates" in text
    out = json.loads(kube.kubectl("get", "crd", "users.kafka.odradek.io", "-o", "json").stdout)
    assert out["spec"]["versions"][0]["name"] == "v1alpha1"


def test_a_secret_the_user_does_not_own_is_never_taken_over(
    kube: ControlPlane, secure_broker: Broker, operator: Operator, namespace: str
) -> None:
    b = secure_broker
    username = f"own-{namespace}"
    put_secret(kube, namespace, "own", "somebody-elses")
    spec: dict[str, Any] = {"username": username, "authentication": {"type": "scram-sha-512"}}
    kube.apply(user("own", bootstrap=b.bootstrap, **spec), namespace)
    obj = wait_reason(kube, "user", namespace, "own", "SecretConflict")
    assert "secretName" in condition(obj)["message"]
    assert secret_data(kube, namespace, "own") == {"password": "somebody-elses"}
    assert scram_of(b.bootstrap, username) == set()
    spec["authentication"]["secretName"] = "own-credentials"
    kube.apply(user("own", bootstrap=b.bootstrap, **spec), namespace)
    obj = wait_ready(kube, "user", namespace, "own")
    assert obj["status"]["credential"]["secret"] == "own-credentials"
    password = secret_data(kube, namespace, "own-credentials")["password"]
    assert authenticates(sasl(b, username, password))
    assert secret_data(kube, namespace, "own") == {"password": "somebody-elses"}
