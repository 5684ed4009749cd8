"""How the client reaches a secured listener: TLS and SASL (PLAIN, SCRAM-SHA-256/512).

Settings come the way Kafka clients take them, as client properties (`security.protocol`,
`sasl.mechanism`, `sasl.username`/`sasl.password` or a `sasl.jaas.config` login module line,
`ssl.ca.location`, ...), so one properties file serves our tools, librdkafka and the Java
clients alike. Stores are PEM files (librdkafka's `ssl.*.location` names; the Java names are
accepted for PEM stores). SCRAM is computed by `scramp`, which also checks the server's
signature, so a broker that does not know the password cannot pass itself off.
"""

from __future__ import annotations

import ssl
from collections.abc import Awaitable, Callable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import scramp

from ..properties import parse_jaas_options, parse_properties
from ..protocol.api_keys import ApiKey
from ..protocol.errors import ErrorCode, KafkaError

PROTOCOLS = ("PLAINTEXT", "SSL", "SASL_PLAINTEXT", "SASL_SSL")
MECHANISMS = ("PLAIN", "SCRAM-SHA-256", "SCRAM-SHA-512")

Request = Callable[[int, dict[str, Any]], Awaitable[dict[str, Any]]]


class ClientConfigError(ValueError):
    """A client property is missing, unknown or inconsistent."""


@dataclass(frozen=True)
class ClientSecurity:
    protocol: str = "PLAINTEXT"
    sasl_mechanism: str = "PLAIN"
    username: str | None = None
    password: str | None = None
    ssl_cafile: str | None = None
    ssl_certfile: str | None = None
    ssl_keyfile: str | None = None
    ssl_key_password: str | None = None
    check_hostname: bool = True
    # A ready-made TLS context (a broker's, built from its own key and trust stores); it
    # replaces the ssl_* settings.
    context: ssl.SSLContext | None = field(default=None, compare=False, repr=False)

    @property
    def uses_tls(self) -> bool:
        return self.protocol in ("SSL", "SASL_SSL")

    @property
    def uses_sasl(self) -> bool:
        return self.protocol in ("SASL_PLAINTEXT", "SASL_SSL")

    def ssl_context(self) -> ssl.SSLContext | None:
        if not self.uses_tls:
            return None
        if self.context is not None:
            return self.context
        context = ssl.create_default_context(cafile=self.ssl_cafile)
        context.check_hostname = self.check_hostname
        if self.ssl_certfile:
            context.load_cert_chain(self.ssl_certfile, self.ssl_keyfile, self.ssl_key_password)
        return context

    @classmethod
    def from_properties(cls, props: Mapping[str, str]) -> ClientSecurity:
        """From Kafka client properties; unknown security settings are refused by name."""
        protocol = props.get("security.protocol", "PLAINTEXT").upper()
        if protocol not in PROTOCOLS:
            raise ClientConfigError(f"security.protocol must be one of {', '.join(PROTOCOLS)}")
        mechanism = props.get("sasl.mechanism", props.get("sasl.mechanisms", "PLAIN")).upper()
        if mechanism not in MECHANISMS:
            raise ClientConfigError(f"sasl.mechanism must be one of {', '.join(MECHANISMS)}")
        username = props.get("sasl.username")
        password = props.get("sasl.password")
        jaas = props.get("sasl.jaas.config")
        if jaas:
            options = parse_jaas_options(jaas)
            username = options.get("username", username)
            password = options.get("password", password)
        if protocol.startswith("SASL_") and (username is None or password is None):
            raise ClientConfigError(
                f"{protocol} needs sasl.username and sasl.password (or sasl.jaas.config)"
            )
        for key in ("ssl.truststore.type", "ssl.keystore.type"):
            if props.get(key, "PEM").upper() != "PEM":
                raise ClientConfigError(f"{key}: only PEM files are supported")
        return cls(
            protocol=protocol,
            sasl_mechanism=mechanism,
            username=username,
            password=password,
            ssl_cafile=props.get("ssl.ca.location", props.get("ssl.truststore.location")),
            ssl_certfile=props.get("ssl.certificate.location", props.get("ssl.keystore.location")),
            ssl_keyfile=props.get("ssl.key.location"),
            ssl_key_password=props.get("ssl.key.password"),
            check_hostname=props.get("ssl.endpoint.identification.algorithm", "https") != "",
        )

    @classmethod
    def from_file(cls, path: str | Path) -> ClientSecurity:
        try:
            text = Path(path).read_text()
        except OSError as e:
            raise ClientConfigError(f"cannot read client config {path}: {e}") from None
        return cls.from_properties(parse_properties(text))

    async def authenticate(self, request: Request, handshake_version: int) -> None:
        """SaslHandshake, then the SaslAuthenticate exchange of the mechanism, on a connection
        whose ApiVersions are known; raises SASL_AUTHENTICATION_FAILED with the broker's
        reason."""
        resp = await request(ApiKey.SASL_HANDSHAKE, {"mechanism": self.sasl_mechanism})
        if resp["error_code"] != ErrorCode.NONE:
            raise KafkaError(
                ErrorCode(resp["error_code"]),
                f"{self.sasl_mechanism} not enabled (broker offers "
                f"{', '.join(resp['mechanisms'])})",
            )
        if handshake_version < 1:
            raise KafkaError(
                ErrorCode.UNSUPPORTED_SASL_MECHANISM, "the broker has no SaslAuthenticate"
            )
        assert self.username is not None and self.password is not None

        async def step(token: bytes) -> bytes:
            reply = await request(ApiKey.SASL_AUTHENTICATE, {"auth_bytes": token})
            if reply["error_code"] != ErrorCode.NONE:
                raise KafkaError(ErrorCode(reply["error_code"]), reply.get("error_message"))
            return bytes(reply["auth_bytes"])

        if self.sasl_mechanism == "PLAIN":
            await step(b"\0" + self.username.encode() + b"\0" + self.password.encode())
            return
        scram = scramp.ScramClient([self.sasl_mechanism], self.username, self.password)
        server_first = await step(scram.get_client_first().encode())
        try:
            scram.set_server_first(server_first.decode())
            server_final = await step(scram.get_client_final().encode())
            scram.set_server_final(server_final.decode())
        except scramp.ScramException as e:
            raise KafkaError(ErrorCode.SASL_AUTHENTICATION_FAILED, str(e)) from None
