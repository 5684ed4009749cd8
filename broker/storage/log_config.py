"""Per-topic log configuration, parsed from Kafka's topic-level property names.

The broker's `log.*` defaults and a topic's overrides both end up here; storage only ever sees a
`LogConfig`. Values keep Kafka's units and sentinels (-1 = unlimited for retention).
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any

LONG_MAX = (1 << 63) - 1
INT_MAX = (1 << 31) - 1

COMPRESSION_TYPES = ("uncompressed", "zstd", "lz4", "snappy", "gzip", "producer")
TIMESTAMP_TYPES = ("CreateTime", "LogAppendTime")
CLEANUP_POLICIES = ("compact", "delete")


class InvalidConfig(ValueError):
    """A property value cannot be parsed or is out of range; the message names the key."""

    def __init__(self, key: str, value: object, reason: str) -> None:
        super().__init__(f"Invalid value {value!r} for configuration {key}: {reason}")
        self.key = key


def _int(lo: int | None = None, hi: int | None = None) -> Callable[[str, str], int]:
    def parse(key: str, raw: str) -> int:
        try:
            value = int(str(raw).strip())
        except ValueError:
            raise InvalidConfig(key, raw, "not a number") from None
        if lo is not None and value < lo:
            raise InvalidConfig(key, raw, f"value must be at least {lo}")
        if hi is not None and value > hi:
            raise InvalidConfig(key, raw, f"value must be no more than {hi}")
        return value

    return parse


def _float(lo: float, hi: float) -> Callable[[str, str], float]:
    def parse(key: str, raw: str) -> float:
        try:
            value = float(str(raw).strip())
        except ValueError:
            raise InvalidConfig(key, raw, "not a number") from None
        if not lo <= value <= hi:
            raise InvalidConfig(key, raw, f"value must be between {lo} and {hi}")
        return value

    return parse


def _bool(key: str, raw: str) -> bool:
    text = str(raw).strip().lower()
    if text not in ("true", "false"):
        raise InvalidConfig(key, raw, "expected true or false")
    return text == "true"


def _choice(options: tuple[str, ...]) -> Callable[[str, str], str]:
    def parse(key: str, raw: str) -> str:
        value = str(raw).strip()
        if value not in options:
            raise InvalidConfig(key, raw, f"string must be one of: {', '.join(options)}")
        return value

    return parse


def _policy(key: str, raw: str) -> tuple[str, ...]:
    items = tuple(sorted({p.strip() for p in str(raw).split(",") if p.strip()}))
    for item in items:
        if item not in CLEANUP_POLICIES:
            raise InvalidConfig(key, raw, f"String must be one of: {', '.join(CLEANUP_POLICIES)}")
    return items


def _string(key: str, raw: str) -> str:
    return str(raw)


@dataclass(frozen=True)
class LogConfig:
    segment_bytes: int = 1 << 30
    segment_ms: int = 7 * 24 * 3600 * 1000
    segment_jitter_ms: int = 0
    segment_index_bytes: int = 10 * 1024 * 1024
    index_interval_bytes: int = 4096
    retention_ms: int = 7 * 24 * 3600 * 1000
    retention_bytes: int = -1
    flush_messages: int = LONG_MAX
    flush_ms: int = LONG_MAX
    file_delete_delay_ms: int = 60000
    cleanup_policy: tuple[str, ...] = ("delete",)
    delete_retention_ms: int = 24 * 3600 * 1000
    min_compaction_lag_ms: int = 0
    max_compaction_lag_ms: int = LONG_MAX
    min_cleanable_dirty_ratio: float = 0.5
    max_message_bytes: int = 1048588
    message_timestamp_type: str = "CreateTime"
    message_timestamp_difference_max_ms: int = LONG_MAX
    message_timestamp_before_max_ms: int = LONG_MAX
    message_timestamp_after_max_ms: int = LONG_MAX
    compression_type: str = "producer"
    compression_gzip_level: int = -1
    compression_lz4_level: int = 9
    compression_zstd_level: int = 3
    min_insync_replicas: int = 1
    unclean_leader_election_enable: bool = False
    preallocate: bool = False
    message_downconversion_enable: bool = True
    message_format_version: str = "3.0-IV1"
    leader_replication_throttled_replicas: str = ""
    follower_replication_throttled_replicas: str = ""

    @property
    def delete(self) -> bool:
        """Retention by time and size applies (cleanup.policy contains delete)."""
        return "delete" in self.cleanup_policy

    @property
    def compact(self) -> bool:
        return "compact" in self.cleanup_policy

    @classmethod
    def from_props(cls, props: Mapping[str, Any], base: LogConfig | None = None) -> LogConfig:
        """Apply topic-level properties (Kafka names) on top of `base` (defaults when None).

        Unknown keys are ignored: validating names is the admin layer's job.
        """
        changes: dict[str, Any] = {}
        for key, raw in props.items():
            parser = _PARSERS.get(key)
            if parser is None or raw is None:
                continue
            changes[key.replace(".", "_")] = parser(key, raw)
        return dataclasses.replace(base or cls(), **changes)

    def to_props(self) -> dict[str, str]:
        """Kafka property names and string values (lists comma-joined, booleans lowercase)."""
        out: dict[str, str] = {}
        for key in _PARSERS:
            value = getattr(self, key.replace(".", "_"))
            if isinstance(value, bool):
                out[key] = "true" if value else "false"
            elif isinstance(value, tuple):
                out[key] = ",".join(value)
            else:
                out[key] = str(value)
        return out


_PARSERS: dict[str, Callable[[str, str], Any]] = {
    "segment.bytes": _int(14, INT_MAX),
    "segment.ms": _int(1),
    "segment.jitter.ms": _int(0),
    "segment.index.bytes": _int(4, INT_MAX),
    "index.interval.bytes": _int(0, INT_MAX),
    "retention.ms": _int(-1),
    "retention.bytes": _int(),
    "flush.messages": _int(1),
    "flush.ms": _int(0),
    "file.delete.delay.ms": _int(0),
    "cleanup.policy": _policy,
    "delete.retention.ms": _int(0),
    "min.compaction.lag.ms": _int(0),
    "max.compaction.lag.ms": _int(1),
    "min.cleanable.dirty.ratio": _float(0.0, 1.0),
    "max.message.bytes": _int(0, INT_MAX),
    "message.timestamp.type": _choice(TIMESTAMP_TYPES),
    "message.timestamp.difference.max.ms": _int(0),
    "message.timestamp.before.max.ms": _int(0),
    "message.timestamp.after.max.ms": _int(0),
    "compression.type": _choice(COMPRESSION_TYPES),
    "compression.gzip.level": _int(-1, 9),
    "compression.lz4.level": _int(1, 17),
    "compression.zstd.level": _int(-131072, 22),
    "min.insync.replicas": _int(1, INT_MAX),
    "unclean.leader.election.enable": _bool,
    "preallocate": _bool,
    "message.downconversion.enable": _bool,
    "message.format.version": _string,
    "leader.replication.throttled.replicas": _string,
    "follower.replication.throttled.replicas": _string,
}

TOPIC_CONFIG_NAMES = frozenset(_PARSERS)
