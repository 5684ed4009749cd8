"""Kafka's topic name rules: what is legal, and which names collide in metric names."""

from __future__ import annotations

import re

from ..protocol.errors import ErrorCode, KafkaError

MAX_TOPIC_NAME_LENGTH = 249
# KRaft's metadata log: Kafka refuses to create a regular topic with this name (as an
# authorization failure, which is what its CreateTopics handler answers).
CLUSTER_METADATA_TOPIC = "__cluster_metadata"
_LEGAL_TOPIC = re.compile(r"[a-zA-Z0-9._-]+")


def validate_topic_name(name: str) -> None:
    """Kafka's topic name rules; INVALID_TOPIC_EXCEPTION with Kafka's messages."""
    if not name:
        raise KafkaError(
            ErrorCode.INVALID_TOPIC_EXCEPTION, "Topic name is illegal, it can't be empty"
        )
    if name in (".", ".."):
        raise KafkaError(ErrorCode.INVALID_TOPIC_EXCEPTION, 'Topic name cannot be "." or ".."')
    if len(name) > MAX_TOPIC_NAME_LENGTH:
        raise KafkaError(
            ErrorCode.INVALID_TOPIC_EXCEPTION,
            f"Topic name is illegal, it can't be longer than {MAX_TOPIC_NAME_LENGTH} "
            f"characters, topic name: {name}",
        )
    if not _LEGAL_TOPIC.fullmatch(name):
        raise KafkaError(
            ErrorCode.INVALID_TOPIC_EXCEPTION,
            f'Topic name "{name}" is illegal, it contains a character other than ASCII '
            "alphanumerics, '.', '_' and '-'",
        )


def could_exist(name: str) -> bool:
    """Whether `name` is a legal topic name (and so a usable znode name) at all."""
    try:
        validate_topic_name(name)
    except KafkaError:
        return False
    return True


def has_collision_chars(name: str) -> bool:
    return "." in name or "_" in name


def collides(a: str, b: str) -> bool:
    """'.' and '_' map to the same metric name, so `a.b` and `a_b` cannot coexist."""
    return a.replace(".", "_") == b.replace(".", "_")
