"""Per-broker quota enforcement: one meter per quota kind and entity (a client group or an IP).

The server calls `record_and_get_throttle_ms` for each request (bytes produced or fetched, or
the request's handling time) and delays the response (muting the channel) by the result,
putting it in `throttle_time_ms`. Quota changes apply to the next call: bounds are looked up
every time, so the config-change listener only has to refresh the cache.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from enum import Enum
from typing import Any

from .config import (
    CONNECTION_CREATION_RATE,
    CONSUMER_BYTE_RATE,
    CONTROLLER_MUTATION_RATE,
    PRODUCER_BYTE_RATE,
    REQUEST_PERCENTAGE,
    Key,
    QuotaConfigCache,
    ip_key,
)
from .rate import SampledRate, TokenBucket, throttle_time_ms, token_throttle_ms

INACTIVE_EXPIRY_MS = 3_600_000


class QuotaKind(Enum):
    PRODUCE = PRODUCER_BYTE_RATE
    FETCH = CONSUMER_BYTE_RATE
    REQUEST = REQUEST_PERCENTAGE
    CONTROLLER_MUTATION = CONTROLLER_MUTATION_RATE
    CONNECTION = CONNECTION_CREATION_RATE


@dataclass(frozen=True)
class QuotaSettings:
    samples: int = 11  # quota.window.num
    window_seconds: int = 1  # quota.window.size.seconds

    @classmethod
    def from_props(cls, get: Callable[[str], Any]) -> QuotaSettings:
        """From a config getter (`config.get(name)`), defaults when a key is unknown."""

        def read(name: str, default: int) -> int:
            try:
                value = get(name)
            except (KeyError, ValueError):
                return default
            return default if value is None else int(value)

        return cls(read("quota.window.num", 11), read("quota.window.size.seconds", 1))


def _user_name(principal: str) -> str:
    """Quotas are keyed by the principal's name (`User:alice` -> `alice`)."""
    _, sep, name = principal.partition(":")
    return name if sep else principal


# Whose usage a meter measures is named with the quota cache's keys: the (user, client id)
# group that shares a client quota (Kafka's metric tags, from QuotaConfigCache.find), or
# ip_key(address) for connections.


@dataclass
class _Meter:
    """The usage of one entity under one kind of quota, and when it was last recorded."""

    usage: SampledRate | TokenBucket
    used: float


class QuotaManager:
    """One meter per (kind, entity): a sampled rate, or for controller mutations the token
    bucket of KIP-599. Every kind is recorded the same way: find the bound that applies and
    the entity it bounds, record the usage, and turn the excess into a throttle time."""

    def __init__(
        self, cache: QuotaConfigCache | None = None, settings: QuotaSettings | None = None
    ) -> None:
        self.cache = cache or QuotaConfigCache()
        self.settings = settings or QuotaSettings()
        self._meters: dict[tuple[QuotaKind, Key], _Meter] = {}

    def _usage(self, kind: QuotaKind, entity: Key, now: float) -> SampledRate | TokenBucket:
        meter = self._meters.get((kind, entity))
        if meter is None:
            usage: SampledRate | TokenBucket
            if kind is QuotaKind.CONTROLLER_MUTATION:
                usage = TokenBucket()
            else:
                usage = SampledRate(self.settings.samples, self.settings.window_seconds * 1000.0)
            meter = self._meters[(kind, entity)] = _Meter(usage, now)
        meter.used = now
        return meter.usage

    def _rate(self, kind: QuotaKind, entity: Key, now: float) -> SampledRate:
        rate = self._usage(kind, entity, now)
        assert isinstance(rate, SampledRate)
        return rate

    def _bucket(self, entity: Key, now: float) -> TokenBucket:
        bucket = self._usage(QuotaKind.CONTROLLER_MUTATION, entity, now)
        assert isinstance(bucket, TokenBucket)
        return bucket

    def _find(self, principal: str, client_id: str, kind: QuotaKind) -> tuple[float, Key] | None:
        """The client quota that applies and the entity (group) whose usage it bounds."""
        return self.cache.find(_user_name(principal), client_id, kind.value)

    def _record(self, kind: QuotaKind, entity: Key, bound: float, value: float, now: float) -> int:
        """Record `value` on the entity's rate; the throttle ms that brings it under `bound`."""
        rate = self._rate(kind, entity, now)
        rate.record(value, now)
        return throttle_time_ms(rate.rate(now), bound, rate.window_size_ms(now))

    def expire_idle(self, now: float, idle_ms: float = INACTIVE_EXPIRY_MS) -> int:
        """Forget the meters of clients idle for `idle_ms` (Kafka expires its quota sensors
        after an hour), so short-lived client ids and addresses do not pile up."""
        # list(): mutation-quota buckets are touched from the topic admin's thread as well.
        stale = [k for k, meter in list(self._meters.items()) if now - meter.used > idle_ms]
        for key in stale:
            self._meters.pop(key, None)
        return len(stale)

    def quota(self, principal: str, client_id: str, kind: QuotaKind | str) -> float | None:
        found = self._find(principal, client_id, QuotaKind(kind))
        return None if found is None else found[0]

    def record_and_get_throttle_ms(
        self,
        principal: str,
        client_id: str,
        kind: QuotaKind | str,
        value: float,
        now: float,
    ) -> int:
        """Record `value` at `now` (ms) and return how long to throttle (0: within quota).

        `value`: bytes for PRODUCE/FETCH; handling time in nanoseconds for REQUEST (Kafka
        measures request quotas as a percentage of one thread's time)."""
        kind = QuotaKind(kind)
        found = self._find(principal, client_id, kind)
        if found is None:
            return 0
        bound, entity = found
        if kind is not QuotaKind.REQUEST:
            return self._record(kind, entity, bound, value, now)
        throttle = self._record(kind, entity, bound, value * 100.0 / 1e9, now)
        # Kafka bounds request-quota throttling to one quota window.
        return min(throttle, self.settings.window_seconds * 1000)

    def record_mutations(
        self, principal: str, client_id: str, permits: int, now: float, *, strict: bool
    ) -> tuple[bool, int]:
        """Controller mutations (partitions created or deleted) against the mutation-rate
        quota: (admitted, throttle ms). Strict (newer request versions): refused while the
        bucket is overdrawn, and a request that is admitted is not throttled; permissive:
        always admitted, throttled once overdrawn (KIP-599)."""
        found = self._find(principal, client_id, QuotaKind.CONTROLLER_MUTATION)
        if found is None:
            return True, 0
        rate, entity = found
        burst = rate * self.settings.samples * self.settings.window_seconds
        bucket = self._bucket(entity, now)
        if strict:
            tokens = bucket.measure(rate, burst, now)
            if tokens < 0:
                return False, token_throttle_ms(tokens, rate)
            bucket.record(permits, rate, burst, now)
            return True, 0
        return True, token_throttle_ms(bucket.record(permits, rate, burst, now), rate)

    def record_connection(self, address: str, now: float) -> int:
        """A new connection from `address` against its connection-creation-rate quota: the
        throttle ms (0: accept). A refused connection is not counted (Kafka unrecords it)."""
        bound = self.cache.find_ip(address, CONNECTION_CREATION_RATE)
        if bound is None:
            return 0
        entity = ip_key(address)
        throttle = self._record(QuotaKind.CONNECTION, entity, bound, 1.0, now)
        if throttle > 0:
            self._rate(QuotaKind.CONNECTION, entity, now).record(-1.0, now)
        return throttle
