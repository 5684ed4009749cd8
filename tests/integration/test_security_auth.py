"""TLS and SASL authentication on a real broker with four listeners: PLAINTEXT (administration),
SASL_SSL (SCRAM-SHA-512), SSL with required client certificates, and SASL_PLAINTEXT (PLAIN and
SCRAM-SHA-256). Clients: confluent-kafka, kafka-python, and raw frames for the protocol states."""

from __future__ import annotations

import asyncio
import socket
import ssl
import struct
import subprocess
import sys
import time
import uuid
from collections.abc import Iterator

import pytest
from certs import CertificateAuthority
from client_samples import kafka_python_round_trip
from confluent_kafka import Consumer, KafkaError, Producer, TopicPartition
from confluent_kafka.admin import (
    AdminClient,
    NewTopic,
    ScramCredentialInfo,
    ScramMechanism,
    UserScramCredentialUpsertion,
)
from conftest import EXTERNAL_BOOTSTRAP, OdradekBroker, retire
from odradek.broker import client as ours
from odradek.broker.protocol.api_keys import ApiKey
from odradek.broker.protocol.errors import ErrorCode
from odradek.broker.testing.processes import free_port
from raw_wire import call, frame, recv_frame

PLAIN_JAAS = (
    "org.apache.kafka.common.security.plain.PlainLoginModule required "
    'user_alice="alice-plain" user_bob="bob-plain";'
)


class SecureBroker:
    def __init__(self, broker: OdradekBroker, ports: dict[str, int], ca: CertificateAuthority):
        self.broker = broker
        self.ports = ports
        self.ca = ca
        self.client = ca.issue("client-alice", "alice", ou="eng")

    def addr(self, listener: str) -> str:
        return f"127.0.0.1:{self.ports[listener]}"


@pytest.fixture(scope="module")
def secure(tmp_path_factory: pytest.TempPathFactory) -> Iterator[SecureBroker]:
    if EXTERNAL_BOOTSTRAP:
        pytest.skip("needs its own broker process")
    base = tmp_path_factory.mktemp("secure")
    ca = CertificateAuthority(base / "certs")
    server = ca.issue("server", "localhost", server=True)
    ports = {name: free_port() for name in ("PLAINTEXT", "SASL_SSL", "SSL", "SASL_PLAINTEXT")}
    broker = OdradekBroker(
        base / "data",
        base / "logs",
        port=ports["PLAINTEXT"],
        overrides={
            "listeners": ",".join(f"{name}://127.0.0.1:{port}" for name, port in ports.items()),
            "ssl.keystore.type": "PEM",
            "ssl.keystore.location": str(server.combined),
            "ssl.truststore.type": "PEM",
            "ssl.truststore.location": str(ca.pem.cert),
            "listener.name.ssl.ssl.client.auth": "required",
            "listener.name.sasl_ssl.sasl.enabled.mechanisms": "SCRAM-SHA-512",
            # GSSAPI is not offered: a start-up warning, and handshakes do not list it.
            "listener.name.sasl_plaintext.sasl.enabled.mechanisms": "PLAIN,SCRAM-SHA-256,GSSAPI",
            "listener.name.sasl_plaintext.plain.sasl.jaas.config": PLAIN_JAAS,
        },
    )
    try:
        broker.start()
        _create_users(broker.bootstrap)
        yield SecureBroker(broker, ports, ca)
    finally:
        retire(broker)


def _create_users(bootstrap: str) -> None:
    admin = AdminClient({"bootstrap.servers": bootstrap})
    deadline = time.monotonic() + 30
    while admin.list_topics(timeout=10).controller_id < 0:
        assert time.monotonic() < deadline, "no controller after 30s"
        time.sleep(0.1)
    admin = AdminClient({"bootstrap.servers": bootstrap})
    upserts = [
        UserScramCredentialUpsertion(
            "alice", ScramCredentialInfo(ScramMechanism.SCRAM_SHA_512, 4096), b"alice-scram"
        ),
        UserScramCredentialUpsertion(
            "carol", ScramCredentialInfo(ScramMechanism.SCRAM_SHA_256, 4096), b"carol-scram"
        ),
    ]
    for fut in admin.alter_user_scram_credentials(upserts, request_timeout=30).values():
        fut.result(30)


def _topic(secure: SecureBroker) -> str:
    name = f"secure-{uuid.uuid4().hex[:10]}"
    admin = AdminClient({"bootstrap.servers": secure.broker.bootstrap})
    admin.create_topics([NewTopic(name, 1, 1)], operation_timeout=30)[name].result(60)
    deadline = time.monotonic() + 30
    while True:
        meta = admin.list_topics(name, timeout=10).topics.get(name)
        if meta is not None and meta.error is None and meta.partitions[0].leader >= 0:
            return name
        assert time.monotonic() < deadline, f"topic {name} has no leader"
        time.sleep(0.1)


def _produce_consume(conf: dict[str, str], topic: str, n: int = 20) -> list[bytes]:
    """Produce n records, then read them back from offset 0 with the same security settings."""
    producer = Producer(conf)
    for i in range(n):
        producer.produce(topic, value=f"m{i}".encode(), key=str(i).encode())
    assert producer.flush(30) == 0
    consumer = Consumer({**conf, "group.id": f"g-{uuid.uuid4().hex[:6]}",
                         "enable.auto.commit": False})  # fmt: skip
    consumer.assign([TopicPartition(topic, 0, 0)])
    got: list[bytes] = []
    deadline = time.monotonic() + 30
    while len(got) < n and time.monotonic() < deadline:
        msg = consumer.poll(0.5)
        if msg is not None and msg.error() is None:
            got.append(msg.value())
    consumer.close()
    return got


def _expected(n: int = 20) -> list[bytes]:
    return [f"m{i}".encode() for i in range(n)]


def _sasl(secure: SecureBroker, listener: str, user: str, password: str) -> dict[str, str]:
    """A confluent-kafka login on the SASL_SSL (SCRAM-SHA-512) or SASL_PLAINTEXT (PLAIN)
    listener."""
    conf = {
        "bootstrap.servers": secure.addr(listener),
        "security.protocol": listener,
        "sasl.mechanism": "SCRAM-SHA-512" if listener == "SASL_SSL" else "PLAIN",
        "sasl.username": user,
        "sasl.password": password,
    }
    if listener == "SASL_SSL":
        conf["ssl.ca.location"] = str(secure.ca.pem.cert)
    return conf


@pytest.mark.parametrize(
    ("listener", "user", "password"),
    [
        pytest.param("SASL_SSL", "alice", "alice-scram", id="sasl-ssl-scram-sha512"),
        pytest.param("SASL_PLAINTEXT", "bob", "bob-plain", id="sasl-plaintext-plain"),
    ],
)
def test_confluent_sasl_login(
    secure: SecureBroker, listener: str, user: str, password: str
) -> None:
    topic = _topic(secure)
    assert _produce_consume(_sasl(secure, listener, user, password), topic) == _expected()


def test_confluent_ssl_client_certificate(secure: SecureBroker) -> None:
    topic = _topic(secure)
    conf = {
        "bootstrap.servers": secure.addr("SSL"),
        "security.protocol": "SSL",
        "ssl.ca.location": str(secure.ca.pem.cert),
        "ssl.certificate.location": str(secure.client.cert),
        "ssl.key.location": str(secure.client.key),
    }
    assert _produce_consume(conf, topic) == _expected()


def test_ssl_client_without_certificate_is_refused(secure: SecureBroker) -> None:
    ctx = ssl.create_default_context(cafile=str(secure.ca.pem.cert))
    request = frame(ApiKey.API_VERSIONS, 0, {})
    with socket.create_connection(("127.0.0.1", secure.ports["SSL"]), timeout=10) as raw:
        with pytest.raises((ssl.SSLError, ConnectionError, EOFError)):
            with ctx.wrap_socket(raw, server_hostname="localhost") as tls:
                # TLS 1.3: the server judges the (missing) certificate after the client
                # finished, so the refusal shows on the first read.
                tls.sendall(request)
                if not tls.recv(4):
                    raise EOFError("closed by the broker")


@pytest.mark.parametrize(
    "conf_fn",
    [
        pytest.param(lambda s: _sasl(s, "SASL_SSL", "alice", "wrong"), id="scram-sha-512"),
        pytest.param(lambda s: _sasl(s, "SASL_PLAINTEXT", "alice", "wrong"), id="plain"),
    ],
)
def test_wrong_password_fails_and_reads_nothing(secure: SecureBroker, conf_fn) -> None:
    topic = _topic(secure)
    good = Producer({"bootstrap.servers": secure.broker.bootstrap})
    good.produce(topic, value=b"secret")
    assert good.flush(30) == 0
    errors: list[KafkaError] = []
    consumer = Consumer({**conf_fn(secure), "group.id": "intruders", "error_cb": errors.append})
    consumer.assign([TopicPartition(topic, 0, 0)])
    got = []
    deadline = time.monotonic() + 20
    while time.monotonic() < deadline and not any(
        e.code() == KafkaError._AUTHENTICATION for e in errors
    ):
        msg = consumer.poll(0.5)
        if msg is not None and msg.error() is None:
            got.append(msg.value())
    consumer.close()
    assert got == []
    assert any(e.code() == KafkaError._AUTHENTICATION for e in errors), errors


def test_kafka_python_sasl_plaintext_scram_sha256(secure: SecureBroker) -> None:
    topic = _topic(secure)
    conf = {
        "bootstrap_servers": secure.addr("SASL_PLAINTEXT"),
        "security_protocol": "SASL_PLAINTEXT",
        "sasl_mechanism": "SCRAM-SHA-256",
        "sasl_plain_username": "carol",
        "sasl_plain_password": "carol-scram",
    }
    assert kafka_python_round_trip(conf, topic, _expected(10)) == _expected(10)


# --- the SASL states on the wire ------------------------------------------------------------


def _connect(secure: SecureBroker) -> socket.socket:
    return socket.create_connection(("127.0.0.1", secure.ports["SASL_PLAINTEXT"]), timeout=10)


def _closed(sock: socket.socket) -> bool:
    try:
        return sock.recv(1) == b""
    except ConnectionError:
        return True


def test_handshake_v0_then_bare_plain_token(secure: SecureBroker) -> None:
    with _connect(secure) as sock:
        resp = call(sock, ApiKey.SASL_HANDSHAKE, 0, {"mechanism": "PLAIN"})
        assert resp["error_code"] == 0
        assert resp["mechanisms"] == ["PLAIN", "SCRAM-SHA-256"]
        token = b"\x00bob\x00bob-plain"
        sock.sendall(struct.pack(">i", len(token)) + token)
        assert recv_frame(sock) == b""  # PLAIN's empty server reply, as a bare frame
        meta = call(sock, ApiKey.METADATA, 1, {"topics": []})
        assert [b["port"] for b in meta["brokers"]] == [secure.ports["SASL_PLAINTEXT"]]


def test_requests_before_authentication_close_the_connection(secure: SecureBroker) -> None:
    with _connect(secure) as sock:
        versions = call(sock, ApiKey.API_VERSIONS, 0, {})
        assert versions["error_code"] == 0
        sock.sendall(frame(ApiKey.METADATA, 1, {"topics": []}))
        assert _closed(sock)


def test_unsupported_mechanism_and_out_of_order_requests(secure: SecureBroker) -> None:
    with _connect(secure) as sock:
        resp = call(sock, ApiKey.SASL_HANDSHAKE, 1, {"mechanism": "GSSAPI"})
        assert resp["error_code"] == ErrorCode.UNSUPPORTED_SASL_MECHANISM
        assert resp["mechanisms"] == ["PLAIN", "SCRAM-SHA-256"]
        assert _closed(sock)
    assert (
        "WARNING odradek.broker.security.service: listener SASL_PLAINTEXT: SASL mechanism GSSAPI "
        "not supported by Odradek (it offers PLAIN, SCRAM-SHA-256, SCRAM-SHA-512); clients that "
        "ask for it get UNSUPPORTED_SASL_MECHANISM"
    ) in secure.broker.log_text()
    with _connect(secure) as sock:
        resp = call(sock, ApiKey.SASL_AUTHENTICATE, 1, {"auth_bytes": b"\x00bob\x00bob-plain"})
        assert resp["error_code"] == ErrorCode.ILLEGAL_SASL_STATE
        assert _closed(sock)
    with _connect(secure) as sock:
        assert call(sock, ApiKey.SASL_HANDSHAKE, 1, {"mechanism": "PLAIN"})["error_code"] == 0
        resp = call(sock, ApiKey.SASL_AUTHENTICATE, 2, {"auth_bytes": b"\x00bob\x00nope"})
        assert resp["error_code"] == ErrorCode.SASL_AUTHENTICATION_FAILED
        assert resp["error_message"] == "Authentication failed: Invalid username or password"
        assert _closed(sock)
    with _connect(secure) as sock:
        assert call(sock, ApiKey.SASL_HANDSHAKE, 1, {"mechanism": "PLAIN"})["error_code"] == 0
        resp = call(sock, ApiKey.SASL_AUTHENTICATE, 1, {"auth_bytes": b"\x00bob\x00bob-plain"})
        assert resp["error_code"] == 0 and resp["session_lifetime_ms"] == 0
        again = call(sock, ApiKey.SASL_HANDSHAKE, 1, {"mechanism": "PLAIN"})
        assert again["error_code"] == ErrorCode.ILLEGAL_SASL_STATE


def test_plaintext_listener_answers_sasl_with_illegal_state(secure: SecureBroker) -> None:
    with socket.create_connection(("127.0.0.1", secure.broker.port), timeout=10) as sock:
        resp = call(sock, ApiKey.SASL_HANDSHAKE, 1, {"mechanism": "PLAIN"})
        assert resp["error_code"] == ErrorCode.ILLEGAL_SASL_STATE


# --- the TLS session in-process: the certificate's distinguished name becomes the principal ---


def test_tls_session_principal_and_large_writes(tmp_path) -> None:
    import asyncio
    import threading

    from odradek.broker.server.tls import TlsSession, server_context

    ca = CertificateAuthority(tmp_path)
    server = ca.issue("server", "localhost", server=True)
    client = ca.issue("client", "alice", ou="eng")
    props = {
        "ssl.keystore.type": "PEM",
        "ssl.keystore.certificate.chain": server.cert.read_text(),
        "ssl.keystore.key": server.key.read_text(),
        "ssl.truststore.certificates": ca.pem.cert.read_text(),
        "ssl.client.auth": "required",
    }
    ctx = server_context(props.get, "SSL", "SSL")
    big = bytes(range(256)) * 8192  # 2 MiB: many TLS records
    server_sock, client_sock = socket.socketpair()
    server_sock.setblocking(False)
    received: list[bytes] = []

    def client_side() -> None:
        cctx = ssl.create_default_context(cafile=str(ca.pem.cert))
        cctx.load_cert_chain(str(client.cert), str(client.key))
        with cctx.wrap_socket(client_sock, server_hostname="localhost") as tls:
            tls.sendall(b"hello")
            buf = b""
            while len(buf) < len(big):
                chunk = tls.recv(1 << 16)
                if not chunk:
                    break
                buf += chunk
            received.append(buf)

    async def server_side() -> str | None:
        session = TlsSession(ctx, server_sock, asyncio.get_running_loop())
        await session.handshake()
        buf = bytearray(16)
        n = await session.recv_into(memoryview(buf))
        assert bytes(buf[:n]) == b"hello"
        await session.sendall(big)
        return session.principal()

    thread = threading.Thread(target=client_side)
    thread.start()
    principal = asyncio.run(asyncio.wait_for(server_side(), 30))
    thread.join(30)
    server_sock.close()
    assert principal == "User:CN=alice,OU=eng,O=Odradek Tests,C=US"
    assert received == [big]


# -- the project's own client (used by the operator and the CLI) ---------------------------


def _ours(secure: SecureBroker, listener: str, props: dict[str, str]) -> ours.AdminClient:
    return ours.AdminClient(
        secure.addr(listener),
        request_timeout=15,
        operation_timeout=15,
        retry_timeout=15,
        security=ours.ClientSecurity.from_properties(props),
    )


@pytest.mark.parametrize(
    ("listener", "props"),
    [
        pytest.param(
            "SASL_SSL",
            {"security.protocol": "SASL_SSL", "sasl.mechanism": "SCRAM-SHA-512",
             "sasl.jaas.config": 'org.apache.kafka.common.security.scram.ScramLoginModule '
             'required username="alice" password="alice-scram";'},
            id="sasl-ssl-scram-512-jaas",
        ),
        pytest.param(
            "SASL_PLAINTEXT",
            {"security.protocol": "SASL_PLAINTEXT", "sasl.mechanism": "SCRAM-SHA-256",
             "sasl.username": "carol", "sasl.password": "carol-scram"},
            id="sasl-plaintext-scram-256",
        ),
        pytest.param(
            "SASL_PLAINTEXT",
            {"security.protocol": "SASL_PLAINTEXT", "sasl.mechanism": "PLAIN",
             "sasl.username": "bob", "sasl.password": "bob-plain"},
            id="sasl-plaintext-plain",
        ),
        pytest.param("SSL", {"security.protocol": "SSL"}, id="ssl-client-certificate"),
    ],
)  # fmt: skip
def test_odradek_client_logs_in(secure: SecureBroker, listener: str, props: dict) -> None:
    topic = _topic(secure)
    props = {**props, "ssl.ca.location": str(secure.ca.pem.cert)}
    if listener == "SSL":
        props["ssl.certificate.location"] = str(secure.client.cert)
        props["ssl.key.location"] = str(secure.client.key)

    async def run() -> tuple[set[str], list[bytes]]:
        async with _ours(secure, listener, props) as admin:
            names = set(await admin.list_topics())
        async with ours.Producer(
            secure.addr(listener), security=ours.ClientSecurity.from_properties(props)
        ) as producer:
            await producer.send_and_wait(topic, b"through " + listener.encode())
        return names, []

    names, _ = asyncio.run(asyncio.wait_for(run(), 60))
    assert topic in names
    got = _produce_consume({"bootstrap.servers": secure.broker.bootstrap}, topic, n=1)
    assert got[0] == b"through " + listener.encode()


def test_odradek_client_wrong_password_is_refused(secure: SecureBroker) -> None:
    props = {"security.protocol": "SASL_SSL", "sasl.mechanism": "SCRAM-SHA-512",
             "sasl.username": "alice", "sasl.password": "wrong",
             "ssl.ca.location": str(secure.ca.pem.cert)}  # fmt: skip

    async def run() -> None:
        async with _ours(secure, "SASL_SSL", props) as admin:
            await admin.list_topics()

    with pytest.raises(ours.KafkaError) as info:
        asyncio.run(asyncio.wait_for(run(), 60))
    assert info.value.code == ErrorCode.SASL_AUTHENTICATION_FAILED


def test_cli_command_config(secure: SecureBroker, tmp_path) -> None:
    topic = _topic(secure)
    config = tmp_path / "client.properties"
    config.write_text(
        "security.protocol=SASL_SSL\n"
        "sasl.mechanism=SCRAM-SHA-512\n"
        "sasl.username=alice\n"
        "sasl.password=alice-scram\n"
        f"ssl.ca.location={secure.ca.pem.cert}\n"
    )
    common = ["--bootstrap-server", secure.addr("SASL_SSL"), "--command-config", str(config)]
    cli = [sys.executable, "-m", "odradek.broker.cli"]
    produced = subprocess.run(
        [*cli, "produce", *common, "--topic", topic, "--value", "secret"],
        capture_output=True, timeout=120, check=False,
    )  # fmt: skip
    assert produced.returncode == 0, produced.stderr.decode()
    consumed = subprocess.run(
        [*cli, "consume", *common, "--topic", topic, "--from-beginning", "--max-messages", "1"],
        capture_output=True, timeout=120, check=False,
    )  # fmt: skip
    assert consumed.stdout == b"secret\n", consumed.stderr.decode()
    config.write_text("security.protocol=SASL_SSL\nsasl.mechanism=GSSAPI\n")
    refused = subprocess.run(
        [*cli, "topics", "list", *common], capture_output=True, timeout=120, check=False
    )
    assert refused.returncode == 1
    assert refused.stderr.decode().startswith("error: sasl.mechanism must be one of")
