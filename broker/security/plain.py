"""SASL/PLAIN (RFC 4616), server side, against users from the broker's configuration.

Users come from Kafka's own property, the JAAS text of
`listener.name.<listener>.plain.sasl.jaas.config` (or the listener-less `sasl.jaas.config`):
every `user_<name>="<password>"` option of the PlainLoginModule entry is a user. The JAAS
grammar we accept is the part Kafka users write: `<LoginModule class> <flag> key="value" ... ;`.
"""

from __future__ import annotations

import hmac
from collections.abc import Callable, Mapping
from dataclasses import dataclass

from ..properties import parse_jaas_options
from .errors import SaslAuthenticationError


class PlainAuthError(SaslAuthenticationError):
    """Bad credentials or a malformed message: SASL_AUTHENTICATION_FAILED, then close."""


def plain_users_from_jaas(text: str) -> dict[str, str]:
    return {
        k[len("user_") :]: v
        for k, v in parse_jaas_options(text).items()
        if k.startswith("user_") and len(k) > len("user_")
    }


def plain_users(
    props: Mapping[str, object] | Callable[[str], object], listener: str
) -> dict[str, str]:
    """PLAIN users of `listener`: its own JAAS config, else the broker-wide `sasl.jaas.config`.

    `props` is a mapping or a getter such as `BrokerConfig.get_raw`; password-typed values
    may be wrappers holding the text in `.value`."""
    get = props.get if isinstance(props, Mapping) else props
    for key in (f"listener.name.{listener.lower()}.plain.sasl.jaas.config", "sasl.jaas.config"):
        text = get(key)
        text = getattr(text, "value", text)
        if text:
            return plain_users_from_jaas(str(text))
    return {}


@dataclass(frozen=True)
class PlainMessage:
    authzid: str
    username: str
    password: str


def parse_plain(token: bytes) -> PlainMessage:
    parts = bytes(token).split(b"\x00")
    if len(parts) != 3:
        raise PlainAuthError("Invalid SASL/PLAIN response: expected 3 tokens")
    try:
        authzid, username, password = (p.decode("utf-8") for p in parts)
    except UnicodeDecodeError:
        raise PlainAuthError("Invalid SASL/PLAIN response: not UTF-8") from None
    if not username:
        raise PlainAuthError("Authentication failed: username not specified")
    if not password:
        raise PlainAuthError("Authentication failed: password not specified")
    return PlainMessage(authzid, username, password)


class PlainServer:
    """One PLAIN exchange: a single client message, an empty reply on success."""

    def __init__(self, users: Mapping[str, str]) -> None:
        self._users = users
        self.authorization_id: str | None = None

    @property
    def complete(self) -> bool:
        return self.authorization_id is not None

    def evaluate(self, token: bytes) -> bytes:
        if self.complete:
            raise PlainAuthError("Unexpected SASL/PLAIN message after authentication")
        msg = parse_plain(token)
        if msg.authzid and msg.authzid != msg.username:
            raise PlainAuthError(
                "Authentication failed: Client requested an authorization id that is "
                "different from username"
            )
        expected = self._users.get(msg.username)
        if expected is None or not hmac.compare_digest(
            expected.encode("utf-8"), msg.password.encode("utf-8")
        ):
            raise PlainAuthError("Authentication failed: Invalid username or password")
        self.authorization_id = msg.username
        return b""
