"""SASL/PLAIN: JAAS user options and the single-message exchange."""

from __future__ import annotations

import pytest
from odradek.broker.security.plain import PlainAuthError, PlainServer, plain_users

JAAS = (
    "org.apache.kafka.common.security.plain.PlainLoginModule required "
    'username="admin" password="admin-secret" user_admin="admin-secret" user_alice="a;b";'
)


def test_users_from_listener_jaas_config() -> None:
    props = {"listener.name.sasl_plaintext.plain.sasl.jaas.config": JAAS}
    assert plain_users(props, "SASL_PLAINTEXT") == {"admin": "admin-secret", "alice": "a;b"}
    assert plain_users({}, "X") == {}


def test_exchange() -> None:
    server = PlainServer({"alice": "pw"})
    assert server.evaluate(b"\x00alice\x00pw") == b""
    assert server.authorization_id == "alice"
    for bad in (b"\x00alice\x00nope", b"\x00bob\x00pw", b"alice\x00pw", b"bob\x00alice\x00pw"):
        with pytest.raises(PlainAuthError):
            PlainServer({"alice": "pw"}).evaluate(bad)


def test_users_from_a_config_getter_with_password_values() -> None:
    class Secret:
        def __init__(self, value: str) -> None:
            self.value = value

    values = {"sasl.jaas.config": Secret(JAAS)}
    assert plain_users(values.get, "L")["alice"] == "a;b"
