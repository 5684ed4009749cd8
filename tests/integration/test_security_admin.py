"""ACL, SCRAM credential and client quota admin APIs against a real broker, with confluent-kafka's
AdminClient and the project's own admin client; everything survives a broker restart."""

from __future__ import annotations

import json
import time

import pytest
from cluster import Cluster, cluster_factory_fixture  # noqa: F401  (fixture)
from confluent_kafka import KafkaException
from confluent_kafka.admin import (
    AclBinding,
    AclBindingFilter,
    AclOperation,
    AclPermissionType,
    AdminClient,
    ResourcePatternType,
    ResourceType,
    ScramCredentialInfo,
    ScramMechanism,
    UserScramCredentialDeletion,
    UserScramCredentialUpsertion,
)
from confluent_kafka.error import KafkaError as CKafkaError
from conftest import run
from odradek.broker.client import admin as ours
from odradek.broker.protocol.api_keys import ApiKey
from odradek.broker.protocol.errors import ErrorCode, KafkaError


def confluent_admin(bootstrap: str) -> AdminClient:
    """An AdminClient once the broker's metadata names a controller: librdkafka sends some
    admin requests to the controller and does not look again soon after a -1."""
    admin = AdminClient({"bootstrap.servers": bootstrap})
    deadline = time.monotonic() + 30
    while admin.list_topics(timeout=10).controller_id < 0:
        assert time.monotonic() < deadline, "no controller after 30s"
        time.sleep(0.1)
    return AdminClient({"bootstrap.servers": bootstrap})


def _acl(name: str, pattern: ResourcePatternType, op: AclOperation, perm: AclPermissionType):
    return AclBinding(ResourceType.TOPIC, name, pattern, "User:alice", "*", op, perm)


def test_acls_with_confluent_admin(broker_factory) -> None:
    broker = broker_factory()
    admin = confluent_admin(broker.bootstrap)
    bindings = [
        _acl("orders", ResourcePatternType.LITERAL, AclOperation.READ, AclPermissionType.ALLOW),
        _acl("app-", ResourcePatternType.PREFIXED, AclOperation.WRITE, AclPermissionType.DENY),
    ]
    for fut in admin.create_acls(bindings, request_timeout=30).values():
        assert fut.result() is None
    everything = AclBindingFilter(
        ResourceType.ANY, None, ResourcePatternType.ANY, None, None,
        AclOperation.ANY, AclPermissionType.ANY,
    )  # fmt: skip
    assert sorted(admin.describe_acls(everything).result(), key=str) == sorted(bindings, key=str)
    match = AclBindingFilter(
        ResourceType.TOPIC, "app-new", ResourcePatternType.MATCH, None, None,
        AclOperation.ANY, AclPermissionType.ANY,
    )  # fmt: skip
    assert admin.describe_acls(match).result() == [bindings[1]]

    invalid = AclBinding(
        ResourceType.GROUP, "g", ResourcePatternType.LITERAL, "User:alice", "*",
        AclOperation.WRITE, AclPermissionType.ALLOW,
    )  # fmt: skip
    with pytest.raises(KafkaException) as info:
        admin.create_acls([invalid])[invalid].result()
    assert info.value.args[0].code() == CKafkaError.INVALID_REQUEST

    broker.restart()
    admin = confluent_admin(broker.bootstrap)
    assert len(admin.describe_acls(everything).result()) == 2
    literal = AclBindingFilter(
        ResourceType.TOPIC, "orders", ResourcePatternType.LITERAL, None, None,
        AclOperation.ANY, AclPermissionType.ANY,
    )  # fmt: skip
    assert admin.delete_acls([literal])[literal].result() == [bindings[0]]
    assert admin.describe_acls(everything).result() == [bindings[1]]


def test_scram_credentials_with_confluent_admin(broker_factory) -> None:
    broker = broker_factory()
    admin = confluent_admin(broker.bootstrap)
    sha512 = ScramCredentialInfo(ScramMechanism.SCRAM_SHA_512, 8192)
    sha256 = ScramCredentialInfo(ScramMechanism.SCRAM_SHA_256, 4096)
    upserts = [
        UserScramCredentialUpsertion("alice", sha512, b"alice-secret", b"salt-a"),
        UserScramCredentialUpsertion("alice", sha256, b"alice-secret", b"salt-b"),
        UserScramCredentialUpsertion("bob", sha512, b"bob-secret", b"salt-c"),
    ]
    for fut in admin.alter_user_scram_credentials(upserts).values():
        assert fut.result() is None
    described = admin.describe_user_scram_credentials(["alice"])["alice"].result()
    assert sorted((c.mechanism, c.iterations) for c in described.scram_credential_infos) == [
        (ScramMechanism.SCRAM_SHA_256, 4096),
        (ScramMechanism.SCRAM_SHA_512, 8192),
    ]
    weak = UserScramCredentialUpsertion(
        "carol", ScramCredentialInfo(ScramMechanism.SCRAM_SHA_256, 100), b"pw", b"salt"
    )
    with pytest.raises(KafkaException) as info:
        admin.alter_user_scram_credentials([weak])["carol"].result()
    assert info.value.args[0].code() == CKafkaError.UNACCEPTABLE_CREDENTIAL
    with pytest.raises(KafkaException) as info:
        admin.describe_user_scram_credentials(["nobody"])["nobody"].result()
    assert info.value.args[0].code() == CKafkaError.RESOURCE_NOT_FOUND

    broker.restart()
    admin = confluent_admin(broker.bootstrap)
    assert set(admin.describe_user_scram_credentials().result()) == {"alice", "bob"}
    deletion = UserScramCredentialDeletion("bob", ScramMechanism.SCRAM_SHA_512)
    admin.alter_user_scram_credentials([deletion])["bob"].result()
    assert set(admin.describe_user_scram_credentials().result()) == {"alice"}


def test_scram_and_quotas_with_project_admin(broker_factory) -> None:
    broker = broker_factory()
    user_entity = (("user", "alice"),)
    client_entity = (("client-id", "app"),)
    default_entity = (("client-id", None), ("user", "alice"))

    async def first() -> None:
        async with ours.AdminClient(broker.bootstrap) as admin:
            await admin.alter_user_scram_credentials(
                [ours.ScramUpsertion("alice", ours.ScramMechanism.SCRAM_SHA_512, "pw")]
            )
            await admin.alter_client_quotas(
                {
                    user_entity: {"producer_byte_rate": 1048576, "request_percentage": 50.0},
                    client_entity: {"consumer_byte_rate": 2048},
                    default_entity: {"producer_byte_rate": 4096},
                }
            )
            with pytest.raises(KafkaError) as info:
                await admin.alter_client_quotas({user_entity: {"not_a_quota": 1.0}})
            assert info.value.code == ErrorCode.INVALID_REQUEST
            with pytest.raises(KafkaError) as info:
                await admin.alter_user_scram_credentials(
                    [ours.ScramUpsertion("bob", ours.ScramMechanism.SCRAM_SHA_256, "pw", 1000)]
                )
            assert info.value.code == ErrorCode.UNACCEPTABLE_CREDENTIAL

    async def second() -> None:
        async with ours.AdminClient(broker.bootstrap) as admin:
            creds = await admin.describe_user_scram_credentials(["alice"])
            assert creds == {"alice": [ours.ScramCredentialInfo(2, 4096)]}
            assert await admin.describe_client_quotas() == {
                user_entity: {"producer_byte_rate": 1048576.0, "request_percentage": 50.0},
                client_entity: {"consumer_byte_rate": 2048.0},
                default_entity: {"producer_byte_rate": 4096.0},
            }
            exact = [("user", ours.QuotaMatchType.EXACT, "alice")]
            assert list(await admin.describe_client_quotas(exact, strict=True)) == [user_entity]
            await admin.alter_client_quotas({user_entity: {"producer_byte_rate": None}})
            assert (await admin.describe_client_quotas(exact, strict=True)) == {
                user_entity: {"request_percentage": 50.0}
            }
            # the SCRAM credential next to the quotas is untouched
            assert await admin.describe_user_scram_credentials() == {
                "alice": [ours.ScramCredentialInfo(2, 4096)]
            }

    run(first, 60)
    broker.restart()
    run(second, 60)


def test_any_broker_of_a_cluster_serves_the_same_acls_credentials_and_quotas(
    cluster_factory,
) -> None:
    cluster: Cluster = cluster_factory(3)
    upsert = ours.ScramUpsertion("alice", ours.ScramMechanism.SCRAM_SHA_512, "pw").to_body()
    resp = cluster[2].request(
        ApiKey.ALTER_USER_SCRAM_CREDENTIALS, {"deletions": [], "upsertions": [upsert]}
    )
    assert resp["results"][0]["error_code"] == 0
    assert cluster[1].alter_client_quota("app", "producer_byte_rate", 1048576.0) == 0
    acl = {
        "resource_type": 2, "resource_name": "orders", "resource_pattern_type": 3,
        "principal": "User:alice", "host": "*", "operation": 3, "permission_type": 3,
    }  # fmt: skip
    resp = cluster[3].request(ApiKey.CREATE_ACLS, {"creations": [acl]}, version=1)
    assert resp["results"][0]["error_code"] == 0

    for b in cluster.running():
        creds = b.request(ApiKey.DESCRIBE_USER_SCRAM_CREDENTIALS, {"users": None})
        assert [(r["user"], r["credential_infos"]) for r in creds["results"]] == [
            ("alice", [{"mechanism": 2, "iterations": 4096}])
        ]
        quotas = b.request(ApiKey.DESCRIBE_CLIENT_QUOTAS, {"components": [], "strict": False})
        assert [e["values"] for e in quotas["entries"]] == [
            [{"key": "producer_byte_rate", "value": 1048576.0}]
        ]
        acls = b.request(
            ApiKey.DESCRIBE_ACLS,
            {
                "resource_type_filter": 1,
                "resource_name_filter": None,
                "pattern_type_filter": 1,
                "principal_filter": None,
                "host_filter": None,
                "operation": 1,
                "permission_type": 1,
            },  # fmt: skip
            version=1,
        )
        assert [r["resource_name"] for r in acls["resources"]] == ["orders"]

    # Kafka's znodes, readable by Kafka's own tools
    config = json.loads(cluster.zk.get("/config/users/alice")[0])["config"]
    assert config["SCRAM-SHA-512"].startswith("salt=")
    assert json.loads(cluster.zk.get("/config/clients/app")[0])["config"] == {
        "producer_byte_rate": "1048576"
    }
    assert json.loads(cluster.zk.get("/kafka-acl/Topic/orders")[0])["acls"] == [
        {"principal": "User:alice", "permissionType": "Allow", "operation": "Read", "host": "*"}
    ]
