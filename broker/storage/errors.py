"""Storage errors. Those a client can see are KafkaErrors carrying Kafka's error code."""

from __future__ import annotations

import functools
from collections.abc import Callable
from typing import Any, TypeVar

from ..protocol.errors import ErrorCode, KafkaError
from .partition_dir import DELETE_DIR_SUFFIX


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


_F = TypeVar("_F", bound=Callable[..., Any])


def guard_io(method: _F) -> _F:
    """An OSError from the log's files becomes KAFKA_STORAGE_ERROR for the caller, and the
    log's `on_io_error` hook (the log manager, which takes the dir offline) hears of it."""

    @functools.wraps(method)
    def guarded(self: Any, *args: Any, **kwargs: Any) -> Any:
        try:
            return method(self, *args, **kwargs)
        except OSError as exc:
            # A log already closed or renamed for deletion says nothing about its disk.
            doomed = self._closed or self.dir.name.endswith(DELETE_DIR_SUFFIX)
            if self.on_io_error is not None and not doomed:
                self.on_io_error(exc)
            raise KafkaStorageError(f"I/O error on {self.dir.name}: {exc}") from exc

    return guarded  # type: ignore[return-value]
