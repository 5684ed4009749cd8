"""Storage: segments, partition logs, the log manager, checkpoints and crash recovery."""

from .errors import KafkaStorageError, OffsetOutOfRange, RecordListTooLarge
from .file_slice import FileSlice
from .log import AppendResult, Log
from .log_config import LogConfig
from .log_manager import LogManager
from .log_timestamps import TimestampAndOffset

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
