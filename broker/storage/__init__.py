"""Storage: segments, partition logs, the log manager, checkpoints and crash recovery."""

from .errors import KafkaStorageError, OffsetOutOfRange, RecordListTooLarge
from .file_slice import FileSlice
from .log import AppendResult, Log, TimestampAndOffset
from .log_config import LogConfig
from .log_manager import LogManager

__all__ = [
    "AppendResult",
    "FileSlice",
    "KafkaStorageError",
    "Log",
    "LogConfig",
    "LogManager",
    "OffsetOutOfRange",
    "RecordListTooLarge",
    "TimestampAndOffset",
]
