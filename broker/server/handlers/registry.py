"""The handler table: which API versions this broker really serves, and by which function."""

from __future__ import annotations

import logging
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from ...protocol.codec import RequestHeader
from ...protocol.messages import REGISTRY
from ...protocol.schema import Versions

if TYPE_CHECKING:
    from ..network import Connection
    from ..services import BrokerServices


@dataclass
class RequestContext:
    broker: BrokerServices
    conn: Connection
    header: RequestHeader

    @property
    def version(self) -> int:
        return self.header.api_version

    def warn_once(self, logger: logging.Logger, message: str) -> None:
        """Log a warning about something this connection asked for, once per connection: a
        client retrying a refused request would otherwise repeat it many times a second."""
        if message not in self.conn.warned:
            self.conn.warned.add(message)
            logger.warning("%s", message)


class Deferred:
    """What is left of a handler once its work is done and only a wait remains (an acks=all
    produce waiting for the high watermark): awaiting `rest` gives the response. The
    dispatcher may let the connection read its next request meanwhile (network.py)."""

    __slots__ = ("rest",)

    def __init__(self, rest: Awaitable[dict[str, Any] | None]) -> None:
        self.rest = rest


Handler = Callable[[RequestContext, dict[str, Any]], Awaitable[dict[str, Any] | Deferred | None]]


@dataclass(frozen=True)
class HandlerSpec:
    api_key: int
    versions: Versions
    fn: Handler


HANDLERS: dict[int, HandlerSpec] = {}


def handles(api_key: int, versions: str) -> Callable[[Handler], Handler]:
    """Register `fn` for `versions` of `api_key`; the schema must cover all of them."""

    def register(fn: Handler) -> Handler:
        v = Versions.parse(versions)
        schema = REGISTRY[api_key].versions
        if v.lo < schema.lo or v.hi > schema.hi:
            raise ValueError(f"API {api_key}: handler versions {versions} exceed the schema's")
        if api_key in HANDLERS:
            raise ValueError(f"API {api_key} has two handlers")
        HANDLERS[api_key] = HandlerSpec(api_key, v, fn)
        return fn

    return register
