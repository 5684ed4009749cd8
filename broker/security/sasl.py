"""Choosing the SASL server for a SaslHandshake: the mechanisms a listener enables and a fresh
server object per connection. Both server kinds offer `evaluate(token) -> reply`, `complete`
and `authorization_id`; failures raise SaslAuthenticationError."""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping
from typing import Protocol

from .credentials import ScramCredentialCache
from .errors import UnsupportedSaslMechanismError
from .plain import PlainServer
from .scram import MECHANISM_NAMES, ScramServer, TokenLookup

SUPPORTED_MECHANISMS = ("PLAIN", *MECHANISM_NAMES)


class SaslServer(Protocol):
    authorization_id: str | None

    @property
    def complete(self) -> bool: ...

    def evaluate(self, token: bytes) -> bytes: ...


def enabled_mechanisms(
    props: Mapping[str, object] | Callable[[str], object], listener: str
) -> list[str]:
    """`listener.name.<l>.sasl.enabled.mechanisms`, else `sasl.enabled.mechanisms` (Kafka's
    default: GSSAPI, which we do not offer, so the default here is empty)."""
    get = props.get if isinstance(props, Mapping) else props
    for key in (f"listener.name.{listener.lower()}.sasl.enabled.mechanisms",
                "sasl.enabled.mechanisms"):  # fmt: skip
        value = get(key)
        if value:
            items = value if isinstance(value, list | tuple) else str(value).split(",")
            return [m.strip() for m in items if str(m).strip()]
    return []


def new_sasl_server(
    mechanism: str,
    enabled: Iterable[str],
    *,
    plain_users: Mapping[str, str] | None = None,
    scram_credentials: ScramCredentialCache | None = None,
    tokens: TokenLookup | None = None,
) -> SaslServer:
    if mechanism not in enabled or mechanism not in SUPPORTED_MECHANISMS:
        raise UnsupportedSaslMechanismError(f"Unsupported SASL mechanism {mechanism}")
    if mechanism == "PLAIN":
        return PlainServer(plain_users or {})
    cache = scram_credentials or ScramCredentialCache()
    return ScramServer(mechanism, cache.lookup(mechanism), tokens)
