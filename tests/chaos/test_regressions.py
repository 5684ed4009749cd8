"""Histories the chaos suite failed on, turned into targeted tests on a cluster in network
namespaces (environment.py), one cluster shared by the module.

- partition-leader-zk / partition-leader-isolated (seed 1): the group coordinator, cut off from
  ZooKeeper, kept answering OffsetFetch from its memory after the controller had moved its
  __consumer_offsets partition and the group had committed further at the new coordinator, so a
  member restarting then would have gone back hundreds of records.
- partition-controller-zk (seed 2026): a leader cut off from ZooKeeper kept serving consumer
  fetches after its successor was elected, and librdkafka delivered one record from both.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Iterator
from pathlib import Path

import pytest
from confluent_kafka import Consumer, KafkaException, TopicPartition
from environment import ChaosCluster, broker_node, wait_for, zk_node
from nemesis import cut
from netns import require_tools
from odradek.broker.client.connection import BrokerConnection
from odradek.broker.protocol.api_keys import ApiKey
from odradek.broker.protocol.errors import ErrorCode

TOPIC = "regressions"
TIMEOUT = 90.0


@pytest.fixture(scope="module")
def env(tmp_path_factory: pytest.TempPathFactory) -> Iterator[ChaosCluster]:
    require_tools()
    cluster = ChaosCluster(Path(tmp_path_factory.mktemp("chaos")))
    try:
        cluster.start()
        cluster.c.create_topic(TOPIC, 1, 3)
        yield cluster
    finally:
        cluster.close()


def call(env: ChaosCluster, broker_id: int, api_key: int, body: dict, version: int) -> dict:
    async def go() -> dict:
        b = env.broker(broker_id)
        conn = await BrokerConnection.open(b.host, b.port, request_timeout=15.0)
        try:
            return await conn.request(api_key, body, version)
        finally:
            await conn.close()

    return asyncio.run(asyncio.wait_for(go(), 30))


def committed_at(env: ChaosCluster, broker_id: int, group: str) -> tuple[int, int]:
    """(error code, committed offset of partition 0) as `broker_id` answers OffsetFetch v7."""
    body = {"group_id": group, "topics": [{"name": TOPIC, "partition_indexes": [0]}]}
    resp = call(env, broker_id, ApiKey.OFFSET_FETCH, {**body, "require_stable": False}, 7)
    if resp["error_code"]:
        return resp["error_code"], -1
    (part,) = resp["topics"][0]["partitions"]
    return part["error_code"], part["committed_offset"]


def commit(env: ChaosCluster, group: str, offset: int, avoid: int | None = None) -> None:
    """Commit through librdkafka, which finds the coordinator and retries on its own.

    `avoid` leaves a broker out of the bootstrap list: librdkafka asks for the coordinator only
    on a broker it is already connected to, so a client whose one connection is to a broker cut
    off from ZooKeeper keeps hearing COORDINATOR_NOT_AVAILABLE until that broker is back."""
    bootstrap = ",".join(env.broker(i).bootstrap for i in env.broker_ids if i != avoid)
    consumer = Consumer({"bootstrap.servers": bootstrap, "group.id": group, "log_level": 0})
    try:
        deadline = time.monotonic() + TIMEOUT
        while True:
            try:
                consumer.commit(offsets=[TopicPartition(TOPIC, 0, offset)], asynchronous=False)
                return
            except KafkaException:
                if time.monotonic() > deadline:
                    raise
                time.sleep(1.0)
    finally:
        consumer.close()


def wait(check, what: str) -> object:
    value = wait_for(check, TIMEOUT)
    assert value, f"timed out waiting for {what}"
    return value


def test_a_coordinator_cut_off_from_zookeeper_stops_serving_its_groups(env: ChaosCluster) -> None:
    group = "zombie-coordinator"
    commit(env, group, 5)
    resp = call(env, 1, ApiKey.FIND_COORDINATOR, {"key": group, "key_type": 0}, 3)
    old = resp["node_id"]
    assert resp["error_code"] == 0 and old in env.broker_ids
    assert committed_at(env, old, group) == (0, 5)
    offsets = env.zk_partition_states("__consumer_offsets")
    (p,) = [p for p, s in offsets.items() if s["leader"] == old][:1]

    zookeepers = {zk_node(i) for i in env.zk_ids}
    env.network.partition(cut({broker_node(old)}, zookeepers))
    try:
        # The session expires, the controller elects another leader, the group commits there.
        wait(lambda: env.zk_partition_states("__consumer_offsets")[p]["leader"] not in (old, -1),
             "another leader of the group's __consumer_offsets partition")  # fmt: skip
        commit(env, group, 9, avoid=old)
        # The zombie neither claims the group nor answers for it from its memory.
        assert committed_at(env, old, group) == (ErrorCode.COORDINATOR_NOT_AVAILABLE, -1)
        resp = call(env, old, ApiKey.FIND_COORDINATOR, {"key": group, "key_type": 0}, 3)
        assert resp["error_code"] == ErrorCode.COORDINATOR_NOT_AVAILABLE
        # Nor does it serve consumers as a leader.
        fetch = {
            "replica_id": -1, "max_wait_ms": 0, "min_bytes": 0, "max_bytes": 1 << 20,
            "isolation_level": 0,
            "topics": [{"topic": "__consumer_offsets", "partitions": [
                {"partition": p, "fetch_offset": 0, "partition_max_bytes": 1 << 20}]}],
        }  # fmt: skip
        resp = call(env, old, ApiKey.FETCH, fetch, 4)
        part = resp["responses"][0]["partitions"][0]
        assert part["error_code"] == ErrorCode.NOT_LEADER_OR_FOLLOWER
    finally:
        env.network.heal()
    # Back in the cluster it follows the new leader: never the old offset again.
    wait(lambda: committed_at(env, old, group)[0] == ErrorCode.NOT_COORDINATOR,
         "the old coordinator to learn it lost the group")  # fmt: skip
    new = env.zk_partition_states("__consumer_offsets")[p]["leader"]
    assert committed_at(env, new, group) == (0, 9)
