"""Failover details of issue 4 on three brokers, with a topic of replication factor 3 and
min.insync.replicas=2: a broker whose ZooKeeper session expired comes back into the ISR, a
SIGTERM on the leader under a running acks=all producer costs the producer nothing but retries,
and configs altered through one broker take effect on all of them."""

from __future__ import annotations

import json

from background_producer import BackgroundProducer
from cluster import SESSION_TIMEOUT_MS, Cluster, cluster_factory_fixture, consume_all  # noqa: F401  (fixture)
from confluent_kafka.admin import (
    AdminClient,
    AlterConfigOpType,
    ConfigEntry,
    ConfigResource,
)
from odradek.broker.protocol.api_keys import ApiKey
from odradek.broker.protocol.errors import ErrorCode
from session_expiry import session_expired

ALL = [1, 2, 3]
TOPIC_RESOURCE = 2
BROKER_RESOURCE = 4
DYNAMIC_TOPIC_CONFIG = 1
DYNAMIC_DEFAULT_BROKER_CONFIG = 3


def create(c: Cluster, topic: str, configs: dict[str, str] | None = None) -> None:
    """One partition on all three brokers with min.insync.replicas=2; waits for the full ISR
    in every broker's metadata."""
    settings = {"min.insync.replicas": "2", **(configs or {})}
    body = {
        "topics": [
            {
                "name": topic,
                "num_partitions": 1,
                "replication_factor": 3,
                "assignments": [],
                "configs": [{"name": k, "value": v} for k, v in settings.items()],
            }
        ],
        "timeout_ms": 30000,
        "validate_only": False,
    }

    def attempt() -> bool:
        code = c.controller().request(ApiKey.CREATE_TOPICS, body)["topics"][0]["error_code"]
        assert code in (ErrorCode.NONE, ErrorCode.TOPIC_ALREADY_EXISTS), code
        return True

    c.wait_until(attempt, f"creation of {topic}")
    c.wait_until(lambda: isr_everywhere(c, topic) == ALL, f"the full ISR of {topic}")


def state(c: Cluster, topic: str) -> dict:
    return json.loads(c.zk.get(f"/brokers/topics/{topic}/partitions/0/state")[0])


def isr_everywhere(c: Cluster, topic: str, skip: int | None = None) -> list[int] | None:
    """The ISR every running broker's Metadata gives (but `skip`'s, a paused one), when they
    all agree on it and a leader."""
    seen = set()
    for b in c.running():
        if b.broker_id == skip:
            continue
        [t] = b.metadata([topic])["topics"]
        if t["error_code"] or not t["partitions"]:
            return None
        p = t["partitions"][0]
        if p["leader_id"] < 0:
            return None
        seen.add((p["leader_id"], tuple(sorted(p["isr_nodes"]))))
    if len(seen) != 1:
        return None
    return list(next(iter(seen))[1])


def leader_serving(c: Cluster, topic: str) -> int | None:
    leader = state(c, topic)["leader"]
    if leader < 0 or not c[leader].running:
        return None
    parts = c[leader].metadata([topic])["topics"][0]["partitions"]
    return leader if parts and parts[0]["leader_id"] == leader else None


def segment(c: Cluster, broker: int, topic: str) -> bytes:
    return (c[broker].data_dir / f"{topic}-0" / "00000000000000000000.log").read_bytes()


def test_expired_session_reregisters_and_rejoins_the_isr(cluster_factory) -> None:
    c = cluster_factory()
    topic = "expiry-isr"
    create(c, topic)
    leader = c.wait_until(lambda: leader_serving(c, topic), "a serving leader")
    controller = c.controller().broker_id
    victim = next(b for b in ALL if b not in (leader, controller))
    with session_expired(c, victim):
        # The controller took it out of the ISR; two in-sync replicas still take acks=all
        # writes, which the paused broker misses.
        without = sorted(set(ALL) - {victim})
        c.wait_until(lambda: isr_everywhere(c, topic, victim) == without, "the ISR without it")
        for i in range(5):
            assert (
                c[leader].produce_one(topic, f"while-away-{i}".encode())["error_code"]
                == ErrorCode.NONE
            )
    # It catches up and the leader expands the ISR again; every broker learns it.
    c.wait_until(lambda: isr_everywhere(c, topic) == ALL, "the ISR with the broker back")
    assert sorted(state(c, topic)["isr"]) == ALL
    c.wait_until(
        lambda: segment(c, victim, topic) == segment(c, leader, topic), "the victim caught up"
    )
    assert c[leader].produce_one(topic, b"after")["error_code"] == ErrorCode.NONE


def test_sigterm_on_the_leader_under_an_acks_all_producer(cluster_factory) -> None:
    c = cluster_factory()
    topic = "sigterm-producer"
    create(c, topic)
    leader = c.wait_until(lambda: leader_serving(c, topic), "a serving leader")
    bootstrap = ",".join(b.bootstrap for b in c.brokers.values())
    writer = BackgroundProducer(
        bootstrap,
        topic,
        flush_seconds=90,
        **{"enable.idempotence": True, "message.timeout.ms": 60000, "retry.backoff.ms": 100},
    )
    delivered = writer.acked

    # Every version of the partition state seen, in ZooKeeper's order.
    states: list[tuple[int, dict]] = []

    def on_state(data, stat, *_) -> None:
        if data is not None:
            states.append((stat.mzxid, json.loads(data)))

    c.zk.DataWatch(f"/brokers/topics/{topic}/partitions/0/state", on_state)
    with writer:
        c.wait_until(lambda: len(delivered) > 50, "acknowledged writes")
        assert c[leader].stop() == 0, c[leader].log_tail()
        deregistered = c.zk.get("/brokers/ids")[1].pzxid
        # Leadership moved while the broker was still registered, i.e. before it exited.
        c.wait_until(lambda: any(st["leader"] != leader for _, st in states), "the move seen")
        zxid, moved = next((z, st) for z, st in states if st["leader"] != leader)
        assert moved["leader"] in set(ALL) - {leader}
        assert leader not in moved["isr"]
        assert zxid < deregistered, "leadership moved only after the broker left"
        before = len(delivered)
        c.wait_until(lambda: len(delivered) > before + 50, "writes to the new leader")
    assert not writer.thread.is_alive()
    assert not writer.errors, [str(e) for e in writer.errors]
    fatal = [str(e) for e in writer.client_errors if e.fatal()]
    assert not fatal, fatal
    consumed = consume_all(bootstrap, topic)
    offsets = [o for o, _ in consumed]
    assert offsets == list(range(len(offsets)))
    values = dict(consumed)
    missing = [o for o, v in delivered.items() if values.get(o) != v]
    assert not missing, f"{len(missing)} delivered records lost, e.g. offsets {missing[:5]}"
    seen = [v for _, v in consumed]
    assert len(seen) == len(set(seen)), "a record was written twice"
    # Now and then a delivery report right after the move carries no offset (cause not yet
    # known); such records must be present too.
    assert set(writer.no_offset) <= set(seen), "records delivered without an offset were lost"


def describe(c: Cluster, broker: int, resource_type: int, name: str, keys: list[str]) -> dict:
    body = {
        "resources": [
            {"resource_type": resource_type, "resource_name": name, "configuration_keys": keys}
        ],
        "include_synonyms": False,
        "include_documentation": False,
    }
    [result] = c[broker].request(ApiKey.DESCRIBE_CONFIGS, body)["results"]
    assert result["error_code"] == ErrorCode.NONE, result
    return {e["name"]: (e["value"], e["config_source"]) for e in result["configs"]}


def test_config_altered_through_one_broker_applies_on_all(cluster_factory) -> None:
    c = cluster_factory()
    topic = "altered"
    create(c, topic)
    create(c, "plain")
    leader = c.wait_until(lambda: leader_serving(c, topic), "a serving leader")
    assert c[leader].produce_one(topic, b"y" * 4000)["error_code"] == ErrorCode.NONE
    # The admin client knows only one broker that neither leads the partition nor controls.
    via = next(b for b in ALL if b not in (leader, c.controller().broker_id))
    admin = AdminClient({"bootstrap.servers": c[via].bootstrap})
    topic_res = ConfigResource(
        ConfigResource.Type.TOPIC,
        topic,
        incremental_configs=[
            ConfigEntry("retention.ms", "3600000", incremental_operation=AlterConfigOpType.SET),
            ConfigEntry("max.message.bytes", "2000", incremental_operation=AlterConfigOpType.SET),
        ],
    )
    admin.incremental_alter_configs([topic_res])[topic_res].result(30)
    # The cluster-wide broker default (resource name ""), which librdkafka refuses to send,
    # through the same broker.
    body = {
        "resources": [
            {
                "resource_type": BROKER_RESOURCE,
                "resource_name": "",
                "configs": [
                    {"name": "log.retention.ms", "config_operation": 0, "value": "7200000"}
                ],
            }
        ],
        "validate_only": False,
    }
    [resp] = c[via].request(ApiKey.INCREMENTAL_ALTER_CONFIGS, body)["responses"]
    assert resp["error_code"] == ErrorCode.NONE, resp

    def topic_configs_everywhere() -> bool:
        want = {
            "retention.ms": ("3600000", DYNAMIC_TOPIC_CONFIG),
            "max.message.bytes": ("2000", DYNAMIC_TOPIC_CONFIG),
        }
        return all(describe(c, b, TOPIC_RESOURCE, topic, list(want)) == want for b in ALL)

    def broker_default_everywhere() -> bool:
        want = {"log.retention.ms": ("7200000", DYNAMIC_DEFAULT_BROKER_CONFIG)}
        # A topic without its own retention.ms inherits the new default.
        inherited = {"retention.ms": ("7200000", DYNAMIC_DEFAULT_BROKER_CONFIG)}
        return all(
            describe(c, b, BROKER_RESOURCE, str(b), ["log.retention.ms"]) == want
            and describe(c, b, TOPIC_RESOURCE, "plain", ["retention.ms"]) == inherited
            for b in ALL
        )

    c.wait_until(topic_configs_everywhere, "the topic configs on every broker")
    c.wait_until(broker_default_everywhere, "the dynamic broker default on every broker")
    # The leader enforces the limit set through another broker.
    assert c[leader].produce_one(topic, b"z" * 4000)["error_code"] == ErrorCode.MESSAGE_TOO_LARGE
    assert c[leader].produce_one(topic, b"z" * 100)["error_code"] == ErrorCode.NONE
