"""Admin operations: Kafka's validation order, error codes and the znodes they write."""

from __future__ import annotations

import asyncio
import json
import random
from collections.abc import Sequence

import pytest
from odradek.broker.cluster import zk_data as zk
from odradek.broker.cluster.embedded_store import EmbeddedStore
from odradek.broker.cluster.kafka_zk import KafkaZk
from odradek.broker.cluster.replica_placement import assign_replicas, rack_alternated
from odradek.broker.cluster.topic_admin import AlterConfigOp, AlterOp, ResourceType, TopicAdmin
from odradek.broker.cluster.topic_names import validate_topic_name
from odradek.broker.config import BrokerConfig, ConfigSource, Endpoint
from odradek.broker.protocol.errors import ErrorCode, KafkaError

E = ErrorCode


class Cluster:
    """An embedded store with `brokers` registered brokers and a TopicAdmin on broker 0."""

    def __init__(
        self, path: str, brokers: int = 2, racks: Sequence[str] = (), **props: str
    ) -> None:
        self.store = EmbeddedStore(path)
        self.zk = KafkaZk(self.store)
        self.zk.create_top_level_paths()
        self.sessions = []
        for b in range(brokers):
            session = self.store.new_session()
            self.sessions.append(session)
            KafkaZk(session).register_broker(
                zk.BrokerRegistration(
                    b,
                    (Endpoint("PLAINTEXT", "localhost", 9092 + b, "PLAINTEXT"),),
                    rack=racks[b] if b < len(racks) else None,
                )
            )
        self.config = BrokerConfig(
            {"broker.id": "0", **{k.replace("_", "."): v for k, v in props.items()}}
        )
        self.admin = TopicAdmin(self.zk, self.config, rng=random.Random(7))

    def run(self, coro):
        return asyncio.run(coro)

    def error(self, coro) -> KafkaError:
        with pytest.raises(KafkaError) as info:
            asyncio.run(coro)
        return info.value

    def json(self, path: str):
        return json.loads(self.store.get(path)[0])

    def close(self) -> None:
        self.admin.close()
        self.store.close()


@pytest.fixture
def cluster(tmp_path):
    c = Cluster(str(tmp_path / "meta"), num_partitions="3")
    yield c
    c.close()


# -- names and placement


@pytest.mark.parametrize(
    ("name", "fragment"),
    [
        ("", "can't be empty"),
        (".", 'cannot be "." or ".."'),
        ("..", 'cannot be "." or ".."'),
        ("x" * 250, "can't be longer than 249 characters"),
        ("bad name", "contains a character other than ASCII alphanumerics"),
        ("a/b", "contains a character other than ASCII alphanumerics"),
        ("ü", "contains a character other than ASCII alphanumerics"),
    ],
)
def test_illegal_topic_names(name, fragment):
    with pytest.raises(KafkaError) as info:
        validate_topic_name(name)
    assert info.value.code == E.INVALID_TOPIC_EXCEPTION
    assert fragment in info.value.message


def test_legal_topic_names():
    for name in ("a", "x" * 249, "A.b_c-9", "__consumer_offsets"):
        validate_topic_name(name)


def test_round_robin_assignment_matches_kafka_layout():
    got = assign_replicas([4, 3, 2, 1, 0], 10, 3, start_index=0)
    # Kafka's documented example for 5 brokers, 10 partitions, replication factor 3.
    assert got[0] == (0, 1, 2)
    assert got[4] == (4, 0, 1)
    assert got[5] == (0, 2, 3)
    assert got[9] == (4, 1, 2)
    leaders = [r[0] for r in got.values()]
    assert sorted(leaders) == [0, 0, 1, 1, 2, 2, 3, 3, 4, 4]
    assert all(len(set(r)) == 3 for r in got.values())
    rand = assign_replicas([0, 1, 2], 6, 2, rng=random.Random(1))
    assert sorted(r[0] for r in rand.values()) == [0, 0, 1, 1, 2, 2]


def test_assignment_errors():
    for args, code in [
        (([0], 0, 1), E.INVALID_PARTITIONS),
        (([0], 1, 0), E.INVALID_REPLICATION_FACTOR),
        (([0, 1], 1, 3), E.INVALID_REPLICATION_FACTOR),
    ]:
        with pytest.raises(KafkaError) as info:
            assign_replicas(*args)
        assert info.value.code == code
    with pytest.raises(KafkaError, match="Replication factor: 3 larger than available brokers: 2."):
        assign_replicas([0, 1], 1, 3)


def test_rack_aware_assignment_matches_kafka_layout():
    racks = {0: "rack1", 1: "rack3", 2: "rack3", 3: "rack2", 4: "rack2", 5: "rack1"}
    # Brokers one rack at a time (Kafka's getRackAlternatedBrokerList).
    assert rack_alternated(racks) == [0, 3, 1, 5, 4, 2]
    assert rack_alternated({b: r for b, r in racks.items() if b != 5}) == [0, 3, 1, 4, 2]
    got = assign_replicas(list(racks), 7, 3, racks=racks, start_index=0)
    assert got == {
        0: (0, 3, 1),
        1: (3, 1, 5),
        2: (1, 5, 4),
        3: (5, 4, 2),
        4: (4, 2, 0),
        5: (2, 0, 3),
        6: (0, 4, 2),
    }


@pytest.mark.parametrize("seed", range(5))
def test_rack_aware_assignment_spreads_every_partition_over_racks(seed: int):
    # Uneven racks: 3 brokers in a, 2 in b, 1 in c.
    racks = {1: "a", 2: "a", 3: "a", 4: "b", 5: "b", 6: "c"}
    got = assign_replicas(list(racks), 12, 3, racks=racks, rng=random.Random(seed))
    for replicas in got.values():
        assert len(set(replicas)) == 3
        assert {racks[b] for b in replicas} == {"a", "b", "c"}
    leaders = [r[0] for r in got.values()]
    assert all(leaders.count(b) == 2 for b in racks)  # leaders spread evenly
    two = assign_replicas(list(racks), 12, 2, racks=racks, rng=random.Random(seed))
    assert all(racks[r[0]] != racks[r[1]] for r in two.values())


def test_rack_aware_assignment_needs_every_rack():
    with pytest.raises(KafkaError, match="Not all brokers have rack information") as info:
        assign_replicas([0, 1, 2], 1, 2, racks={0: "a", 1: "b", 2: None})
    assert info.value.code == E.UNKNOWN_SERVER_ERROR


def test_topics_are_placed_across_the_brokers_racks(tmp_path):
    c = Cluster(str(tmp_path / "meta"), 4, racks=["east", "east", "west", "west"])
    try:
        c.run(c.admin.create_topic("spread", 8, 2))
        assignment, _ = c.zk.get_topic_assignment("spread")
        racks = {0: "east", 1: "east", 2: "west", 3: "west"}
        for p in range(8):
            replicas = assignment.partitions[p].replicas
            assert {racks[b] for b in replicas} == {"east", "west"}, (p, replicas)
        # Partitions added later follow the same rule.
        c.run(c.admin.create_partitions("spread", 12))
        assignment, _ = c.zk.get_topic_assignment("spread")
        for p in range(8, 12):
            assert {racks[b] for b in assignment.partitions[p].replicas} == {"east", "west"}
    finally:
        c.close()


# -- CreateTopics


def test_create_topic_writes_config_then_assignment(cluster):
    created = cluster.run(
        cluster.admin.create_topic("events", replication_factor=2, configs={"retention.ms": "1000"})
    )
    assert created.num_partitions == 3 and created.replication_factor == 2
    assert created.topic_id != zk.ZERO_UUID
    node = cluster.json("/brokers/topics/events")
    assert node["version"] == 3
    assert node["topic_id"] == zk.uuid_to_base64(created.topic_id)
    assert {int(p): tuple(r) for p, r in node["partitions"].items()} == created.assignment
    assert cluster.json("/config/topics/events") == {
        "version": 1,
        "config": {"retention.ms": "1000"},
    }
    assert cluster.store.get_children("/config/changes") == []  # creation sends no notification
    entries = {e.name: e for e in created.configs}
    assert entries["retention.ms"].value == "1000"
    assert entries["retention.ms"].source is ConfigSource.DYNAMIC_TOPIC_CONFIG
    assert entries["cleanup.policy"].source is ConfigSource.DEFAULT_CONFIG


def test_create_topic_validate_only_writes_nothing(cluster):
    created = cluster.run(cluster.admin.create_topic("dry", 5, 1, validate_only=True))
    assert created.topic_id == zk.ZERO_UUID and created.num_partitions == 5
    assert cluster.store.exists("/brokers/topics/dry") is None
    assert cluster.store.exists("/config/topics/dry") is None


def test_create_topic_with_explicit_assignment(cluster):
    created = cluster.run(cluster.admin.create_topic("manual", assignments={0: [1, 0], 1: [0, 1]}))
    assert created.assignment == {0: (1, 0), 1: (0, 1)}
    assert created.replication_factor == 2


@pytest.mark.parametrize(
    ("kwargs", "code", "fragment"),
    [
        ({"num_partitions": 0}, E.INVALID_PARTITIONS, "must be larger than 0"),
        ({"num_partitions": -2}, E.INVALID_PARTITIONS, "must be larger than 0"),
        ({"replication_factor": 0}, E.INVALID_REPLICATION_FACTOR, "must be larger than 0"),
        ({"replication_factor": 3}, E.INVALID_REPLICATION_FACTOR, "larger than available brokers: 2"),
        ({"num_partitions": 2, "assignments": {0: [0]}}, E.INVALID_REQUEST, "Both numPartitions"),
        ({"assignments": {0: [0], 2: [1]}}, E.INVALID_REPLICA_ASSIGNMENT, "consecutive 0-based"),
        ({"assignments": {0: [0, 0]}}, E.INVALID_REPLICA_ASSIGNMENT, "Duplicate replica assignment"),
        ({"assignments": {0: [0], 1: [0, 1]}}, E.INVALID_REPLICA_ASSIGNMENT, "same number of replicas"),
        ({"configs": {"retention.days": "1"}}, E.INVALID_CONFIG, "Unknown topic config name: retention.days"),
        ({"configs": {"retention.ms": "forever"}}, E.INVALID_CONFIG, "Invalid value forever for configuration retention.ms"),
        ({"configs": {"cleanup.policy": None}}, E.INVALID_CONFIG, "Null value not supported for topic configs: cleanup.policy"),
    ],
)  # fmt: skip
def test_create_topic_errors(cluster, kwargs, code, fragment):
    err = cluster.error(cluster.admin.create_topic("t", **kwargs))
    assert err.code == code
    assert fragment in err.message
    assert cluster.store.exists("/brokers/topics/t") is None


def test_create_existing_colliding_and_deleting_topics(cluster):
    cluster.run(cluster.admin.create_topic("a.b"))
    err = cluster.error(cluster.admin.create_topic("a.b"))
    assert (err.code, err.message) == (E.TOPIC_ALREADY_EXISTS, "Topic 'a.b' already exists.")
    err = cluster.error(cluster.admin.create_topic("a_b"))
    assert err.code == E.INVALID_TOPIC_EXCEPTION
    assert err.message == "Topic 'a_b' collides with existing topics: a.b"
    cluster.store.create("/admin/delete_topics/gone")
    err = cluster.error(cluster.admin.create_topic("gone"))
    assert (err.code, err.message) == (
        E.TOPIC_ALREADY_EXISTS,
        "Topic 'gone' is marked for deletion.",
    )
    for bad in ("bad topic", "a/b", "", ".."):
        err = cluster.error(cluster.admin.create_topic(bad))
        assert err.code == E.INVALID_TOPIC_EXCEPTION
    # Internal topics: coordinators create __consumer_offsets like any topic; KRaft's metadata
    # log name is refused as Kafka refuses it.
    assert cluster.run(cluster.admin.create_topic("__consumer_offsets", 2, 1)).num_partitions == 2
    err = cluster.error(cluster.admin.create_topic("__cluster_metadata"))
    assert err.code == E.TOPIC_AUTHORIZATION_FAILED


def test_illegal_names_are_unknown_topics_elsewhere(cluster):
    for bad in ("a/b", "", "..", "x" * 300):
        assert cluster.error(cluster.admin.delete_topic(bad)).code == E.UNKNOWN_TOPIC_OR_PARTITION
        err = cluster.error(cluster.admin.create_partitions(bad, 2))
        assert err.code == E.UNKNOWN_TOPIC_OR_PARTITION
        if bad:
            err = cluster.error(cluster.admin.alter_configs(ResourceType.TOPIC, bad, {}))
            assert err.code == E.UNKNOWN_TOPIC_OR_PARTITION
            ops = [AlterConfigOp("retention.ms", AlterOp.SET, "1")]
            err = cluster.error(
                cluster.admin.incremental_alter_configs(ResourceType.TOPIC, bad, ops)
            )
            assert err.code == E.UNKNOWN_TOPIC_OR_PARTITION


# -- DeleteTopics


def test_delete_topic_marks_it(cluster):
    cluster.run(cluster.admin.create_topic("doomed"))
    cluster.run(cluster.admin.delete_topic("doomed"))
    cluster.run(cluster.admin.delete_topic("doomed"))  # already marked: still fine
    assert cluster.store.get_children("/admin/delete_topics") == ["doomed"]
    err = cluster.error(cluster.admin.delete_topic("never"))
    assert err.code == E.UNKNOWN_TOPIC_OR_PARTITION


def test_delete_topic_disabled(tmp_path):
    c = Cluster(str(tmp_path / "m"), delete_topic_enable="false")
    try:
        c.run(c.admin.create_topic("kept"))
        assert c.error(c.admin.delete_topic("kept")).code == E.TOPIC_DELETION_DISABLED
        assert c.store.get_children("/admin/delete_topics") == []
    finally:
        c.close()


# -- CreatePartitions


def test_create_partitions(cluster):
    cluster.run(cluster.admin.create_topic("grow", 2, 2))
    before = cluster.json("/brokers/topics/grow")
    full = cluster.run(cluster.admin.create_partitions("grow", 4, validate_only=True))
    assert len(full) == 4
    assert cluster.json("/brokers/topics/grow") == before
    full = cluster.run(cluster.admin.create_partitions("grow", 5, [[1, 0], [0, 1], [1, 0]]))
    after = cluster.json("/brokers/topics/grow")
    assert after["topic_id"] == before["topic_id"]
    assert after["partitions"]["4"] == [1, 0] and len(after["partitions"]) == 5
    assert full[2] == (1, 0)


@pytest.mark.parametrize(
    ("count", "assignments", "code", "fragment"),
    [
        (1, None, E.INVALID_PARTITIONS, "Topic currently has 2 partitions, which is higher than the requested 1."),
        (2, None, E.INVALID_PARTITIONS, "Topic already has 2 partitions."),
        (3, [[7, 0]], E.INVALID_REPLICA_ASSIGNMENT, "Unknown broker(s) in replica assignment: 7."),
        (4, [[1, 0]], E.INVALID_REPLICA_ASSIGNMENT, "Increasing the number of partitions by 2 but 1 assignments provided."),
        (3, [[1]], E.INVALID_REPLICA_ASSIGNMENT, "Inconsistent replication factor"),
        (3, [[1, 1]], E.INVALID_REPLICA_ASSIGNMENT, "Duplicate brokers not allowed"),
    ],
)  # fmt: skip
def test_create_partitions_errors(cluster, count, assignments, code, fragment):
    cluster.run(cluster.admin.create_topic("fixed", 2, 2))
    err = cluster.error(cluster.admin.create_partitions("fixed", count, assignments))
    assert err.code == code
    assert fragment in err.message


def test_create_partitions_unknown_or_deleting_topic(cluster):
    assert (
        cluster.error(cluster.admin.create_partitions("nope", 3)).code
        == E.UNKNOWN_TOPIC_OR_PARTITION
    )
    cluster.run(cluster.admin.create_topic("leaving"))
    cluster.run(cluster.admin.delete_topic("leaving"))
    err = cluster.error(cluster.admin.create_partitions("leaving", 9))
    assert (err.code, err.message) == (
        E.INVALID_TOPIC_EXCEPTION,
        "The topic is queued for deletion.",
    )


# -- configs


def _notifications(cluster) -> list[str]:
    return [
        zk.decode_config_change(cluster.store.get(f"/config/changes/{c}")[0])
        for c in cluster.store.get_children("/config/changes")
    ]


def test_alter_topic_config_replaces_overrides_and_notifies(cluster):
    cluster.run(cluster.admin.create_topic("t", configs={"retention.ms": "1", "segment.ms": "100"}))
    cluster.run(cluster.admin.alter_configs(ResourceType.TOPIC, "t", {"cleanup.policy": "compact"}))
    assert cluster.json("/config/topics/t")["config"] == {"cleanup.policy": "compact"}
    assert _notifications(cluster) == ["topics/t"]
    cluster.run(cluster.admin.alter_configs(ResourceType.TOPIC, "t", {"retention.ms": "5"}, True))
    assert cluster.json("/config/topics/t")["config"] == {"cleanup.policy": "compact"}


def test_alter_topic_config_errors(cluster):
    cluster.run(cluster.admin.create_topic("t"))
    err = cluster.error(cluster.admin.alter_configs(ResourceType.TOPIC, "t", {"retention.ms": "x"}))
    assert err.code == E.INVALID_CONFIG
    assert err.message == (
        "Invalid config value for resource ConfigResource(type=TOPIC, name='t'): "
        "Invalid value x for configuration retention.ms: Not a number of type LONG"
    )
    err = cluster.error(cluster.admin.alter_configs(ResourceType.TOPIC, "t", {"bogus": "1"}))
    assert (err.code, err.message) == (E.INVALID_CONFIG, "Unknown topic config name: bogus")
    err = cluster.error(cluster.admin.alter_configs(ResourceType.TOPIC, "missing", {}))
    assert err.code == E.UNKNOWN_TOPIC_OR_PARTITION
    err = cluster.error(cluster.admin.alter_configs(ResourceType.TOPIC, "", {}))
    assert err.code == E.INVALID_REQUEST
    assert cluster.error(cluster.admin.alter_configs(8, "0", {})).code == E.INVALID_REQUEST


def test_incremental_alter_topic_config(cluster):
    cluster.run(cluster.admin.create_topic("t", configs={"retention.ms": "1"}))
    ops = [
        AlterConfigOp("cleanup.policy", AlterOp.APPEND, "compact"),
        AlterConfigOp("retention.ms", AlterOp.DELETE),
        AlterConfigOp("segment.ms", AlterOp.SET, "1000"),
    ]
    cluster.run(cluster.admin.incremental_alter_configs(ResourceType.TOPIC, "t", ops))
    assert cluster.json("/config/topics/t")["config"] == {
        "cleanup.policy": "delete,compact",
        "segment.ms": "1000",
    }
    sub = [AlterConfigOp("cleanup.policy", AlterOp.SUBTRACT, "delete")]
    cluster.run(cluster.admin.incremental_alter_configs(ResourceType.TOPIC, "t", sub))
    assert cluster.json("/config/topics/t")["config"]["cleanup.policy"] == "compact"
    assert _notifications(cluster) == ["topics/t", "topics/t"]


@pytest.mark.parametrize(
    ("ops", "code", "fragment"),
    [
        ([AlterConfigOp("segment.ms", AlterOp.APPEND, "1")], E.INVALID_REQUEST, "Config value append is not allowed for config key: segment.ms"),
        ([AlterConfigOp("nope", AlterOp.SUBTRACT, "1")], E.INVALID_CONFIG, "Unknown topic config name: nope"),
        ([AlterConfigOp("nope", AlterOp.SET, "1")], E.INVALID_CONFIG, "Unknown topic config name: nope"),
        ([AlterConfigOp("segment.ms", AlterOp.SET, None)], E.INVALID_REQUEST, "Null value"),
        ([AlterConfigOp("segment.ms", AlterOp.SET, "1"), AlterConfigOp("segment.ms", AlterOp.DELETE)], E.INVALID_REQUEST, "duplicate config keys"),
        ([AlterConfigOp("segment.ms", AlterOp.SET, "0")], E.INVALID_CONFIG, "Value must be at least 1"),
    ],
)  # fmt: skip
def test_incremental_alter_errors(cluster, ops, code, fragment):
    cluster.run(cluster.admin.create_topic("t"))
    err = cluster.error(cluster.admin.incremental_alter_configs(ResourceType.TOPIC, "t", ops))
    assert err.code == code
    assert fragment in err.message


def test_alter_broker_configs(cluster):
    cluster.run(
        cluster.admin.incremental_alter_configs(
            ResourceType.BROKER, "", [AlterConfigOp("log.retention.ms", AlterOp.SET, "60000")]
        )
    )
    assert cluster.json("/config/brokers/<default>")["config"] == {"log.retention.ms": "60000"}
    cluster.run(cluster.admin.alter_configs(ResourceType.BROKER, "1", {"num.io.threads": "4"}))
    assert cluster.json("/config/brokers/1")["config"] == {"num.io.threads": "4"}
    assert _notifications(cluster) == ["brokers/<default>", "brokers/1"]
    err = cluster.error(cluster.admin.alter_configs(ResourceType.BROKER, "0", {"broker.id": "5"}))
    assert err.code == E.INVALID_CONFIG and "Cannot update these configs dynamically" in err.message
    err = cluster.error(
        cluster.admin.alter_configs(ResourceType.BROKER, "", {"listeners": "PLAINTEXT://:1"})
    )
    assert err.code == E.INVALID_CONFIG and "broker id must be specified" in err.message
    err = cluster.error(cluster.admin.alter_configs(ResourceType.BROKER, "x", {}))
    assert (err.code, err.message) == (
        E.INVALID_REQUEST,
        "Broker id must be an integer, but it is: x",
    )


def test_describe_configs(cluster):
    cluster.run(cluster.admin.create_topic("t", configs={"segment.bytes": "1048576"}))
    entries = cluster.run(
        cluster.admin.describe_topic_configs("t", ["segment.bytes", "retention.ms"])
    )
    assert [(e.name, e.value) for e in entries] == [
        ("retention.ms", "604800000"),
        ("segment.bytes", "1048576"),
    ]
    assert (
        cluster.error(cluster.admin.describe_topic_configs("nope")).code
        == E.UNKNOWN_TOPIC_OR_PARTITION
    )
    assert (
        cluster.error(cluster.admin.describe_topic_configs("bad name")).code
        == E.INVALID_TOPIC_EXCEPTION
    )
    broker = cluster.admin.describe_broker_configs("0", ["num.partitions"])
    assert [(e.name, e.value, e.source) for e in broker] == [
        ("num.partitions", "3", ConfigSource.STATIC_BROKER_CONFIG)
    ]
    with pytest.raises(KafkaError) as info:
        cluster.admin.describe_broker_configs("1")
    assert info.value.code == E.INVALID_REQUEST
    assert cluster.admin.describe_broker_configs("") == []
