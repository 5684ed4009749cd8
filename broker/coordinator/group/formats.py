"""What the group coordinator writes to `__consumer_offsets`, byte for byte as Kafka does.

Every record key and value is an int16 schema version followed by that version's fields
(reference §4.2), so Kafka's own tools can read our partitions and we can read theirs. The
layouts are declared with the protocol schema DSL; versions 4 of both values are flexible.
"""

from __future__ import annotations

import struct
from dataclasses import dataclass
from functools import lru_cache

from ...protocol import primitives as p
from ...protocol.codec import ProtocolError, decode_body, encode_body
from ...protocol.schema import Api, F

OFFSETS_TOPIC = "__consumer_offsets"

# Key versions: 0 and 1 are offset commits, 2 is group metadata; later ones belong to the
# KIP-848 consumer protocol and are skipped by classic readers.
OFFSET_KEY_VERSION = 1
GROUP_KEY_VERSION = 2
# Value versions written: offset v3 (v1 when the commit carries an expire timestamp), group v3.
OFFSET_VALUE_VERSION = 3
OFFSET_VALUE_VERSION_WITH_EXPIRY = 1
GROUP_VALUE_VERSION = 3

_OFFSET_KEY = Api(
    -1,
    "OffsetCommitKey",
    versions="0-1",
    flexible="none",
    request=[F("group", "string"), F("topic", "string"), F("partition", "int32")],
    response=[],
)
_OFFSET_VALUE = Api(
    -1,
    "OffsetCommitValue",
    versions="0-4",
    flexible="4+",
    request=[
        F("offset", "int64"),
        F("leader_epoch", "int32", "3+", default=-1),
        F("metadata", "string"),
        F("commit_timestamp", "int64"),
        F("expire_timestamp", "int64", "1", default=-1),
    ],
    response=[],
)
_GROUP_KEY = Api(
    -1, "GroupMetadataKey", versions="2", flexible="none", request=[F("group", "string")],
    response=[],
)  # fmt: skip
_GROUP_VALUE = Api(
    -1,
    "GroupMetadataValue",
    versions="0-4",
    flexible="4+",
    request=[
        F("protocol_type", "string"),
        F("generation", "int32"),
        F("protocol", "string", nullable="0+"),
        F("leader", "string", nullable="0+"),
        F("current_state_timestamp", "int64", "2+", default=-1),
        F(
            "members",
            [
                F("member_id", "string"),
                F("group_instance_id", "string", "3+", nullable="3+", default=None),
                F("client_id", "string"),
                F("client_host", "string"),
                F("rebalance_timeout", "int32", "1+"),
                F("session_timeout", "int32"),
                F("subscription", "bytes"),
                F("assignment", "bytes"),
            ],
        ),
    ],
    response=[],
)

_INT16 = struct.Struct(">h")


class FormatError(Exception):
    """A record of __consumer_offsets or __transaction_state that cannot be parsed."""


# --- coordinator lookup ------------------------------------------------------------------


@lru_cache(maxsize=4096)
def java_string_hash(s: str) -> int:
    """Java's String.hashCode: over UTF-16 code units, wrapping at 32 bits, signed. Cached:
    every coordinator request asks it of its group or transactional id, the same few ids
    again and again (about ten times a transaction), and the loop over a 22-character id's
    characters takes 7 us here."""
    data = s.encode("utf-16-be")
    h = 0
    for i in range(0, len(data), 2):
        h = (31 * h + ((data[i] << 8) | data[i + 1])) & 0xFFFFFFFF
    return h - (1 << 32) if h & 0x80000000 else h


def partition_for(group_id: str, num_partitions: int) -> int:
    """The __consumer_offsets partition of a group (Kafka's Utils.abs maps INT_MIN to 0)."""
    h = java_string_hash(group_id)
    return (0 if h == -(2**31) else abs(h)) % num_partitions


# --- records -----------------------------------------------------------------------------


@dataclass(frozen=True)
class OffsetKey:
    group: str
    topic: str
    partition: int


@dataclass(frozen=True)
class GroupKey:
    group: str


@dataclass(frozen=True)
class OffsetValue:
    offset: int
    leader_epoch: int  # -1: none
    metadata: str
    commit_timestamp: int
    expire_timestamp: int  # -1: none (only value version 1 stores one)


@dataclass(frozen=True)
class MemberValue:
    member_id: str
    group_instance_id: str | None
    client_id: str
    client_host: str
    rebalance_timeout: int
    session_timeout: int
    subscription: bytes
    assignment: bytes


@dataclass(frozen=True)
class GroupValue:
    protocol_type: str
    generation: int
    protocol: str | None
    leader: str | None
    current_state_timestamp: int  # -1: unknown
    members: tuple[MemberValue, ...]


def _versioned(api: Api, version: int, body: dict) -> bytes:
    return _INT16.pack(version) + encode_body(api, version, "request", body)


def offset_key(group: str, topic: str, partition: int) -> bytes:
    body = {"group": group, "topic": topic, "partition": partition}
    return _versioned(_OFFSET_KEY, OFFSET_KEY_VERSION, body)


def group_key(group: str) -> bytes:
    return _versioned(_GROUP_KEY, GROUP_KEY_VERSION, {"group": group})


def offset_value(v: OffsetValue) -> bytes:
    version = OFFSET_VALUE_VERSION_WITH_EXPIRY if v.expire_timestamp >= 0 else OFFSET_VALUE_VERSION
    body = {
        "offset": v.offset,
        "leader_epoch": v.leader_epoch,
        "metadata": v.metadata,
        "commit_timestamp": v.commit_timestamp,
        "expire_timestamp": v.expire_timestamp,
    }
    return _versioned(_OFFSET_VALUE, version, body)


def group_value(v: GroupValue, version: int = GROUP_VALUE_VERSION) -> bytes:
    body = {
        "protocol_type": v.protocol_type,
        "generation": v.generation,
        "protocol": v.protocol,
        "leader": v.leader,
        "current_state_timestamp": v.current_state_timestamp,
        "members": [
            {
                "member_id": m.member_id,
                "group_instance_id": m.group_instance_id,
                "client_id": m.client_id,
                "client_host": m.client_host,
                "rebalance_timeout": m.rebalance_timeout,
                "session_timeout": m.session_timeout,
                "subscription": m.subscription,
                "assignment": m.assignment,
            }
            for m in v.members
        ],
    }
    return _versioned(_GROUP_VALUE, version, body)


def record_version(data: bytes | memoryview) -> int:
    """The int16 version every key and value of the internal topics starts with."""
    if len(data) < 2:
        raise FormatError("record shorter than its version")
    return _INT16.unpack_from(data, 0)[0]


def decode_record(api: Api, data: bytes | memoryview) -> dict:
    """A key or value of an internal topic, in one of the versions `api` knows."""
    version = record_version(data)
    if version not in api.versions:
        raise FormatError(f"unknown {api.name} version {version}")
    try:
        body, _ = decode_body(api, version, "request", data, 2)
    except ProtocolError as e:
        raise FormatError(f"malformed {api.name} v{version}: {e}") from e
    return body


def parse_key(data: bytes | memoryview) -> OffsetKey | GroupKey | None:
    """The key of a __consumer_offsets record; None for record types classic groups ignore."""
    version = record_version(data)
    if version in _OFFSET_KEY.versions:
        body = decode_record(_OFFSET_KEY, data)
        return OffsetKey(body["group"], body["topic"], body["partition"])
    if version in _GROUP_KEY.versions:
        return GroupKey(decode_record(_GROUP_KEY, data)["group"])
    return None


def parse_offset_value(data: bytes | memoryview) -> OffsetValue:
    b = decode_record(_OFFSET_VALUE, data)
    return OffsetValue(
        b["offset"], b["leader_epoch"], b["metadata"], b["commit_timestamp"], b["expire_timestamp"]
    )


def parse_group_value(data: bytes | memoryview) -> GroupValue:
    b = decode_record(_GROUP_VALUE, data)
    version = record_version(data)
    members = tuple(
        MemberValue(
            m["member_id"],
            m["group_instance_id"],
            m["client_id"],
            m["client_host"],
            # Version 0 had no rebalance timeout: the session timeout served for both.
            m["rebalance_timeout"] if version >= 1 else m["session_timeout"],
            m["session_timeout"],
            bytes(m["subscription"]),
            bytes(m["assignment"]),
        )
        for m in b["members"]
    )
    return GroupValue(
        b["protocol_type"],
        b["generation"],
        b["protocol"],
        b["leader"],
        b["current_state_timestamp"],
        members,
    )


# --- the consumer protocol's subscription (to know which topics a group reads) -----------


def subscribed_topics(subscription: bytes | memoryview) -> list[str] | None:
    """Topics of a ConsumerProtocolSubscription (any version: all start with the topic list);
    None when the bytes are not one."""
    try:
        buf = memoryview(subscription)
        if len(buf) < 2:
            return None
        pos = 2
        count, pos = p.read_array_length(buf, pos)
        topics = []
        for _ in range(count):
            name, pos = p.read_string(buf, pos)
            topics.append(name)
        return topics
    except p.ProtocolError:
        return None
