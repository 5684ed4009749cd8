"""Transactions on one broker, with real clients: confluent-kafka's transactional producer and
read_committed consumer, aiokafka's transactional producer, Kafka's Java producer and console
consumer, a consume-transform-produce application killed with SIGKILL, zombie fencing, the
coordinator's timeout, a broker killed with open transactions, and Kafka's dump tool on our
segments.
"""

from __future__ import annotations

import asyncio
import os
import select
import signal
import subprocess
import sys
import time
import uuid
from collections import Counter
from pathlib import Path

import pytest
import test_clients_java as java_tools
from confluent_kafka import Consumer, KafkaError, KafkaException, Producer, TopicPartition
from conftest import EXTERNAL_BOOTSTRAP, OdradekBroker, retire
from odradek.broker import kafka_tools
from odradek.broker.client.admin import AdminClient
from odradek.broker.client.blocking import BlockingConnection
from odradek.broker.protocol.api_keys import ApiKey
from odradek.broker.storage.txn_index import ENTRY_SIZE
from polling import wait_until

HERE = Path(__file__).resolve().parent
# Kafka's tool runner, shared with the Java client tests (kafka_libs comes from conftest).
kafka = java_tools.kafka
CONSOLE_CONSUMER = java_tools.CONSOLE_CONSUMER
TIMEOUT = 60

# The coordinator checks for timed-out transactions every half second here (10 s by default).
# Request quotas over two one-second samples (the quota test's window).
OVERRIDES = {
    "transaction.abort.timed.out.transaction.cleanup.interval.ms": "500",
    "quota.window.num": "2",
    "quota.window.size.seconds": "1",
}


@pytest.fixture(scope="module")
def broker(tmp_path_factory: pytest.TempPathFactory):
    """This module's broker (shared by its tests, each with its own topics and ids)."""
    if EXTERNAL_BOOTSTRAP:
        pytest.skip("these tests read the broker's files and change its settings")
    base = tmp_path_factory.mktemp("txn-broker")
    proc = OdradekBroker(base / "data", base / "logs", overrides=OVERRIDES)
    try:
        yield proc.start()
    finally:
        retire(proc)


def txn_producer(bootstrap: str, txn_id: str, **conf) -> Producer:
    p = Producer({"bootstrap.servers": bootstrap, "transactional.id": txn_id, **conf})
    p.init_transactions(TIMEOUT)
    return p


def consume_all(
    bootstrap: str, topics: list[str], partitions: int, isolation: str
) -> list[tuple[str, int, int, bytes]]:
    """Every record of the topics (from the start to the end) under `isolation`."""
    c = Consumer(
        {
            "bootstrap.servers": bootstrap,
            "group.id": f"reader-{uuid.uuid4().hex[:8]}",
            "isolation.level": isolation,
            "enable.partition.eof": True,
            "enable.auto.commit": False,
        }
    )
    tps = [TopicPartition(t, p, 0) for t in topics for p in range(partitions)]
    c.assign(tps)
    out, eof = [], set()
    deadline = time.monotonic() + TIMEOUT
    while len(eof) < len(tps):
        assert time.monotonic() < deadline, f"end of {sorted(set(tps) - eof)} not reached"
        m = c.poll(0.5)
        if m is None:
            continue
        if m.error():
            assert m.error().code() == KafkaError._PARTITION_EOF, m.error()
            eof.add(TopicPartition(m.topic(), m.partition(), 0))
            continue
        out.append((m.topic(), m.partition(), m.offset(), m.value()))
    c.close()
    return out


def watermarks(bootstrap: str, topic: str, partition: int, isolation: str) -> tuple[int, int]:
    c = Consumer({"bootstrap.servers": bootstrap, "group.id": "wm", "isolation.level": isolation})
    try:
        return c.get_watermark_offsets(TopicPartition(topic, partition), timeout=TIMEOUT)
    finally:
        c.close()


def values(records) -> list[bytes]:
    return sorted(r[3] for r in records)


# --- confluent-kafka ----------------------------------------------------------------------------


def test_commit_abort_and_isolation_levels(bootstrap: str, new_topic) -> None:
    topics = [new_topic(partitions=2, suffix=f"-{i}") for i in range(3)]
    p = txn_producer(bootstrap, f"tx-{topics[0]}")
    for outcome in ("commit", "abort"):
        p.begin_transaction()
        for t in topics:
            for part in range(2):
                p.produce(t, value=f"{outcome}-{t}-{part}".encode(), partition=part)
        if outcome == "commit":
            p.commit_transaction(TIMEOUT)
        else:
            p.flush(TIMEOUT)
            p.abort_transaction(TIMEOUT)
    committed = [f"commit-{t}-{part}".encode() for t in topics for part in range(2)]
    aborted = [f"abort-{t}-{part}".encode() for t in topics for part in range(2)]
    assert values(consume_all(bootstrap, topics, 2, "read_committed")) == sorted(committed)
    assert values(consume_all(bootstrap, topics, 2, "read_uncommitted")) == sorted(
        committed + aborted
    )
    # Each partition: data, COMMIT, data, ABORT; both levels end at 4.
    assert watermarks(bootstrap, topics[0], 0, "read_committed") == (0, 4)
    # An open transaction holds the last stable offset back for read_committed only.
    p.begin_transaction()
    p.produce(topics[0], value=b"open", partition=0)
    p.flush(TIMEOUT)
    assert watermarks(bootstrap, topics[0], 0, "read_uncommitted") == (0, 5)
    assert watermarks(bootstrap, topics[0], 0, "read_committed") == (0, 4)
    p.commit_transaction(TIMEOUT)
    assert watermarks(bootstrap, topics[0], 0, "read_committed") == (0, 6)
    assert b"open" in values(consume_all(bootstrap, topics[:1], 2, "read_committed"))


def test_zombie_producer_is_fenced(bootstrap: str, new_topic) -> None:
    topic = new_topic(partitions=1)
    txn_id = f"zombie-{topic}"
    old = txn_producer(bootstrap, txn_id)
    old.begin_transaction()
    old.produce(topic, value=b"zombie-1")
    old.flush(TIMEOUT)
    new = txn_producer(bootstrap, txn_id)  # fences `old` and aborts its transaction
    new.begin_transaction()
    new.produce(topic, value=b"live")
    new.commit_transaction(TIMEOUT)
    with pytest.raises(KafkaException) as info:
        old.produce(topic, value=b"zombie-2")
        old.commit_transaction(TIMEOUT)
    assert info.value.args[0].fatal(), info.value
    assert values(consume_all(bootstrap, [topic], 1, "read_committed")) == [b"live"]


def test_open_transaction_past_its_timeout_is_aborted(bootstrap: str, new_topic) -> None:
    topic = new_topic(partitions=1)
    p = txn_producer(bootstrap, f"slow-{topic}", **{"transaction.timeout.ms": 2000})
    p.begin_transaction()
    p.produce(topic, value=b"never")
    p.flush(TIMEOUT)
    assert watermarks(bootstrap, topic, 0, "read_committed") == (0, 0)
    deadline = time.monotonic() + TIMEOUT
    # The coordinator aborts it (ABORT marker at offset 1): the LSO moves past it.
    while watermarks(bootstrap, topic, 0, "read_committed") != (0, 2):
        assert time.monotonic() < deadline, "the timed-out transaction was never aborted"
        time.sleep(0.5)
    assert consume_all(bootstrap, [topic], 1, "read_committed") == []
    with pytest.raises(KafkaException):
        p.commit_transaction(TIMEOUT)


def test_transactional_requests_count_against_request_quotas(bootstrap: str) -> None:
    """A client over its request_percentage is throttled on transactional requests too."""
    client_id = f"txn-quota-{uuid.uuid4().hex[:8]}"
    txn_id = f"{client_id}-tx"

    async def set_quota() -> None:
        async with AdminClient(bootstrap) as admin:
            await admin.alter_client_quotas(
                {(("client-id", client_id),): {"request_percentage": 0.1}}
            )

    asyncio.run(asyncio.wait_for(set_quota(), 30))
    host, _, port = bootstrap.rpartition(":")
    with BlockingConnection(host, int(port), client_id=client_id, timeout=TIMEOUT) as conn:
        found = conn.call(ApiKey.FIND_COORDINATOR, 3, {"key": txn_id, "key_type": 1})
        assert found["error_code"] == 0
        throttles = []
        for _ in range(200):
            resp = conn.call(
                ApiKey.INIT_PRODUCER_ID,
                4,
                {"transactional_id": txn_id, "transaction_timeout_ms": 60000},
            )
            throttles.append(resp["throttle_time_ms"])
            if resp["throttle_time_ms"] > 0:
                break
    assert throttles[-1] > 0, "never throttled"


# --- consume-transform-produce, the application killed in a transaction -------------------------


def test_consume_transform_produce_exactly_once_across_a_kill(bootstrap: str, new_topic) -> None:
    src = new_topic(partitions=2, suffix="-in")
    dst = new_topic(partitions=2, suffix="-out")
    total = 400
    p = Producer({"bootstrap.servers": bootstrap, "enable.idempotence": True})
    for i in range(total):
        p.produce(src, key=str(i).encode(), value=f"v{i}".encode(), partition=i % 2)
    p.flush(TIMEOUT)
    group, txn_id = f"{src}-app", f"{src}-app-txn"
    args = [sys.executable, str(HERE / "txn_app.py"), bootstrap, src, dst, group, txn_id]

    app = subprocess.Popen(
        [*args, str(total), "1.0"], stdout=subprocess.PIPE, text=True, env=os.environ
    )
    try:
        assert app.stdout is not None
        seen: list[str] = []
        deadline = time.monotonic() + TIMEOUT * 2
        # Kill it inside its third transaction, after producing and before committing.
        while "produced 3" not in seen:
            remaining = deadline - time.monotonic()
            assert remaining > 0, f"no progress: {seen}"
            ready, _, _ = select.select([app.stdout], [], [], remaining)
            if not ready:
                continue
            line = app.stdout.readline()
            assert line, f"the application exited early: {seen}"
            seen.append(line.strip())
        app.send_signal(signal.SIGKILL)
        app.wait(TIMEOUT)
    finally:
        if app.poll() is None:
            app.kill()
    # The killed transaction's records are in the log, not committed.
    uncommitted = consume_all(bootstrap, [dst], 2, "read_uncommitted")
    assert len(uncommitted) > len(consume_all(bootstrap, [dst], 2, "read_committed"))

    done = subprocess.run([*args, str(total), "0"], capture_output=True, text=True, timeout=180)
    assert done.returncode == 0, done.stderr[-3000:]
    out = consume_all(bootstrap, [dst], 2, "read_committed")
    counts = Counter(v for _, _, _, v in out)
    assert sorted(counts) == sorted(f"V{i}".encode() for i in range(total))
    assert set(counts.values()) == {1}, [v for v, n in counts.items() if n > 1]
    c = Consumer({"bootstrap.servers": bootstrap, "group.id": group})
    committed = c.committed([TopicPartition(src, 0), TopicPartition(src, 1)], timeout=TIMEOUT)
    c.close()
    assert [tp.offset for tp in committed] == [total // 2, total // 2]


# --- aiokafka, Kafka's Java clients and tools --------------------------------------------------


def test_aiokafka_transactional_producer(bootstrap: str, new_topic) -> None:
    from aiokafka import AIOKafkaProducer

    topic = new_topic(partitions=2)

    async def scenario() -> None:
        producer = AIOKafkaProducer(bootstrap_servers=bootstrap, transactional_id=f"aio-{topic}")
        await producer.start()
        try:
            async with producer.transaction():
                for i in range(10):
                    await producer.send(topic, f"aio-{i}".encode(), partition=i % 2)
            await producer.begin_transaction()
            await producer.send_and_wait(topic, b"aio-aborted", partition=0)
            await producer.abort_transaction()
        finally:
            await producer.stop()

    asyncio.run(asyncio.wait_for(scenario(), 120))
    got = values(consume_all(bootstrap, [topic], 2, "read_committed"))
    assert got == sorted(f"aio-{i}".encode() for i in range(10))


PERF_PRODUCER = "kafka-producer-perf-test.sh"


def test_java_transactional_producer_and_read_committed_console_consumer(
    kafka,
    kafka_libs: Path,
    bootstrap: str,
    new_topic,
) -> None:
    topic = new_topic(partitions=3)
    n = 3000
    # First an aborted transaction at the start of every partition, then Kafka's own
    # transactional producer (a transaction every 100 ms).
    p = txn_producer(bootstrap, f"aborter-{topic}")
    p.begin_transaction()
    for part in range(3):
        p.produce(topic, value=b"aborted", partition=part)
    p.flush(TIMEOUT)
    p.abort_transaction(TIMEOUT)
    perf = subprocess.run(
        kafka_tools.command(PERF_PRODUCER, [
            "--topic", topic, "--num-records", str(n), "--throughput", "-1",
            "--payload-monotonic", "--transactional-id", f"java-{topic}",
            "--transaction-duration-ms", "100",
            "--producer-props", f"bootstrap.servers={bootstrap}", "acks=all",
        ]),
        capture_output=True, text=True, timeout=180, check=False,
    )  # fmt: skip
    assert perf.returncode == 0, perf.stderr[-3000:]
    out = kafka(
        CONSOLE_CONSUMER, "--topic", topic, "--from-beginning", "--isolation-level",
        "read_committed", "--max-messages", str(n), "--timeout-ms", "30000",
    ).stdout  # fmt: skip
    lines = out.split()
    assert "aborted" not in lines
    assert sorted(map(int, lines)) == list(range(n))


TRANSACTIONS_TOOL = "kafka-transactions.sh"


def test_transactions_cli_admin_and_kafka_transactions_tool(
    kafka, bootstrap: str, new_topic
) -> None:
    topic = new_topic(partitions=2)
    txn_id = f"cli-{topic}"
    p = txn_producer(bootstrap, txn_id)
    p.begin_transaction()
    p.produce(topic, value=b"open", partition=1)
    p.flush(TIMEOUT)

    def cli(*args: str) -> str:
        proc = subprocess.run(
            [sys.executable, "-m", "odradek.broker.cli", "transactions", *args,
             "--bootstrap-server", bootstrap],
            capture_output=True, text=True, timeout=TIMEOUT, check=False,
        )  # fmt: skip
        assert proc.returncode == 0, proc.stderr
        return proc.stdout

    listed = [line.split() for line in cli("list", "--state", "Ongoing").splitlines()]
    assert listed[0] == ["TRANSACTIONAL-ID", "COORDINATOR", "PRODUCER-ID", "STATE"]
    (row,) = [r for r in listed if r[0] == txn_id]
    assert row[3] == "Ongoing"
    described = cli("describe", "--transactional-id", txn_id).splitlines()[1].split()
    assert described[0] == txn_id and described[4] == "Ongoing"
    assert described[7] == f"{topic}-1"
    # Kafka's own tool reads the same APIs: the producer and its open transaction.
    tool = kafka(TRANSACTIONS_TOOL, "describe", "--transactional-id", txn_id).stdout
    assert txn_id in tool and "Ongoing" in tool and f"{topic}-1" in tool
    producers = kafka(
        TRANSACTIONS_TOOL, "describe-producers", "--topic", topic, "--partition", "1"
    ).stdout
    # ProducerId, ProducerEpoch, LatestCoordinatorEpoch, LastSequence, LastTimestamp and
    # CurrentTransactionStartOffset: the open transaction starts at offset 0.
    (fields,) = [ln.split() for ln in producers.splitlines()[1:] if ln.split()[:1] == [row[2]]]
    assert (fields[1], fields[3], fields[5]) == ("0", "0", "0")
    p.commit_transaction(TIMEOUT)
    # EndTxn answers once PrepareCommit is written, as in Kafka; the markers follow.
    wait_until(
        lambda: (
            cli("describe", "--transactional-id", txn_id).splitlines()[1].split()[4]
            == "CompleteCommit"
        ),
        timeout=30,
        what="the transaction's markers",
    )
    assert txn_id in kafka(TRANSACTIONS_TOOL, "list").stdout


DUMP_LOG = "kafka-dump-log.sh"


def test_kafka_dump_log_decodes_transaction_state_and_markers(
    kafka_libs: Path,
    broker: OdradekBroker,
    bootstrap: str,
    new_topic,
) -> None:
    topic = new_topic(partitions=1)
    txn_id = f"dump-{topic}"
    p = txn_producer(bootstrap, txn_id)
    for commit in (True, False):
        p.begin_transaction()
        p.produce(topic, value=b"x")
        if commit:
            p.commit_transaction(TIMEOUT)
        else:
            p.flush(TIMEOUT)
            p.abort_transaction(TIMEOUT)

    def dump(*args: str) -> str:
        proc = subprocess.run(
            kafka_tools.command(DUMP_LOG, args),
            capture_output=True, text=True, timeout=120, check=False,
        )  # fmt: skip
        assert proc.returncode == 0 and "Exception" not in proc.stderr, proc.stderr[-3000:]
        return proc.stdout

    data = broker.data_dir / f"{topic}-0"
    out = dump("--files", f"{data}/{0:020d}.log,{data}/{0:020d}.txnindex", "--print-data-log")
    assert "endTxnMarker: COMMIT" in out and "endTxnMarker: ABORT" in out
    assert "isTransactional: true isControl: true" in out
    assert "firstOffset: 2 lastOffset: 3 lastStableOffset: 4" in out
    logs = [
        d / f"{0:020d}.log"
        for d in broker.data_dir.glob("__transaction_state-*")
        if txn_id.encode() in (d / f"{0:020d}.log").read_bytes()
    ]
    (log,) = logs
    states = dump("--files", str(log), "--transaction-log-decoder", "--print-data-log")
    mine = [line for line in states.splitlines() if f"transactionalId={txn_id}" in line]
    got = [line.split("state=")[1].split(",")[0] for line in mine]
    assert got == ["Empty", "Ongoing", "PrepareCommit", "CompleteCommit", "Ongoing",
                   "PrepareAbort", "CompleteAbort"]  # fmt: skip
    assert f"partitions=[{topic}-0]" in mine[1]


# --- a broker killed with open transactions -----------------------------------------------------


def test_kill9_broker_rebuilds_txnindex_and_producer_state(broker_factory, tmp_path: Path) -> None:
    b = broker_factory(overrides=OVERRIDES)
    bootstrap = b.bootstrap
    from confluent_kafka.admin import AdminClient, NewTopic

    topic = "kill9"
    admin = AdminClient({"bootstrap.servers": bootstrap})
    admin.create_topics([NewTopic(topic, 2, 1)])[topic].result(TIMEOUT)
    done = txn_producer(bootstrap, "k9-done")
    for commit in (True, False, True, False):
        done.begin_transaction()
        for part in range(2):
            done.produce(topic, value=f"{commit}-{part}".encode(), partition=part)
        if commit:
            done.commit_transaction(TIMEOUT)
        else:
            done.flush(TIMEOUT)
            done.abort_transaction(TIMEOUT)
    opened = txn_producer(bootstrap, "k9-open")
    opened.begin_transaction()
    for part in range(2):
        opened.produce(topic, value=b"open", partition=part)
    opened.flush(TIMEOUT)
    index = b.data_dir / f"{topic}-0" / f"{0:020d}.txnindex"
    before = index.read_bytes()
    assert len(before) == 2 * ENTRY_SIZE
    b.restart(kill=True)
    # Recovery rebuilt the index (same entries) and the open transaction (LSO held back).
    deadline = time.monotonic() + TIMEOUT
    while True:
        try:
            marks = watermarks(bootstrap, topic, 0, "read_committed")
            break
        except KafkaException:
            assert time.monotonic() < deadline, "the partition is not served after the restart"
            time.sleep(0.2)
    assert marks == (0, 8)
    assert index.read_bytes() == before
    assert watermarks(bootstrap, topic, 0, "read_uncommitted") == (0, 9)
    opened.commit_transaction(TIMEOUT)  # the producer carries on with the restarted broker
    got = values(consume_all(bootstrap, [topic], 2, "read_committed"))
    assert got == sorted([b"True-0", b"True-1"] * 2 + [b"open", b"open"])
