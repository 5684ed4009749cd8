"""Delegation tokens on the real embedded store: HMAC, stored format, lifecycle, expiry, change
notifications between two managers, and SCRAM authentication with kafka-python's client."""

from __future__ import annotations

import asyncio
import base64
import hashlib
import hmac
import json
from pathlib import Path

import pytest
from kafka.net.sasl.scram import ScramClient
from manual_clock import Clock
from odradek.broker.cluster.embedded_store import EmbeddedStore
from odradek.broker.cluster.kafka_zk import KafkaZk
from odradek.broker.protocol.errors import ErrorCode, KafkaError
from odradek.broker.security.scram import ScramAuthError, ScramMechanism, ScramServer
from odradek.broker.security.service import SecurityService
from odradek.broker.security.tokens import (
    DelegationTokenManager,
    TokenSettings,
    compute_hmac,
    decode_token,
    hmac_password,
    new_token_id,
    token_path,
)

HOUR = 3600 * 1000
SETTINGS = TokenSettings(b"secret", max_lifetime_ms=10 * HOUR, expiry_time_ms=HOUR)


NOW = 1_700_000_000_000


@pytest.fixture
def zkc(tmp_path: Path) -> KafkaZk:
    z = KafkaZk(EmbeddedStore(str(tmp_path / "meta")))
    z.create_top_level_paths()
    return z


def scram_login(lookup, token_id: str, password: str, mechanism: str = "SCRAM-SHA-512") -> str:
    """A real client exchange with the `tokenauth=true` extension; returns the principal."""
    server = ScramServer(mechanism, {}.get, lookup)
    client = ScramClient(token_id, password, mechanism)
    first = client.first_message() + b",tokenauth=true"
    client.auth_message += b",tokenauth=true"
    client.process_server_first_message(server.evaluate(first))
    client.process_server_final_message(server.evaluate(client.final_message()))
    assert server.token_authenticated
    return server.authorization_id


def test_token_id_and_hmac() -> None:
    token_id = new_token_id()
    assert len(token_id) == 22 and token_id != new_token_id()
    expected = hmac.new(b"key", token_id.encode(), hashlib.sha512).digest()
    assert compute_hmac(token_id, b"key") == expected
    assert hmac_password(expected) == base64.b64encode(expected).decode()


def test_settings_names() -> None:
    props = {"delegation.token.master.key": "old", "delegation.token.max.lifetime.ms": "5"}
    assert TokenSettings.from_props(props.get).secret_key == b"old"
    props["delegation.token.secret.key"] = "new"
    settings = TokenSettings.from_props(props.get)
    assert settings.secret_key == b"new" and settings.max_lifetime_ms == 5
    assert not TokenSettings.from_props({}.get).enabled


def test_disabled_without_secret_key(zkc: KafkaZk) -> None:
    manager = DelegationTokenManager(zkc, TokenSettings())
    with pytest.raises(KafkaError) as e:
        manager.create_token("User:alice", "User:alice", [], -1)
    assert e.value.code == ErrorCode.DELEGATION_TOKEN_AUTH_DISABLED


def test_create_stores_kafka_format_and_authenticates(zkc: KafkaZk) -> None:
    clock = Clock(NOW)
    manager = DelegationTokenManager(zkc, SETTINGS, clock=clock)
    info, token_hmac = manager.create_token("User:alice", "User:alice", ["User:bob"], -1)
    assert token_hmac == compute_hmac(info.token_id, b"secret")
    assert info.issue_ms == clock.now
    assert info.max_ms == clock.now + 10 * HOUR
    assert info.expiry_ms == clock.now + HOUR
    data, _ = zkc.get_data(token_path(info.token_id))
    doc = json.loads(data)
    assert doc["owner"] == "User%3Aalice" and doc["renewers"] == ["User%3Abob"]
    assert doc["tokenId"] == info.token_id and "SCRAM-SHA-512" in doc and "SCRAM-SHA-256" in doc
    assert decode_token(data)[0] == info
    password = hmac_password(token_hmac)
    for mech in ScramMechanism.SCRAM_SHA_256, ScramMechanism.SCRAM_SHA_512:
        login = scram_login(manager.lookup(mech), info.token_id, password, mech.mechanism_name)
        assert login == "alice"
    with pytest.raises(ScramAuthError):
        scram_login(manager.lookup("SCRAM-SHA-512"), info.token_id, "wrong")
    # A shorter requested lifetime wins over the configured maximum.
    short, _ = manager.create_token("User:alice", "User:alice", [], 1000)
    assert short.max_ms == short.expiry_ms == clock.now + 1000


def test_renew_expire_and_owner_checks(zkc: KafkaZk) -> None:
    clock = Clock(NOW)
    manager = DelegationTokenManager(zkc, SETTINGS, clock=clock)
    info, token_hmac = manager.create_token("User:alice", "User:alice", ["User:bob"], -1)
    with pytest.raises(KafkaError) as e:
        manager.renew_token("User:mallory", token_hmac, HOUR)
    assert e.value.code == ErrorCode.DELEGATION_TOKEN_OWNER_MISMATCH
    with pytest.raises(KafkaError) as e:
        manager.renew_token("User:bob", b"not-a-token", HOUR)
    assert e.value.code == ErrorCode.DELEGATION_TOKEN_NOT_FOUND
    clock.now += HOUR // 2
    assert manager.renew_token("User:bob", token_hmac, 2 * HOUR) == clock.now + 2 * HOUR
    # Renewal never passes the maximum lifetime.
    assert manager.renew_token("User:alice", token_hmac, 100 * HOUR) == info.max_ms
    assert manager.expire_token("User:alice", token_hmac, 1000) == clock.now + 1000
    clock.now += 1001
    assert manager.lookup("SCRAM-SHA-512")(info.token_id) is None
    with pytest.raises(KafkaError) as e:
        manager.renew_token("User:alice", token_hmac, HOUR)
    assert e.value.code == ErrorCode.DELEGATION_TOKEN_EXPIRED
    assert manager.remove_expired() == [info.token_id]
    assert zkc.get_data(token_path(info.token_id)) is None and manager.tokens() == []


def test_negative_expiry_period_removes_now(zkc: KafkaZk) -> None:
    clock = Clock(NOW)
    manager = DelegationTokenManager(zkc, SETTINGS, clock=clock)
    info, token_hmac = manager.create_token("User:alice", "User:alice", [], -1)
    assert manager.expire_token("User:alice", token_hmac, -1) == clock.now
    assert manager.get(info.token_id) is None
    assert zkc.get_data(token_path(info.token_id)) is None


def test_other_broker_follows_notifications(zkc: KafkaZk) -> None:
    writer = DelegationTokenManager(zkc, SETTINGS)
    reader = DelegationTokenManager(zkc, SETTINGS)

    async def run() -> None:
        await reader.notifications.skip_existing()
        reader.load()
        info, token_hmac = writer.create_token("User:alice", "User:alice", [], -1)
        assert reader.get(info.token_id) is None
        await reader.notifications.process()
        assert reader.get(info.token_id) == info
        assert reader.get_by_hmac(token_hmac) == info
        writer.expire_token("User:alice", token_hmac, -1)
        await reader.notifications.process()
        assert reader.get(info.token_id) is None

    asyncio.run(run())
    # A broker starting later loads every stored token.
    again, _ = writer.create_token("User:carol", "User:carol", [], -1)
    late = DelegationTokenManager(zkc, SETTINGS)
    late.load()
    assert late.tokens() == [again]


def test_security_service_authenticates_token_owner(zkc: KafkaZk) -> None:
    props = {"sasl.enabled.mechanisms": "SCRAM-SHA-512", "delegation.token.secret.key": "k"}

    async def run() -> None:
        service = SecurityService(zkc, props)
        await service.start()
        try:
            info, token_hmac = await asyncio.to_thread(
                service.tokens.create_token, "User:alice", "User:alice", [], -1
            )
            server = service.new_sasl_server("SASL_PLAINTEXT", "SCRAM-SHA-512")
            client = ScramClient(info.token_id, hmac_password(token_hmac), "SCRAM-SHA-512")
            first = client.first_message() + b",tokenauth=true"
            client.auth_message += b",tokenauth=true"
            reply = server.evaluate(first)
            client.process_server_first_message(reply)
            client.process_server_final_message(server.evaluate(client.final_message()))
            assert server.authorization_id == "alice"
        finally:
            await service.stop()

    asyncio.run(run())
