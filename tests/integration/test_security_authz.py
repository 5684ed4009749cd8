"""ACL authorization on a real broker: a SASL_PLAINTEXT listener with PLAIN users, Kafka's
`AclAuthorizer` class name and `super.users=User:admin`. ACLs are managed as admin through
confluent-kafka's AdminClient; `alice` is checked with confluent-kafka clients and raw requests."""

from __future__ import annotations

import uuid
from collections.abc import Iterator
from typing import Any

import pytest
from authz_clients import consume, produce_errors
from confluent_kafka import KafkaError, KafkaException, Producer
from confluent_kafka.admin import (
    AclBinding,
    AclOperation,
    AclPermissionType,
    AdminClient,
    NewTopic,
    ResourcePatternType,
    ResourceType,
)
from conftest import OdradekBroker, retire, sasl_broker
from odradek.broker.client.blocking import BlockingConnection
from odradek.broker.protocol.api_keys import ApiKey
from odradek.broker.protocol.errors import ErrorCode
from odradek.broker.records.record import Record, build_batch
from polling import wait_until

PASSWORDS = {"admin": "admin-pw", "alice": "alice-pw"}
JAAS = "org.apache.kafka.common.security.plain.PlainLoginModule required " + " ".join(
    f'user_{u}="{p}"' for u, p in PASSWORDS.items()
) + ";"  # fmt: skip
TAF = ErrorCode.TOPIC_AUTHORIZATION_FAILED
WAIT_S = 30


class AclBroker:
    def __init__(self, broker: OdradekBroker, sasl_port: int) -> None:
        self.broker = broker
        self.sasl_port = sasl_port

    def conf(self, user: str) -> dict[str, str]:
        return {
            "bootstrap.servers": f"127.0.0.1:{self.sasl_port}",
            "security.protocol": "SASL_PLAINTEXT",
            "sasl.mechanism": "PLAIN",
            "sasl.username": user,
            "sasl.password": PASSWORDS[user],
        }

    def admin(self) -> AdminClient:
        return AdminClient(self.conf("admin"))


@pytest.fixture(scope="module")
def secured(tmp_path_factory: pytest.TempPathFactory) -> Iterator[AclBroker]:
    broker, sasl = sasl_broker(
        tmp_path_factory.mktemp("authz"),
        {
            "listener.name.sasl_plaintext.sasl.enabled.mechanisms": "PLAIN",
            "listener.name.sasl_plaintext.plain.sasl.jaas.config": JAAS,
            "authorizer.class.name": "kafka.security.authorizer.AclAuthorizer",
            "super.users": "User:admin",
        },
    )
    try:
        broker.start()
        secured = AclBroker(broker, sasl)
        admin = secured.admin()
        wait_until(
            lambda: admin.list_topics(timeout=10).controller_id >= 0, WAIT_S, what="a controller"
        )
        yield secured
    finally:
        retire(broker)


def unique(prefix: str) -> str:
    return f"{prefix}-{uuid.uuid4().hex[:8]}"


def offset_one_of(topic: str) -> list[dict[str, Any]]:
    """The `topics` of an (Txn)OffsetCommit request that commits offset 1 of partition 0."""
    return [{"name": topic, "partitions": [
        {"partition_index": 0, "committed_offset": 1, "committed_leader_epoch": -1,
         "committed_metadata": ""}]}]  # fmt: skip


def commit_error(response: dict[str, Any]) -> int:
    """The error code of that one partition in an (Txn)OffsetCommit response."""
    return response["topics"][0]["partitions"][0]["error_code"]


def create_topic(secured: AclBroker, name: str, records: int = 0) -> None:
    """As admin: create `name` (one partition) and write `records` values m0, m1, ..."""
    admin = secured.admin()
    admin.create_topics([NewTopic(name, 1, 1)], operation_timeout=30)[name].result(60)

    def has_leader() -> bool:
        t = admin.list_topics(name, timeout=10).topics.get(name)
        return t is not None and t.error is None and t.partitions[0].leader >= 0

    wait_until(has_leader, WAIT_S, what=f"leader for {name}")
    if records:
        producer = Producer(secured.conf("admin"))
        for i in range(records):
            producer.produce(name, value=f"m{i}".encode())
        assert producer.flush(30) == 0


def add_acls(secured: AclBroker, *bindings: AclBinding) -> None:
    admin = secured.admin()  # kept alive until the results are in
    for fut in admin.create_acls(list(bindings), request_timeout=30).values():
        fut.result(30)


def alice_acl(
    rtype: ResourceType,
    name: str,
    op: AclOperation,
    perm: AclPermissionType = AclPermissionType.ALLOW,
    pattern: ResourcePatternType = ResourcePatternType.LITERAL,
) -> AclBinding:
    return AclBinding(rtype, name, pattern, "User:alice", "*", op, perm)


class Raw(BlockingConnection):
    """A SASL/PLAIN-authenticated connection speaking raw requests."""

    def __init__(self, secured: AclBroker, user: str) -> None:
        super().__init__("127.0.0.1", secured.sasl_port, timeout=10, client_id="authz-test")
        assert self.call(ApiKey.SASL_HANDSHAKE, 1, {"mechanism": "PLAIN"})["error_code"] == 0
        token = f"\0{user}\0{PASSWORDS[user]}".encode()
        assert self.call(ApiKey.SASL_AUTHENTICATE, 2, {"auth_bytes": token})["error_code"] == 0

    def __enter__(self) -> Raw:
        return self

    def metadata(self, topics: list[str] | None, **flags: bool) -> dict:
        wanted = None if topics is None else [{"name": t} for t in topics]
        return self.call(
            ApiKey.METADATA, 10, {"topics": wanted, "allow_auto_topic_creation": False, **flags}
        )

    def topic_error(self, topic: str) -> int:
        return self.metadata([topic])["topics"][0]["error_code"]

    def coordinator_error(self, group: str) -> int:
        return self.call(ApiKey.FIND_COORDINATOR, 3, {"key": group, "key_type": 0})["error_code"]

    def fetch_error(self, topic: str) -> int:
        resp = self.call(
            ApiKey.FETCH,
            12,
            {"replica_id": -1, "max_wait_ms": 0, "min_bytes": 0, "max_bytes": 1 << 20,
             "isolation_level": 0, "session_id": 0, "session_epoch": -1,
             "topics": [{"topic": topic, "partitions": [
                 {"partition": 0, "fetch_offset": 0, "partition_max_bytes": 1 << 20}]}],
             "forgotten_topics_data": []},
        )  # fmt: skip
        return resp["responses"][0]["partitions"][0]["error_code"]


def test_user_without_acls_cannot_produce_or_consume(secured: AclBroker) -> None:
    topic = unique("noacl")
    create_topic(secured, topic, records=3)
    failures = produce_errors(secured.conf("alice"), topic, 3)
    assert failures == [KafkaError.TOPIC_AUTHORIZATION_FAILED] * 3
    group = unique("g")
    got, errors = consume(secured.conf("alice"), topic, group, 3, timeout=WAIT_S)
    assert got == []
    assert KafkaError.GROUP_AUTHORIZATION_FAILED in errors
    # With the group allowed, the topic is what is refused.
    add_acls(secured, alice_acl(ResourceType.GROUP, group, AclOperation.READ))
    with Raw(secured, "alice") as alice:
        wait_until(lambda: alice.coordinator_error(group) == 0, WAIT_S, what="group ACL applied")
    got, errors = consume(secured.conf("alice"), topic, group, 3, timeout=WAIT_S)
    assert got == []
    assert KafkaError.TOPIC_AUTHORIZATION_FAILED in errors


def test_raw_requests_get_authorization_errors(secured: AclBroker) -> None:
    topic = unique("raw")
    create_topic(secured, topic, records=1)
    with Raw(secured, "alice") as alice:
        batch = build_batch([Record(0, 0, None, b"x", [])])
        produced = alice.call(
            ApiKey.PRODUCE,
            9,
            {"acks": 1, "timeout_ms": 5000, "topic_data": [
                {"name": topic, "partition_data": [{"index": 0, "records": batch}]}]},
        )  # fmt: skip
        assert produced["responses"][0]["partition_responses"][0]["error_code"] == TAF
        assert alice.fetch_error(topic) == TAF
        listed = alice.call(
            ApiKey.LIST_OFFSETS,
            7,
            {"replica_id": -1, "isolation_level": 0, "topics": [
                {"name": topic, "partitions": [{"partition_index": 0, "timestamp": -1}]}]},
        )  # fmt: skip
        assert listed["topics"][0]["partitions"][0]["error_code"] == TAF
        assert alice.topic_error(topic) == TAF
        committed = alice.call(
            ApiKey.OFFSET_COMMIT,
            8,
            {"group_id": unique("g"), "generation_id_or_member_epoch": -1, "member_id": "",
             "group_instance_id": None, "topics": offset_one_of(topic)},
        )  # fmt: skip
        assert commit_error(committed) == ErrorCode.GROUP_AUTHORIZATION_FAILED
        created = alice.call(
            ApiKey.CREATE_TOPICS,
            5,
            {"topics": [{"name": unique("new"), "num_partitions": 1, "replication_factor": 1,
                         "assignments": [], "configs": []}],
             "timeout_ms": 5000, "validate_only": False},
        )  # fmt: skip
        assert created["topics"][0]["error_code"] == TAF
        acls = alice.call(
            ApiKey.CREATE_ACLS,
            2,
            {"creations": [{"resource_type": 2, "resource_name": topic,
                            "resource_pattern_type": 3, "principal": "User:alice", "host": "*",
                            "operation": 3, "permission_type": 3}]},
        )  # fmt: skip
        assert acls["results"][0]["error_code"] == ErrorCode.CLUSTER_AUTHORIZATION_FAILED
        meta = alice.metadata(None, include_cluster_authorized_operations=True)
        assert meta["cluster_authorized_operations"] == 0
    with Raw(secured, "admin") as admin:
        meta = admin.metadata([topic], include_cluster_authorized_operations=True)
        assert meta["topics"][0]["error_code"] == 0
        # The cluster's operations: CREATE, CLUSTER_ACTION, DESCRIBE_CONFIGS, ALTER_CONFIGS,
        # IDEMPOTENT_WRITE, ALTER, DESCRIBE.
        ops = {5, 9, 10, 11, 12, 7, 8}
        assert meta["cluster_authorized_operations"] == sum(1 << op for op in ops)


def test_allow_acl_lets_user_consume_and_deny_overrides_it(secured: AclBroker) -> None:
    topic, group = unique("allowed"), unique("readers")
    create_topic(secured, topic, records=5)
    add_acls(
        secured,
        alice_acl(ResourceType.TOPIC, topic, AclOperation.READ),
        alice_acl(ResourceType.GROUP, group, AclOperation.READ),
    )
    with Raw(secured, "alice") as alice:
        wait_until(lambda: alice.topic_error(topic) == 0, WAIT_S, what="READ ACL applied")
        got, errors = consume(secured.conf("alice"), topic, group, 5, timeout=WAIT_S)
        assert got == [f"m{i}".encode() for i in range(5)], errors
        # READ does not imply WRITE.
        failures = produce_errors(secured.conf("alice"), topic, 1)
        assert failures == [KafkaError.TOPIC_AUTHORIZATION_FAILED]

        add_acls(
            secured,
            alice_acl(ResourceType.TOPIC, topic, AclOperation.READ, AclPermissionType.DENY),
        )
        wait_until(lambda: alice.fetch_error(topic) == TAF, WAIT_S, what="DENY ACL applied")
    got, errors = consume(secured.conf("alice"), topic, group, 5, timeout=WAIT_S)
    assert got == []
    assert KafkaError.TOPIC_AUTHORIZATION_FAILED in errors


def test_prefixed_acl_covers_new_topics(secured: AclBroker) -> None:
    prefix = unique("team") + "."
    prefixed = ResourcePatternType.PREFIXED
    add_acls(
        secured,
        alice_acl(ResourceType.TOPIC, prefix, AclOperation.WRITE, pattern=prefixed),
        alice_acl(ResourceType.TOPIC, prefix, AclOperation.READ, pattern=prefixed),
        alice_acl(ResourceType.GROUP, prefix, AclOperation.READ, pattern=prefixed),
    )
    topic = prefix + "orders"
    create_topic(secured, topic)  # after the ACLs
    with Raw(secured, "alice") as alice:
        wait_until(lambda: alice.topic_error(topic) == 0, WAIT_S, what="prefixed ACL applied")
        assert alice.topic_error(unique("team") + ".other") == TAF
    assert produce_errors(secured.conf("alice"), topic, 4) == []
    got, errors = consume(secured.conf("alice"), topic, prefix + "app", 4, timeout=WAIT_S)
    assert got == [f"m{i}".encode() for i in range(4)], errors


def test_metadata_hides_topics_the_user_may_not_describe(secured: AclBroker) -> None:
    visible, hidden = unique("visible"), unique("hidden")
    create_topic(secured, visible)
    create_topic(secured, hidden)
    add_acls(secured, alice_acl(ResourceType.TOPIC, visible, AclOperation.DESCRIBE))
    with Raw(secured, "alice") as alice:
        wait_until(lambda: alice.topic_error(visible) == 0, WAIT_S, what="DESCRIBE ACL applied")
        listed = {t["name"] for t in alice.metadata(None)["topics"]}
        assert visible in listed
        assert hidden not in listed
        assert alice.topic_error(hidden) == TAF
    as_alice = AdminClient(secured.conf("alice")).list_topics(timeout=10)
    assert visible in as_alice.topics and hidden not in as_alice.topics
    named = AdminClient(secured.conf("alice")).list_topics(hidden, timeout=10).topics[hidden]
    assert named.error is not None
    assert named.error.code() == KafkaError.TOPIC_AUTHORIZATION_FAILED
    as_admin = secured.admin().list_topics(timeout=10)
    assert visible in as_admin.topics and hidden in as_admin.topics


def test_transactions_need_transactional_id_and_group_acls(secured: AclBroker) -> None:
    """Kafka's checks: WRITE (which implies DESCRIBE) on the transactional id for the
    producer, READ on the group for its offsets, CLUSTER_ACTION for markers, DESCRIBE on the
    id for the admin views."""
    topic, txn_id, group = unique("txn"), unique("tx"), unique("g")
    create_topic(secured, topic)
    add_acls(secured, alice_acl(ResourceType.TOPIC, topic, AclOperation.WRITE))
    conf = {**secured.conf("alice"), "transactional.id": txn_id}
    denied = Producer(conf)
    with pytest.raises(KafkaException) as info:
        denied.init_transactions(30)
    assert info.value.args[0].code() == KafkaError.TRANSACTIONAL_ID_AUTHORIZATION_FAILED
    add_acls(secured, alice_acl(ResourceType.TRANSACTIONAL_ID, txn_id, AclOperation.WRITE))
    producer = Producer(conf)
    producer.init_transactions(30)
    producer.begin_transaction()
    producer.produce(topic, value=b"in-txn")
    producer.commit_transaction(30)

    with Raw(secured, "alice") as alice:
        found = alice.call(ApiKey.FIND_COORDINATOR, 3, {"key": txn_id, "key_type": 1})
        assert found["error_code"] == 0

        def described() -> list[dict[str, Any]]:
            return alice.call(
                ApiKey.DESCRIBE_TRANSACTIONS, 0, {"transactional_ids": [txn_id, unique("other")]}
            )["transaction_states"]

        states = described()
        assert [s["error_code"] for s in states] == [
            0,
            ErrorCode.TRANSACTIONAL_ID_AUTHORIZATION_FAILED,
        ]
        # As in Kafka, EndTxn answers once PrepareCommit is written; the markers follow.
        assert states[0]["transaction_state"] in ("PrepareCommit", "CompleteCommit")
        wait_until(
            lambda: described()[0]["transaction_state"] == "CompleteCommit",
            timeout=30,
            interval=0.05,
            what="the transaction's markers",
        )
        listed = alice.call(
            ApiKey.LIST_TRANSACTIONS, 1, {"state_filters": [], "producer_id_filters": []}
        )
        assert [s["transactional_id"] for s in listed["transaction_states"]] == [txn_id]
        init = alice.call(
            ApiKey.INIT_PRODUCER_ID,
            4,
            {"transactional_id": txn_id, "transaction_timeout_ms": 60000},
        )
        pid, epoch = init["producer_id"], init["producer_epoch"]
        assert init["error_code"] == 0
        offsets = alice.call(
            ApiKey.ADD_OFFSETS_TO_TXN,
            3,
            {"transactional_id": txn_id, "producer_id": pid, "producer_epoch": epoch,
             "group_id": group},
        )  # fmt: skip
        assert offsets["error_code"] == ErrorCode.GROUP_AUTHORIZATION_FAILED
        committed = alice.call(
            ApiKey.TXN_OFFSET_COMMIT,
            3,
            {"transactional_id": txn_id, "group_id": group, "producer_id": pid,
             "producer_epoch": epoch, "generation_id": -1, "member_id": "",
             "group_instance_id": None, "topics": offset_one_of(topic)},
        )  # fmt: skip
        assert commit_error(committed) == ErrorCode.GROUP_AUTHORIZATION_FAILED
        markers = alice.call(
            ApiKey.WRITE_TXN_MARKERS,
            1,
            {"markers": [{"producer_id": pid, "producer_epoch": epoch, "transaction_result": True,
                          "topics": [{"name": topic, "partition_indexes": [0]}],
                          "coordinator_epoch": 0}]},
        )  # fmt: skip
        (marker,) = markers["markers"]
        code = marker["topics"][0]["partitions"][0]["error_code"]
        assert code == ErrorCode.CLUSTER_AUTHORIZATION_FAILED
        # Transactional batches need WRITE on the request's transactional id.
        batch = build_batch(
            [Record(0, 0, None, b"x", [])], producer_id=pid, producer_epoch=epoch,
            base_sequence=0, transactional=True,
        )  # fmt: skip
        other = alice.call(
            ApiKey.PRODUCE,
            9,
            {"transactional_id": unique("not-mine"), "acks": -1, "timeout_ms": 5000,
             "topic_data": [{"name": topic, "partition_data": [{"index": 0, "records": batch}]}]},
        )  # fmt: skip
        code = other["responses"][0]["partition_responses"][0]["error_code"]
        assert code == ErrorCode.TRANSACTIONAL_ID_AUTHORIZATION_FAILED
