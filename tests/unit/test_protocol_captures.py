"""Byte-exact decoding of frames real clients sent and Apache Kafka 3.9 answered (captures/)."""

from __future__ import annotations

import struct
import uuid
from pathlib import Path

import crc32c
import pytest
from odradek.broker.protocol.codec import (
    decode_request,
    decode_response,
    encode_request,
    encode_response,
    read_request_header,
)

CAPTURES = Path(__file__).parent / "captures"
REQUESTS = sorted(CAPTURES.glob("*_req.hex"))
# Frames a client sends with stray bytes after the body (Kafka ignores them, and so do we).
TRAILING = {"confluent-kafka_AlterUserScramCredentials_v0_req.hex": b"\x00"}


def load(name: str) -> bytes:
    return bytes.fromhex((CAPTURES / name).read_text())


def request(name: str):
    frame = load(f"{name}_req.hex")
    header, offset = read_request_header(frame)
    return header, offset, decode_request(header.api_key, header.api_version, frame, offset)


def response(name: str) -> dict:
    header, _, _ = request(name)
    correlation_id, body = decode_response(
        header.api_key, header.api_version, load(f"{name}_resp.hex")
    )
    assert correlation_id == header.correlation_id
    return body


def test_captures_exist():
    assert len(REQUESTS) >= 30


@pytest.mark.parametrize("path", REQUESTS, ids=lambda p: p.name[: -len("_req.hex")])
def test_capture_decodes_and_reencodes_byte_for_byte(path: Path):
    frame = bytes.fromhex(path.read_text())
    header, offset = read_request_header(frame)
    body = decode_request(header.api_key, header.api_version, frame, offset)
    again = encode_request(
        header.api_key, header.api_version, header.correlation_id, header.client_id, body
    )
    assert again + TRAILING.get(path.name, b"") == frame
    resp_path = path.with_name(path.name.replace("_req.hex", "_resp.hex"))
    if resp_path.exists():
        resp = bytes.fromhex(resp_path.read_text())
        correlation_id, rbody = decode_response(header.api_key, header.api_version, resp)
        assert correlation_id == header.correlation_id
        parts = encode_response(header.api_key, header.api_version, correlation_id, rbody)
        assert b"".join(parts) == resp


def test_librdkafka_api_versions_v3():
    header, offset, body = request("confluent-kafka_ApiVersions_v3")
    assert header == (18, 3, 1, "cap-admin")
    assert offset == 8 + 2 + len("cap-admin") + 1  # int16 client id, then the tag section
    assert body == {
        "client_software_name": "confluent-kafka-python",
        "client_software_version": "2.16.1-rdkafka-2.16.0",
    }
    resp = response("confluent-kafka_ApiVersions_v3")
    assert resp["error_code"] == 0 and resp["throttle_time_ms"] == 0
    keys = {k["api_key"]: (k["min_version"], k["max_version"]) for k in resp["api_keys"]}
    assert keys[0] == (0, 11) and keys[1] == (0, 17) and keys[3] == (0, 12) and keys[18] == (0, 4)
    # Tagged fields (KRaft broker features) decoded from the response's tag section.
    assert resp["supported_features"] == [
        {"name": "metadata.version", "min_version": 1, "max_version": 21}
    ]
    assert resp["finalized_features"] == [
        {"name": "metadata.version", "max_version_level": 21, "min_version_level": 21}
    ]
    assert resp["finalized_features_epoch"] > 0
    # Response header v0 even though v3 is flexible: the body starts right after the id.
    raw = load("confluent-kafka_ApiVersions_v3_resp.hex")
    assert raw[4:6] == b"\x00\x00"


def test_kcat_api_versions_v3():
    header, _, body = request("kcat_ApiVersions_v3")
    assert header.client_id == "rdkafka"
    assert body == {"client_software_name": "librdkafka", "client_software_version": "2.0.2"}


def test_kafka_python_api_versions():
    header, offset, body = request("kafka-python-0.10_ApiVersions_v0")
    frame = load("kafka-python-0.10_ApiVersions_v0_req.hex")
    assert header == (18, 0, 1, "cap-kpy") and offset == len(frame)  # v0 has an empty body
    assert body == {"client_software_name": "", "client_software_version": ""}
    resp = response("kafka-python-0.10_ApiVersions_v0")
    assert resp["finalized_features_epoch"] == -1 and resp["supported_features"] == []
    header, _, body = request("kafka-python_ApiVersions_v4")
    assert header == (18, 4, 1, "cap-kpy-admin")
    assert body == {"client_software_name": "kafka-python", "client_software_version": "3.0.12"}


def test_aiokafka_api_versions_v0():
    header, _, body = request("aiokafka_ApiVersions_v0")
    assert header == (18, 0, 1, "cap-aio-admin")


def test_librdkafka_metadata_v12():
    header, _, body = request("confluent-kafka_Metadata_v12")
    assert header == (3, 12, 2, "cap-admin")
    assert body["topics"] == [] and body["allow_auto_topic_creation"] is False
    assert body["include_topic_authorized_operations"] is False
    resp = response("confluent-kafka_Metadata_v12")
    assert resp["brokers"] == [{"node_id": 1, "host": "127.0.0.1", "port": 40975, "rack": None}]
    assert resp["cluster_id"] == "oB89TlQaQ8yBN3WCrJTSqg" and resp["controller_id"] == 1
    assert resp["cluster_authorized_operations"] == -(2**31)


def test_kafka_python_metadata_v1():
    header, _, body = request("kafka-python-0.10_Metadata_v1")
    assert header == (3, 1, 2, "cap-kpy")
    assert [t["name"] for t in body["topics"]] == ["kpy-t"]
    resp = response("kafka-python-0.10_Metadata_v1")
    assert resp["cluster_id"] is None  # not in v1: the default
    (topic,) = resp["topics"]
    assert topic["name"] == "kpy-t" and topic["error_code"] == 0
    assert sorted(p["partition_index"] for p in topic["partitions"]) == [0, 1]
    assert all(p["replica_nodes"] == [1] and p["isr_nodes"] == [1] for p in topic["partitions"])


def test_kcat_metadata_v4_unknown_topic():
    _, _, body = request("kcat_Metadata_v4")
    assert [t["name"] for t in body["topics"]] == ["kcat-t"]
    assert body["allow_auto_topic_creation"] is True
    (topic,) = response("kcat_Metadata_v4")["topics"]
    assert topic["error_code"] == 3 and topic["partitions"] == []  # UNKNOWN_TOPIC_OR_PARTITION


def _batch_fields(records: memoryview) -> tuple[int, int, int]:
    """(batch length, magic, attributes) of the first batch / message in a records view."""
    length = struct.unpack_from(">i", records, 8)[0]
    magic = records[16]
    attributes = records[22] if magic >= 2 else records[17]
    return length, magic, attributes


def test_librdkafka_produce_v10():
    header, _, body = request("confluent-kafka_Produce_v10")
    assert header == (0, 10, 2, "cap-producer")
    assert body["transactional_id"] is None and body["acks"] == -1
    assert body["timeout_ms"] == 30000
    (topic,) = body["topic_data"]
    (part,) = topic["partition_data"]
    assert topic["name"] == "cap-t" and part["index"] == 0
    records = part["records"]
    assert isinstance(records, memoryview) and len(records) == 121
    length, magic, attributes = _batch_fields(records)
    # librdkafka sends small batches uncompressed when lz4 would not shrink them.
    assert length == 121 - 12 and magic == 2 and attributes & 0x07 == 0
    assert struct.unpack_from(">I", records, 17)[0] == crc32c.crc32c(records[21:])
    resp = response("confluent-kafka_Produce_v10")
    (pr,) = resp["responses"][0]["partition_responses"]
    assert pr["error_code"] == 6 and pr["base_offset"] == -1  # leader not elected yet
    assert pr["current_leader"] == {"leader_id": -1, "leader_epoch": -1}


def test_kafka_python_produce_v2_legacy_message_set():
    _, _, body = request("kafka-python-0.10_Produce_v2")
    records = body["topic_data"][0]["partition_data"][0]["records"]
    length, magic, attributes = _batch_fields(records)
    assert len(records) == 12 + length and magic == 1 and attributes & 0x07 == 1  # gzip
    (pr,) = response("kafka-python-0.10_Produce_v2")["responses"][0]["partition_responses"]
    assert pr["error_code"] == 0 and pr["base_offset"] == 0


def test_aiokafka_produce_v7_idempotent():
    _, _, body = request("aiokafka_Produce_v7")
    records = body["topic_data"][0]["partition_data"][0]["records"]
    _, magic, attributes = _batch_fields(records)
    producer_id = struct.unpack_from(">q", records, 43)[0]
    assert magic == 2 and attributes & 0x07 == 4 and producer_id >= 0  # zstd, idempotent


def test_librdkafka_fetch_v16():
    header, _, body = request("confluent-kafka_Fetch_v16")
    assert header.api_version == 16 and header.client_id == "cap-consumer"
    assert body["replica_id"] == -1 and body["isolation_level"] == 1
    assert body["max_wait_ms"] == 500 and body["max_bytes"] == 52428800
    assert body["cluster_id"] is None  # tagged, absent
    (topic,) = body["topics"]
    topic_id = uuid.UUID("42a8a232-5cec-4894-8d33-5d531c4d0737")
    assert topic["topic_id"] == topic_id and topic["topic"] == ""
    (part,) = topic["partitions"]
    assert part["fetch_offset"] == 0 and part["partition_max_bytes"] == 1048576
    resp = response("confluent-kafka_Fetch_v16")
    assert resp["responses"][0]["topic_id"] == topic_id
    rpart = resp["responses"][0]["partitions"][0]
    assert rpart["records"] == b"" and rpart["diverging_epoch"] == {"epoch": -1, "end_offset": -1}


def test_kafka_python_fetch_v2():
    _, _, body = request("kafka-python-0.10_Fetch_v2")
    assert [t["topic"] for t in body["topics"]] == ["kpy-t"]
    resp = response("kafka-python-0.10_Fetch_v2")
    records = resp["responses"][0]["partitions"][0]["records"]
    assert records is not None and len(records) > 0


def test_librdkafka_join_group_v5():
    _, _, body = request("confluent-kafka_JoinGroup_v5")
    assert body["group_id"] == "cap-group" and body["protocol_type"] == "consumer"
    assert body["session_timeout_ms"] == 45000 and body["rebalance_timeout_ms"] == 300000
    assert body["member_id"] == "" and body["group_instance_id"] is None
    assert [p["name"] for p in body["protocols"]] == ["range", "roundrobin"]
    assert body["protocols"][0]["metadata"].startswith(b"\x00\x03\x00\x00\x00\x01\x00\x05cap-t")
    resp = response("confluent-kafka_JoinGroup_v5")
    assert resp["error_code"] == 79  # MEMBER_ID_REQUIRED
    assert resp["member_id"].startswith("cap-consumer-")


def test_librdkafka_scram_upsert_has_a_trailing_byte_we_ignore():
    header, _, body = request("confluent-kafka_AlterUserScramCredentials_v0")
    assert body["deletions"] == []
    (upsert,) = body["upsertions"]
    assert upsert["name"] == "alice" and upsert["mechanism"] == 1  # SCRAM-SHA-256
    assert upsert["iterations"] == 4096 and upsert["salt"] == b"salt"
    assert len(upsert["salted_password"]) == 32


def test_librdkafka_transactional_producer():
    _, _, body = request("confluent-kafka_InitProducerId_v4")
    assert body["transactional_id"] == "cap-txn" and body["producer_id"] == -1
    resp = response("confluent-kafka_InitProducerId_v4")
    assert resp["error_code"] == 0 and resp["producer_id"] >= 0
    _, _, body = request("confluent-kafka_EndTxn_v1")
    assert body["transactional_id"] == "cap-txn" and body["committed"] is True
