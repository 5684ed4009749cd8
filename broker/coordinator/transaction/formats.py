"""What the transaction coordinator writes to `__transaction_state`, byte for byte as Kafka.

A record's key is the transactional id, its value the transaction's metadata, each prefixed by
an int16 schema version (reference §5.3). Value version 0 is what a ZooKeeper-mode Kafka writes
and what Kafka's `kafka-dump-log --transaction-log-decoder` reads; version 1 (flexible, with
tagged producer ids and client transaction version) is read too. A null value is a tombstone:
the transactional id expired.
"""

from __future__ import annotations

import struct
from dataclasses import dataclass

from ...protocol.codec import ProtocolError, decode_body, encode_body
from ...protocol.schema import Api, F
from ..group.formats import FormatError, decode_record, partition_for, record_version

TRANSACTION_STATE_TOPIC = "__transaction_state"
KEY_VERSION = 0
VALUE_VERSION = 0
MAX_STATE_ID = 7  # PrepareEpochFence; see metadata.TxnState

__all__ = [
    "TRANSACTION_STATE_TOPIC",
    "FormatError",
    "TxnLogValue",
    "key_bytes",
    "parse_key",
    "parse_value",
    "partition_for",
    "value_bytes",
]

_KEY = Api(
    -1, "TransactionLogKey", versions="0", flexible="none",
    request=[F("transactional_id", "string")], response=[],
)  # fmt: skip
_VALUE = Api(
    -1,
    "TransactionLogValue",
    versions="0-1",
    flexible="1+",
    request=[
        F("producer_id", "int64"),
        F("previous_producer_id", "int64", "1+", tag=0, tagged="1+", default=-1),
        F("next_producer_id", "int64", "1+", tag=1, tagged="1+", default=-1),
        F("producer_epoch", "int16"),
        F("transaction_timeout_ms", "int32"),
        F("transaction_status", "int8"),
        F(
            "transaction_partitions",
            [F("topic", "string"), F("partition_ids", "[]int32")],
            nullable="0+",
        ),
        F("transaction_last_update_timestamp_ms", "int64"),
        F("transaction_start_timestamp_ms", "int64"),
        F("client_transaction_version", "int16", "1+", tag=2, tagged="1+", default=0),
    ],
    response=[],
)
_INT16 = struct.Struct(">h")


@dataclass(frozen=True)
class TxnLogValue:
    producer_id: int
    producer_epoch: int
    timeout_ms: int
    state_id: int
    partitions: frozenset[tuple[str, int]]
    last_update_ms: int
    start_ms: int


def key_bytes(transactional_id: str) -> bytes:
    body = {"transactional_id": transactional_id}
    return _INT16.pack(KEY_VERSION) + encode_body(_KEY, KEY_VERSION, "request", body)


def value_bytes(v: TxnLogValue) -> bytes:
    """Version 0; the partition list is null for Empty (state 0), as Kafka writes it."""
    by_topic: dict[str, list[int]] = {}
    for topic, partition in sorted(v.partitions):
        by_topic.setdefault(topic, []).append(partition)
    body = {
        "producer_id": v.producer_id,
        "producer_epoch": v.producer_epoch,
        "transaction_timeout_ms": v.timeout_ms,
        "transaction_status": v.state_id,
        "transaction_partitions": None
        if v.state_id == 0
        else [{"topic": t, "partition_ids": ps} for t, ps in by_topic.items()],
        "transaction_last_update_timestamp_ms": v.last_update_ms,
        "transaction_start_timestamp_ms": v.start_ms,
    }
    return _INT16.pack(VALUE_VERSION) + encode_body(_VALUE, VALUE_VERSION, "request", body)


def parse_key(data: bytes | memoryview) -> str | None:
    """The transactional id of a record key; None for an unknown key version (skipped)."""
    version = record_version(data)
    if version not in _KEY.versions:
        return None
    try:
        body, _ = decode_body(_KEY, version, "request", data, 2)
    except ProtocolError as e:
        raise FormatError(f"malformed TransactionLogKey: {e}") from e
    return body["transactional_id"]


def parse_value(data: bytes | memoryview) -> TxnLogValue:
    b = decode_record(_VALUE, data)
    if not 0 <= b["transaction_status"] <= MAX_STATE_ID:
        raise FormatError(f"unknown transaction state id {b['transaction_status']}")
    partitions = frozenset(
        (t["topic"], p) for t in b["transaction_partitions"] or [] for p in t["partition_ids"]
    )
    return TxnLogValue(
        b["producer_id"],
        b["producer_epoch"],
        b["transaction_timeout_ms"],
        b["transaction_status"],
        partitions if b["transaction_status"] != 0 else frozenset(),
        b["transaction_last_update_timestamp_ms"],
        b["transaction_start_timestamp_ms"],
    )
