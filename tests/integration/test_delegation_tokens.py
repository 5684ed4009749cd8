"""Delegation tokens on a real broker with a PLAINTEXT and a SASL_PLAINTEXT (SCRAM-SHA-512)
listener: the four token APIs as raw requests, and kafka-python producing and consuming with a
token. librdkafka (confluent-kafka) cannot send SCRAM extensions, so it cannot present the
`tokenauth=true` extension a token login needs; kafka-python's SCRAM mechanism is extended with
it instead (the same client-first message Apache Kafka's Java client sends)."""

from __future__ import annotations

import base64
import socket
import time
import uuid
from collections.abc import Iterator
from pathlib import Path

import pytest
from client_samples import kafka_python_round_trip
from cluster import Cluster
from confluent_kafka.admin import (
    AdminClient,
    NewTopic,
    ScramCredentialInfo,
    ScramMechanism,
    UserScramCredentialUpsertion,
)
from conftest import EXTERNAL_BOOTSTRAP, OdradekBroker, retire, sasl_broker
from kafka.net import sasl as kafka_sasl
from kafka.net.sasl.scram import SaslMechanismScram, ScramClient
from odradek.broker.protocol.api_keys import ApiKey
from odradek.broker.protocol.errors import ErrorCode
from odradek.broker.security.acl import (
    AclOperation,
    AclPatternType,
    AclPermissionType,
    AclResourceType,
)
from odradek.broker.testing.processes import free_port
from odradek.broker.testing.zookeeper import ZkEnsemble
from polling import wait_until
from raw_wire import call

USERS = {"alice": "alice-pw", "bob": "bob-pw", "carol": "carol-pw"}
MECHANISM = "SCRAM-SHA-512"


class TokenBroker:
    def __init__(self, broker: OdradekBroker, sasl_port: int) -> None:
        self.broker = broker
        self.sasl_port = sasl_port
        self.sasl_addr = f"127.0.0.1:{sasl_port}"


@pytest.fixture(scope="module")
def tb(tmp_path_factory: pytest.TempPathFactory) -> Iterator[TokenBroker]:
    broker, sasl = sasl_broker(
        tmp_path_factory.mktemp("tokens"),
        {
            "listener.name.sasl_plaintext.sasl.enabled.mechanisms": MECHANISM,
            "delegation.token.secret.key": "odradek-token-secret",
            "delegation.token.expiry.check.interval.ms": "300",
            # The PLAINTEXT listener is the administrators' channel.
            "authorizer.class.name": "kafka.security.authorizer.AclAuthorizer",
            "super.users": "User:ANONYMOUS",
        },
    )
    try:
        broker.start()
        admin = AdminClient({"bootstrap.servers": broker.bootstrap})
        deadline = time.monotonic() + 30
        while admin.list_topics(timeout=10).controller_id < 0:
            assert time.monotonic() < deadline, "no controller after 30s"
            time.sleep(0.1)
        upserts = [
            UserScramCredentialUpsertion(
                user, ScramCredentialInfo(ScramMechanism.SCRAM_SHA_512, 4096), pw.encode()
            )
            for user, pw in USERS.items()
        ]
        for fut in admin.alter_user_scram_credentials(upserts, request_timeout=30).values():
            fut.result(30)
        yield TokenBroker(broker, sasl)
    finally:
        retire(broker)


# -- raw requests ------------------------------------------------------------------------------


class AuthFailed(Exception):
    pass


def sasl_connect(
    tb: TokenBroker | int, user: str, password: str, *, token: bool = False
) -> socket.socket:
    """A SASL_PLAINTEXT connection (to a TokenBroker or a port) after a SCRAM-SHA-512 login
    with kafka-python's SCRAM client; `token` adds the tokenauth extension. Raises AuthFailed
    with the broker's message."""
    port = tb if isinstance(tb, int) else tb.sasl_port
    sock = socket.create_connection(("127.0.0.1", port), timeout=10)
    try:
        assert call(sock, ApiKey.SASL_HANDSHAKE, 1, {"mechanism": MECHANISM})["error_code"] == 0
        client = ScramClient(user, password, MECHANISM)
        first = client.first_message()
        if token:
            first += b",tokenauth=true"
            client.auth_message += b",tokenauth=true"
        for step in range(2):
            data = first if step == 0 else client.final_message()
            resp = call(sock, ApiKey.SASL_AUTHENTICATE, 2, {"auth_bytes": data})
            if resp["error_code"] != 0:
                assert resp["error_code"] == ErrorCode.SASL_AUTHENTICATION_FAILED
                raise AuthFailed(resp["error_message"])
            if step == 0:
                client.process_server_first_message(resp["auth_bytes"])
            else:
                client.process_server_final_message(resp["auth_bytes"])
    except BaseException:
        sock.close()
        raise
    return sock


def allow(tb: TokenBroker, rtype: AclResourceType, name: str, user: str, op: AclOperation) -> None:
    """CreateAcls as a raw request (confluent-kafka has no USER resource type)."""
    creation = {
        "resource_type": rtype,
        "resource_name": name,
        "resource_pattern_type": AclPatternType.LITERAL,
        "principal": f"User:{user}",
        "host": "*",
        "operation": op,
        "permission_type": AclPermissionType.ALLOW,
    }
    with socket.create_connection(("127.0.0.1", tb.broker.port), timeout=10) as admin:
        resp = call(admin, ApiKey.CREATE_ACLS, 3, {"creations": [creation]})
    assert resp["results"][0]["error_code"] == 0


def create_token(
    sock: socket.socket, renewers: list[str], max_lifetime_ms: int = -1, owner: str | None = None
) -> dict:
    body = {
        "owner_principal_type": "User" if owner else None,
        "owner_principal_name": owner,
        "renewers": [{"principal_type": "User", "principal_name": r} for r in renewers],
        "max_lifetime_ms": max_lifetime_ms,
    }
    return call(sock, ApiKey.CREATE_DELEGATION_TOKEN, 3, body)


def describe(sock: socket.socket, owners: list[str] | None = None) -> dict:
    body = {
        "owners": None
        if owners is None
        else [{"principal_type": "User", "principal_name": o} for o in owners]
    }
    return call(sock, ApiKey.DESCRIBE_DELEGATION_TOKEN, 3, body)


def token_ids(resp: dict) -> set[str]:
    assert resp["error_code"] == 0
    return {t["token_id"] for t in resp["tokens"]}


def password_of(created: dict) -> str:
    return base64.b64encode(bytes(created["hmac"])).decode()


# -- tests -------------------------------------------------------------------------------------


def test_token_requests_need_a_non_token_sasl_identity(tb: TokenBroker) -> None:
    with socket.create_connection(("127.0.0.1", tb.broker.port), timeout=10) as plain:
        assert (
            create_token(plain, [])["error_code"] == ErrorCode.DELEGATION_TOKEN_REQUEST_NOT_ALLOWED
        )
        assert describe(plain)["error_code"] == ErrorCode.DELEGATION_TOKEN_REQUEST_NOT_ALLOWED
    with sasl_connect(tb, "alice", USERS["alice"]) as alice:
        created = create_token(alice, [])
        assert created["error_code"] == 0
    with sasl_connect(tb, created["token_id"], password_of(created), token=True) as tok:
        resp = create_token(tok, [])
        assert resp["error_code"] == ErrorCode.DELEGATION_TOKEN_REQUEST_NOT_ALLOWED
        renew = call(
            tok, ApiKey.RENEW_DELEGATION_TOKEN, 2, {"hmac": created["hmac"], "renew_period_ms": 1}
        )
        assert renew["error_code"] == ErrorCode.DELEGATION_TOKEN_REQUEST_NOT_ALLOWED
        # The session itself is usable for ordinary requests.
        meta = call(tok, ApiKey.METADATA, 4, {"topics": None, "allow_auto_topic_creation": False})
        assert meta["brokers"]
    # Without the extension the token id is just an unknown user.
    with pytest.raises(AuthFailed):
        sasl_connect(tb, created["token_id"], password_of(created))


def test_create_describe_renew_expire(tb: TokenBroker) -> None:
    with sasl_connect(tb, "alice", USERS["alice"]) as alice:
        created = create_token(alice, ["bob"])
        assert created["error_code"] == 0
        assert (created["principal_type"], created["principal_name"]) == ("User", "alice")
        assert created["token_requester_principal_name"] == "alice"
        assert len(created["hmac"]) == 64
        assert created["issue_timestamp_ms"] < created["expiry_timestamp_ms"]
        assert created["expiry_timestamp_ms"] <= created["max_timestamp_ms"]
        token_id = created["token_id"]
        assert token_id in token_ids(describe(alice))
        assert token_id in token_ids(describe(alice, ["alice"]))
        assert token_id not in token_ids(describe(alice, ["bob"]))
        assert token_ids(describe(alice, [])) == set()
        detail = next(t for t in describe(alice)["tokens"] if t["token_id"] == token_id)
        assert bytes(detail["hmac"]) == bytes(created["hmac"])
        assert [r["principal_name"] for r in detail["renewers"]] == ["bob"]

    hmac = created["hmac"]
    with sasl_connect(tb, "carol", USERS["carol"]) as carol:
        assert token_id not in token_ids(describe(carol))
        resp = call(carol, ApiKey.RENEW_DELEGATION_TOKEN, 2, {"hmac": hmac, "renew_period_ms": 1})
        assert resp["error_code"] == ErrorCode.DELEGATION_TOKEN_OWNER_MISMATCH
        resp = call(carol, ApiKey.EXPIRE_DELEGATION_TOKEN, 2,
                    {"hmac": hmac, "expiry_time_period_ms": -1})  # fmt: skip
        assert resp["error_code"] == ErrorCode.DELEGATION_TOKEN_OWNER_MISMATCH
        # DESCRIBE_TOKENS on the owner shows a user the owner's tokens.
        allow(tb, AclResourceType.USER, "User:alice", "carol", AclOperation.DESCRIBE_TOKENS)
        wait_until(
            lambda: token_id in token_ids(describe(carol)), 30.0, what="carol seeing the token"
        )
    with sasl_connect(tb, "bob", USERS["bob"]) as bob:
        assert token_id in token_ids(describe(bob))
        # A token for someone else needs CREATE_TOKENS on that user.
        resp = create_token(bob, [], owner="alice")
        assert resp["error_code"] == ErrorCode.DELEGATION_TOKEN_AUTHORIZATION_FAILED
        resp = call(bob, ApiKey.RENEW_DELEGATION_TOKEN, 2,
                    {"hmac": hmac, "renew_period_ms": 3_600_000})  # fmt: skip
        assert resp["error_code"] == 0
        assert resp["expiry_timestamp_ms"] <= created["max_timestamp_ms"]
        resp = call(bob, ApiKey.RENEW_DELEGATION_TOKEN, 2,
                    {"hmac": b"\x00" * 64, "renew_period_ms": 1})  # fmt: skip
        assert resp["error_code"] == ErrorCode.DELEGATION_TOKEN_NOT_FOUND
    with sasl_connect(tb, "alice", USERS["alice"]) as alice:
        resp = call(alice, ApiKey.EXPIRE_DELEGATION_TOKEN, 2,
                    {"hmac": hmac, "expiry_time_period_ms": -1})  # fmt: skip
        assert resp["error_code"] == 0
        assert token_id not in token_ids(describe(alice))
    with pytest.raises(AuthFailed):
        sasl_connect(tb, token_id, password_of(created), token=True)


class TokenScram(SaslMechanismScram):
    """kafka-python's SCRAM mechanism plus the `tokenauth=true` extension."""

    def auth_bytes(self) -> bytes:
        if self._state == 0:
            first = self._scram_client.first_message() + b",tokenauth=true"
            self._scram_client.auth_message += b",tokenauth=true"
            return first
        return super().auth_bytes()


@pytest.fixture
def token_mechanism() -> Iterator[None]:
    original = kafka_sasl.get_sasl_mechanism(MECHANISM)
    kafka_sasl.register_sasl_mechanism(MECHANISM, TokenScram, overwrite=True)
    try:
        yield
    finally:
        kafka_sasl.register_sasl_mechanism(MECHANISM, original, overwrite=True)


def test_client_with_token_produces_consumes_until_expired(
    tb: TokenBroker, token_mechanism: None
) -> None:

    topic = f"token-{uuid.uuid4().hex[:8]}"
    admin = AdminClient({"bootstrap.servers": tb.broker.bootstrap})
    admin.create_topics([NewTopic(topic, 1, 1)], operation_timeout=30)[topic].result(60)
    allow(tb, AclResourceType.TOPIC, topic, "alice", AclOperation.ALL)
    with sasl_connect(tb, "alice", USERS["alice"]) as alice:
        created = create_token(alice, [])
    assert created["error_code"] == 0
    # The token's session is alice's: once her ACL is in force, it sees the topic.
    with sasl_connect(tb, created["token_id"], password_of(created), token=True) as tok:

        def visible() -> bool:
            body = {"topics": [{"name": topic}], "allow_auto_topic_creation": False}
            meta = call(tok, ApiKey.METADATA, 4, body)
            return meta["topics"][0]["error_code"] == 0

        wait_until(visible, 30.0, what="alice's topic ACL")
    conf = {
        "bootstrap_servers": tb.sasl_addr,
        "security_protocol": "SASL_PLAINTEXT",
        "sasl_mechanism": MECHANISM,
        "sasl_plain_username": created["token_id"],
        "sasl_plain_password": password_of(created),
    }
    values = [f"t{i}".encode() for i in range(10)]
    assert kafka_python_round_trip(conf, topic, values) == values

    # Expire it now (period 0): logins fail at once, and the sweep removes the token.
    with sasl_connect(tb, "alice", USERS["alice"]) as alice:
        resp = call(alice, ApiKey.EXPIRE_DELEGATION_TOKEN, 2,
                    {"hmac": created["hmac"], "expiry_time_period_ms": 0})  # fmt: skip
        assert resp["error_code"] == 0
        deadline = time.monotonic() + 30
        while created["token_id"] in token_ids(describe(alice)):
            assert time.monotonic() < deadline, "expired token was never removed"
            time.sleep(0.1)
    with pytest.raises(AuthFailed):
        sasl_connect(tb, created["token_id"], password_of(created), token=True)


def _logs_in(port: int, user: str, password: str, *, token: bool = False) -> bool:
    try:
        sasl_connect(port, user, password, token=token).close()
    except AuthFailed:
        return False
    return True


def test_token_known_to_every_broker_of_a_cluster(zk_ensemble: ZkEnsemble, tmp_path: Path) -> None:
    if EXTERNAL_BOOTSTRAP:
        pytest.skip("needs its own brokers")
    cluster = Cluster(zk_ensemble, tmp_path, 3, {"delegation.token.secret.key": "cluster-secret"})
    sasl_ports = {}
    for b in cluster.brokers.values():
        sasl_ports[b.broker_id] = free_port()
        b.settings = {
            **b.settings,
            "listeners": f"PLAINTEXT://127.0.0.1:{b.port},"
            f"SASL_PLAINTEXT://127.0.0.1:{sasl_ports[b.broker_id]}",
            "listener.name.sasl_plaintext.sasl.enabled.mechanisms": MECHANISM,
        }
    try:
        cluster.start()
        admin = AdminClient({"bootstrap.servers": cluster[1].bootstrap})
        upsert = UserScramCredentialUpsertion(
            "alice", ScramCredentialInfo(ScramMechanism.SCRAM_SHA_512, 4096), b"alice-pw"
        )
        for fut in admin.alter_user_scram_credentials([upsert], request_timeout=30).values():
            fut.result(30)
        wait_until(lambda: _logs_in(sasl_ports[1], "alice", "alice-pw"), 30.0, what="alice's login")
        with sasl_connect(sasl_ports[1], "alice", "alice-pw") as alice:
            created = create_token(alice, [])
        assert created["error_code"] == 0
        token_id, password = created["token_id"], password_of(created)
        for broker_id in (2, 3):
            wait_until(
                lambda p=sasl_ports[broker_id]: _logs_in(p, token_id, password, token=True),
                30.0,
                what=f"token login on broker {broker_id}",
            )
        # Expired through broker 3: no broker accepts it any more.
        wait_until(
            lambda: _logs_in(sasl_ports[3], "alice", "alice-pw"), 30.0, what="alice on broker 3"
        )
        with sasl_connect(sasl_ports[3], "alice", "alice-pw") as alice:
            resp = call(alice, ApiKey.EXPIRE_DELEGATION_TOKEN, 2,
                        {"hmac": created["hmac"], "expiry_time_period_ms": -1})  # fmt: skip
            assert resp["error_code"] == 0
        for broker_id in (1, 2):
            wait_until(
                lambda p=sasl_ports[broker_id]: not _logs_in(p, token_id, password, token=True),
                30.0,
                what=f"token refused on broker {broker_id}",
            )
    finally:
        cluster.stop()
