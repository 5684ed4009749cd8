"""Mechanism selection and the SCRAM credential cache fed from /config/users."""

from __future__ import annotations

from pathlib import Path

import pytest
from kafka.net.sasl.scram import ScramClient
from odradek.broker.cluster.embedded_store import EmbeddedStore
from odradek.broker.cluster.kafka_zk import KafkaZk
from odradek.broker.security.credentials import ScramCredentialCache
from odradek.broker.security.entity_config import update_entity_config
from odradek.broker.security.errors import (
    SaslAuthenticationError,
    UnsupportedSaslMechanismError,
)
from odradek.broker.security.sasl import enabled_mechanisms, new_sasl_server
from odradek.broker.security.scram import ScramMechanism, generate_credential


def test_enabled_mechanisms_per_listener() -> None:
    props = {
        "sasl.enabled.mechanisms": "PLAIN",
        "listener.name.sasl_ssl.sasl.enabled.mechanisms": "SCRAM-SHA-512, SCRAM-SHA-256",
    }
    assert enabled_mechanisms(props, "SASL_SSL") == ["SCRAM-SHA-512", "SCRAM-SHA-256"]
    assert enabled_mechanisms(props, "OTHER") == ["PLAIN"]
    with pytest.raises(UnsupportedSaslMechanismError):
        new_sasl_server("GSSAPI", ["GSSAPI"])
    with pytest.raises(UnsupportedSaslMechanismError):
        new_sasl_server("PLAIN", ["SCRAM-SHA-512"])
    server = new_sasl_server("PLAIN", ["PLAIN"], plain_users={"u": "p"})
    with pytest.raises(SaslAuthenticationError):
        server.evaluate(b"\x00u\x00bad")


def test_credential_cache_follows_the_store(tmp_path: Path) -> None:
    store = EmbeddedStore(str(tmp_path / "meta"))
    try:
        zkc = KafkaZk(store)
        zkc.create_top_level_paths()
        cred = generate_credential(ScramMechanism.SCRAM_SHA_512, "secret")
        update_entity_config(
            zkc, "users", "al%20ice", lambda c: {**c, "SCRAM-SHA-512": cred.to_config_value()}
        )
        cache = ScramCredentialCache()
        cache.load(zkc)
        assert cache.get("al ice", "SCRAM-SHA-512") == cred
        server = new_sasl_server("SCRAM-SHA-512", ["SCRAM-SHA-512"], scram_credentials=cache)
        client = ScramClient("al ice", "secret", "SCRAM-SHA-512")
        client.process_server_first_message(server.evaluate(client.first_message()))
        client.process_server_final_message(server.evaluate(client.final_message()))
        assert server.complete and server.authorization_id == "al ice"

        update_entity_config(zkc, "users", "al%20ice", lambda c: {})
        cache.reload_entity(zkc, "users", "al%20ice")
        assert cache.get("al ice", ScramMechanism.SCRAM_SHA_512) is None
    finally:
        store.close()
