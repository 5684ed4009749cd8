"""Broker configuration: properties syntax, defaults, validation, synonyms, describe data."""

from __future__ import annotations

import logging

import pytest
from odradek.broker.config import (
    BROKER_CONFIGS,
    TOPIC_CONFIGS,
    BrokerConfig,
    ConfigError,
    ConfigSource,
    ConfigType,
    Endpoint,
    UnknownConfigError,
    java_double,
    load_config,
    validate_dynamic_broker_configs,
    validate_topic_configs,
)
from odradek.broker.properties import parse_properties

# -- properties syntax


def test_properties_separators_comments_and_blank_lines():
    text = (
        "# a comment\n! another comment\n\na=1\nb : 2\nc 3\n  d=  spaced value  \ne=\nf\ng=x=y:z\n"
    )
    assert parse_properties(text) == {
        "a": "1",
        "b": "2",
        "c": "3",
        "d": "spaced value  ",
        "e": "",
        "f": "",
        "g": "x=y:z",
    }


def test_properties_continuations_and_escapes():
    text = (
        "listeners=PLAINTEXT://:9092,\\\n"
        "          SSL://:9093\n"
        "path=C:\\\\logs\\tdir\n"
        "key\\ with\\=odd\\:chars=v\n"
        "uni=caf\\u00e9\n"
        "two\\\\=even backslashes end the key escape\n"
        "# comment ending with backslash \\\n"
        "after=comment\n"
    )
    props = parse_properties(text)
    assert props["listeners"] == "PLAINTEXT://:9092,SSL://:9093"
    assert props["path"] == "C:\\logs\tdir"
    assert props["key with=odd:chars"] == "v"
    assert props["uni"] == "café"
    assert props["two\\"] == "even backslashes end the key escape"
    assert props["after"] == "comment"


def test_properties_crlf_and_last_value_wins():
    assert parse_properties("a=1\r\nb=2\ra=3") == {"a": "3", "b": "2"}


# -- load_config


def test_load_config_file_and_overrides(tmp_path):
    path = tmp_path / "server.properties"
    path.write_text(
        "broker.id=3\n"
        "listeners=PLAINTEXT://127.0.0.1:19092\n"
        f"log.dirs={tmp_path}/a, {tmp_path}/b\n"
        "num.partitions=4\n"
    )
    cfg = load_config(str(path), ["num.partitions=6", "delete.topic.enable=false"])
    assert cfg.broker_id == 3
    assert cfg.listeners == [Endpoint("PLAINTEXT", "127.0.0.1", 19092, "PLAINTEXT")]
    assert cfg.log_dirs == [f"{tmp_path}/a", f"{tmp_path}/b"]
    assert cfg.num_partitions == 6
    assert cfg.delete_topic_enable is False
    assert cfg.source("num.partitions") is ConfigSource.STATIC_BROKER_CONFIG
    assert cfg.source("message.max.bytes") is ConfigSource.DEFAULT_CONFIG


def test_kafka_defaults():
    cfg = load_config(None, [])
    assert cfg.get("listeners") == "PLAINTEXT://:9092"
    assert cfg.log_dirs == ["/tmp/kafka-logs"]
    assert cfg.zookeeper_connect is None
    assert cfg.metadata_store_dir == "/tmp/kafka-logs/__odradek_metadata"
    assert cfg.get("message.max.bytes") == 1048588
    assert cfg.get("log.segment.bytes") == 1073741824
    assert cfg.get("offsets.topic.replication.factor") == 3
    assert cfg.get("log.cleanup.policy") == ["delete"]
    assert cfg.get("log.cleaner.min.cleanable.ratio") == 0.5
    assert cfg.auto_create_topics_enable is True


def test_embedded_store_dir_property():
    cfg = load_config(None, ["log.dirs=/data/k1,/data/k2", "zookeeper.connect="])
    assert cfg.zookeeper_connect is None
    assert cfg.metadata_store_dir == "/data/k1/__odradek_metadata"
    cfg = load_config(None, ["metadata.store.dir=/meta", "zookeeper.connect=zk:2181/kafka"])
    assert cfg.metadata_store_dir == "/meta"
    assert cfg.zookeeper_connect == "zk:2181/kafka"
    assert BROKER_CONFIGS["metadata.store.dir"].odradek


def test_unknown_key_logs_a_warning(caplog):
    with caplog.at_level(logging.WARNING, logger="odradek.broker.config"):
        load_config(None, ["no.such.property=1", "listener.name.plaintext.foo=bar"])
    messages = [r.getMessage() for r in caplog.records]
    assert any("no.such.property" in m for m in messages)
    assert not any("listener.name.plaintext.foo" in m for m in messages)


@pytest.mark.parametrize(
    ("override", "key", "fragment"),
    [
        ("num.partitions=abc", "num.partitions", "Not a number of type INT"),
        ("num.partitions=0", "num.partitions", "Value must be at least 1"),
        ("auto.create.topics.enable=yes", "auto.create.topics.enable", "true or false"),
        ("log.retention.ms=1.5", "log.retention.ms", "Not a number of type LONG"),
        ("compression.type=brotli", "compression.type", "String must be one of"),
        ("log.cleanup.policy=delete,shred", "log.cleanup.policy", "String must be one of"),
        ("log.cleaner.min.cleanable.ratio=2", "log.cleaner.min.cleanable.ratio", "no more than 1"),
        ("message.max.bytes=99999999999", "message.max.bytes", "Not a number of type INT"),
        ("listeners=FOO://:9092", "listeners", "No security protocol defined for listener FOO"),
        ("listeners=PLAINTEXT://:9092,PLAINTEXT://:9093", "listeners", "different name"),
        ("advertised.listeners=PLAINTEXT://0.0.0.0:9092", "advertised.listeners", "0.0.0.0"),
        ("broker.id=-5", "broker.id", "greater than or equal to -1"),
    ],
)
def test_invalid_value_names_the_key(override, key, fragment):
    with pytest.raises(ConfigError) as info:
        load_config(None, [override])
    assert info.value.key == key
    assert key in str(info.value)
    assert fragment in str(info.value)


def test_malformed_override():
    with pytest.raises(ConfigError):
        load_config(None, ["justakey"])


def test_listener_protocol_map_and_advertised():
    cfg = load_config(
        None,
        [
            "listeners=CLIENT://:9092,REPL://[::1]:9093",
            "listener.security.protocol.map=CLIENT:SASL_PLAINTEXT,REPL:PLAINTEXT",
            "advertised.listeners=CLIENT://broker-0.kafka:9092,REPL://broker-0.kafka:9093",
            "inter.broker.listener.name=REPL",
        ],
    )
    assert cfg.listeners[1] == Endpoint("REPL", "::1", 9093, "PLAINTEXT")
    assert cfg.listeners[1].connection_string() == "REPL://[::1]:9093"
    assert [e.host for e in cfg.advertised_listeners] == ["broker-0.kafka"] * 2
    assert cfg.inter_broker_listener == "REPL"
    # Empty advertised host: the machine's name is published instead.
    assert all(e.host for e in load_config(None, []).advertised_listeners)


# -- topic configs and synonyms


def test_topic_defaults_follow_broker_synonyms():
    cfg = load_config(
        None, ["log.retention.hours=24", "log.roll.ms=1000", "message.max.bytes=2000"]
    )
    values = cfg.topic_config({})
    assert values["retention.ms"] == 24 * 3_600_000
    assert values["segment.ms"] == 1000
    assert values["max.message.bytes"] == 2000
    assert values["flush.ms"] == 2**63 - 1  # falls back to log.flush.scheduler.interval.ms
    cfg = load_config(None, ["log.retention.minutes=5", "log.retention.hours=1"])
    assert cfg.topic_config({})["retention.ms"] == 300_000
    assert load_config(None, ["log.retention.ms=-7"]).topic_config({})["retention.ms"] == -1


def test_topic_overrides_win_and_strings_are_canonical():
    cfg = load_config(None, [])
    strings = cfg.topic_config_strings({"cleanup.policy": "compact , delete", "retention.ms": "5"})
    assert strings["cleanup.policy"] == "compact,delete"
    assert strings["retention.ms"] == "5"
    assert strings["min.cleanable.dirty.ratio"] == "0.5"
    assert strings["unclean.leader.election.enable"] == "false"
    assert set(strings) == set(TOPIC_CONFIGS)


def test_validate_topic_configs_messages():
    with pytest.raises(UnknownConfigError, match="Unknown topic config name: retention.days"):
        validate_topic_configs({"retention.days": "1"})
    with pytest.raises(ConfigError) as info:
        validate_topic_configs({"retention.ms": "-2"})
    assert str(info.value) == (
        "Invalid value -2 for configuration retention.ms: Value must be at least -1"
    )
    with pytest.raises(ConfigError, match="String must be one of: compact, delete"):
        validate_topic_configs({"cleanup.policy": "compact,archive"})
    with pytest.raises(ConfigError, match="CreateTime, LogAppendTime"):
        validate_topic_configs({"message.timestamp.type": "Now"})
    with pytest.raises(ConfigError, match=r"min.compaction.lag.ms \(10\) > max.compaction.lag.ms"):
        validate_topic_configs({"min.compaction.lag.ms": "10", "max.compaction.lag.ms": "5"})
    with pytest.raises(ConfigError, match="Null value not supported"):
        validate_topic_configs({"retention.ms": None})
    assert validate_topic_configs({"segment.bytes": "1048576", "preallocate": "TRUE"}) == {
        "segment.bytes": 1048576,
        "preallocate": True,
    }


def test_describe_topic_sources_and_synonyms():
    cfg = BrokerConfig({"log.cleanup.policy": "compact", "log.retention.hours": "24"})
    cfg.update_dynamic(default={"log.segment.bytes": "2097152"})
    entries = {
        e.name: e
        for e in cfg.describe_topic(
            {"retention.ms": "1000"}, include_synonyms=True, include_documentation=True
        )
    }
    retention = entries["retention.ms"]
    assert (retention.value, retention.source) == ("1000", ConfigSource.DYNAMIC_TOPIC_CONFIG)
    assert retention.synonyms[0].source is ConfigSource.DYNAMIC_TOPIC_CONFIG
    assert retention.config_type is ConfigType.LONG
    assert retention.documentation
    cleanup = entries["cleanup.policy"]
    assert (cleanup.value, cleanup.source) == ("compact", ConfigSource.STATIC_BROKER_CONFIG)
    assert [(s.name, s.value, s.source) for s in cleanup.synonyms] == [
        ("log.cleanup.policy", "compact", ConfigSource.STATIC_BROKER_CONFIG),
        ("log.cleanup.policy", "delete", ConfigSource.DEFAULT_CONFIG),
    ]
    segment = entries["segment.bytes"]
    assert (segment.value, segment.source) == (
        "2097152",
        ConfigSource.DYNAMIC_DEFAULT_BROKER_CONFIG,
    )
    # Kafka lists synonyms only from the primary one (log.retention.ms) on: none here.
    unset = {e.name: e for e in cfg.describe_topic({}, include_synonyms=True)}["retention.ms"]
    assert unset.value == str(24 * 3_600_000)
    assert unset.synonyms == ()
    assert unset.source is ConfigSource.DEFAULT_CONFIG
    as_dict = segment.as_dict()
    assert as_dict["config_source"] == int(ConfigSource.DYNAMIC_DEFAULT_BROKER_CONFIG)
    assert as_dict["is_default"] is False


def test_describe_broker_read_only_sensitive_and_default_resource():
    cfg = BrokerConfig({"broker.id": "0", "ssl.keystore.password": "secret"}, warn_unknown=False)
    cfg.update_dynamic(default={"log.retention.ms": "1000"})
    entries = {e.name: e for e in cfg.describe_broker(include_synonyms=True)}
    assert entries["broker.id"].read_only
    assert entries["broker.id"].source is ConfigSource.STATIC_BROKER_CONFIG
    assert not entries["num.io.threads"].read_only
    password = entries["ssl.keystore.password"]
    assert password.is_sensitive and password.value is None
    assert all(s.value is None for s in password.synonyms)
    retention = entries["log.retention.ms"]
    assert (retention.value, retention.source) == (
        "1000",
        ConfigSource.DYNAMIC_DEFAULT_BROKER_CONFIG,
    )
    default_only = cfg.describe_broker(per_broker=False, include_synonyms=True)
    assert [(e.name, e.value) for e in default_only] == [("log.retention.ms", "1000")]
    picked = cfg.describe_broker(names=["num.partitions", "nope"])
    assert [e.name for e in picked] == ["num.partitions"]


def test_dynamic_layers_precedence():
    cfg = BrokerConfig({"num.io.threads": "4"})
    changed = cfg.update_dynamic(default={"num.io.threads": "6"}, broker={})
    assert changed == {"num.io.threads"}
    assert cfg.get("num.io.threads") == 6
    cfg.update_dynamic(broker={"num.io.threads": "9"})
    assert cfg.get("num.io.threads") == 9
    assert cfg.source("num.io.threads") is ConfigSource.DYNAMIC_BROKER_CONFIG
    # Read-only or invalid dynamic values are ignored, not fatal.
    cfg.update_dynamic(broker={"broker.id": "7", "num.io.threads": "zero"})
    assert cfg.get("num.io.threads") == 6
    assert cfg.broker_id == -1


def test_validate_dynamic_broker_configs():
    validate_dynamic_broker_configs({"log.retention.ms": "100", "custom.x": "1"}, per_broker=False)
    with pytest.raises(
        ConfigError, match="Cannot update these configs dynamically: Set\\(broker.id\\)"
    ):
        validate_dynamic_broker_configs({"broker.id": "2"}, per_broker=True)
    with pytest.raises(ConfigError, match="broker id must be specified"):
        validate_dynamic_broker_configs(
            {"advertised.listeners": "PLAINTEXT://h:1"}, per_broker=False
        )
    with pytest.raises(ConfigError, match="Not a number of type LONG"):
        validate_dynamic_broker_configs({"log.retention.ms": "soon"}, per_broker=True)
    with pytest.raises(ConfigError, match="Password encoder secret"):
        validate_dynamic_broker_configs({"ssl.keystore.password": "x"}, per_broker=True)


def test_java_double_formatting():
    assert [java_double(v) for v in (0.5, 1.0, 0.0, 1e7, 1.5e-5, 1.7976931348623157e308)] == [
        "0.5",
        "1.0",
        "0.0",
        "1.0E7",
        "1.5E-5",
        "1.7976931348623157E308",
    ]


def test_every_definition_default_is_valid():
    for defs in (BROKER_CONFIGS, TOPIC_CONFIGS):
        for d in defs.values():
            assert d.parse(None) == d.default, d.name
            text = d.to_string(d.default)
            if text is not None and not d.sensitive:
                assert d.parse(text) == d.default, d.name
