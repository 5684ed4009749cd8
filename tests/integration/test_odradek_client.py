"""The project's own asyncio client (admin, producer, consumer) against a real broker.

Run against Apache Kafka with ODRADEK_TEST_BOOTSTRAP=host:port to check the client itself.
"""

from __future__ import annotations

import asyncio
import time
import warnings

import pytest
from conftest import run
from odradek.broker.client import (
    AdminClient,
    AlterConfigOp,
    ConfigResource,
    ConfigSource,
    Consumer,
    ErrorCode,
    KafkaError,
    NewTopic,
    OffsetSpec,
    Producer,
    TopicPartition,
)
from odradek.broker.client.producer import default_partition


async def wait_for_leaders(admin: AdminClient, name: str, partitions: int) -> None:
    deadline = time.monotonic() + 60
    while True:
        try:
            t = await admin.describe_topic(name)
            if len(t.partitions) == partitions and all(p.leader >= 0 for p in t.partitions):
                return
        except KafkaError as e:
            if e.code != ErrorCode.UNKNOWN_TOPIC_OR_PARTITION:
                raise
        assert time.monotonic() < deadline, f"{name}: no leaders after 60s"
        await asyncio.sleep(0.1)


async def create(admin: AdminClient, name: str, partitions: int = 1, **configs: str) -> None:
    await admin.create_topic(
        name, partitions, 1, {k.replace("_", "."): v for k, v in configs.items()}
    )
    await wait_for_leaders(admin, name, partitions)


async def create_topic(bootstrap: str, name: str, partitions: int) -> None:
    """`create` through an admin client of its own."""
    async with AdminClient(bootstrap) as admin:
        await create(admin, name, partitions)


async def consume_all(consumer: Consumer, expected: int, timeout: float = 30) -> list:
    got: list = []
    deadline = time.monotonic() + timeout
    while len(got) < expected and time.monotonic() < deadline:
        got.extend(await consumer.poll(1.0))
    return got


# -- admin ------------------------------------------------------------------------------------


def test_create_describe_list_delete_topics(bootstrap: str, topic_name: str) -> None:
    async def main() -> None:
        async with AdminClient(bootstrap) as admin:
            results = await admin.create_topics(
                [NewTopic(topic_name, 3, 1, {"retention.ms": "3600000"})]
            )
            created = results[topic_name]
            assert created.error is None
            assert created.num_partitions in (3, -1)
            await wait_for_leaders(admin, topic_name, 3)

            assert topic_name in await admin.list_topics()
            desc = await admin.describe_topic(topic_name)
            assert [p.partition for p in desc.partitions] == [0, 1, 2]
            assert desc.replication_factor == 1
            assert not desc.is_internal
            brokers = {b.node_id for b in (await admin.describe_cluster()).brokers}
            for p in desc.partitions:
                assert p.leader in brokers
                assert p.replicas == [p.leader] and p.isr == [p.leader]

            with pytest.raises(KafkaError) as info:
                await admin.create_topic(topic_name, 1, 1)
            assert info.value.code == ErrorCode.TOPIC_ALREADY_EXISTS

            deleted = await admin.delete_topics([topic_name])
            assert deleted[topic_name].error is None
            deadline = time.monotonic() + 30
            while topic_name in await admin.list_topics():
                assert time.monotonic() < deadline, "topic still listed 30s after deletion"
                await asyncio.sleep(0.2)
            with pytest.raises(KafkaError) as info:
                await admin.describe_topic(topic_name)
            assert info.value.code == ErrorCode.UNKNOWN_TOPIC_OR_PARTITION

    run(main)


def test_create_topic_errors(bootstrap: str, topic_name: str) -> None:
    async def main() -> None:
        async with AdminClient(bootstrap) as admin:
            with pytest.raises(KafkaError) as info:
                await admin.create_topic(topic_name, 1, 1, {"cleanup.policy": "sideways"})
            assert info.value.code == ErrorCode.INVALID_CONFIG
            with pytest.raises(KafkaError) as info:
                await admin.create_topic(topic_name, 0, 1)
            assert info.value.code == ErrorCode.INVALID_PARTITIONS
            with pytest.raises(KafkaError) as info:
                await admin.create_topic(topic_name, 1, 99)
            assert info.value.code == ErrorCode.INVALID_REPLICATION_FACTOR
            with pytest.raises(KafkaError) as info:
                await admin.create_topic("bad/name", 1, 1)
            assert info.value.code == ErrorCode.INVALID_TOPIC_EXCEPTION
            results = await admin.create_topics(
                [NewTopic(topic_name, 1, 1), NewTopic("bad name", 1, 1)], raise_errors=False
            )
            assert results[topic_name].error is None
            err = results["bad name"].error
            assert err is not None and err.code == ErrorCode.INVALID_TOPIC_EXCEPTION
            with pytest.raises(KafkaError) as info:
                await admin.delete_topics([topic_name + "-missing"])
            assert info.value.code == ErrorCode.UNKNOWN_TOPIC_OR_PARTITION

    run(main)


def test_validate_only_creates_nothing(bootstrap: str, topic_name: str) -> None:
    async def main() -> None:
        async with AdminClient(bootstrap) as admin:
            await admin.create_topic(topic_name, 2, 1, validate_only=True)
            assert topic_name not in await admin.list_topics()
            with pytest.raises(KafkaError) as info:
                await admin.create_topic(
                    topic_name, 2, 1, {"segment.bytes": "x"}, validate_only=True
                )
            assert info.value.code == ErrorCode.INVALID_CONFIG

    run(main)


def test_topic_configs(bootstrap: str, topic_name: str) -> None:
    async def main() -> None:
        async with AdminClient(bootstrap) as admin:
            await create(admin, topic_name, retention_ms="3600000")
            configs = await admin.describe_topic_configs(topic_name)
            assert configs["retention.ms"].value == "3600000"
            assert configs["retention.ms"].source == ConfigSource.DYNAMIC_TOPIC_CONFIG
            assert configs["cleanup.policy"].value == "delete"
            assert configs["cleanup.policy"].source != ConfigSource.DYNAMIC_TOPIC_CONFIG

            resource = ConfigResource.topic(topic_name)
            await admin.incremental_alter_configs(
                {
                    resource: [
                        AlterConfigOp.set("cleanup.policy", "compact"),
                        AlterConfigOp.set("segment.ms", "100000"),
                        AlterConfigOp.delete("retention.ms"),
                    ]
                }
            )
            configs = await admin.describe_topic_configs(topic_name)
            dynamic = {
                k: e.value
                for k, e in configs.items()
                if e.source == ConfigSource.DYNAMIC_TOPIC_CONFIG
            }
            assert dynamic == {"cleanup.policy": "compact", "segment.ms": "100000"}

            # Legacy AlterConfigs replaces the whole set.
            await admin.alter_configs({resource: {"retention.bytes": "1048576"}})
            configs = await admin.describe_topic_configs(topic_name)
            dynamic = {
                k: e.value
                for k, e in configs.items()
                if e.source == ConfigSource.DYNAMIC_TOPIC_CONFIG
            }
            assert dynamic == {"retention.bytes": "1048576"}

            some = await admin.describe_configs([resource], keys=["retention.bytes"])
            assert list(some[resource]) == ["retention.bytes"]

            with pytest.raises(KafkaError) as info:
                await admin.incremental_alter_configs(
                    {resource: [AlterConfigOp.set("cleanup.policy", "sideways")]}
                )
            assert info.value.code == ErrorCode.INVALID_CONFIG
            await admin.incremental_alter_configs(
                {resource: [AlterConfigOp.set("retention.ms", "5")]}, validate_only=True
            )
            assert "retention.ms" not in {
                k
                for k, e in (await admin.describe_topic_configs(topic_name)).items()
                if e.source == ConfigSource.DYNAMIC_TOPIC_CONFIG
            }
            with pytest.raises(KafkaError) as info:
                await admin.describe_topic_configs(topic_name + "-missing")
            assert info.value.code == ErrorCode.UNKNOWN_TOPIC_OR_PARTITION

    run(main)


def test_broker_configs_and_cluster(bootstrap: str) -> None:
    async def main() -> None:
        async with AdminClient(bootstrap) as admin:
            cluster = await admin.describe_cluster()
            assert cluster.brokers
            assert cluster.controller_id in {b.node_id for b in cluster.brokers}
            broker_id = cluster.brokers[0].node_id
            resource = ConfigResource.broker(broker_id)
            configs = (
                await admin.describe_configs(
                    [resource],
                    keys=["num.partitions", "log.retention.hours"],
                    include_synonyms=True,
                )
            )[resource]
            assert set(configs) == {"num.partitions", "log.retention.hours"}
            assert int(configs["log.retention.hours"].value or "0") > 0
            assert configs["num.partitions"].synonyms
            everything = (await admin.describe_configs([resource]))[resource]
            assert "log.dirs" in everything or "log.dir" in everything

    run(main)


def test_create_partitions(bootstrap: str, topic_name: str) -> None:
    async def main() -> None:
        async with AdminClient(bootstrap) as admin:
            await create(admin, topic_name, 1)
            await admin.create_partitions({topic_name: 3}, validate_only=True)
            assert len((await admin.describe_topic(topic_name)).partitions) == 1
            await admin.create_partitions({topic_name: 3})
            await wait_for_leaders(admin, topic_name, 3)
            with pytest.raises(KafkaError) as info:
                await admin.create_partitions({topic_name: 2})
            assert info.value.code == ErrorCode.INVALID_PARTITIONS
            with pytest.raises(KafkaError) as info:
                await admin.create_partitions({topic_name + "-missing": 2})
            assert info.value.code == ErrorCode.UNKNOWN_TOPIC_OR_PARTITION

    run(main)


def test_list_offsets_delete_records_and_log_dirs(bootstrap: str, topic_name: str) -> None:
    async def main() -> None:
        async with AdminClient(bootstrap) as admin:
            await create(admin, topic_name, 1)
            tp = TopicPartition(topic_name, 0)
            async with Producer(bootstrap, linger_ms=0) as producer:
                for i in range(10):
                    await producer.send_and_wait(topic_name, b"x", timestamp_ms=1_000_000 + i * 10)
            got = await admin.list_offsets({tp: OffsetSpec.EARLIEST})
            assert got[tp].offset == 0
            got = await admin.list_offsets({tp: OffsetSpec.LATEST})
            assert got[tp].offset == 10
            got = await admin.list_offsets({tp: 1_000_045})
            assert (got[tp].offset, got[tp].timestamp) == (5, 1_000_050)
            got = await admin.list_offsets({tp: 9_000_000})
            assert got[tp].offset == -1
            got = await admin.list_offsets({tp: OffsetSpec.MAX_TIMESTAMP})
            assert (got[tp].offset, got[tp].timestamp) == (9, 1_000_090)

            low = await admin.delete_records({tp: 4})
            assert low[tp] == 4
            assert (await admin.list_offsets({tp: OffsetSpec.EARLIEST}))[tp].offset == 4
            with pytest.raises(KafkaError) as info:
                await admin.delete_records({tp: 11})
            assert info.value.code == ErrorCode.OFFSET_OUT_OF_RANGE

            with pytest.raises(KafkaError) as info:
                await admin.list_offsets({TopicPartition(topic_name, 5): OffsetSpec.LATEST})
            assert info.value.code == ErrorCode.UNKNOWN_TOPIC_OR_PARTITION

            dirs = await admin.describe_log_dirs(topics={topic_name: [0]})
            replicas = [d.replicas[tp] for ds in dirs.values() for d in ds if tp in d.replicas]
            assert len(replicas) == 1
            assert replicas[0].size > 0
            assert all(d.error == ErrorCode.NONE for ds in dirs.values() for d in ds)

    run(main)


# -- producer and consumer --------------------------------------------------------------------


@pytest.mark.parametrize("compression", ["none", "gzip", "snappy", "lz4", "zstd"])
def test_produce_consume_round_trip(bootstrap: str, topic_name: str, compression: str) -> None:
    async def main() -> None:
        await create_topic(bootstrap, topic_name, 3)
        sent = []
        async with Producer(bootstrap, compression=compression, linger_ms=10) as producer:
            futures = []
            for i in range(300):
                key = None if i % 5 == 0 else f"key-{i % 7}".encode()
                headers = [("i", str(i).encode()), ("empty", None)] if i % 2 else None
                futures.append(
                    await producer.send(
                        topic_name,
                        f"value-{i}".encode(),
                        key=key,
                        headers=headers,
                        timestamp_ms=1_700_000_000_000 + i,
                    )
                )
            await producer.flush()
            for i, f in enumerate(futures):
                meta = f.result()
                assert meta.topic == topic_name and meta.offset >= 0
                sent.append((i, meta))
        # Keyed records land where Kafka's default partitioner puts them.
        for i, meta in sent:
            if i % 5:
                assert meta.partition == default_partition(f"key-{i % 7}".encode(), 3)
        async with Consumer(bootstrap, auto_offset_reset="earliest") as consumer:
            await consumer.assign_topic(topic_name)
            records = await consume_all(consumer, 300)
        assert len(records) == 300
        by_value = {r.value: r for r in records}
        for i, meta in sent:
            r = by_value[f"value-{i}".encode()]
            assert (r.partition, r.offset) == (meta.partition, meta.offset)
            assert r.timestamp == 1_700_000_000_000 + i
            assert r.key == (None if i % 5 == 0 else f"key-{i % 7}".encode())
            assert r.headers == ([("i", str(i).encode()), ("empty", None)] if i % 2 else [])
        # Offsets are contiguous and in order per partition.
        for p in range(3):
            offsets = [r.offset for r in records if r.partition == p]
            assert offsets == list(range(len(offsets)))

    run(main)


@pytest.mark.parametrize("sessions", [True, False], ids=["sessions", "no-sessions"])
def test_consumer_positions_and_live_tail(bootstrap: str, topic_name: str, sessions: bool) -> None:
    async def main() -> None:
        await create_topic(bootstrap, topic_name, 2)
        tp0, tp1 = TopicPartition(topic_name, 0), TopicPartition(topic_name, 1)
        async with Producer(bootstrap, linger_ms=0) as producer:
            for i in range(20):
                await producer.send(topic_name, f"a{i}".encode(), partition=i % 2)
            await producer.flush()
            async with Consumer(
                bootstrap, use_fetch_sessions=sessions, fetch_max_wait_ms=200
            ) as consumer:
                consumer.assign([tp0, tp1])
                # default reset is latest
                assert await consumer.position(tp0) == 10
                assert await consumer.end_offsets([tp0, tp1]) == {tp0: 10, tp1: 10}
                assert await consumer.beginning_offsets([tp0]) == {tp0: 0}
                assert await consumer.poll(0.3) == []

                consumer.seek(tp0, 7)
                got = await consume_all(consumer, 3)
                assert [(r.partition, r.offset, r.value) for r in got] == [
                    (0, 7, b"a14"), (0, 8, b"a16"), (0, 9, b"a18"),
                ]  # fmt: skip

                consumer.seek_to_beginning(tp1)
                got = await consume_all(consumer, 10)
                assert [r.offset for r in got] == list(range(10))
                assert all(r.partition == 1 for r in got)

                # Records produced now arrive on the open fetch session.
                for round_ in range(3):
                    await producer.send_and_wait(topic_name, f"live{round_}".encode(), partition=0)
                    await producer.send_and_wait(topic_name, f"live{round_}".encode(), partition=1)
                    got = await consume_all(consumer, 2)
                    assert sorted((r.partition, r.value) for r in got) == [
                        (0, f"live{round_}".encode()), (1, f"live{round_}".encode()),
                    ]  # fmt: skip
                assert consumer.highwater(tp0) == 13
                assert await consumer.position(tp0) == 13

                # Dropping a partition from the assignment stops its records.
                consumer.assign([tp1])
                await producer.send_and_wait(topic_name, b"gone", partition=0)
                await producer.send_and_wait(topic_name, b"kept", partition=1)
                got = await consume_all(consumer, 1)
                assert [(r.partition, r.value) for r in got] == [(1, b"kept")]

    run(main)


def test_out_of_range_offset_resets(bootstrap: str, topic_name: str) -> None:
    async def main() -> None:
        await create_topic(bootstrap, topic_name, 1)
        tp = TopicPartition(topic_name, 0)
        async with Producer(bootstrap) as producer:
            for i in range(5):
                await producer.send(topic_name, f"r{i}".encode())
            await producer.flush()
        async with Consumer(bootstrap, auto_offset_reset="earliest") as consumer:
            consumer.assign([tp])
            consumer.seek(tp, 1000)
            got = await consume_all(consumer, 5)
            assert [r.offset for r in got] == [0, 1, 2, 3, 4]
        async with Consumer(bootstrap, auto_offset_reset="none") as consumer:
            consumer.assign([tp])
            consumer.seek(tp, 1000)
            with pytest.raises(KafkaError) as info:
                await consumer.poll(5.0)
            assert info.value.code == ErrorCode.OFFSET_OUT_OF_RANGE

    run(main)


def test_acks_and_large_records(bootstrap: str, topic_name: str) -> None:
    async def main() -> None:
        await create_topic(bootstrap, topic_name, 1)
        big = bytes(range(256)) * 2000  # 512 KB, bigger than a batch
        async with Producer(bootstrap, acks=0, linger_ms=0) as producer:
            meta = await producer.send_and_wait(topic_name, b"acks0")
            assert meta.offset == -1
        async with Producer(bootstrap, acks=1) as producer:
            meta = await producer.send_and_wait(topic_name, big)
            assert meta.offset == 1
        async with Producer(bootstrap, acks="all", compression="gzip") as producer:
            meta = await producer.send_and_wait(topic_name, b"all")
            assert meta.offset == 2
            with pytest.raises(KafkaError) as info:
                await producer.send_and_wait(topic_name, b"x" * 2_000_000)
            assert info.value.code == ErrorCode.MESSAGE_TOO_LARGE
            with pytest.raises(KafkaError) as info:
                await producer.send_and_wait(topic_name, b"x", partition=5)
            assert info.value.code == ErrorCode.UNKNOWN_TOPIC_OR_PARTITION
        async with Consumer(
            bootstrap, auto_offset_reset="earliest", max_partition_fetch_bytes=1024
        ) as consumer:
            consumer.assign([(topic_name, 0)])
            got = await consume_all(consumer, 3)
        assert [r.value for r in got] == [b"acks0", big, b"all"]

    run(main)


def test_interoperates_with_confluent_kafka(bootstrap: str, topic_name: str) -> None:
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", DeprecationWarning)
        from confluent_kafka import Consumer as CKConsumer
        from confluent_kafka import Producer as CKProducer

    async def produce_ours() -> None:
        await create_topic(bootstrap, topic_name, 1)
        async with Producer(bootstrap, compression="lz4") as producer:
            for i in range(50):
                await producer.send(topic_name, f"ours-{i}".encode(), key=b"k", headers={"h": "v"})
            await producer.flush()

    run(produce_ours)
    consumer = CKConsumer(
        {
            "bootstrap.servers": bootstrap,
            "group.id": topic_name,
            "auto.offset.reset": "earliest",
            "enable.auto.commit": False,
        }
    )
    consumer.assign([__import__("confluent_kafka").TopicPartition(topic_name, 0, 0)])
    seen = []
    deadline = time.monotonic() + 60
    while len(seen) < 50 and time.monotonic() < deadline:
        m = consumer.poll(1.0)
        if m is not None and m.error() is None:
            seen.append((m.offset(), m.key(), m.value(), m.headers()))
    consumer.close()
    assert seen == [(i, b"k", f"ours-{i}".encode(), [("h", b"v")]) for i in range(50)]

    producer = CKProducer({"bootstrap.servers": bootstrap, "compression.type": "zstd"})
    for i in range(50):
        producer.produce(topic_name, value=f"theirs-{i}".encode(), key=b"c", headers=[("x", b"y")])
    assert producer.flush(30) == 0

    async def consume_ours() -> list:
        async with Consumer(bootstrap) as consumer:
            tp = TopicPartition(topic_name, 0)
            consumer.assign([tp])
            consumer.seek(tp, 50)
            return await consume_all(consumer, 50)

    got = run(consume_ours)
    assert [(r.offset, r.key, r.value, r.headers) for r in got] == [
        (50 + i, b"c", f"theirs-{i}".encode(), [("x", b"y")]) for i in range(50)
    ]


def test_producer_waits_for_buffer_space(bootstrap: str, topic_name: str) -> None:
    async def main() -> None:
        await create_topic(bootstrap, topic_name, 2)
        async with Producer(bootstrap, buffer_memory=20_000, batch_size=4096) as producer:
            futures = [await producer.send(topic_name, bytes(200)) for _ in range(1000)]
            assert producer._buffered <= 20_000 + 300
            metas = [await f for f in futures]
        assert sorted(m.offset for m in metas if m.partition == 0) == list(
            range(sum(1 for m in metas if m.partition == 0))
        )
        async with Consumer(bootstrap, auto_offset_reset="earliest") as consumer:
            await consumer.assign_topic(topic_name)
            assert len(await consume_all(consumer, 1000)) == 1000

    run(main)


def test_clients_survive_a_broker_restart(broker_factory, topic_name: str) -> None:
    broker = broker_factory()

    async def main() -> None:
        async with (
            AdminClient(broker.bootstrap) as admin,
            Producer(broker.bootstrap, linger_ms=0) as producer,
            Consumer(broker.bootstrap, auto_offset_reset="earliest") as consumer,
        ):
            await create(admin, topic_name, 1)
            assert (await producer.send_and_wait(topic_name, b"before")).offset == 0
            consumer.assign([(topic_name, 0)])
            assert [r.value for r in await consume_all(consumer, 1)] == [b"before"]

            await asyncio.get_running_loop().run_in_executor(None, broker.restart)

            # Every client reconnects on its own and carries on where it was.
            assert (await producer.send_and_wait(topic_name, b"after")).offset == 1
            assert [r.value for r in await consume_all(consumer, 1)] == [b"after"]
            assert topic_name in await admin.list_topics()

    run(main)
