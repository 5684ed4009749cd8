"""Names of partition directories: `<topic>-<partition>`, and Kafka's suffixed forms for a log
awaiting deletion or being moved into another log dir. Shared by the log and the log manager."""

from __future__ import annotations

import uuid

# Kafka's partition directories `<topic>-<p>.<uuid>-delete` (awaiting deletion) and
# `<topic>-<p>.<uuid>-future` (a replica being moved into another log dir).
DELETE_DIR_SUFFIX = "-delete"
FUTURE_DIR_SUFFIX = "-future"


def strip_dir_suffix(name: str) -> str:
    """`<topic>-<p>` from a moving or deleted log's `<topic>-<p>.<uuid>-future|-delete`."""
    if name.endswith((FUTURE_DIR_SUFFIX, DELETE_DIR_SUFFIX)) and "." in name:
        return name[: name.rindex(".")]
    return name


def parse_topic_partition(name: str) -> tuple[str, int] | None:
    """`<topic>-<partition>` -> (topic, partition); None for other names."""
    topic, sep, partition = name.rpartition("-")
    if not sep or not topic or not partition.isdigit():
        return None
    return topic, int(partition)


def delete_dir_name(topic: str, partition: int) -> str:
    """Kafka's name for a partition directory awaiting deletion (at most 255 characters)."""
    suffix = f"-{partition}.{uuid.uuid4().hex}{DELETE_DIR_SUFFIX}"
    return topic[: 255 - len(suffix)] + suffix


def future_dir_name(topic: str, partition: int) -> str:
    """Kafka's name for a replica being moved into a log dir: `<topic>-<p>.<uuid>-future`."""
    return f"{topic}-{partition}.{uuid.uuid4().hex}{FUTURE_DIR_SUFFIX}"
