"""Errors of the security layer, mapped by the network layer to Kafka's error codes."""

from __future__ import annotations


class SaslAuthenticationError(Exception):
    """Authentication failed: answer SASL_AUTHENTICATION_FAILED with this message, then close."""


class UnsupportedSaslMechanismError(Exception):
    """SaslHandshake named a mechanism this listener does not enable (UNSUPPORTED_SASL_MECHANISM)."""
