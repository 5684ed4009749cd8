"""Transactions on three brokers in a real ZooKeeper ensemble: kill -9 the transaction
coordinator's broker, and separately a partition leader, while a confluent-kafka transactional
producer runs many short transactions. The test records what the producer was told about each
transaction and compares with what a read_committed consumer sees afterwards: every committed
transaction exactly once, nothing of an aborted one, no duplicate.
"""

from __future__ import annotations

import threading
import time
import uuid
from collections import Counter
from collections.abc import Callable, Iterator

import pytest
from cluster import Cluster, ClusterBroker, run
from confluent_kafka import Consumer, KafkaError, KafkaException, Producer, TopicPartition
from odradek.broker.client.connection import BrokerConnection
from odradek.broker.protocol.api_keys import ApiKey
from odradek.broker.testing.zookeeper import ZkEnsemble

PARTITIONS = 3
RECORDS_PER_TXN = 6
TIMEOUT = 120


@pytest.fixture(scope="module")
def cluster(zk_ensemble: ZkEnsemble, tmp_path_factory: pytest.TempPathFactory) -> Iterator[Cluster]:
    """Three brokers shared by this module's tests; each test restarts what it kills."""
    c = Cluster(
        zk_ensemble,
        tmp_path_factory.mktemp("txn-cluster"),
        3,
        {"transaction.abort.timed.out.transaction.cleanup.interval.ms": "1000"},
    )
    try:
        yield c.start()
    finally:
        c.stop()


def bootstrap(c: Cluster) -> str:
    return ",".join(b.bootstrap for b in c.brokers.values())


def create_topic(c: Cluster) -> str:
    topic = f"txn-{uuid.uuid4().hex[:8]}"
    c.create_topic(topic, PARTITIONS, 3)

    def led_everywhere() -> bool:
        for b in c.running():
            [t] = b.metadata([topic])["topics"]
            if t["error_code"] or len(t["partitions"]) != PARTITIONS:
                return False
            if any(p["leader_id"] < 0 or len(p["isr_nodes"]) != 3 for p in t["partitions"]):
                return False
        return True

    c.wait_until(led_everywhere, f"leaders and full ISRs of {topic}")
    return topic


def coordinator_of(c: Cluster, txn_id: str) -> int:
    async def ask(b) -> int:
        conn = await BrokerConnection.open(b.host, b.port, request_timeout=15.0)
        try:
            resp = await conn.request(ApiKey.FIND_COORDINATOR, {"key": txn_id, "key_type": 1}, 2)
        finally:
            await conn.close()
        assert resp["error_code"] == 0, resp
        return resp["node_id"]

    return c.wait_until(lambda: run(ask(c.running()[0])), f"the coordinator of {txn_id}")


def leader_of(c: Cluster, topic: str, partition: int) -> int:
    [t] = c.running()[0].metadata([topic])["topics"]
    return next(p["leader_id"] for p in t["partitions"] if p["partition_index"] == partition)


class TxnWorkload:
    """Short transactions in a thread; `outcomes[n]` is what the producer was told about
    transaction n ("committed", "aborted" or "unknown") and `values[n]` what it wrote."""

    def __init__(self, c: Cluster, topic: str, txn_id: str) -> None:
        self.cluster = c
        self.topic = topic
        self.txn_id = txn_id
        self.outcomes: dict[int, str] = {}
        self.values: dict[int, list[bytes]] = {}
        self.errors: list[str] = []
        self.stop = threading.Event()
        self.thread = threading.Thread(target=self._run, daemon=True)

    def _producer(self) -> Producer:
        p = Producer(
            {
                "bootstrap.servers": bootstrap(self.cluster),
                "transactional.id": self.txn_id,
                "transaction.timeout.ms": 30000,
                "linger.ms": 2,
            }
        )
        self._retrying("init", lambda: p.init_transactions(30))
        return p

    def _retrying(self, what: str, call: Callable[[], None]) -> None:
        """`call` again while it fails with a retriable error, for TIMEOUT seconds at most."""
        deadline = time.monotonic() + TIMEOUT
        while True:
            try:
                call()
                return
            except KafkaException as e:
                if not e.args[0].retriable() or time.monotonic() > deadline:
                    raise
                self.errors.append(f"{what} retried: {e}")

    def _run(self) -> None:
        p = self._producer()
        n = 0
        while not self.stop.is_set():
            n += 1
            vals = [f"{n}-{i}".encode() for i in range(RECORDS_PER_TXN)]
            self.values[n] = vals
            self.outcomes[n] = "unknown"
            try:
                p.begin_transaction()
                for i, v in enumerate(vals):
                    p.produce(self.topic, value=v, partition=i % PARTITIONS)
                self.outcomes[n] = self._commit(p)
            except KafkaException as e:
                self.errors.append(f"txn {n}: {e}")
                err: KafkaError = e.args[0]
                if err.txn_requires_abort():
                    self.outcomes[n] = self._abort(p)
                elif err.fatal():
                    p = self._producer()  # fences the old one; its transaction is aborted
                # retriable: the next begin_transaction fails until it is resolved
                time.sleep(0.2)

    def _commit(self, p: Producer) -> str:
        self._retrying("commit", lambda: p.commit_transaction(20))
        return "committed"

    def _abort(self, p: Producer) -> str:
        try:
            self._retrying("abort", lambda: p.abort_transaction(20))
        except KafkaException:
            return "unknown"
        return "aborted"

    def committed_count(self) -> int:
        return sum(1 for o in list(self.outcomes.values()) if o == "committed")

    def wait_commits(self, n: int) -> None:
        deadline = time.monotonic() + TIMEOUT
        while self.committed_count() < n:
            assert self.thread.is_alive(), f"the producer died: {self.errors[-5:]}"
            assert time.monotonic() < deadline, f"no progress: {self.errors[-5:]}"
            time.sleep(0.1)

    def finish(self) -> None:
        self.stop.set()
        self.thread.join(TIMEOUT)
        assert not self.thread.is_alive(), "the producer did not stop"


def read_committed(c: Cluster, topic: str) -> list[bytes]:
    consumer = Consumer(
        {
            "bootstrap.servers": bootstrap(c),
            "group.id": f"check-{uuid.uuid4().hex[:8]}",
            "isolation.level": "read_committed",
            "enable.auto.commit": False,
            "enable.partition.eof": True,
        }
    )
    tps = [TopicPartition(topic, p, 0) for p in range(PARTITIONS)]
    consumer.assign(tps)
    out, eof = [], set()
    deadline = time.monotonic() + TIMEOUT
    try:
        while len(eof) < PARTITIONS:
            assert time.monotonic() < deadline, f"partitions {eof} of {PARTITIONS} read to the end"
            m = consumer.poll(0.5)
            if m is None:
                continue
            if m.error():
                if m.error().code() == KafkaError._PARTITION_EOF:
                    eof.add(m.partition())
                continue
            out.append(m.value())
    finally:
        consumer.close()
    return out


def check(w: TxnWorkload, seen: list[bytes]) -> None:
    counts = Counter(seen)
    assert [v for v, k in counts.items() if k > 1] == [], "duplicates"
    produced = {v: n for n, vals in w.values.items() for v in vals}
    assert set(counts) <= set(produced), "records nobody produced"
    for n, outcome in w.outcomes.items():
        present = [v in counts for v in w.values[n]]
        if outcome == "committed":
            assert all(present), f"committed transaction {n} lost records"
        elif outcome == "aborted":
            assert not any(present), f"aborted transaction {n} is visible"
        else:
            assert all(present) or not any(present), f"transaction {n} is half visible"
    assert w.committed_count() >= 10


def started_workload(cluster: Cluster) -> TxnWorkload:
    """A transactional producer busy on a new topic, five commits in."""
    topic = create_topic(cluster)
    w = TxnWorkload(cluster, topic, f"{topic}-producer")
    w.thread.start()
    w.wait_commits(5)
    return w


def restart_and_check(cluster: Cluster, w: TxnWorkload, victim: ClusterBroker) -> None:
    """Bring the killed broker back, let five more transactions commit, then stop and check
    every outcome against what a read_committed consumer sees."""
    victim.start()
    w.wait_commits(w.committed_count() + 5)
    w.finish()
    check(w, read_committed(cluster, w.topic))


def test_kill9_of_the_transaction_coordinator(cluster: Cluster) -> None:
    w = started_workload(cluster)
    txn_id = w.txn_id
    victim = cluster[coordinator_of(cluster, txn_id)]
    victim.kill()
    before = w.committed_count()
    w.wait_commits(before + 5)  # the coordinator moved to another broker
    assert coordinator_of(cluster, txn_id) != victim.broker_id
    restart_and_check(cluster, w, victim)


def test_kill9_of_a_partition_leader(cluster: Cluster) -> None:
    w = started_workload(cluster)
    topic, txn_id = w.topic, w.txn_id
    coordinator = coordinator_of(cluster, txn_id)
    # A leader of the topic that is not the transaction coordinator.
    victim_id = next(
        (ld for p in range(PARTITIONS) if (ld := leader_of(cluster, topic, p)) != coordinator),
        None,
    )
    if victim_id is None:  # every partition led by the coordinator: take any other broker
        victim_id = next(i for i in cluster.brokers if i != coordinator)
    victim = cluster[victim_id]
    victim.kill()
    w.wait_commits(w.committed_count() + 5)
    restart_and_check(cluster, w, victim)
