"""TLS listener settings: Kafka's ssl.client.auth rules and RFC 2253 principal names."""

from __future__ import annotations

import pytest
from odradek.broker.server.tls import (
    TlsConfigError,
    client_auth,
    distinguished_name,
    server_context,
)


def test_distinguished_name_is_most_specific_first_and_escaped() -> None:
    cert = {
        "subject": (
            (("countryName", "US"),),
            (("organizationName", "Acme, Inc."),),
            (("organizationalUnitName", "eng"), ("userId", "u1")),
            (("commonName", "#alice "),),
        )
    }
    assert distinguished_name(cert) == r"CN=\#alice\ ,OU=eng+UID=u1,O=Acme\, Inc.,C=US"


def test_client_auth_of_sasl_ssl_needs_the_listener_prefix() -> None:
    props = {"ssl.client.auth": "required"}
    assert client_auth(props.get, "EXTERNAL", "SSL") == "required"
    assert client_auth(props.get, "CLIENTS", "SASL_SSL") == "none"
    props["listener.name.clients.ssl.client.auth"] = "requested"
    assert client_auth(props.get, "CLIENTS", "SASL_SSL") == "requested"
    with pytest.raises(TlsConfigError):
        client_auth({"ssl.client.auth": "always"}.get, "SSL", "SSL")


def test_tls_listener_without_key_store_is_a_configuration_error() -> None:
    with pytest.raises(TlsConfigError, match="no key store"):
        server_context({}.get, "SSL", "SSL")


def test_non_pem_key_store_is_refused(tmp_path) -> None:
    jks = tmp_path / "server.jks"
    jks.write_bytes(b"\xfe\xed\xfe\xed binary key store")
    props = {"ssl.keystore.location": str(jks)}
    with pytest.raises(TlsConfigError, match="only PEM"):
        server_context(props.get, "SSL", "SSL")
