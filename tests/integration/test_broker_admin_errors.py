"""Admin requests the broker must refuse, with Kafka's error codes, and configs it must report.

Driven through confluent-kafka's AdminClient (what operators' tools use); values librdkafka
refuses to put on the wire (negative partition counts, replication factor 0) go through the
project's codec on a raw socket instead.
"""

from __future__ import annotations

import time
import uuid

import pytest
from confluent_kafka import KafkaError, KafkaException, Producer, TopicPartition
from confluent_kafka.admin import (
    AdminClient,
    AlterConfigOpType,
    ConfigEntry,
    ConfigResource,
    ConfigSource,
    NewPartitions,
    NewTopic,
    ResourceType,
)
from odradek.broker.client.blocking import BlockingConnection
from odradek.broker.protocol.api_keys import ApiKey
from odradek.broker.protocol.errors import ErrorCode
from odradek.broker.protocol.messages import REGISTRY
from topic_ready import wait_for_topic

TIMEOUT = 60.0

# Kafka 3.9's topic defaults (from the broker-level defaults nobody overrides in these tests).
TOPIC_DEFAULTS = {
    "retention.ms": "604800000",
    "retention.bytes": "-1",
    "cleanup.policy": "delete",
    "segment.bytes": "1073741824",
    "segment.ms": "604800000",
    "max.message.bytes": "1048588",
}


# --- helpers ------------------------------------------------------------------------------------


def admin_for(bootstrap: str) -> AdminClient:
    return AdminClient({"bootstrap.servers": bootstrap})


def error_of(future) -> KafkaError:
    """The KafkaError an admin future fails with (the test fails if it succeeds)."""
    with pytest.raises(KafkaException) as info:
        future.result(TIMEOUT)
    err = info.value.args[0]
    assert isinstance(err, KafkaError), err
    return err


def create(admin: AdminClient, topic: NewTopic):
    return admin.create_topics([topic], operation_timeout=30)[topic.topic]


def unique(prefix: str) -> str:
    return f"{prefix}-{uuid.uuid4().hex[:10]}"


def topic_names(admin: AdminClient) -> set[str]:
    return set(admin.list_topics(timeout=10).topics)


def describe(admin: AdminClient, topic: str) -> dict[str, ConfigEntry]:
    resource = ConfigResource(ResourceType.TOPIC, topic)
    return admin.describe_configs([resource])[resource].result(TIMEOUT)


def raw_call(host: str, port: int, api_key: int, body: dict) -> dict:
    """One request at the highest version both the broker and this codec know."""
    with BlockingConnection(host, port, timeout=TIMEOUT, client_id="admin-tests") as conn:
        versions = conn.call(ApiKey.API_VERSIONS, 0, {})
        ranges = {e["api_key"]: e["max_version"] for e in versions["api_keys"]}
        assert api_key in ranges, f"API {api_key} is not advertised"
        return conn.call(api_key, min(ranges[api_key], REGISTRY[api_key].versions.hi), body)


def raw_create_error(broker, name: str, partitions: int, replication: int) -> int:
    body = {
        "topics": [{"name": name, "num_partitions": partitions, "replication_factor": replication}],
        "timeout_ms": 30000,
    }
    response = raw_call(broker.host, broker.port, ApiKey.CREATE_TOPICS, body)
    (result,) = response["topics"]
    assert result["name"] == name
    return result["error_code"]


def raw_metadata_topic_error(broker, name: str, allow_auto_create: bool) -> int:
    body = {"topics": [{"name": name}], "allow_auto_topic_creation": allow_auto_create}
    response = raw_call(broker.host, broker.port, ApiKey.METADATA, body)
    (topic,) = response["topics"]
    assert topic["name"] == name
    return topic["error_code"]


# --- CreateTopics -------------------------------------------------------------------------------


@pytest.mark.parametrize("name", ["bad name", "a" * 250, ".", "..", "ab/c", "tab\there", "é"])
def test_invalid_topic_name(bootstrap: str, name: str) -> None:
    admin = admin_for(bootstrap)
    err = error_of(create(admin, NewTopic(name, 1, 1)))
    assert err.code() == KafkaError.TOPIC_EXCEPTION == 17, err
    assert name not in topic_names(admin)


def test_longest_legal_topic_name(bootstrap: str) -> None:
    admin = admin_for(bootstrap)
    name = unique("long")
    name += "x" * (249 - len(name))
    create(admin, NewTopic(name, 1, 1)).result(TIMEOUT)
    wait_for_topic(admin, name, 1)


@pytest.mark.parametrize(
    ("prefix", "partitions", "replication", "code", "number"),
    [
        ("zero-partitions", 0, 1, KafkaError.INVALID_PARTITIONS, 37),
        # one broker cannot hold three replicas
        ("rf3", 1, 3, KafkaError.INVALID_REPLICATION_FACTOR, 38),
    ],
)
def test_impossible_partitions_or_replication(
    bootstrap: str, prefix: str, partitions: int, replication: int, code: int, number: int
) -> None:
    admin = admin_for(bootstrap)
    name = unique(prefix)
    err = error_of(create(admin, NewTopic(name, partitions, replication)))
    assert err.code() == code == number, err
    assert name not in topic_names(admin)


@pytest.mark.parametrize("partitions", [0, -2, -100])
def test_non_positive_partitions_raw(broker, partitions: int) -> None:
    name = unique("bad-partitions")
    assert raw_create_error(broker, name, partitions, 1) == ErrorCode.INVALID_PARTITIONS


@pytest.mark.parametrize("replication", [0, -2])
def test_non_positive_replication_factor_raw(broker, replication: int) -> None:
    name = unique("bad-rf")
    error = raw_create_error(broker, name, 1, replication)
    assert error == ErrorCode.INVALID_REPLICATION_FACTOR


def test_default_partitions_and_replication(broker, bootstrap: str) -> None:
    """-1 means the broker's defaults (num.partitions=1, default.replication.factor=1)."""
    name = unique("defaults")
    assert raw_create_error(broker, name, -1, -1) == ErrorCode.NONE
    wait_for_topic(admin_for(bootstrap), name, 1)


def test_topic_already_exists(bootstrap: str, new_topic) -> None:
    topic = new_topic(partitions=2)
    admin = admin_for(bootstrap)
    err = error_of(create(admin, NewTopic(topic, 3, 1)))
    assert err.code() == KafkaError.TOPIC_ALREADY_EXISTS == 36, err
    # The existing topic is untouched.
    assert len(admin.list_topics(topic, timeout=10).topics[topic].partitions) == 2


@pytest.mark.parametrize(
    "config",
    [
        {"no.such.topic.config": "1"},
        {"retention.ms": "abc"},
        {"cleanup.policy": "bogus"},
        {"segment.bytes": "-5"},
        {"min.insync.replicas": "0"},
    ],
)
def test_invalid_topic_config_on_create(bootstrap: str, config: dict[str, str]) -> None:
    admin = admin_for(bootstrap)
    name = unique("bad-config")
    err = error_of(create(admin, NewTopic(name, 1, 1, config=config)))
    assert err.code() == KafkaError.INVALID_CONFIG == 40, err
    assert name not in topic_names(admin)


# --- configs ------------------------------------------------------------------------------------


@pytest.mark.filterwarnings("ignore:alter_configs has been deprecated:DeprecationWarning")
def test_describe_configs_defaults_and_changes(bootstrap: str, new_topic) -> None:
    topic = new_topic(config={"segment.ms": "3600000"})
    admin = admin_for(bootstrap)

    configs = describe(admin, topic)
    for name, value in TOPIC_DEFAULTS.items():
        if name == "segment.ms":
            continue
        assert configs[name].value == value, (name, configs[name])
        assert configs[name].source == ConfigSource.DEFAULT_CONFIG.value, (name, configs[name])
        assert configs[name].is_default
    assert configs["segment.ms"].value == "3600000"
    assert configs["segment.ms"].source == ConfigSource.DYNAMIC_TOPIC_CONFIG.value
    assert not configs["segment.ms"].is_default

    # IncrementalAlterConfigs SET: only the named key changes.
    entry = ConfigEntry("retention.ms", "3600000", incremental_operation=AlterConfigOpType.SET)
    incremental = ConfigResource(ResourceType.TOPIC, topic, incremental_configs=[entry])
    admin.incremental_alter_configs([incremental])[incremental].result(TIMEOUT)
    configs = describe(admin, topic)
    assert configs["retention.ms"].value == "3600000"
    assert configs["retention.ms"].source == ConfigSource.DYNAMIC_TOPIC_CONFIG.value
    assert configs["segment.ms"].value == "3600000"

    # IncrementalAlterConfigs DELETE: back to the default.
    entry = ConfigEntry("retention.ms", None, incremental_operation=AlterConfigOpType.DELETE)
    incremental = ConfigResource(ResourceType.TOPIC, topic, incremental_configs=[entry])
    admin.incremental_alter_configs([incremental])[incremental].result(TIMEOUT)
    configs = describe(admin, topic)
    assert configs["retention.ms"].value == TOPIC_DEFAULTS["retention.ms"]
    assert configs["retention.ms"].source == ConfigSource.DEFAULT_CONFIG.value

    # AlterConfigs (the legacy API) replaces the whole set: segment.ms reverts to its default.
    legacy = ConfigResource(ResourceType.TOPIC, topic, set_config={"retention.ms": "7200000"})
    admin.alter_configs([legacy])[legacy].result(TIMEOUT)
    configs = describe(admin, topic)
    assert configs["retention.ms"].value == "7200000"
    assert configs["retention.ms"].source == ConfigSource.DYNAMIC_TOPIC_CONFIG.value
    assert configs["segment.ms"].value == TOPIC_DEFAULTS["segment.ms"]
    assert configs["segment.ms"].source == ConfigSource.DEFAULT_CONFIG.value


@pytest.mark.filterwarnings("ignore:alter_configs has been deprecated:DeprecationWarning")
@pytest.mark.parametrize(
    ("name", "value"),
    [("retention.ms", "abc"), ("cleanup.policy", "bogus"), ("no.such.topic.config", "1")],
)
def test_invalid_config_on_alter(bootstrap: str, new_topic, name: str, value: str) -> None:
    topic = new_topic()
    admin = admin_for(bootstrap)
    entry = ConfigEntry(name, value, incremental_operation=AlterConfigOpType.SET)
    incremental = ConfigResource(ResourceType.TOPIC, topic, incremental_configs=[entry])
    err = error_of(admin.incremental_alter_configs([incremental])[incremental])
    assert err.code() == KafkaError.INVALID_CONFIG, err
    legacy = ConfigResource(ResourceType.TOPIC, topic, set_config={name: value})
    err = error_of(admin.alter_configs([legacy])[legacy])
    assert err.code() == KafkaError.INVALID_CONFIG, err
    # Nothing was applied.
    configs = describe(admin, topic)
    if name in TOPIC_DEFAULTS:
        assert configs[name].value == TOPIC_DEFAULTS[name]
    else:
        assert name not in configs


def test_alter_configs_of_missing_topic(bootstrap: str) -> None:
    admin = admin_for(bootstrap)
    topic = unique("missing")
    entry = ConfigEntry("retention.ms", "1000", incremental_operation=AlterConfigOpType.SET)
    incremental = ConfigResource(ResourceType.TOPIC, topic, incremental_configs=[entry])
    err = error_of(admin.incremental_alter_configs([incremental])[incremental])
    assert err.code() == KafkaError.UNKNOWN_TOPIC_OR_PART, err


# --- CreatePartitions, DeleteTopics -------------------------------------------------------------


def test_create_partitions(bootstrap: str, new_topic) -> None:
    topic = new_topic(partitions=3)
    admin = admin_for(bootstrap)
    for count in (2, 3):  # lowering, or not raising, is refused
        err = error_of(admin.create_partitions([NewPartitions(topic, count)])[topic])
        assert err.code() == KafkaError.INVALID_PARTITIONS == 37, (count, err)
    assert len(admin.list_topics(topic, timeout=10).topics[topic].partitions) == 3
    admin.create_partitions([NewPartitions(topic, 5)])[topic].result(TIMEOUT)
    wait_for_topic(admin, topic, 5)


def test_create_partitions_of_missing_topic(bootstrap: str) -> None:
    admin = admin_for(bootstrap)
    topic = unique("missing")
    err = error_of(admin.create_partitions([NewPartitions(topic, 2)])[topic])
    assert err.code() == KafkaError.UNKNOWN_TOPIC_OR_PART, err


def test_delete_missing_topic(bootstrap: str) -> None:
    admin = admin_for(bootstrap)
    topic = unique("missing")
    err = error_of(admin.delete_topics([topic], operation_timeout=30)[topic])
    assert err.code() == KafkaError.UNKNOWN_TOPIC_OR_PART == 3, err


def test_delete_topic_then_recreate(bootstrap: str, new_topic) -> None:
    topic = new_topic()
    admin = admin_for(bootstrap)
    admin.delete_topics([topic], operation_timeout=30)[topic].result(TIMEOUT)
    deadline = time.monotonic() + TIMEOUT
    while topic in topic_names(admin):
        assert time.monotonic() < deadline, f"{topic} still listed after deletion"
        time.sleep(0.1)
    # A second delete finds nothing; creating the name again works and starts empty.
    err = error_of(admin.delete_topics([topic], operation_timeout=30)[topic])
    assert err.code() == KafkaError.UNKNOWN_TOPIC_OR_PART, err
    deadline = time.monotonic() + TIMEOUT
    while True:  # Kafka may still be removing the old partitions: retry while it says so
        try:
            create(admin, NewTopic(topic, 1, 1)).result(TIMEOUT)
            break
        except KafkaException as e:
            assert e.args[0].code() == KafkaError.TOPIC_ALREADY_EXISTS, e
            assert time.monotonic() < deadline, "the deleted topic's name stays taken"
            time.sleep(0.2)
    wait_for_topic(admin, topic, 1)


# --- DeleteRecords ------------------------------------------------------------------------------


def produce(bootstrap: str, topic: str, n: int) -> list[int]:
    producer = Producer({"bootstrap.servers": bootstrap, "linger.ms": 5})
    offsets: list[int] = []

    def on_delivery(err, msg) -> None:
        assert err is None, err
        offsets.append(msg.offset())

    for i in range(n):
        producer.produce(topic, value=f"record-{i}".encode(), partition=0, on_delivery=on_delivery)
    assert producer.flush(TIMEOUT) == 0
    assert len(offsets) == n
    return offsets


def watermarks(bootstrap: str, topic: str) -> tuple[int, int]:
    from confluent_kafka import Consumer

    consumer = Consumer({"bootstrap.servers": bootstrap, "group.id": unique("wm")})
    try:
        return consumer.get_watermark_offsets(TopicPartition(topic, 0), timeout=TIMEOUT)
    finally:
        consumer.close()


def test_delete_records_moves_low_watermark(bootstrap: str, new_topic) -> None:
    topic = new_topic()
    assert produce(bootstrap, topic, 10) == list(range(10))
    admin = admin_for(bootstrap)

    tp = TopicPartition(topic, 0, 4)
    deleted = admin.delete_records([tp])[tp].result(TIMEOUT)
    assert deleted.low_watermark == 4
    assert watermarks(bootstrap, topic) == (4, 10)

    # Deleting below the current start changes nothing; beyond the high watermark is an error.
    tp = TopicPartition(topic, 0, 2)
    assert admin.delete_records([tp])[tp].result(TIMEOUT).low_watermark == 4
    tp = TopicPartition(topic, 0, 11)
    err = error_of(admin.delete_records([tp])[tp])
    assert err.code() == KafkaError.OFFSET_OUT_OF_RANGE == 1, err
    assert watermarks(bootstrap, topic) == (4, 10)

    # -1 means "up to the high watermark".
    tp = TopicPartition(topic, 0, -1)
    assert admin.delete_records([tp])[tp].result(TIMEOUT).low_watermark == 10
    assert watermarks(bootstrap, topic) == (10, 10)
    # New records continue at 10.
    assert produce(bootstrap, topic, 3) == [10, 11, 12]


def test_delete_records_of_missing_partition(broker, new_topic) -> None:
    """Raw request: librdkafka refuses a partition it has no leader for before sending."""
    topic = new_topic()
    missing = unique("missing")
    body = {
        "topics": [
            {"name": topic, "partitions": [{"partition_index": 7, "offset": 0}]},
            {"name": missing, "partitions": [{"partition_index": 0, "offset": 0}]},
        ],
        "timeout_ms": 30000,
    }
    response = raw_call(broker.host, broker.port, ApiKey.DELETE_RECORDS, body)
    errors = {
        (t["name"], p["partition_index"]): p["error_code"]
        for t in response["topics"]
        for p in t["partitions"]
    }
    assert errors == {
        (topic, 7): ErrorCode.UNKNOWN_TOPIC_OR_PARTITION,
        (missing, 0): ErrorCode.UNKNOWN_TOPIC_OR_PARTITION,
    }


# --- auto.create.topics.enable ------------------------------------------------------------------


def test_auto_create_on_produce_by_default(broker, bootstrap: str) -> None:
    admin = admin_for(bootstrap)
    topic = unique("auto-created")
    assert topic not in topic_names(admin)
    producer = Producer({"bootstrap.servers": bootstrap, "message.timeout.ms": 60000})
    reports = []
    producer.produce(topic, value=b"hello", on_delivery=lambda err, msg: reports.append(err))
    assert producer.flush(TIMEOUT) == 0
    assert reports == [None]
    wait_for_topic(admin, topic, 1)  # num.partitions defaults to 1

    # A metadata request that does not allow auto-creation creates nothing.
    other = unique("not-auto-created")
    error = raw_metadata_topic_error(broker, other, allow_auto_create=False)
    assert error == ErrorCode.UNKNOWN_TOPIC_OR_PARTITION
    assert other not in topic_names(admin)


def test_no_auto_create_when_disabled(broker_factory) -> None:
    b = broker_factory(overrides={"auto.create.topics.enable": "false"})
    admin = admin_for(b.bootstrap)
    topic = unique("never-created")
    error = raw_metadata_topic_error(b, topic, allow_auto_create=True)
    assert error == ErrorCode.UNKNOWN_TOPIC_OR_PARTITION

    producer = Producer({"bootstrap.servers": b.bootstrap, "message.timeout.ms": 5000})
    reports = []
    producer.produce(topic, value=b"hello", on_delivery=lambda err, msg: reports.append(err))
    producer.flush(TIMEOUT)
    assert len(reports) == 1 and reports[0] is not None, reports
    assert reports[0].code() in (
        KafkaError.UNKNOWN_TOPIC_OR_PART,
        KafkaError._UNKNOWN_TOPIC,
        KafkaError._MSG_TIMED_OUT,
    ), reports[0]
    assert topic not in topic_names(admin)
    # Explicit creation still works.
    create(admin, NewTopic(topic, 1, 1)).result(TIMEOUT)
    wait_for_topic(admin, topic, 1)
