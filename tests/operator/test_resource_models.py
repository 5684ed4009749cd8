"""Pure rules of the Quota and User kinds (no Kubernetes, no brokers)."""

from __future__ import annotations

from odradek.broker.client.admin import (
    AclOperation,
    AclPatternType,
    AclPermissionType,
    AclResourceType,
    QuotaMatchType,
)
from odradek.operator.quota_model import (
    as_spec_fields,
    changes,
    desired_values,
    entity_of,
    entity_text,
    strict_filter,
)
from odradek.operator.user_model import (
    authentication_of,
    desired_bindings,
    generated_secret_data,
    jaas_config,
    principal,
)


def test_quota_entities() -> None:
    spec = {"user": {"name": "alice"}, "clientId": {"default": True}}
    entity = entity_of(spec)
    assert entity == (("client-id", None), ("user", "alice"))
    assert entity_text(entity) == "client-id=<default>,user=alice"
    assert strict_filter(entity) == [
        ("client-id", QuotaMatchType.DEFAULT, None),
        ("user", QuotaMatchType.EXACT, "alice"),
    ]
    assert entity_of({"clientId": {"name": "app"}}) == (("client-id", "app"),)


def test_quota_changes_set_and_remove_exactly() -> None:
    desired = desired_values({"producerByteRate": 100, "requestPercentage": 12.5})
    assert desired == {"producer_byte_rate": 100.0, "request_percentage": 12.5}
    actual = {"producer_byte_rate": 100.0, "consumer_byte_rate": 5.0}
    assert changes(desired, actual) == {"request_percentage": 12.5, "consumer_byte_rate": None}
    assert changes(desired, desired) == {}
    assert as_spec_fields({"producer_byte_rate": 100.0, "request_percentage": 12.5}) == {
        "producerByteRate": 100,
        "requestPercentage": 12.5,
    }


def test_user_bindings_one_per_operation() -> None:
    spec = {
        "authorization": {
            "acls": [
                {
                    "resource": {"type": "topic", "name": "t", "patternType": "prefix"},
                    "operations": ["Read", "Describe"],
                },
                {"type": "deny", "resource": {"type": "cluster"}, "operations": ["Alter"]},
            ]
        }
    }
    p = principal("res", {"username": "bob"})
    assert p == "User:bob"
    found = {
        (b.resource_type, b.name, b.pattern_type, b.principal, b.host, b.operation, b.permission)
        for b in desired_bindings(p, spec)
    }
    allow, deny = AclPermissionType.ALLOW, AclPermissionType.DENY
    topic, prefix = AclResourceType.TOPIC, AclPatternType.PREFIXED
    assert found == {
        (topic, "t", prefix, p, "*", AclOperation.READ, allow),
        (topic, "t", prefix, p, "*", AclOperation.DESCRIBE, allow),
        (
            AclResourceType.CLUSTER,
            "kafka-cluster",
            AclPatternType.LITERAL,
            p,
            "*",
            AclOperation.ALTER,
            deny,
        ),
    }


def test_user_authentication_sources() -> None:
    assert authentication_of("u", {}) is None
    generated = authentication_of("u", {"authentication": {"type": "scram-sha-512"}})
    assert generated and generated.generated and generated.secret_name == "u"
    given = authentication_of(
        "u",
        {
            "authentication": {
                "type": "scram-sha-256",
                "password": {"valueFrom": {"secretKeyRef": {"name": "s", "key": "pw"}}},
            }
        },
    )
    assert given and not given.generated and (given.secret_name, given.secret_key) == ("s", "pw")
    assert 'password="a\\"b"' in jaas_config("u", 'a"b')


def test_generated_secret_keys_follow_the_password() -> None:
    data = generated_secret_data("app", 'p\\w"d', "scram-sha-256")
    assert data == {
        "username": "app",
        "password": 'p\\w"d',
        "mechanism": "SCRAM-SHA-256",
        "sasl.jaas.config": "org.apache.kafka.common.security.scram.ScramLoginModule required "
        'username="app" password="p\\\\w\\"d";',
    }
