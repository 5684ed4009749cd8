"""How this broker logs in to the others (controller requests, replica fetches, controlled
shutdown): Kafka's inter-broker settings turned into the client's `ClientSecurity`.

The inter-broker listener (`inter.broker.listener.name`, else `security.inter.broker.protocol`)
decides the protocol; a SASL mechanism comes from `sasl.mechanism.inter.broker.protocol` and its
credentials from the `username`/`password` options of the listener's JAAS config for that
mechanism (`listener.name.<l>.<mechanism>.sasl.jaas.config`, else `sasl.jaas.config`), as in
Kafka. TLS uses the listener's trust store, and its key store as the client certificate.
"""

from __future__ import annotations

from ..client.security import MECHANISMS, ClientSecurity
from ..config import BrokerConfig, ConfigError
from ..properties import parse_jaas_options
from .tls import client_context


def inter_broker_security(config: BrokerConfig) -> ClientSecurity | None:
    """None for PLAINTEXT; raises ConfigError naming the setting that is missing or wrong."""
    listener = config.inter_broker_listener
    protocol = next(
        (e.security_protocol for e in config.listeners if e.listener == listener), listener
    )
    if protocol == "PLAINTEXT":
        return None
    context = client_context(config.get_raw, listener) if protocol.endswith("SSL") else None
    if not protocol.startswith("SASL_"):
        return ClientSecurity(protocol=protocol, context=context)
    mechanism = str(config.get("sasl.mechanism.inter.broker.protocol")).upper()
    if mechanism not in MECHANISMS:
        raise ConfigError(
            "sasl.mechanism.inter.broker.protocol",
            f"sasl.mechanism.inter.broker.protocol={mechanism} is not supported between "
            f"brokers; use one of {', '.join(MECHANISMS)}",
        )
    key = f"listener.name.{listener.lower()}.{mechanism.lower()}.sasl.jaas.config"
    jaas = config.get_raw(key) or config.get_raw("sasl.jaas.config")
    options = parse_jaas_options(str(jaas)) if jaas else {}
    if "username" not in options or "password" not in options:
        raise ConfigError(
            key,
            f"the inter-broker listener {listener} uses {mechanism}: set username and password "
            f"in {key}",
        )
    return ClientSecurity(
        protocol=protocol,
        sasl_mechanism=mechanism,
        username=options["username"],
        password=options["password"],
        context=context,
    )
