"""Replication APIs on the wire against one broker: OffsetForLeaderEpoch (key 23) in every
version, and a follower-style Fetch (replica id set) that reads past the high watermark."""

from __future__ import annotations

import asyncio

import pytest
from confluent_kafka import Producer
from odradek.broker.client.connection import BrokerConnection
from odradek.broker.protocol.api_keys import ApiKey
from odradek.broker.protocol.errors import ErrorCode


async def request(bootstrap: str, api_key: int, body: dict, version: int) -> dict:
    host, port = bootstrap.rsplit(":", 1)
    conn = await BrokerConnection.open(host, int(port))
    try:
        return await conn.request(api_key, body, version)
    finally:
        await conn.close()


def produce(bootstrap: str, topic: str, n: int) -> None:
    p = Producer({"bootstrap.servers": bootstrap, "acks": "all"})
    for i in range(n):
        p.produce(topic, f"v{i}".encode(), partition=0)
    assert p.flush(30) == 0


@pytest.mark.parametrize("version", range(5))
def test_offset_for_leader_epoch_every_version(bootstrap, new_topic, version) -> None:
    topic = new_topic()
    produce(bootstrap, topic, 3)

    def ask(epoch: int, current: int = -1) -> dict:
        body = {
            "replica_id": -2,
            "topics": [
                {
                    "topic": topic,
                    "partitions": [
                        {"partition": 0, "current_leader_epoch": current, "leader_epoch": epoch}
                    ],
                }
            ],
        }
        resp = asyncio.run(request(bootstrap, ApiKey.OFFSET_FOR_LEADER_EPOCH, body, version))
        return resp["topics"][0]["partitions"][0]

    latest = ask(0)
    assert latest["error_code"] == ErrorCode.NONE
    assert latest["end_offset"] == 3
    if version >= 1:
        assert latest["leader_epoch"] == 0
    # An epoch newer than any the leader knows has no end offset.
    assert ask(5)["end_offset"] == -1
    if version >= 2:
        assert ask(0, current=7)["error_code"] == ErrorCode.UNKNOWN_LEADER_EPOCH


def test_offset_for_leader_epoch_unknown_partition(bootstrap) -> None:
    body = {
        "topics": [{"topic": "no-such-topic", "partitions": [{"partition": 0, "leader_epoch": 0}]}]
    }
    resp = asyncio.run(request(bootstrap, ApiKey.OFFSET_FOR_LEADER_EPOCH, body, 4))
    assert resp["topics"][0]["partitions"][0]["error_code"] == ErrorCode.UNKNOWN_TOPIC_OR_PARTITION


def test_fetch_from_a_replica_that_is_not_assigned_is_refused(bootstrap, new_topic) -> None:
    topic = new_topic()
    produce(bootstrap, topic, 2)
    body = {
        "replica_id": 424242,
        "max_wait_ms": 0,
        "min_bytes": 1,
        "topics": [
            {
                "topic": topic,
                "partitions": [{"partition": 0, "fetch_offset": 0, "partition_max_bytes": 1 << 20}],
            }
        ],
    }
    resp = asyncio.run(request(bootstrap, ApiKey.FETCH, body, 12))
    part = resp["responses"][0]["partitions"][0]
    assert part["error_code"] == ErrorCode.NOT_LEADER_OR_FOLLOWER


def test_consumer_fetch_checks_the_leader_epoch(bootstrap, new_topic) -> None:
    """A consumer's Fetch (v9+) names the leader epoch it knows: an older one is fenced, a newer
    one is unknown to this leader yet (the Java consumer refreshes its metadata on both)."""
    topic = new_topic()
    produce(bootstrap, topic, 2)

    def fetch(epoch: int) -> dict:
        partition = {"partition": 0, "current_leader_epoch": epoch, "fetch_offset": 0,
                     "log_start_offset": -1, "partition_max_bytes": 1 << 20}  # fmt: skip
        body = {
            "replica_id": -1,
            "max_wait_ms": 0,
            "min_bytes": 1,
            "max_bytes": 1 << 20,
            "isolation_level": 0,
            "session_id": 0,
            "session_epoch": -1,
            "topics": [{"topic": topic, "partitions": [partition]}],
            "forgotten_topics_data": [],
        }
        resp = asyncio.run(request(bootstrap, ApiKey.FETCH, body, 12))
        return resp["responses"][0]["partitions"][0]

    current = fetch(0)
    assert current["error_code"] == ErrorCode.NONE and current["high_watermark"] == 2
    assert fetch(1)["error_code"] == ErrorCode.UNKNOWN_LEADER_EPOCH
    assert fetch(-1)["error_code"] == ErrorCode.NONE
