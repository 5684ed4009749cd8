"""aiokafka against a real broker process: produce, consume, offsets, groups.

Each test runs its own event loop with asyncio.run, so no asyncio pytest plugin is needed.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Coroutine
from typing import Any

import pytest
from aiokafka import AIOKafkaConsumer, AIOKafkaProducer, ConsumerRecord, TopicPartition
from client_samples import BASE_TS, assert_read_back, sample_records

CODECS = [None, "gzip", "snappy", "lz4", "zstd"]


def run(coro: Coroutine[Any, Any, Any], timeout: float = 120.0) -> Any:
    return asyncio.run(asyncio.wait_for(coro, timeout))


async def produce_all(bootstrap: str, topic: str, records: list[dict], **conf: Any) -> list:
    producer = AIOKafkaProducer(bootstrap_servers=bootstrap, linger_ms=20, **conf)
    await producer.start()
    try:
        futures = [await producer.send(topic, **rec) for rec in records]
        return list(await asyncio.gather(*futures))
    finally:
        await producer.stop()


async def getmany_n(c: AIOKafkaConsumer, n: int, timeout: float = 60.0) -> list[ConsumerRecord]:
    out: list[ConsumerRecord] = []
    deadline = time.monotonic() + timeout
    while len(out) < n and time.monotonic() < deadline:
        batches = await c.getmany(timeout_ms=1000, max_records=n - len(out))
        for batch in batches.values():
            out.extend(batch)
    assert len(out) == n, f"consumed {len(out)} of {n} records within {timeout}s"
    return sorted(out, key=lambda r: (r.partition, r.offset))


def assigned_consumer(bootstrap: str, **conf: Any) -> AIOKafkaConsumer:
    return AIOKafkaConsumer(
        bootstrap_servers=bootstrap,
        group_id=None,
        enable_auto_commit=False,
        auto_offset_reset="earliest",
        **conf,
    )


async def read_from_start(bootstrap: str, topic: str, n: int) -> list[Any]:
    """The first `n` records of partition 0, read by a consumer outside any group."""
    c = assigned_consumer(bootstrap)
    await c.start()
    try:
        c.assign([TopicPartition(topic, 0)])
        await c.seek_to_beginning(TopicPartition(topic, 0))
        return await getmany_n(c, n)
    finally:
        await c.stop()


@pytest.mark.parametrize("codec", CODECS, ids=lambda c: c or "none")
def test_roundtrip_every_codec(bootstrap: str, new_topic, codec: str | None) -> None:
    topic = new_topic()
    records = sample_records(60)

    async def scenario() -> None:
        meta = await produce_all(bootstrap, topic, records, compression_type=codec)
        assert [m.offset for m in meta] == list(range(60))

        assert_read_back(records, await read_from_start(bootstrap, topic, 60))

    run(scenario())


def test_offsets_for_times_and_seek(bootstrap: str, new_topic) -> None:
    topic = new_topic()
    tp = TopicPartition(topic, 0)

    async def scenario() -> None:
        await produce_all(
            bootstrap,
            topic,
            [{"value": f"v{i}".encode(), "timestamp_ms": BASE_TS + 1000 * i} for i in range(10)],
        )
        c = assigned_consumer(bootstrap)
        await c.start()
        try:
            c.assign([tp])
            assert await c.beginning_offsets([tp]) == {tp: 0}
            assert await c.end_offsets([tp]) == {tp: 10}
            found = (await c.offsets_for_times({tp: BASE_TS + 3500}))[tp]
            assert (found.offset, found.timestamp) == (4, BASE_TS + 4000)
            assert (await c.offsets_for_times({tp: BASE_TS + 60_000}))[tp] is None

            c.seek(tp, found.offset)
            assert [r.value for r in await getmany_n(c, 3)] == [b"v4", b"v5", b"v6"]
            c.seek(tp, 1)
            rec = await c.getone()
            assert (rec.offset, rec.value, rec.timestamp) == (1, b"v1", BASE_TS + 1000)
            assert await c.position(tp) == 2
            await c.seek_to_end(tp)
            assert await c.position(tp) == 10
        finally:
            await c.stop()

    run(scenario())


def test_consumer_group_commit_and_resume(bootstrap: str, new_topic) -> None:
    topic = new_topic(partitions=3)
    group = f"{topic}-group"
    tps = [TopicPartition(topic, p) for p in range(3)]

    async def scenario() -> None:
        await produce_all(
            bootstrap, topic, [{"key": f"k{i}".encode(), "value": b"x"} for i in range(45)]
        )
        c = AIOKafkaConsumer(
            topic,
            bootstrap_servers=bootstrap,
            group_id=group,
            enable_auto_commit=False,
            auto_offset_reset="earliest",
        )
        await c.start()
        try:
            assert len(await getmany_n(c, 45)) == 45
            await c.commit()
            ends = await c.end_offsets(tps)
            assert {tp: await c.committed(tp) for tp in tps} == ends
        finally:
            await c.stop()

        await produce_all(bootstrap, topic, [{"key": b"k-late", "value": b"after-commit"}])
        c2 = AIOKafkaConsumer(
            topic, bootstrap_servers=bootstrap, group_id=group, auto_offset_reset="earliest"
        )
        await c2.start()
        try:
            (rec,) = await getmany_n(c2, 1)
            assert rec.value == b"after-commit"
        finally:
            await c2.stop()

    run(scenario())


def test_idempotent_producer(bootstrap: str, new_topic) -> None:
    topic = new_topic()

    async def scenario() -> None:
        records = [{"value": f"v{i}".encode()} for i in range(300)]
        meta = await produce_all(
            bootstrap, topic, records, enable_idempotence=True, compression_type="gzip"
        )
        assert [m.offset for m in meta] == list(range(300))
        got = await read_from_start(bootstrap, topic, 300)
        assert [r.value for r in got] == [r["value"] for r in records]

    run(scenario())
