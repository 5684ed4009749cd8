"""Error codes and API keys."""

from __future__ import annotations

from odradek.broker.protocol.api_keys import ApiKey
from odradek.broker.protocol.errors import ErrorCode, KafkaError


def test_codes_are_contiguous_and_named_as_kafka():
    assert [c.value for c in ErrorCode] == list(range(-1, len(ErrorCode) - 1))
    kafka_values = {
        "UNKNOWN_SERVER_ERROR": -1,
        "CORRUPT_MESSAGE": 2,
        "UNKNOWN_TOPIC_OR_PARTITION": 3,
        "NOT_LEADER_OR_FOLLOWER": 6,
        "MESSAGE_TOO_LARGE": 10,
        "INVALID_TOPIC_EXCEPTION": 17,
        "UNSUPPORTED_VERSION": 35,
        "TOPIC_ALREADY_EXISTS": 36,
        "INVALID_PARTITIONS": 37,
        "INVALID_REPLICATION_FACTOR": 38,
        "INVALID_CONFIG": 40,
        "INVALID_REQUEST": 42,
        "INVALID_RECORD": 87,
        "INVALID_REGISTRATION": 119,
    }
    assert {name: ErrorCode[name].value for name in kafka_values} == kafka_values


def test_retriable_matches_kafka():
    retriable = {
        ErrorCode.CORRUPT_MESSAGE,
        ErrorCode.UNKNOWN_TOPIC_OR_PARTITION,
        ErrorCode.NOT_LEADER_OR_FOLLOWER,
        ErrorCode.REQUEST_TIMED_OUT,
        ErrorCode.NOT_COORDINATOR,
        ErrorCode.NOT_ENOUGH_REPLICAS,
        ErrorCode.FENCED_LEADER_EPOCH,
        ErrorCode.UNKNOWN_TOPIC_ID,
    }
    assert all(c.retriable for c in retriable)
    for code in (
        ErrorCode.NONE,
        ErrorCode.UNKNOWN_SERVER_ERROR,
        ErrorCode.MESSAGE_TOO_LARGE,
        ErrorCode.INVALID_RECORD,
        ErrorCode.TOPIC_ALREADY_EXISTS,
        ErrorCode.REBALANCE_IN_PROGRESS,
        ErrorCode.BROKER_NOT_AVAILABLE,
    ):
        assert not code.retriable


def test_kafka_error():
    e = KafkaError(ErrorCode.INVALID_CONFIG, "bad retention.ms")
    assert e.code is ErrorCode.INVALID_CONFIG and e.message == "bad retention.ms"
    assert "INVALID_CONFIG" in str(e) and "retention.ms" in str(e)
    assert not e.retriable
    assert KafkaError(3).code is ErrorCode.UNKNOWN_TOPIC_OR_PARTITION
    assert KafkaError(9999).code is ErrorCode.UNKNOWN_SERVER_ERROR


def test_api_keys():
    assert [k.value for k in ApiKey] == list(range(88))
    assert ApiKey.PRODUCE == 0 and ApiKey.API_VERSIONS == 18
    assert ApiKey.DESCRIBE_CLUSTER == 60 and ApiKey.READ_SHARE_GROUP_STATE_SUMMARY == 87
