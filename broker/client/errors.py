"""Client-side failures expressed as Kafka errors, so callers handle one exception type.

A lost connection and a request that got no answer in time are retriable in Kafka's sense (the
cluster client refreshes metadata and tries again); an API the broker cannot speak is not.
"""

from __future__ import annotations

from ..protocol.errors import ErrorCode, KafkaError

__all__ = ["BrokerConnectionError", "RequestTimeoutError", "UnsupportedVersionError", "KafkaError"]


class BrokerConnectionError(KafkaError):
    """The TCP connection could not be opened or broke while requests were outstanding."""

    def __init__(self, message: str) -> None:
        super().__init__(ErrorCode.NETWORK_EXCEPTION, message)


class RequestTimeoutError(KafkaError):
    """No response within the request timeout; the connection is closed (its order is lost)."""

    def __init__(self, message: str) -> None:
        super().__init__(ErrorCode.REQUEST_TIMED_OUT, message)


class UnsupportedVersionError(KafkaError):
    """No version of an API is supported by both this client and the broker."""

    def __init__(self, message: str) -> None:
        super().__init__(ErrorCode.UNSUPPORTED_VERSION, message)
