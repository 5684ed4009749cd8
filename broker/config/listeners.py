"""Listener endpoints: `listeners`, `advertised.listeners` and the security protocol map."""

from __future__ import annotations

import re
from collections.abc import Mapping
from typing import NamedTuple

from .definitions import SECURITY_PROTOCOLS
from .values import ConfigError


class Endpoint(NamedTuple):
    """One listener: name (upper case), host ("" = all interfaces), port, security protocol."""

    listener: str
    host: str
    port: int
    security_protocol: str

    def connection_string(self) -> str:
        host = f"[{self.host}]" if ":" in self.host else self.host
        return f"{self.listener}://{host}:{self.port}"


_ENDPOINT_RE = re.compile(r"(.*)://\[?([0-9a-zA-Z\-%._:]*)\]?:(-?[0-9]+)")


def parse_protocol_map(name: str, raw: str) -> dict[str, str]:
    mapping: dict[str, str] = {}
    for item in [p.strip() for p in raw.split(",") if p.strip()]:
        listener, sep, proto = item.partition(":")
        if not sep or proto.strip().upper() not in SECURITY_PROTOCOLS:
            raise ConfigError.invalid(
                name, raw, f"Invalid listener to security protocol entry '{item}'"
            )
        mapping[listener.strip().upper()] = proto.strip().upper()
    return mapping


def parse_listeners(name: str, raw: str | None, protocol_map: Mapping[str, str]) -> list[Endpoint]:
    """Parse `NAME://host:port,...`; names must be unique and mapped to a security protocol."""
    if raw is None or not raw.strip():
        return []
    endpoints: list[Endpoint] = []
    for item in [p.strip() for p in raw.split(",") if p.strip()]:
        m = _ENDPOINT_RE.fullmatch(item)
        if not m:
            raise ConfigError.invalid(name, raw, f"Unable to parse {item} to a broker endpoint")
        listener = m.group(1).upper()
        if listener not in protocol_map:
            raise ConfigError.invalid(
                name, raw, f"No security protocol defined for listener {listener}"
            )
        port = int(m.group(3))
        if not 0 <= port <= 65535:
            raise ConfigError.invalid(name, raw, f"Invalid port {port} for listener {listener}")
        endpoints.append(Endpoint(listener, m.group(2), port, protocol_map[listener]))
    names = [e.listener for e in endpoints]
    if len(set(names)) != len(names):
        raise ConfigError.invalid(
            name, raw, f"Each listener must have a different name, listeners: {raw}"
        )
    return endpoints


# --------------------------------------------------------------------------------------------
# Describe data
