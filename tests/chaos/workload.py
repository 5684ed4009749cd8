"""The clients of a chaos run: idempotent acks=all producers, a consumer group and a free
reader, each on its own thread, logging everything they see into the History.

Every value is unique (`<session>-<seq>`, a session being one producer instance), so the checker
can follow each record. Producers write round-robin over the partitions; a producer that hits a
fatal error is replaced by a new session. Group members commit what they read every second and
on revocation; an observer asks the coordinator for the group's committed offsets meanwhile.
"""

from __future__ import annotations

import logging
import random
import threading
import time
from typing import Any

from confluent_kafka import (
    OFFSET_BEGINNING,
    Consumer,
    KafkaError,
    KafkaException,
    Producer,
    TopicPartition,
)
from history import ACK, ASSIGN, COMMIT, COMMITTED, FAIL, READ, SEND, History

log = logging.getLogger("chaos")

TOPIC = "chaos"
GROUP = "chaos-group"

PRODUCER_CONFIG = {
    "enable.idempotence": True,
    "acks": "all",
    "linger.ms": 5,
    # librdkafka's timeouts are left at their defaults (message 300 s, request 30 s, socket 60 s):
    # when a request times out in the client while in flight (or a record's message timeout
    # expires), librdkafka bumps the producer epoch and sends what it had not seen acknowledged
    # again under the new epoch, which no broker can tell from new records: duplicates that
    # are the client's (its INTRODUCTION.md says so), not the broker's.
    "retry.backoff.ms": 200,
    "metadata.max.age.ms": 5000,
    "topic.metadata.refresh.interval.ms": 2000,
    "log_level": 3,
}
CONSUMER_CONFIG = {
    "enable.auto.commit": False,
    "auto.offset.reset": "earliest",
    "session.timeout.ms": 10000,
    "heartbeat.interval.ms": 1000,
    "max.poll.interval.ms": 60000,
    "metadata.max.age.ms": 5000,
    "topic.metadata.refresh.interval.ms": 2000,
    "log_level": 3,
}


class Worker(threading.Thread):
    def __init__(self, name: str, history: History, bootstrap: str) -> None:
        super().__init__(name=name, daemon=True)
        self.history = history
        self.bootstrap = bootstrap
        self.stopping = threading.Event()
        self.error: BaseException | None = None

    def run(self) -> None:
        try:
            self.work()
        except BaseException as e:  # noqa: BLE001 - reported by the runner
            self.error = e
            log.exception("%s failed", self.name)

    def work(self) -> None:
        raise NotImplementedError

    def stop(self) -> None:
        self.stopping.set()


class ProducerWorker(Worker):
    """Sends `rate` records a second round-robin over `partitions` until stopped."""

    def __init__(
        self, name: str, history: History, bootstrap: str, partitions: int, rate: float
    ) -> None:
        super().__init__(name, history, bootstrap)
        self.partitions = partitions
        self.interval = 1.0 / rate
        self.sessions = 0
        self.drain_timeout = 60.0

    def work(self) -> None:
        while not self.stopping.is_set():
            self.sessions += 1
            self._session(f"{self.name}.{self.sessions}")

    def _session(self, session: str) -> None:
        fatal = threading.Event()

        def on_error(err: KafkaError) -> None:
            if err.fatal():
                log.warning("%s: fatal producer error %s; new session", session, err)
                fatal.set()

        producer = Producer(
            {"bootstrap.servers": self.bootstrap, "error_cb": on_error, **PRODUCER_CONFIG}
        )
        h = self.history
        seq = 0
        next_at = time.monotonic()
        while not self.stopping.is_set() and not fatal.is_set():
            value = f"{session}-{seq}"
            partition = seq % self.partitions
            sent = {"producer": session, "partition": partition, "value": value, "seq": seq}

            def delivered(err: Any, msg: Any, sent: dict[str, Any] = sent) -> None:
                if err is None:
                    h.add(ACK, **sent, offset=msg.offset())
                else:
                    h.add(FAIL, **sent, error=str(err.name()))

            try:
                producer.produce(TOPIC, value.encode(), partition=partition, on_delivery=delivered)
            except BufferError:
                producer.poll(0.5)
                continue
            except KafkaException as e:
                log.warning("%s: produce refused: %s", session, e)
                break
            h.add(SEND, **sent)
            seq += 1
            next_at += self.interval
            producer.poll(max(0.0, next_at - time.monotonic()))
        left = producer.flush(self.drain_timeout)
        if left:
            log.warning("%s: %d records still undelivered at the end", session, left)


class GroupConsumer(Worker):
    """A member of GROUP: records receipts, commits positions each second and on revocation."""

    def __init__(self, name: str, history: History, bootstrap: str) -> None:
        super().__init__(name, history, bootstrap)
        self.positions: dict[int, int] = {}  # partition -> next offset to commit
        self.committed: dict[int, int] = {}

    def work(self) -> None:
        h = self.history
        consumer = Consumer(
            {"bootstrap.servers": self.bootstrap, "group.id": GROUP, **CONSUMER_CONFIG}
        )

        def on_assign(c: Consumer, tps: list[TopicPartition]) -> None:
            h.add(ASSIGN, consumer=self.name, group=GROUP, partitions=[tp.partition for tp in tps])

        def on_revoke(c: Consumer, tps: list[TopicPartition]) -> None:
            self._commit(c)
            for tp in tps:
                self.positions.pop(tp.partition, None)
                self.committed.pop(tp.partition, None)

        consumer.subscribe([TOPIC], on_assign=on_assign, on_revoke=on_revoke)
        last_commit = time.monotonic()
        try:
            while not self.stopping.is_set():
                msg = consumer.poll(0.5)
                if msg is not None and not msg.error():
                    p = msg.partition()
                    h.add(READ, consumer=self.name, partition=p, offset=msg.offset(),
                          value=msg.value().decode())  # fmt: skip
                    self.positions[p] = msg.offset() + 1
                if time.monotonic() - last_commit >= 1.0:
                    self._commit(consumer)
                    last_commit = time.monotonic()
            self._commit(consumer)
        finally:
            consumer.close()

    def _commit(self, consumer: Consumer) -> None:
        due = [
            TopicPartition(TOPIC, p, o)
            for p, o in self.positions.items()
            if self.committed.get(p) != o
        ]
        if not due:
            return
        try:
            result = consumer.commit(offsets=due, asynchronous=False)
        except KafkaException as e:
            log.info("%s: commit failed: %s", self.name, e)
            return
        for tp in result or []:
            if tp.error is None:
                self.history.add(COMMIT, consumer=self.name, group=GROUP,
                                 partition=tp.partition, offset=tp.offset)  # fmt: skip
                self.committed[tp.partition] = tp.offset


class FreeReader(Worker):
    """Reads every partition from the beginning without a group (assign), as fast as it can."""

    def __init__(self, name: str, history: History, bootstrap: str, partitions: int) -> None:
        super().__init__(name, history, bootstrap)
        self.partitions = partitions

    def work(self) -> None:
        h = self.history
        consumer = Consumer(
            {"bootstrap.servers": self.bootstrap, "group.id": f"{GROUP}-free", **CONSUMER_CONFIG}
        )
        parts = list(range(self.partitions))
        consumer.assign([TopicPartition(TOPIC, p, OFFSET_BEGINNING) for p in parts])
        h.add(ASSIGN, consumer=self.name, group=None, partitions=parts)
        try:
            while not self.stopping.is_set():
                msg = consumer.poll(0.5)
                if msg is not None and not msg.error():
                    h.add(READ, consumer=self.name, partition=msg.partition(),
                          offset=msg.offset(), value=msg.value().decode())  # fmt: skip
        finally:
            consumer.close()


class OffsetObserver(Worker):
    """Asks the coordinator for GROUP's committed offsets every second (OffsetFetch)."""

    def __init__(self, name: str, history: History, bootstrap: str, partitions: int) -> None:
        super().__init__(name, history, bootstrap)
        self.partitions = partitions

    def observe(self, consumer: Consumer, timeout: float = 10.0) -> bool:
        started = self.history.now()
        try:
            got = consumer.committed(
                [TopicPartition(TOPIC, p) for p in range(self.partitions)], timeout=timeout
            )
        except KafkaException:
            return False
        for tp in got:
            if tp.error is None and tp.offset >= 0:
                self.history.add(COMMITTED, group=GROUP, partition=tp.partition,
                                 offset=tp.offset, started=started)  # fmt: skip
        return True

    def observe_once(self, bootstrap: str) -> bool:
        """One observation with a consumer of its own (after the workload stopped)."""
        consumer = Consumer({"bootstrap.servers": bootstrap, "group.id": GROUP, **CONSUMER_CONFIG})
        try:
            return self.observe(consumer, timeout=30.0)
        finally:
            consumer.close()

    def work(self) -> None:
        consumer = Consumer({"bootstrap.servers": self.bootstrap, "group.id": GROUP,
                             **CONSUMER_CONFIG})  # fmt: skip
        try:
            while not self.stopping.wait(1.0):
                self.observe(consumer)
        finally:
            consumer.close()


class Workload:
    def __init__(
        self,
        history: History,
        bootstrap: str,
        partitions: int,
        rng: random.Random,
        producers: int = 2,
        rate: float = 40.0,
        members: int = 2,
    ) -> None:
        self.history = history
        self.bootstrap = bootstrap
        self.partitions = partitions
        self.producers = [
            ProducerWorker(f"p{i}", history, bootstrap, partitions, rate)
            for i in range(1, producers + 1)
        ]
        self.consumers: list[Worker] = [
            GroupConsumer(f"g{i}", history, bootstrap) for i in range(1, members + 1)
        ]
        self.consumers.append(FreeReader("r1", history, bootstrap, partitions))
        self.observer = OffsetObserver("o1", history, bootstrap, partitions)

    @property
    def workers(self) -> list[Worker]:
        return [*self.producers, *self.consumers, self.observer]

    def start(self) -> None:
        for w in self.workers:
            w.start()

    def stop_producers(self, timeout: float) -> None:
        for w in self.producers:
            w.stop()
        deadline = time.monotonic() + timeout
        for w in self.producers:
            w.join(max(0.0, deadline - time.monotonic()))

    def stop_consumers(self, timeout: float) -> None:
        for w in [*self.consumers, self.observer]:
            w.stop()
        deadline = time.monotonic() + timeout
        for w in [*self.consumers, self.observer]:
            w.join(max(0.0, deadline - time.monotonic()))

    def errors(self) -> list[str]:
        return [f"{w.name}: {w.error!r}" for w in self.workers if w.error is not None]

    def caught_up(self, ends: dict[int, int]) -> bool:
        """The group has committed, and the free reader received, everything up to `ends`."""
        reads: dict[int, int] = {}
        for e in self.history.of(READ):
            if e["consumer"] == "r1":
                reads[e["partition"]] = max(reads.get(e["partition"], -1), e["offset"])
        committed: dict[int, int] = {}
        for e in self.history.of(COMMIT):
            committed[e["partition"]] = max(committed.get(e["partition"], -1), e["offset"])
        return all(
            end == 0 or (reads.get(p, -1) >= end - 1 and committed.get(p, -1) >= end)
            for p, end in ends.items()
        )


def read_all(
    bootstrap: str, partitions: int, timeout: float = 120.0
) -> dict[int, list[tuple[int, str]]]:
    """Every record of every partition, from offset 0 to the high watermark."""
    consumer = Consumer(
        {"bootstrap.servers": bootstrap, "group.id": f"{GROUP}-final", **CONSUMER_CONFIG}
    )
    out: dict[int, list[tuple[int, str]]] = {p: [] for p in range(partitions)}
    try:
        ends = end_offsets(consumer, partitions)
        consumer.assign([TopicPartition(TOPIC, p, OFFSET_BEGINNING) for p in range(partitions)])
        deadline = time.monotonic() + timeout
        while any(out[p][-1][0] < ends[p] - 1 if out[p] else ends[p] > 0 for p in out):
            if time.monotonic() > deadline:
                raise TimeoutError(f"final read incomplete: ends {ends}, got "
                                   f"{ {p: len(v) for p, v in out.items()} }")  # fmt: skip
            msg = consumer.poll(1.0)
            if msg is None or msg.error():
                continue
            out[msg.partition()].append((msg.offset(), msg.value().decode()))
        return out
    finally:
        consumer.close()


def end_offsets(consumer: Consumer, partitions: int) -> dict[int, int]:
    return {
        p: consumer.get_watermark_offsets(TopicPartition(TOPIC, p), timeout=30)[1]
        for p in range(partitions)
    }


def probe(bootstrap: str, partitions: int, history: History, timeout: float = 30.0) -> bool:
    """One acks=all record to each partition, recorded like any other; True if all are acked."""
    session = f"probe.{int(history.now() * 1000)}"
    producer = Producer({"bootstrap.servers": bootstrap, **PRODUCER_CONFIG,
                         "message.timeout.ms": int(timeout * 1000)})  # fmt: skip
    acked = []
    for p in range(partitions):
        sent = {"producer": session, "partition": p, "value": f"{session}-{p}", "seq": p}

        def delivered(err: Any, msg: Any, sent: dict[str, Any] = sent) -> None:
            if err is None:
                history.add(ACK, **sent, offset=msg.offset())
                acked.append(sent)
            else:
                history.add(FAIL, **sent, error=str(err.name()))

        producer.produce(TOPIC, sent["value"].encode(), partition=p, on_delivery=delivered)
        history.add(SEND, **sent)
    producer.flush(timeout + 5)
    return len(acked) == partitions
