"""Kafka's znode JSON formats: decode what Kafka writes, write what Kafka reads."""

from __future__ import annotations

import json
import uuid

import pytest
from odradek.broker.cluster import zk_data as zk
from odradek.broker.config import Endpoint


def same_json(data: bytes, text: str) -> bool:
    return json.loads(data) == json.loads(text)


def test_cluster_id():
    text = '{"version":"1","id":"Jb3Z-oQdQb-LU8OvRGmJ7A"}'
    assert zk.decode_cluster_id(text.encode()) == "Jb3Z-oQdQb-LU8OvRGmJ7A"
    assert zk.encode_cluster_id("Jb3Z-oQdQb-LU8OvRGmJ7A") == text.encode()
    generated = zk.new_cluster_id()
    assert len(generated) == 22 and "=" not in generated and not generated.startswith("-")


def test_controller_and_epoch():
    kafka3 = b'{"version":2,"brokerid":1,"timestamp":"1700000000000","kraftControllerEpoch":-1}'
    kafka2 = b'{"version":1,"brokerid":7,"timestamp":"1700000000000"}'
    assert zk.decode_controller(kafka3) == 1
    assert zk.decode_controller(kafka2) == 7
    assert zk.encode_controller(1, 1700000000000) == kafka3
    assert zk.encode_controller_epoch(5) == b"5"
    assert zk.decode_controller_epoch(b"5") == 5


def test_broker_registration_v5():
    text = (
        '{"features":{},"listener_security_protocol_map":{"CLIENT":"PLAINTEXT",'
        '"REPLICATION":"SSL"},"endpoints":["CLIENT://broker1.example:9092",'
        '"REPLICATION://broker1.example:9093"],"rack":"dc1","jmx_port":-1,'
        '"port":9092,"host":"broker1.example","version":5,"timestamp":"1700000000000"}'
    )
    reg = zk.decode_broker(1, text.encode(), epoch=42)
    assert reg.endpoints == (
        Endpoint("CLIENT", "broker1.example", 9092, "PLAINTEXT"),
        Endpoint("REPLICATION", "broker1.example", 9093, "SSL"),
    )
    assert (reg.rack, reg.jmx_port, reg.timestamp, reg.epoch) == ("dc1", -1, 1700000000000, 42)
    assert same_json(zk.encode_broker(reg), text)
    assert reg.endpoint("REPLICATION").port == 9093


def test_broker_registration_without_plaintext_or_rack():
    reg = zk.BrokerRegistration(
        id=2,
        endpoints=(Endpoint("SASL_SSL", "::1", 9094, "SASL_SSL"),),
        timestamp=5,
        features={"metadata.version": (1, 7)},
    )
    obj = json.loads(zk.encode_broker(reg))
    assert obj["host"] is None and obj["port"] == -1
    assert obj["endpoints"] == ["SASL_SSL://[::1]:9094"]
    assert "rack" not in obj
    assert obj["features"] == {"metadata.version": {"min_version": 1, "max_version": 7}}
    back = zk.decode_broker(2, zk.encode_broker(reg))
    assert back.endpoints == reg.endpoints and back.features == reg.features


def test_broker_registration_old_versions():
    v1 = b'{"version":1,"host":"old.example","port":9092,"jmx_port":-1,"timestamp":"1"}'
    assert zk.decode_broker(0, v1).endpoints == (
        Endpoint("PLAINTEXT", "old.example", 9092, "PLAINTEXT"),
    )
    v2 = b'{"version":2,"host":"h","port":9092,"endpoints":["SSL://h:9093"],"jmx_port":-1,"timestamp":"1"}'
    assert zk.decode_broker(0, v2).endpoints == (Endpoint("SSL", "h", 9093, "SSL"),)


def test_topic_assignment_v3():
    text = (
        '{"version":3,"topic_id":"6nY0i2cNRzyNl0cEzG4lOg","partitions":{"0":[1,2,3],'
        '"1":[2,3,1]},"adding_replicas":{"0":[4]},"removing_replicas":{"0":[1]}}'
    )
    t = zk.decode_topic(text.encode())
    assert zk.uuid_to_base64(t.topic_id) == "6nY0i2cNRzyNl0cEzG4lOg"
    assert t.partitions[0] == zk.ReplicaAssignment((1, 2, 3), (4,), (1,))
    assert t.partitions[1] == zk.ReplicaAssignment((2, 3, 1))
    assert t.partitions[0].being_reassigned and not t.partitions[1].being_reassigned
    assert same_json(zk.encode_topic(t.topic_id, t.partitions), text)


def test_topic_assignment_old_versions_and_plain_lists():
    v1 = b'{"version":1,"partitions":{"0":[0],"1":[0]}}'
    t = zk.decode_topic(v1)
    assert t.topic_id is None and t.partitions[1].replicas == (0,)
    encoded = json.loads(zk.encode_topic(None, {0: [5, 6]}))
    assert encoded == {
        "version": 3,
        "partitions": {"0": [5, 6]},
        "adding_replicas": {},
        "removing_replicas": {},
    }


def test_partition_state():
    text = '{"controller_epoch":7,"leader":2,"version":1,"leader_epoch":12,"isr":[2,3,1]}'
    st = zk.decode_partition_state(text.encode(), zk_version=9)
    assert st == zk.PartitionState(2, 12, (2, 3, 1), 7, zk.RECOVERED, 9)
    assert zk.encode_partition_state(st) == text.encode()
    recovering = zk.PartitionState(1, 3, (1,), 2, zk.RECOVERING)
    obj = json.loads(zk.encode_partition_state(recovering))
    assert obj["leader_recovery_state"] == 1
    assert zk.decode_partition_state(zk.encode_partition_state(recovering)) == recovering


def test_entity_config_and_change_notifications():
    text = '{"version":1,"config":{"retention.ms":"86400000","cleanup.policy":"compact"}}'
    assert zk.decode_entity_config(text.encode()) == {
        "retention.ms": "86400000",
        "cleanup.policy": "compact",
    }
    assert same_json(zk.encode_entity_config(zk.decode_entity_config(text.encode())), text)
    assert zk.decode_entity_config(b"") == {}
    change = b'{"version":2,"entity_path":"topics/my-topic"}'
    assert zk.decode_config_change(change) == "topics/my-topic"
    assert zk.encode_config_change("topics/my-topic") == change
    legacy = b'{"version":1,"entity_type":"topics","entity_name":"my-topic"}'
    assert zk.decode_config_change(legacy) == "topics/my-topic"
    assert zk.sequence_number("config_change_0000000042") == 42


def test_producer_id_block_feature_and_admin_nodes():
    block = b'{"version":1,"broker":1,"block_start":"0","block_end":"999"}'
    assert zk.decode_producer_id_block(block) == zk.ProducerIdBlock(1, 0, 999)
    assert zk.encode_producer_id_block(zk.ProducerIdBlock(1, 0, 999)) == block
    feature = b'{"version":2,"status":1,"features":{}}'
    assert zk.encode_feature({}) == feature
    assert zk.decode_feature(feature) == (True, {})
    reassign = b'{"version":1,"partitions":[{"topic":"t","partition":0,"replicas":[1,2,3]}]}'
    assert zk.decode_reassignment(reassign) == {("t", 0): (1, 2, 3)}
    assert zk.encode_reassignment({("t", 0): [1, 2, 3]}) == reassign
    plist = b'{"version":1,"partitions":[{"topic":"t","partition":0},{"topic":"t","partition":1}]}'
    assert zk.decode_partition_list(plist) == [("t", 0), ("t", 1)]
    assert zk.encode_partition_list([("t", 0), ("t", 1)]) == plist
    assert zk.encode_log_dir_event(1) == b'{"version":1,"broker":1,"event":1}'


def test_paths():
    assert zk.partition_state_path("t", 3) == "/brokers/topics/t/partitions/3/state"
    assert (
        zk.entity_config_path(zk.BROKERS_ENTITY, zk.DEFAULT_ENTITY) == "/config/brokers/<default>"
    )
    assert zk.delete_topic_path("t") == "/admin/delete_topics/t"
    assert "/config/topics" in zk.PERSISTENT_PATHS and "/brokers/seqid" in zk.PERSISTENT_PATHS


@pytest.mark.parametrize(
    ("name", "sanitized"),
    [
        ("user-1_a.b", "user-1_a.b"),
        ("CN=alice,O=org", "CN%3Dalice%2CO%3Dorg"),
        ("a b*c~", "a%20b%2Ac%7E"),
        ("émile", "%C3%A9mile"),
    ],
)
def test_sanitize(name, sanitized):
    assert zk.sanitize(name) == sanitized
    assert zk.desanitize(sanitized) == name


def test_uuid_base64():
    assert zk.uuid_to_base64(uuid.UUID(int=0)) == "A" * 22
    assert zk.uuid_to_base64(zk.METADATA_TOPIC_ID) == "AAAAAAAAAAAAAAAAAAAAAQ"  # Kafka's constant
    assert zk.uuid_to_base64(uuid.UUID(int=2**128 - 1)) == "_" * 21 + "w"  # URL-safe alphabet
    u = uuid.uuid4()
    assert zk.base64_to_uuid(zk.uuid_to_base64(u)) == u
    with pytest.raises(ValueError):
        zk.base64_to_uuid("abc")
