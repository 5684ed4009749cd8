"""Consumer groups with confluent-kafka (librdkafka) against a real broker: rebalancing when a
member dies, committed offsets, cooperative-sticky, static membership, broker restarts.

Waits are bounded and generous; nothing asserts how long a rebalance took.
"""

from __future__ import annotations

import json
import signal
import subprocess
import sys
import threading
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager

import pytest
from confluent_kafka import Consumer, KafkaError, Producer, TopicPartition
from confluent_kafka.admin import AdminClient, NewTopic
from polling import wait_until
from resume_points import first_offsets

WAIT_S = 90.0
# The broker's group.min.session.timeout.ms: the shortest session a member may ask for.
SHORT_SESSION = {"session.timeout.ms": 6000, "heartbeat.interval.ms": 500}


def produce(bootstrap: str, topic: str, partitions: int, per_partition: int, tag: str) -> None:
    producer = Producer({"bootstrap.servers": bootstrap, "linger.ms": 20})
    failures: list[KafkaError] = []

    def report(err: KafkaError | None, _msg: object) -> None:
        if err is not None:
            failures.append(err)

    for i in range(per_partition):
        for p in range(partitions):
            producer.produce(
                topic, value=f"{tag}-{p}-{i}".encode(), partition=p, on_delivery=report
            )
    assert producer.flush(60) == 0
    assert not failures, failures


def end_offsets(bootstrap: str, topic: str, partitions: int) -> dict[int, int]:
    c = Consumer({"bootstrap.servers": bootstrap, "group.id": "end-offsets-probe"})
    try:
        return {
            p: c.get_watermark_offsets(TopicPartition(topic, p), timeout=30)[1]
            for p in range(partitions)
        }
    finally:
        c.close()


# --- consumers in their own processes (so one can be killed with SIGKILL) ----------------

CONSUMER_SCRIPT = r"""
import json, sys
from confluent_kafka import Consumer

conf = json.loads(sys.argv[1])
topic = sys.argv[2]

def say(*parts):
    sys.stdout.write(" ".join(str(p) for p in parts) + "\n")
    sys.stdout.flush()

def on_assign(consumer, partitions):
    say("ASSIGN", ",".join(str(p.partition) for p in partitions) or "-")

def on_revoke(consumer, partitions):
    say("REVOKE", ",".join(str(p.partition) for p in partitions) or "-")

c = Consumer(conf)
c.subscribe([topic], on_assign=on_assign, on_revoke=on_revoke)
say("STARTED")
try:
    while True:
        msg = c.poll(0.2)
        if msg is None:
            continue
        if msg.error():
            say("ERROR", msg.error())
            continue
        # Printed (and flushed) before the offset may be committed: at least once.
        say("REC", msg.partition(), msg.offset())
        c.store_offsets(msg)
finally:
    c.close()
"""


class MemberProcess:
    """A confluent-kafka group member in a subprocess; its output is parsed as it comes."""

    def __init__(self, bootstrap: str, topic: str, group: str, **conf: object) -> None:
        config = {
            "bootstrap.servers": bootstrap,
            "group.id": group,
            "auto.offset.reset": "earliest",
            "enable.auto.commit": True,
            "enable.auto.offset.store": False,
            "auto.commit.interval.ms": 200,
            **conf,
        }
        self.proc = subprocess.Popen(
            [sys.executable, "-c", CONSUMER_SCRIPT, json.dumps(config), topic],
            stdout=subprocess.PIPE,
            stderr=subprocess.DEVNULL,
            text=True,
        )
        self.lock = threading.Lock()
        self.assigned: set[int] = set()
        self.records: set[tuple[int, int]] = set()
        self.errors: list[str] = []
        self._reader = threading.Thread(target=self._read, daemon=True)
        self._reader.start()

    def _read(self) -> None:
        assert self.proc.stdout is not None
        for line in self.proc.stdout:
            kind, _, rest = line.strip().partition(" ")
            with self.lock:
                if kind == "ASSIGN":
                    self.assigned = {int(p) for p in rest.split(",") if p != "-"}
                elif kind == "REVOKE":
                    self.assigned = set()
                elif kind == "REC":
                    partition, offset = rest.split()
                    self.records.add((int(partition), int(offset)))
                elif kind == "ERROR":
                    self.errors.append(rest)

    def assignment(self) -> set[int]:
        with self.lock:
            return set(self.assigned)

    def consumed(self) -> set[tuple[int, int]]:
        with self.lock:
            return set(self.records)

    def kill(self) -> None:
        self.proc.send_signal(signal.SIGKILL)
        self.proc.wait(30)
        self._reader.join(10)

    def stop(self) -> None:
        if self.proc.poll() is None:
            self.proc.send_signal(signal.SIGINT)  # KeyboardInterrupt: closes via `finally`
            try:
                self.proc.wait(30)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait()


@contextmanager
def members(n: int, *args: object, **conf: object) -> Iterator[list[MemberProcess]]:
    started = [MemberProcess(*args, **conf) for _ in range(n)]  # type: ignore[arg-type]
    try:
        yield started
    finally:
        for m in started:
            m.stop()


def test_three_members_share_partitions_and_survive_kill_9(bootstrap: str, new_topic) -> None:
    topic = new_topic(partitions=6)
    group = f"{topic}-group"
    produce(bootstrap, topic, 6, 50, "first")
    with members(3, bootstrap, topic, group, **SHORT_SESSION) as procs:

        def owners() -> list[set[int]]:
            return [m.assignment() for m in procs if m.proc.poll() is None]

        def exactly_once(sets: list[set[int]]) -> bool:
            flat = [p for s in sets for p in s]
            return sorted(flat) == list(range(6)) and all(sets)

        wait_until(
            lambda: exactly_once(owners()),
            WAIT_S,
            what="every partition owned by exactly one member",
        )
        expected = {(p, o) for p in range(6) for o in range(50)}

        def all_consumed() -> set[tuple[int, int]]:
            out: set[tuple[int, int]] = set()
            for m in procs:
                out |= m.consumed()
            return out

        wait_until(lambda: expected <= all_consumed(), WAIT_S, what="the first 300 records")
        victim = next(m for m in procs if m.assignment())
        orphaned = victim.assignment()
        victim.kill()
        survivors = [m for m in procs if m is not victim]
        produce(bootstrap, topic, 6, 50, "second")
        # After the victim's session times out, the survivors own everything.
        wait_until(
            lambda: exactly_once([m.assignment() for m in survivors]),
            WAIT_S,
            what="the survivors to own all six partitions",
        )
        assert orphaned <= set().union(*(m.assignment() for m in survivors))
        ends = end_offsets(bootstrap, topic, 6)
        assert ends == dict.fromkeys(range(6), 100)
        everything = {(p, o) for p in range(6) for o in range(100)}
        wait_until(lambda: everything <= all_consumed(), WAIT_S, what="every record at least once")
        assert all_consumed() == everything  # and nothing that was never written
        for m in survivors:
            assert not m.errors, m.errors


# --- in-process consumers ----------------------------------------------------------------


def consumer(bootstrap: str, group: str, **conf: object) -> Consumer:
    return Consumer(
        {
            "bootstrap.servers": bootstrap,
            "group.id": group,
            "auto.offset.reset": "earliest",
            "enable.auto.commit": False,
            **conf,
        }
    )


class Tracked:
    """A subscribed consumer that records its rebalance callbacks."""

    def __init__(self, c: Consumer, topic: str, *, cooperative: bool = False) -> None:
        self.c = c
        self.assigned: list[list[int]] = []
        self.revoked: list[list[int]] = []
        self.owned: set[int] = set()
        # Cooperative callbacks carry only the change; eager ones the whole assignment.
        self.cooperative = cooperative
        c.subscribe([topic], on_assign=self._on_assign, on_revoke=self._on_revoke)

    def _on_assign(self, c: Consumer, partitions: list[TopicPartition]) -> None:
        ids = sorted(p.partition for p in partitions)
        self.assigned.append(ids)
        self.owned = self.owned | set(ids) if self.cooperative else set(ids)

    def _on_revoke(self, c: Consumer, partitions: list[TopicPartition]) -> None:
        ids = sorted(p.partition for p in partitions)
        self.revoked.append(ids)
        self.owned -= set(ids)

    def poll(self) -> None:
        msg = self.c.poll(0.05)
        if msg is not None and msg.error() is not None:
            assert msg.error().code() == KafkaError._PARTITION_EOF, msg.error()


def poll_until(tracked: list[Tracked], predicate: Callable[[], bool], what: str) -> None:
    deadline = time.monotonic() + WAIT_S
    while not predicate():
        if time.monotonic() > deadline:
            states = [(t.owned, t.assigned, t.revoked) for t in tracked]
            pytest.fail(f"timed out waiting for {what}: {states}")
        for t in tracked:
            t.poll()


def split_evenly(tracked: list[Tracked], partitions: int) -> bool:
    owned = [t.owned for t in tracked]
    flat = sorted(p for s in owned for p in s)
    sizes = {len(s) for s in owned}
    return flat == list(range(partitions)) and max(sizes) - min(sizes) <= 1


def test_commit_exit_resume_after_the_committed_offset(bootstrap: str, new_topic) -> None:
    topic = new_topic(partitions=1)
    group = f"{topic}-group"
    produce(bootstrap, topic, 1, 40, "r")
    c = consumer(bootstrap, group)
    try:
        c.subscribe([topic])
        got = []
        deadline = time.monotonic() + WAIT_S
        while len(got) < 25 and time.monotonic() < deadline:
            msg = c.poll(0.5)
            if msg is not None and msg.error() is None:
                got.append(msg)
        assert len(got) == 25
        # Commit the position after the 17th record, then exit.
        c.commit(offsets=[TopicPartition(topic, 0, got[16].offset() + 1)], asynchronous=False)
    finally:
        c.close()
    c2 = consumer(bootstrap, group)
    try:
        assert c2.committed([TopicPartition(topic, 0)], timeout=30)[0].offset == 17
        c2.subscribe([topic])
        deadline = time.monotonic() + WAIT_S
        first = None
        while first is None and time.monotonic() < deadline:
            msg = c2.poll(0.5)
            if msg is not None and msg.error() is None:
                first = msg
        assert first is not None
        assert first.offset() == 17
        assert first.value() == b"r-0-17"
    finally:
        c2.close()


def test_cooperative_sticky_keeps_partitions_of_survivors(bootstrap: str, new_topic) -> None:
    topic = new_topic(partitions=6)
    group = f"{topic}-group"
    conf = {"partition.assignment.strategy": "cooperative-sticky", **SHORT_SESSION}
    tracked = [
        Tracked(consumer(bootstrap, group, **conf), topic, cooperative=True) for _ in range(3)
    ]
    try:
        poll_until(tracked, lambda: split_evenly(tracked, 6), "three members with two each")
        leaving, survivors = tracked[2], tracked[:2]
        kept = [set(t.owned) for t in survivors]
        for t in survivors:
            t.assigned.clear()
            t.revoked.clear()
        leaving.c.close()
        tracked = survivors
        poll_until(survivors, lambda: split_evenly(survivors, 6), "two members with three each")
        for t, before in zip(survivors, kept, strict=True):
            # Incremental: nothing they kept was revoked, they only gained partitions.
            assert all(not r for r in t.revoked), t.revoked
            assert before <= t.owned
            gained = {p for a in t.assigned for p in a}
            assert gained == t.owned - before
    finally:
        for t in tracked:
            t.c.close()


def test_static_member_restart_keeps_assignment_without_rebalance(
    bootstrap: str, new_topic
) -> None:
    topic = new_topic(partitions=6)
    group = f"{topic}-group"
    conf = {"session.timeout.ms": 30000, "heartbeat.interval.ms": 500}
    a = Tracked(consumer(bootstrap, group, **{"group.instance.id": "a", **conf}), topic)
    b = Tracked(consumer(bootstrap, group, **{"group.instance.id": "b", **conf}), topic)
    restarted: Tracked | None = None
    try:
        poll_until([a, b], lambda: split_evenly([a, b], 6), "two static members with three each")
        before_a, before_b = set(a.owned), set(b.owned)
        b.assigned.clear()
        b.revoked.clear()
        a.c.close()  # a static member does not leave the group when it closes
        restarted = Tracked(consumer(bootstrap, group, **{"group.instance.id": "a", **conf}), topic)
        poll_until([restarted, b], lambda: restarted.owned == before_a, "a's partitions back")
        # The other member went on undisturbed: no revocation, no new assignment.
        for _ in range(20):
            b.poll()
        assert b.revoked == [] and b.assigned == []
        assert b.owned == before_b
        admin = AdminClient({"bootstrap.servers": bootstrap})
        described = admin.describe_consumer_groups([group])[group].result(30)
        assert sorted(m.group_instance_id for m in described.members) == ["a", "b"]
    finally:
        if restarted is not None:
            restarted.c.close()
        b.c.close()


# --- the broker restarts -------------------------------------------------------------------


@pytest.mark.parametrize("kill", [False, True], ids=["sigterm", "sigkill"])
def test_groups_and_offsets_survive_broker_restart(broker_factory, kill: bool) -> None:
    broker = broker_factory()
    bootstrap = broker.bootstrap
    admin = AdminClient({"bootstrap.servers": bootstrap})
    topic = "restart-topic"
    admin.create_topics([NewTopic(topic, 3, 1)])[topic].result(60)
    wait_until(
        lambda: len(admin.list_topics(topic, timeout=10).topics[topic].partitions) == 3,
        WAIT_S,
        what="topic",
    )
    produce(bootstrap, topic, 3, 10, "r")
    committed = {p: 3 + p for p in range(3)}
    c = consumer(bootstrap, "restart-group")
    try:
        c.subscribe([topic])
        deadline = time.monotonic() + WAIT_S
        while not c.assignment() and time.monotonic() < deadline:
            c.poll(0.2)
        assert len(c.assignment()) == 3
        c.commit(
            offsets=[TopicPartition(topic, p, o) for p, o in committed.items()], asynchronous=False
        )
    finally:
        c.close()
    simple = consumer(bootstrap, "standalone-committer")
    try:
        simple.commit(offsets=[TopicPartition(topic, 0, 9)], asynchronous=False)
    finally:
        simple.close()

    broker.restart(kill=kill)

    admin = AdminClient({"bootstrap.servers": bootstrap})

    def listed() -> set[str]:
        # While the coordinator still loads, ListGroups answers COORDINATOR_LOAD_IN_PROGRESS.
        result = admin.list_consumer_groups().result(30)
        return {g.group_id for g in result.valid} if not result.errors else set()

    wait_until(
        lambda: {"restart-group", "standalone-committer"} <= listed(), WAIT_S, what="groups listed"
    )
    described = admin.describe_consumer_groups(["restart-group"])["restart-group"].result(30)
    assert described.state.name == "EMPTY"
    probe = consumer(bootstrap, "restart-group")
    try:
        got = probe.committed([TopicPartition(topic, p) for p in range(3)], timeout=30)
        assert {tp.partition: tp.offset for tp in got} == committed
        other = consumer(bootstrap, "standalone-committer")
        try:
            (tp,) = other.committed([TopicPartition(topic, 0)], timeout=30)
            assert tp.offset == 9
        finally:
            other.close()
        # A member of the group resumes where the group left off.
        assert first_offsets(probe, topic, 3, WAIT_S) == committed
    finally:
        probe.close()
