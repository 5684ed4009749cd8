"""Consumer groups of the other real clients: kafka-python, aiokafka and `kcat -G`, two members
each, sharing a topic's partitions, consuming everything and committing."""

from __future__ import annotations

import asyncio
import signal
import subprocess
import threading
import time

from confluent_kafka import Producer
from confluent_kafka.admin import AdminClient
from polling import wait_until

WAIT_S = 90.0
PARTITIONS = 4
PER_PARTITION = 25


def produce(bootstrap: str, topic: str) -> set[tuple[int, int]]:
    producer = Producer({"bootstrap.servers": bootstrap, "linger.ms": 20})
    for i in range(PER_PARTITION):
        for p in range(PARTITIONS):
            producer.produce(topic, value=f"{p}-{i}".encode(), partition=p)
    assert producer.flush(60) == 0
    return {(p, o) for p in range(PARTITIONS) for o in range(PER_PARTITION)}


def shared_out(assignments: list[set[int]]) -> bool:
    """Every partition owned by exactly one member, and every member owns some."""
    flat = sorted(p for a in assignments for p in a)
    return flat == list(range(PARTITIONS)) and all(assignments)


def described_members(bootstrap: str, group: str) -> list[set[int]]:
    admin = AdminClient({"bootstrap.servers": bootstrap})
    desc = admin.describe_consumer_groups([group])[group].result(30)
    if desc.state.name != "STABLE":
        return []
    return [{tp.partition for tp in m.assignment.topic_partitions} for m in desc.members]


# The group member settings kafka-python's and aiokafka's consumers share (same keywords).
MEMBER = {
    "enable_auto_commit": False,
    "auto_offset_reset": "earliest",
    "heartbeat_interval_ms": 500,
    "session_timeout_ms": 10000,
}


def test_kafka_python_group(bootstrap: str, new_topic) -> None:
    from kafka import KafkaConsumer, TopicPartition

    topic = new_topic(partitions=PARTITIONS)
    group = f"{topic}-group"
    expected = produce(bootstrap, topic)
    stop = threading.Event()
    lock = threading.Lock()
    seen: set[tuple[int, int]] = set()
    owned: list[set[int]] = [set(), set()]
    failures: list[BaseException] = []

    def member(i: int) -> None:
        c = KafkaConsumer(bootstrap_servers=bootstrap, group_id=group, **MEMBER)
        # kafka-python 3.0.12 loses a JoinGroup still in flight when a poll returns before it
        # is answered and the leader's own assignment has meanwhile made need_rejoin() false:
        # that member then never applies its assignment nor heartbeats again (seen in packet
        # captures: the broker answered its SyncGroup). The leader rejoins like that when topic
        # metadata arrives after it assigned without it. So: know the topic before joining, and
        # poll long enough for a rebalance to finish within one call (poll returns as soon as
        # records arrive).
        assert c.partitions_for_topic(topic) == set(range(PARTITIONS))
        c.subscribe([topic])
        try:
            while not stop.is_set():
                batches = c.poll(timeout_ms=3000)
                with lock:
                    owned[i] = {tp.partition for tp in c.assignment()}
                    for records in batches.values():
                        seen.update((r.partition, r.offset) for r in records)
                if batches:
                    c.commit()
        except BaseException as e:  # reported by the main thread
            failures.append(e)
        finally:
            c.close()

    threads = [threading.Thread(target=member, args=(i,), daemon=True) for i in range(2)]
    for t in threads:
        t.start()
    try:

        def done() -> bool:
            with lock:
                return expected <= seen and shared_out([set(o) for o in owned])

        wait_until(
            lambda: done() or bool(failures),
            WAIT_S,
            what="two kafka-python members sharing the topic",
        )
    finally:
        stop.set()
        for t in threads:
            t.join(60)
    assert not failures, failures
    assert seen == expected
    probe = KafkaConsumer(bootstrap_servers=bootstrap, group_id=group, enable_auto_commit=False)
    try:
        tps = [TopicPartition(topic, p) for p in range(PARTITIONS)]
        assert [probe.committed(tp) for tp in tps] == [PER_PARTITION] * PARTITIONS
    finally:
        probe.close()


def test_aiokafka_group(bootstrap: str, new_topic) -> None:
    from aiokafka import AIOKafkaConsumer, TopicPartition

    topic = new_topic(partitions=PARTITIONS)
    group = f"{topic}-group"
    expected = produce(bootstrap, topic)

    async def main() -> None:
        seen: set[tuple[int, int]] = set()
        consumers = [
            AIOKafkaConsumer(topic, bootstrap_servers=bootstrap, group_id=group, **MEMBER)
            for _ in range(2)
        ]
        for c in consumers:
            await c.start()
        try:
            deadline = time.monotonic() + WAIT_S
            while not (
                expected <= seen
                and shared_out([{tp.partition for tp in c.assignment()} for c in consumers])
            ):
                assert time.monotonic() < deadline, (seen, [c.assignment() for c in consumers])
                results = await asyncio.gather(*(c.getmany(timeout_ms=200) for c in consumers))
                for c, batches in zip(consumers, results, strict=True):
                    for records in batches.values():
                        seen.update((r.partition, r.offset) for r in records)
                    if batches:
                        await c.commit()
            assert seen == expected
        finally:
            for c in consumers:
                await c.stop()
        probe = AIOKafkaConsumer(bootstrap_servers=bootstrap, group_id=group)
        await probe.start()
        try:
            got = [await probe.committed(TopicPartition(topic, p)) for p in range(PARTITIONS)]
            assert got == [PER_PARTITION] * PARTITIONS
        finally:
            await probe.stop()

    asyncio.run(main())


def test_kcat_balanced_consumers_share_a_topic(kcat: str, bootstrap: str, new_topic) -> None:
    topic = new_topic(partitions=PARTITIONS)
    group = f"{topic}-group"
    expected = produce(bootstrap, topic)
    cmd = [
        kcat, "-b", bootstrap, "-G", group, "-q", "-u", "-f", "%p %o\n",
        "-X", "auto.offset.reset=earliest", "-X", "session.timeout.ms=10000",
        "-X", "heartbeat.interval.ms=500", topic,
    ]  # fmt: skip
    procs = [
        subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True)
        for _ in range(2)
    ]
    lock = threading.Lock()
    seen: set[tuple[int, int]] = set()

    def read(proc: subprocess.Popen[str]) -> None:
        assert proc.stdout is not None
        for line in proc.stdout:
            p, o = line.split()
            with lock:
                seen.add((int(p), int(o)))

    readers = [threading.Thread(target=read, args=(p,), daemon=True) for p in procs]
    for r in readers:
        r.start()
    try:

        def consumed() -> bool:
            with lock:
                return expected <= seen

        wait_until(consumed, WAIT_S, what="kcat members to consume every record")
        wait_until(
            lambda: (
                len(described_members(bootstrap, group)) == 2
                and shared_out(described_members(bootstrap, group))
            ),
            WAIT_S,
            what="two kcat members sharing the partitions",
        )
    finally:
        for p in procs:
            p.send_signal(signal.SIGINT)
        for p in procs:
            try:
                p.wait(30)
            except subprocess.TimeoutExpired:
                p.kill()
                p.wait()
    with lock:
        assert seen == expected
