"""SCRAM: RFC 7677 test vector, Kafka's stored format, and kafka-python's real SCRAM client."""

from __future__ import annotations

import base64

import pytest
from kafka.net.sasl.scram import ScramClient
from odradek.broker.security.scram import (
    ScramAuthError,
    ScramCredential,
    ScramMechanism,
    ScramServer,
    credential_from_salted_password,
    credentials_from_config,
    generate_credential,
    salted_password,
)

SHA256 = ScramMechanism.SCRAM_SHA_256
SHA512 = ScramMechanism.SCRAM_SHA_512


def test_rfc7677_sha256_exchange() -> None:
    salt = base64.b64decode("W22ZaJ0SNY7soEsUEjb6gQ==")
    cred = generate_credential(SHA256, "pencil", 4096, salt)
    server = ScramServer(SHA256, {"user": cred}.get, server_nonce="%hvYDpWUa2RaTCAfuxFIlj)hNlF$k0")
    first = server.evaluate(b"n,,n=user,r=rOprNGfwEbeRWgbNEkqO")
    assert first == (
        b"r=rOprNGfwEbeRWgbNEkqO%hvYDpWUa2RaTCAfuxFIlj)hNlF$k0,s=W22ZaJ0SNY7soEsUEjb6gQ==,i=4096"
    )
    final = server.evaluate(
        b"c=biws,r=rOprNGfwEbeRWgbNEkqO%hvYDpWUa2RaTCAfuxFIlj)hNlF$k0,"
        b"p=dHzbZapWIk4jUhN+Ute9ytag9zjfMHgsqmmiz7AndVQ="
    )
    assert final == b"v=6rriTRBi23WpRR/wtup+mMhUZUn/dB5nLTJRsjl95G4="
    assert server.complete and server.authorization_id == "user"


def test_stored_format_round_trip() -> None:
    cred = generate_credential(SHA512, "secret", 8192)
    text = cred.to_config_value()
    assert text.startswith("salt=") and ",stored_key=" in text and text.endswith(",iterations=8192")
    assert ScramCredential.from_config_value(text) == cred
    config = {"SCRAM-SHA-512": text, "producer_byte_rate": "1024"}
    assert credentials_from_config(config) == {SHA512: cred}


def test_salted_password_path_matches_password_path() -> None:
    salt = b"0123456789abcdef"
    salted = salted_password(SHA256, "pw", salt, 4096)
    assert credential_from_salted_password(SHA256, salt, salted, 4096) == generate_credential(
        SHA256, "pw", 4096, salt
    )


@pytest.mark.parametrize("mechanism", [SHA256, SHA512])
def test_kafka_python_client_authenticates(mechanism: ScramMechanism) -> None:
    cred = generate_credential(mechanism, "alice-secret")
    server = ScramServer(mechanism.mechanism_name, {"alice": cred}.get)
    client = ScramClient("alice", "alice-secret", mechanism.mechanism_name)
    client.process_server_first_message(server.evaluate(client.first_message()))
    client.process_server_final_message(server.evaluate(client.final_message()))
    assert server.authorization_id == "alice"


def test_wrong_password_fails() -> None:
    cred = generate_credential(SHA512, "right")
    server = ScramServer(SHA512, {"alice": cred}.get)
    client = ScramClient("alice", "wrong", "SCRAM-SHA-512")
    client.process_server_first_message(server.evaluate(client.first_message()))
    with pytest.raises(ScramAuthError):
        server.evaluate(client.final_message())
    assert not server.complete and server.authorization_id is None


def test_unknown_user_and_bad_messages_fail() -> None:
    with pytest.raises(ScramAuthError):
        ScramServer(SHA256, {}.get).evaluate(b"n,,n=nobody,r=abc")
    with pytest.raises(ScramAuthError):
        ScramServer(SHA256, {}.get).evaluate(b"p=tls-unique,,n=x,r=abc")
    with pytest.raises(ScramAuthError):
        ScramServer(SHA256, {}.get).evaluate(b"garbage")


def test_token_auth_extension_uses_token_credentials() -> None:
    cred = generate_credential(SHA256, "token-hmac")
    server = ScramServer(SHA256, {}.get, {"tokenid": (cred, "owner")}.get)
    client = ScramClient("tokenid", "token-hmac", "SCRAM-SHA-256")
    first = client.first_message() + b",tokenauth=true"
    client.auth_message = client.auth_message + b",tokenauth=true"
    client.process_server_first_message(server.evaluate(first))
    client.process_server_final_message(server.evaluate(client.final_message()))
    assert server.token_authenticated and server.authorization_id == "owner"
    assert server.extensions == {"tokenauth": "true"}
