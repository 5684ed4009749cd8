"""Kafka's sampled rate: `samples` windows of `window_ms`, and the throttle time of a violation.

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
