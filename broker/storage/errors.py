"""Storage errors. Those a client can see are KafkaErrors carrying Kafka's error code."""

from __future__ import annotations

from ..protocol.errors import ErrorCode, KafkaError


class OffsetOutOfRange(KafkaError):
    """The requested offset is below the log start offset or above the log end offset."""

    def __init__(self, message: str | None = None) -> None:
        super().__init__(ErrorCode.OFFSET_OUT_OF_RANGE, message)


class RecordListTooLarge(KafkaError):
    """An append is larger than a whole segment (segment.bytes), so no segment can hold it."""

    def __init__(self, message: str | None = None) -> None:
        super().__init__(ErrorCode.RECORD_LIST_TOO_LARGE, message)


class KafkaStorageError(KafkaError):
    """A disk operation failed (ENOSPC, EIO...); the log may be unusable until restart."""

    def __init__(self, message: str | None = None) -> None:
        super().__init__(ErrorCode.KAFKA_STORAGE_ERROR, message)


class UnexpectedAppendOffset(ValueError):
    """A follower append whose offsets do not continue the log (first offset below its end)."""


class CorruptIndex(ValueError):
    """An index file disagrees with its segment; it is rebuilt from the log."""


class LogDirError(RuntimeError):
    """A log directory the broker cannot use; the message names it and says why."""


class LogDirInUse(LogDirError):
    """Another process holds the lock of a log directory."""


class InconsistentMetaProperties(RuntimeError):
    """meta.properties of a log dir names another broker id or cluster id."""
