"""Per-broker quota enforcement: one sampled rate per quota group and kind.

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
    QuotaConfigCache,
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


class QuotaManager:
    def __init__(
        self, cache: QuotaConfigCache | None = None, settings: QuotaSettings | None = None
    ) -> None:
        self.cache = cache or QuotaConfigCache()
        self.settings = settings or QuotaSettings()
        self._rates: dict[tuple[QuotaKind, object], SampledRate] = {}
        self._buckets: dict[object, TokenBucket] = {}
        self._used: dict[object, float] = {}  # last use of each rate and bucket (ms)

    def _rate(self, key: tuple[QuotaKind, object], now: float) -> SampledRate:
        rate = self._rates.get(key)
        if rate is None:
            window_ms = self.settings.window_seconds * 1000.0
            rate = self._rates[key] = SampledRate(self.settings.samples, window_ms)
        self._used[key] = now
        return rate

    def expire_idle(self, now: float, idle_ms: float = INACTIVE_EXPIRY_MS) -> int:
        """Forget the rates and buckets of clients idle for `idle_ms` (Kafka expires its quota
        sensors after an hour), so short-lived client ids and addresses do not pile up."""
        # list(): mutation-quota buckets are touched from the topic admin's thread as well.
        stale = [k for k, used in list(self._used.items()) if now - used > idle_ms]
        for key in stale:
            self._used.pop(key, None)
            if isinstance(key, tuple) and key[0] == "bucket":
                self._buckets.pop(key[1], None)
            else:
                self._rates.pop(key, None)  # type: ignore[arg-type]
        return len(stale)

    def quota(self, principal: str, client_id: str, kind: QuotaKind | str) -> float | None:
        kind = QuotaKind(kind) if not isinstance(kind, QuotaKind) else kind
        found = self.cache.find(_user_name(principal), client_id, kind.value)
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
        kind = QuotaKind(kind) if not isinstance(kind, QuotaKind) else kind
        found = self.cache.find(_user_name(principal), client_id, kind.value)
        if found is None:
            return 0
        bound, group = found
        if kind == QuotaKind.REQUEST:
            value = value * 100.0 / 1e9
        rate = self._rate((kind, group), now)
        window_ms = self.settings.window_seconds * 1000.0
        rate.record(value, now)
        measured = rate.rate(now)
        throttle = throttle_time_ms(measured, bound, rate.window_size_ms(now))
        if kind == QuotaKind.REQUEST:
            # Kafka bounds request-quota throttling to one quota window.
            throttle = min(throttle, int(window_ms))
        return throttle

    def record_mutations(
        self, principal: str, client_id: str, permits: int, now: float, *, strict: bool
    ) -> tuple[bool, int]:
        """Controller mutations (partitions created or deleted) against the mutation-rate
        quota: (admitted, throttle ms). Strict (newer request versions): refused while the
        bucket is overdrawn, and a request that is admitted is not throttled; permissive:
        always admitted, throttled once overdrawn (KIP-599)."""
        found = self.cache.find(_user_name(principal), client_id, CONTROLLER_MUTATION_RATE)
        if found is None:
            return True, 0
        rate, group = found
        burst = rate * self.settings.samples * self.settings.window_seconds
        bucket = self._buckets.get(group)
        if bucket is None:
            bucket = self._buckets[group] = TokenBucket()
        self._used[("bucket", group)] = now
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
        rate = self._rate((QuotaKind.CONNECTION, address), now)
        rate.record(1.0, now)
        throttle = throttle_time_ms(rate.rate(now), bound, rate.window_size_ms(now))
        if throttle > 0:
            rate.record(-1.0, now)
        return throttle
