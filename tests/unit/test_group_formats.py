"""__consumer_offsets record formats (Kafka's byte layouts) and the group -> partition mapping."""

from __future__ import annotations

import struct

import pytest
from odradek.broker.coordinator.group import formats as fmt


def kstr(s: str) -> bytes:
    data = s.encode()
    return struct.pack(">h", len(data)) + data


def test_java_string_hash_matches_java() -> None:
    # Values of String.hashCode() in Java.
    assert fmt.java_string_hash("") == 0
    assert fmt.java_string_hash("hello") == 99162322
    assert fmt.java_string_hash("Aa") == fmt.java_string_hash("BB") == 2112
    assert fmt.java_string_hash("polygenelubricants") == -(2**31)
    # Characters outside the BMP count as two UTF-16 units.
    assert fmt.java_string_hash("\U0001f600") == 31 * 0xD83D + 0xDE00


def test_partition_for_uses_kafka_abs() -> None:
    assert fmt.partition_for("hello", 50) == 99162322 % 50
    # Utils.abs(Integer.MIN_VALUE) is 0, not MIN_VALUE & 0x7fffffff.
    assert fmt.partition_for("polygenelubricants", 50) == 0
    negative = "consumer-group-7"
    h = fmt.java_string_hash(negative)
    assert fmt.partition_for(negative, 50) == abs(h) % 50
    assert all(0 <= fmt.partition_for(f"g{i}", 7) < 7 for i in range(100))


def test_offset_key_is_version_1() -> None:
    key = fmt.offset_key("grp", "topic-a", 7)
    assert key == struct.pack(">h", 1) + kstr("grp") + kstr("topic-a") + struct.pack(">i", 7)
    assert fmt.parse_key(key) == fmt.OffsetKey("grp", "topic-a", 7)
    # Version 0 has the same layout.
    v0 = struct.pack(">h", 0) + key[2:]
    assert fmt.parse_key(v0) == fmt.OffsetKey("grp", "topic-a", 7)


def test_group_key_is_version_2() -> None:
    key = fmt.group_key("grp")
    assert key == struct.pack(">h", 2) + kstr("grp")
    assert fmt.parse_key(key) == fmt.GroupKey("grp")
    # Keys of the KIP-848 consumer protocol (version 3+) are not for classic groups.
    assert fmt.parse_key(struct.pack(">h", 3) + kstr("grp")) is None


def test_offset_value_v3_and_v1() -> None:
    value = fmt.offset_value(fmt.OffsetValue(42, 5, "meta", 1_700_000_000_000, -1))
    assert value == (
        struct.pack(">hqi", 3, 42, 5) + kstr("meta") + struct.pack(">q", 1_700_000_000_000)
    )
    assert fmt.parse_offset_value(value) == fmt.OffsetValue(42, 5, "meta", 1_700_000_000_000, -1)
    # An explicit expire timestamp (OffsetCommit v2-v4 retention) needs version 1.
    v1 = fmt.offset_value(fmt.OffsetValue(42, -1, "", 1000, 5000))
    assert v1 == struct.pack(">hq", 1, 42) + kstr("") + struct.pack(">qq", 1000, 5000)
    assert fmt.parse_offset_value(v1) == fmt.OffsetValue(42, -1, "", 1000, 5000)


def test_offset_value_v0_and_flexible_v4_are_read() -> None:
    v0 = struct.pack(">hq", 0, 9) + kstr("m") + struct.pack(">q", 77)
    assert fmt.parse_offset_value(v0) == fmt.OffsetValue(9, -1, "m", 77, -1)
    # v4: compact string (length + 1 as an unsigned varint) and an empty tagged-field section.
    v4 = struct.pack(">hqi", 4, 9, 3) + b"\x02m" + struct.pack(">q", 77) + b"\x00"
    assert fmt.parse_offset_value(v4) == fmt.OffsetValue(9, 3, "m", 77, -1)


def test_group_value_v3_layout_and_round_trip() -> None:
    member = fmt.MemberValue(
        "m-1", "static-1", "client", "/127.0.0.1", 300000, 10000, b"sub", b"as"
    )
    value = fmt.GroupValue("consumer", 4, "range", "m-1", 1234, (member,))
    data = fmt.group_value(value)
    expected = (
        struct.pack(">h", 3)
        + kstr("consumer")
        + struct.pack(">i", 4)
        + kstr("range")
        + kstr("m-1")
        + struct.pack(">q", 1234)
        + struct.pack(">i", 1)
        + kstr("m-1")
        + kstr("static-1")
        + kstr("client")
        + kstr("/127.0.0.1")
        + struct.pack(">ii", 300000, 10000)
        + struct.pack(">i", 3)
        + b"sub"
        + struct.pack(">i", 2)
        + b"as"
    )
    assert data == expected
    assert fmt.parse_group_value(data) == value
    assert fmt.parse_group_value(fmt.group_value(value, 4)) == value


def test_empty_group_value_has_null_protocol_and_leader() -> None:
    data = fmt.group_value(fmt.GroupValue("consumer", 2, None, None, 99, ()))
    assert data == (
        struct.pack(">h", 3) + kstr("consumer") + struct.pack(">ihhqi", 2, -1, -1, 99, 0)
    )
    assert fmt.parse_group_value(data).protocol is None


def test_group_value_v0_uses_session_timeout_for_rebalances() -> None:
    data = (
        struct.pack(">h", 0) + kstr("consumer") + struct.pack(">i", 1) + kstr("range")
        + kstr("m") + struct.pack(">i", 1) + kstr("m") + kstr("c") + kstr("/h")
        + struct.pack(">i", 6000) + struct.pack(">i", 0) + struct.pack(">i", 0)
    )  # fmt: skip
    (member,) = fmt.parse_group_value(data).members
    assert member.rebalance_timeout == member.session_timeout == 6000


def test_malformed_records_raise_format_error() -> None:
    with pytest.raises(fmt.FormatError):
        fmt.parse_offset_value(b"\x00")
    with pytest.raises(fmt.FormatError):
        fmt.parse_offset_value(struct.pack(">h", 9) + b"\x00" * 20)
    with pytest.raises(fmt.FormatError):
        fmt.parse_group_value(struct.pack(">h", 3) + b"\x00\x05ab")


def test_subscribed_topics_of_consumer_protocol() -> None:
    # ConsumerProtocolSubscription v1: version, topics, user data, owned partitions.
    sub = (
        struct.pack(">hi", 1, 2) + kstr("a") + kstr("b") + struct.pack(">i", -1)
        + struct.pack(">i", 0)
    )  # fmt: skip
    assert fmt.subscribed_topics(sub) == ["a", "b"]
    assert fmt.subscribed_topics(b"\x00") is None
    assert fmt.subscribed_topics(struct.pack(">hi", 0, 5)) is None
