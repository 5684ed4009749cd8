"""Client quotas enforced by real brokers: throttled, never failed, and alike on every broker.

The produce test measures a rate because holding a client to its quota is the feature itself
(issue 5's acceptance criterion); the band is the issue's 20%.
"""

from __future__ import annotations

import asyncio
import json
import time
import uuid
from concurrent.futures import ThreadPoolExecutor
from typing import Any

from cluster import Cluster, cluster_factory_fixture  # noqa: F401  (fixture)
from confluent_kafka import Producer
from confluent_kafka.admin import AdminClient, NewTopic
from odradek.broker.client import admin as ours
from odradek.broker.client.blocking import BlockingConnection, api_versions_probe
from odradek.broker.client.connection import BrokerConnection
from odradek.broker.protocol.api_keys import ApiKey
from odradek.broker.protocol.errors import ErrorCode
from odradek.broker.records.record import Record, build_batch

QUOTA = 1024 * 1024
RUN_SECONDS = 20.0
# Kafka's sampled rate never measures over less than (quota.window.num - 1) windows, so a new
# client (or one whose busiest sample just expired) may send that many windows' worth at once.
# With the default 11 one-second samples that burst is 10 MB, half of what 20 s at 1 MB/s allow,
# and a 20 s measurement would mostly measure the burst. Two samples keep Kafka's algorithm and
# bound the burst to one second's worth.
QUOTA_WINDOWS = {"quota.window.num": "2", "quota.window.size.seconds": "1"}
VALUE = b"q" * 10_000


def create_topic(bootstrap: str, topic: str) -> None:
    admin = AdminClient({"bootstrap.servers": bootstrap})
    admin.create_topics([NewTopic(topic, 1, 1)], operation_timeout=30)[topic].result(60)
    deadline = time.monotonic() + 60
    while True:
        meta = admin.list_topics(topic, timeout=10).topics.get(topic)
        if meta is not None and meta.error is None and meta.partitions[0].leader >= 0:
            return
        assert time.monotonic() < deadline, f"{topic} has no leader: {meta}"
        time.sleep(0.1)


def set_quota(bootstrap: str, client_id: str, values: dict[str, float | None]) -> None:
    async def alter() -> None:
        async with ours.AdminClient(bootstrap) as admin:
            await admin.alter_client_quotas({(("client-id", client_id),): values})

    asyncio.run(asyncio.wait_for(alter(), 30))


def test_produce_byte_rate_quota_holds_confluent_producer_to_its_rate(broker_factory) -> None:
    broker = broker_factory(overrides=QUOTA_WINDOWS)
    topic = "quota-rate-" + uuid.uuid4().hex[:8]
    create_topic(broker.bootstrap, topic)
    client_id = f"quota-{topic[-8:]}"
    set_quota(broker.bootstrap, client_id, {"producer_byte_rate": QUOTA})

    delivered: list[tuple[float, int]] = []
    errors: list[Any] = []
    throttles: list[int] = []
    stats_throttle: list[float] = []

    def on_delivery(err: Any, msg: Any) -> None:
        if err is not None:
            errors.append(err)
        else:
            delivered.append((time.monotonic(), len(msg.value())))

    def on_stats(raw: str) -> None:
        for b in json.loads(raw)["brokers"].values():
            if b.get("nodeid", -1) >= 0:
                stats_throttle.append(b["throttle"]["max"])

    producer = Producer(
        {
            "bootstrap.servers": broker.bootstrap,
            "client.id": client_id,
            "acks": 1,
            "linger.ms": 5,
            "queue.buffering.max.messages": 2000,
            "statistics.interval.ms": 1000,
            "stats_cb": on_stats,
            "throttle_cb": lambda event: throttles.append(event.throttle_time),
        }
    )
    start = time.monotonic()
    end = start + RUN_SECONDS
    while time.monotonic() < end:
        try:
            producer.produce(topic, VALUE, on_delivery=on_delivery)
        except BufferError:
            producer.poll(0.05)
        else:
            producer.poll(0)
    producer.purge(in_flight=False)
    producer.flush(30)

    assert not [e for e in errors if "purge" not in str(e).lower()], errors[:5]
    sent = sum(n for t, n in delivered if start < t <= end)
    rate = sent / RUN_SECONDS
    assert 0.8 * QUOTA <= rate <= 1.2 * QUOTA, f"{rate / QUOTA:.2f} x the quota"
    assert throttles and max(throttles) > 0
    assert stats_throttle and max(stats_throttle) > 0


def _produce_body(topic: str, partition: int, size: int) -> dict[str, Any]:
    batch = build_batch([Record(value=b"x" * size)])
    return {
        "transactional_id": None,
        "acks": 1,
        "timeout_ms": 10000,
        "topic_data": [{"name": topic, "partition_data": [{"index": partition, "records": batch}]}],
    }


def _throttle_of_one_produce(host: str, port: int, client_id: str, body: dict) -> int:
    async def once() -> int:
        conn = await BrokerConnection.open(host, port, client_id=client_id, request_timeout=15.0)
        try:
            resp = await conn.request(ApiKey.PRODUCE, body)
        finally:
            await conn.close()
        part = resp["responses"][0]["partition_responses"][0]
        assert part["error_code"] == 0, resp
        return resp["throttle_time_ms"]

    return asyncio.run(asyncio.wait_for(once(), 30))


def test_quota_altered_through_one_broker_applies_on_another(cluster_factory) -> None:
    cluster: Cluster = cluster_factory(3)
    topic = "quota-cluster"
    cluster.create_topic(topic, 3, 1)

    def partition_led_by_3() -> int | None:
        meta = cluster[3].metadata([topic])
        for p in meta["topics"][0]["partitions"]:
            if p["leader_id"] == 3:
                return p["partition_index"] + 1  # truthy for wait_until
        return None

    partition = cluster.wait_until(partition_led_by_3, "a partition led by broker 3") - 1
    body = _produce_body(topic, partition, 200_000)
    b3 = cluster[3]
    assert _throttle_of_one_produce(b3.host, b3.port, "limited", body) == 0

    assert cluster[1].alter_client_quota("limited", "producer_byte_rate", 10_240.0) == 0
    throttle = cluster.wait_until(
        lambda: _throttle_of_one_produce(b3.host, b3.port, "limited", body),
        "broker 3 to throttle the client id limited through broker 1",
    )
    assert throttle > 0
    # other client ids are not limited
    assert _throttle_of_one_produce(b3.host, b3.port, "free", body) == 0


def test_a_quota_set_while_a_connection_is_open_applies_to_its_next_produce(
    broker_factory,
) -> None:
    """The acks=all produce path keeps, per connection, whether quotas leave it unthrottled
    (such a connection reads its next request while the last one waits for replication). A
    quota set meanwhile must reach that connection: its throttled response mutes it, so a
    request already sent behind it is read, and answered, only once the mute is over."""
    broker = broker_factory(overrides=QUOTA_WINDOWS)
    topic = "quota-open-" + uuid.uuid4().hex[:8]
    create_topic(broker.bootstrap, topic)
    client_id = f"quota-{topic[-8:]}"
    body = {**_produce_body(topic, 0, 30_000), "acks": -1}

    async def produce(conn: BrokerConnection) -> tuple[float, int]:
        resp = await conn.request(ApiKey.PRODUCE, body)
        answered = time.monotonic()
        part = resp["responses"][0]["partition_responses"][0]
        assert part["error_code"] == 0, resp
        return answered, resp["throttle_time_ms"]

    async def run() -> None:
        conn = await BrokerConnection.open(broker.host, broker.port, client_id=client_id,
                                           request_timeout=30.0)  # fmt: skip
        try:
            for _ in range(3):  # unthrottled, and known to be on this connection
                assert (await produce(conn))[1] == 0
            async with ours.AdminClient(broker.bootstrap) as admin:
                await admin.alter_client_quotas(
                    {(("client-id", client_id),): {"producer_byte_rate": 10_240.0}}
                )
            deadline = time.monotonic() + 30
            while (await produce(conn))[1] == 0:
                assert time.monotonic() < deadline, "the quota never reached the connection"
                await asyncio.sleep(0.1)
            first = asyncio.ensure_future(produce(conn))
            second = asyncio.ensure_future(produce(conn))
            (answered, throttle_ms), (answered_next, _) = await first, await second
            assert throttle_ms > 0
            assert answered_next - answered >= throttle_ms / 2000, (
                "the request behind a throttled one was served before its mute was over"
            )
        finally:
            await conn.close()

    asyncio.run(asyncio.wait_for(run(), 90))


def test_consumer_over_its_fetch_byte_rate_gets_an_empty_throttled_response(
    broker_factory,
) -> None:
    broker = broker_factory()
    topic = "quota-fetch-" + uuid.uuid4().hex[:8]
    create_topic(broker.bootstrap, topic)
    for _ in range(3):
        assert (
            _throttle_of_one_produce(
                "127.0.0.1", broker.port, "writer", _produce_body(topic, 0, 100_000)
            )
            == 0
        )
    set_quota(broker.bootstrap, "reader", {"consumer_byte_rate": 20_480})

    def fetch(offset: int) -> dict:
        body = {
            "replica_id": -1,
            "max_wait_ms": 0,
            "min_bytes": 1,
            "max_bytes": 50_000_000,
            "isolation_level": 0,
            "session_id": 0,
            "session_epoch": -1,
            "topics": [
                {
                    "topic": topic,
                    "partitions": [
                        {"partition": 0, "fetch_offset": offset, "partition_max_bytes": 50_000_000}
                    ],
                }
            ],
        }

        async def once() -> dict:
            conn = await BrokerConnection.open(
                "127.0.0.1", broker.port, client_id="reader", request_timeout=15.0
            )
            try:
                return await conn.request(ApiKey.FETCH, body, version=12)
            finally:
                await conn.close()

        return asyncio.run(asyncio.wait_for(once(), 30))

    # One quota window admits 10 samples x 20 480 bytes: the first two batches, not the third.
    first = fetch(0)
    assert first["throttle_time_ms"] == 0
    records = first["responses"][0]["partitions"][0]["records"]
    assert 200_000 < len(records) <= 204_800
    second = fetch(2)
    assert second["error_code"] == 0
    assert second["throttle_time_ms"] > 0
    assert second["responses"] == []


def _create_topics(bootstrap: str, client_id: str, version: int, topics: dict[str, int]) -> dict:
    host, _, port = bootstrap.rpartition(":")
    body = {
        "topics": [
            {"name": n, "num_partitions": p, "replication_factor": 1, "assignments": [],
             "configs": []}
            for n, p in topics.items()
        ],
        "timeout_ms": 30000,
        "validate_only": False,
    }  # fmt: skip
    # A fresh connection each time: the broker mutes a throttled connection for a while.
    with BlockingConnection(host, int(port), client_id=client_id) as conn:
        return conn.call(ApiKey.CREATE_TOPICS, version, body)


def test_controller_mutation_quota_refuses_then_throttles(broker_factory) -> None:
    """KIP-599 on CreateTopics, CreatePartitions and DeleteTopics: 1 partition/s, burst 2."""
    broker = broker_factory(overrides=QUOTA_WINDOWS)
    client_id = "mutations-" + uuid.uuid4().hex[:8]
    set_quota(broker.bootstrap, client_id, {"controller_mutation_rate": 1.0})
    big, refused, late = (f"{client_id}-{s}" for s in ("big", "refused", "late"))

    # Strict (v7): admitted while credits remain, even when it overdraws them by 8...
    first = _create_topics(broker.bootstrap, client_id, 7, {big: 10})
    assert [t["error_code"] for t in first["topics"]] == [0]
    assert first["throttle_time_ms"] == 0
    # ...then refused, with the time the bucket needs to refill, and nothing created.
    second = _create_topics(broker.bootstrap, client_id, 7, {refused: 1})
    (result,) = second["topics"]
    assert result["error_code"] == ErrorCode.THROTTLING_QUOTA_EXCEEDED, result
    assert result["error_message"] == "The throttling quota has been exceeded."
    assert 0 < second["throttle_time_ms"] <= 8000
    host, _, port = broker.bootstrap.rpartition(":")
    with BlockingConnection(host, int(port), client_id=client_id) as conn:
        grow = conn.call(
            ApiKey.CREATE_PARTITIONS,
            3,
            {"topics": [{"name": big, "count": 12, "assignments": None}], "timeout_ms": 30000,
             "validate_only": False},
        )  # fmt: skip
    assert grow["results"][0]["error_code"] == ErrorCode.THROTTLING_QUOTA_EXCEEDED
    with BlockingConnection(host, int(port), client_id=client_id) as conn:
        delete = conn.call(ApiKey.DELETE_TOPICS, 5, {"topic_names": [big], "timeout_ms": 30000})
    assert delete["responses"][0]["error_code"] == ErrorCode.THROTTLING_QUOTA_EXCEEDED
    # Permissive (v5): created, and throttled instead.
    third = _create_topics(broker.bootstrap, client_id, 5, {late: 1})
    assert [t["error_code"] for t in third["topics"]] == [0]
    assert third["throttle_time_ms"] > 0
    # Other clients are not limited at all.
    other = _create_topics(broker.bootstrap, "unlimited", 7, {f"{client_id}-other": 5})
    assert [t["error_code"] for t in other["topics"]] == [0]
    assert other["throttle_time_ms"] == 0
    names = asyncio.run(asyncio.wait_for(_list_topics(broker.bootstrap), 30))
    assert {big, late, f"{client_id}-other"} <= names and refused not in names


async def _list_topics(bootstrap: str) -> set[str]:
    async with ours.AdminClient(bootstrap) as admin:
        return set(await admin.list_topics())


def test_connection_rate_quota_per_ip(broker_factory) -> None:
    """KIP-612: connections from an IP over its rate are closed unread after a delay."""
    broker = broker_factory(overrides=QUOTA_WINDOWS)
    host, _, port = broker.bootstrap.rpartition(":")

    async def alter(values: dict[str, float | None]) -> None:
        async with ours.AdminClient(broker.bootstrap) as admin:
            await admin.alter_client_quotas({(("ip", "127.0.0.1"),): values})

    asyncio.run(asyncio.wait_for(alter({"connection_creation_rate": 10.0}), 30))
    try:
        with ThreadPoolExecutor(30) as pool:
            answered = list(
                pool.map(lambda _: api_versions_probe(host, int(port), timeout=20), range(30))
            )
        # Two one-second samples admit about ten connections at once; the rest are refused.
        assert 0 < answered.count(True) < 30, answered
        # Once the rate has fallen, connections are served again.
        deadline = time.monotonic() + 30
        while not api_versions_probe(host, int(port), timeout=20):
            assert time.monotonic() < deadline, "connections still refused after 30 s"
            time.sleep(0.5)
    finally:
        asyncio.run(asyncio.wait_for(alter({"connection_creation_rate": None}), 60))
