"""Kafka's sampled rate: `samples` windows of `window_ms`, and the throttle time of a violation;
and Kafka's token bucket, which controller-mutation quotas use instead (KIP-599).

Mirrors Kafka's SampledStat/Rate so throttle times match what clients of Apache Kafka see: a new
sample starts when the current one is `window_ms` old; samples older than samples*window_ms are
reset; the rate divides the sum of all samples by the elapsed time, which is never taken as
shorter than (samples - 1) full windows (so a first burst is not overestimated).
"""

from __future__ import annotations

from dataclasses import dataclass


@dataclass
class _Sample:
    start_ms: float
    value: float = 0.0


class SampledRate:
    def __init__(self, samples: int = 11, window_ms: float = 1000.0) -> None:
        if samples < 2:
            raise ValueError("a sampled rate needs at least two samples")
        self.samples = samples
        self.window_ms = window_ms
        self._samples: list[_Sample] = []
        self._current = 0

    def record(self, value: float, now_ms: float) -> None:
        if not self._samples:
            self._samples.append(_Sample(now_ms))
        sample = self._samples[self._current]
        if now_ms - sample.start_ms >= self.window_ms:
            self._current = (self._current + 1) % self.samples
            if self._current >= len(self._samples):
                self._samples.append(_Sample(now_ms))
            else:
                self._samples[self._current] = _Sample(now_ms)
            sample = self._samples[self._current]
        sample.value += value

    def _purge(self, now_ms: float) -> None:
        expire = self.samples * self.window_ms
        for i, s in enumerate(self._samples):
            if now_ms - s.start_ms >= expire:
                self._samples[i] = _Sample(now_ms)

    def window_size_ms(self, now_ms: float) -> float:
        self._purge(now_ms)
        oldest = min((s.start_ms for s in self._samples), default=now_ms)
        elapsed = now_ms - oldest
        full = int(elapsed // self.window_ms)
        if full < self.samples - 1:
            elapsed += (self.samples - 1 - full) * self.window_ms
        return elapsed

    def rate(self, now_ms: float) -> float:
        """Per second."""
        size = self.window_size_ms(now_ms)
        total = sum(s.value for s in self._samples)
        return total / (size / 1000.0) if size > 0 else 0.0


def throttle_time_ms(rate: float, bound: float, window_size_ms: float) -> int:
    """Kafka's QuotaUtils.throttleTime: how long until the measured rate falls to `bound`."""
    if bound <= 0 or rate <= bound:
        return 0
    return int((rate - bound) / bound * window_size_ms)


class TokenBucket:
    """Credits refill at the quota's rate up to a burst of samples*window worth of it; a record
    may overdraw them, and the quota is exhausted while they are below zero. The rate is passed
    on every call, so a quota change applies at once (as Kafka's TokenBucket stat)."""

    def __init__(self) -> None:
        self.tokens = 0.0
        self.last_ms = 0.0  # a first refill from time 0 fills the bucket

    def _refill(self, rate: float, burst: float, now_ms: float) -> None:
        self.tokens = min(burst, self.tokens + rate * (now_ms - self.last_ms) / 1000.0)
        self.last_ms = now_ms

    def measure(self, rate: float, burst: float, now_ms: float) -> float:
        self._refill(rate, burst, now_ms)
        return self.tokens

    def record(self, value: float, rate: float, burst: float, now_ms: float) -> float:
        self._refill(rate, burst, now_ms)
        self.tokens = min(burst, self.tokens - value)
        return self.tokens


def token_throttle_ms(tokens: float, rate: float) -> int:
    """How long until an overdrawn bucket is back at zero."""
    if tokens >= 0 or rate <= 0:
        return 0
    return round(-tokens / rate * 1000)
