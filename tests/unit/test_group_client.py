"""Client-side helpers for groups: the consumer protocol's assignment and the CLI's parsing."""

from __future__ import annotations

import struct

from odradek.broker.cli import build_parser
from odradek.broker.client.admin import parse_consumer_assignment
from odradek.broker.client.cluster import TopicPartition


def assignment(version: int, topics: dict[str, list[int]], user_data: bytes | None) -> bytes:
    out = struct.pack(">hi", version, len(topics))
    for name, parts in topics.items():
        out += struct.pack(">h", len(name)) + name.encode()
        out += struct.pack(f">i{len(parts)}i", len(parts), *parts)
    return out + (
        struct.pack(">i", -1)
        if user_data is None
        else struct.pack(">i", len(user_data)) + user_data
    )


def test_parse_consumer_assignment_any_version() -> None:
    data = assignment(1, {"a": [0, 2], "b": [1]}, b"ud")
    assert parse_consumer_assignment(data) == [
        TopicPartition("a", 0),
        TopicPartition("a", 2),
        TopicPartition("b", 1),
    ]
    assert parse_consumer_assignment(assignment(0, {}, None)) == []


def test_parse_consumer_assignment_tolerates_garbage() -> None:
    assert parse_consumer_assignment(b"") == []
    assert parse_consumer_assignment(None) == []
    assert parse_consumer_assignment(b"\x00\x00\x00\x00\x00\x05\x00") == []


def test_groups_commands_parse() -> None:
    parser = build_parser()
    args = parser.parse_args(["groups", "describe", "--group", "a", "--group", "b"])
    assert (args.command, args.action, args.group) == ("groups", "describe", ["a", "b"])
    args = parser.parse_args(["groups", "list", "--state", "Stable"])
    assert args.state == ["Stable"]
    args = parser.parse_args(["groups", "delete", "--group", "g", "--bootstrap-server", "h:1"])
    assert (args.group, args.bootstrap_server) == (["g"], "h:1")
