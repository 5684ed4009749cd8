"""Idempotent producers against a real broker: InitProducerId, de-duplication of retried batches,
sequence and epoch checks, and de-duplication that survives a broker restart.

Client tests use confluent-kafka (librdkafka) and kafka-python as their users would; the rule
checks speak the wire protocol over raw sockets with the project's codec, sending batches built
with a chosen producer id, epoch and sequence.
"""

from __future__ import annotations

import time
from collections import Counter

import pytest
from confluent_kafka import Consumer, KafkaError, Producer, TopicPartition
from confluent_kafka.admin import AdminClient, NewTopic
from odradek.broker.client.blocking import BlockingConnection
from odradek.broker.protocol.api_keys import ApiKey
from odradek.broker.protocol.errors import ErrorCode
from odradek.broker.records import batch as rb
from odradek.broker.records.record import Record, build_batch, decode_all

CLIENT_ID = "odradek-idempotence-tests"
IO_TIMEOUT = 30.0


# --- raw protocol helpers -------------------------------------------------------------------


class Wire(BlockingConnection):
    """The project's blocking connection with the requests these tests send."""

    def __init__(self, host: str, port: int) -> None:
        super().__init__(host, port, timeout=IO_TIMEOUT, client_id=CLIENT_ID)

    def init_producer_id(self, version: int = 4, **body) -> dict:
        request = {"transactional_id": None, "transaction_timeout_ms": 60000, **body}
        return self.call(ApiKey.INIT_PRODUCER_ID, version, request)

    def produce(self, topic: str, partition: int, records: bytes) -> dict:
        response = self.call(
            ApiKey.PRODUCE,
            8,
            {
                "transactional_id": None,
                "acks": -1,
                "timeout_ms": 30000,
                "topic_data": [
                    {"name": topic, "partition_data": [{"index": partition, "records": records}]}
                ],
            },
        )
        return response["responses"][0]["partition_responses"][0]

    def fetch_all(self, topic: str, partition: int = 0) -> bytes:
        """Every batch of the partition from offset 0 (the test partitions are small)."""
        response = self.call(
            ApiKey.FETCH,
            4,
            {
                "replica_id": -1,
                "max_wait_ms": 0,
                "min_bytes": 0,
                "max_bytes": 64 << 20,
                "isolation_level": 0,
                "topics": [
                    {
                        "topic": topic,
                        "partitions": [
                            {
                                "partition": partition,
                                "fetch_offset": 0,
                                "partition_max_bytes": 64 << 20,
                            }
                        ],
                    }
                ],
            },
        )
        part = response["responses"][0]["partitions"][0]
        assert part["error_code"] == ErrorCode.NONE
        return bytes(part["records"] or b"")


def idempotent_batch(pid: int, epoch: int, seq: int, values: list[str]) -> bytes:
    now = int(time.time() * 1000)
    records = [Record(offset=i, timestamp=now, value=v.encode()) for i, v in enumerate(values)]
    return build_batch(records, producer_id=pid, producer_epoch=epoch, base_sequence=seq)


def values_in(data: bytes) -> list[bytes | None]:
    return [r.value for _, records in decode_all(data) for r in records]


def headers_in(data: bytes) -> list[rb.BatchHeader]:
    return [h for _, h in rb.iter_batches(data)]


def create_topic(bootstrap: str, name: str, partitions: int = 1) -> str:
    admin = AdminClient({"bootstrap.servers": bootstrap})
    admin.create_topics([NewTopic(name, partitions, 1)], operation_timeout=30)[name].result(60)
    deadline = time.monotonic() + 60
    while True:
        meta = admin.list_topics(name, timeout=10).topics.get(name)
        if meta is not None and meta.error is None and len(meta.partitions) == partitions:
            if all(p.leader >= 0 for p in meta.partitions.values()):
                return name
        assert time.monotonic() < deadline, f"topic {name} has no leaders: {meta}"
        time.sleep(0.1)


def is_odradek(broker) -> bool:
    return hasattr(broker, "proc")


# --- InitProducerId -------------------------------------------------------------------------


@pytest.mark.parametrize("version", [0, 1, 2, 3, 4, 5])
def test_init_producer_id_gives_fresh_ids_with_epoch_zero(broker, version: int) -> None:
    with Wire(broker.host, broker.port) as wire:
        first = wire.init_producer_id(version)
        second = wire.init_producer_id(version)
    for response in (first, second):
        assert response["error_code"] == ErrorCode.NONE
        assert response["producer_id"] >= 0
        assert response["producer_epoch"] == 0
    assert first["producer_id"] != second["producer_id"]


def test_init_producer_id_with_known_id_gives_a_new_id(broker) -> None:
    """Without a transactional id Kafka never bumps the epoch: it hands out a new id."""
    with Wire(broker.host, broker.port) as wire:
        first = wire.init_producer_id(4)
        again = wire.init_producer_id(
            4, producer_id=first["producer_id"], producer_epoch=first["producer_epoch"]
        )
        assert again["error_code"] == ErrorCode.NONE
        assert again["producer_id"] != first["producer_id"]
        assert again["producer_epoch"] == 0
        half = wire.init_producer_id(4, producer_id=first["producer_id"], producer_epoch=-1)
        assert half["error_code"] == ErrorCode.INVALID_REQUEST
        assert (half["producer_id"], half["producer_epoch"]) == (-1, -1)


def test_init_producer_id_for_a_transactional_id(broker) -> None:
    with Wire(broker.host, broker.port) as wire:
        empty = wire.init_producer_id(4, transactional_id="")
        assert empty["error_code"] == ErrorCode.INVALID_REQUEST
        too_long = wire.init_producer_id(
            4, transactional_id="txn", transaction_timeout_ms=24 * 3600 * 1000
        )
        assert too_long["error_code"] == ErrorCode.INVALID_TRANSACTION_TIMEOUT
        if is_odradek(broker):
            # One broker coordinates every transactional id once __transaction_state exists;
            # each InitProducerId bumps the id's epoch (fencing the producer before).
            found = wire.call(ApiKey.FIND_COORDINATOR, 1, {"key": "txn", "key_type": 1})
            assert found["error_code"] == ErrorCode.NONE
            deadline = time.monotonic() + 30
            while (first := wire.init_producer_id(4, transactional_id="txn"))[
                "error_code"
            ] == ErrorCode.COORDINATOR_LOAD_IN_PROGRESS:
                assert time.monotonic() < deadline
                time.sleep(0.1)
            assert first["error_code"] == ErrorCode.NONE
            again = wire.init_producer_id(4, transactional_id="txn")
            assert again["producer_id"] == first["producer_id"]
            assert again["producer_epoch"] == first["producer_epoch"] + 1


# --- the rules over the wire ----------------------------------------------------------------


def test_retried_batch_gets_its_first_offset_and_is_stored_once(broker, new_topic) -> None:
    topic = new_topic()
    with Wire(broker.host, broker.port) as wire:
        pid = wire.init_producer_id()["producer_id"]
        first = idempotent_batch(pid, 0, 0, ["a", "b"])
        assert wire.produce(topic, 0, first)["base_offset"] == 0
        retry = wire.produce(topic, 0, first)
        assert retry["error_code"] == ErrorCode.NONE
        assert retry["base_offset"] == 0
        nxt = wire.produce(topic, 0, idempotent_batch(pid, 0, 2, ["c"]))
        assert (nxt["error_code"], nxt["base_offset"]) == (ErrorCode.NONE, 2)
        # An older batch still in the window of five is a retry too.
        assert wire.produce(topic, 0, first)["base_offset"] == 0
        data = wire.fetch_all(topic)
    assert values_in(data) == [b"a", b"b", b"c"]
    assert [(h.producer_id, h.base_sequence) for h in headers_in(data)] == [(pid, 0), (pid, 2)]


def test_sequence_gap_is_out_of_order(broker, new_topic) -> None:
    topic = new_topic()
    with Wire(broker.host, broker.port) as wire:
        pid = wire.init_producer_id()["producer_id"]
        assert wire.produce(topic, 0, idempotent_batch(pid, 0, 0, ["a"]))["error_code"] == 0
        gap = wire.produce(topic, 0, idempotent_batch(pid, 0, 2, ["c"]))
        assert gap["error_code"] == ErrorCode.OUT_OF_ORDER_SEQUENCE_NUMBER
        ok = wire.produce(topic, 0, idempotent_batch(pid, 0, 1, ["b"]))
        assert (ok["error_code"], ok["base_offset"]) == (ErrorCode.NONE, 1)
        assert values_in(wire.fetch_all(topic)) == [b"a", b"b"]


def test_epochs_fence_older_ones_and_restart_sequences(broker, new_topic) -> None:
    topic = new_topic()
    with Wire(broker.host, broker.port) as wire:
        pid = wire.init_producer_id()["producer_id"]
        assert wire.produce(topic, 0, idempotent_batch(pid, 0, 0, ["a", "b"]))["error_code"] == 0
        # A bumped epoch (as an idempotent client bumps it itself) must start at sequence 0.
        bad = wire.produce(topic, 0, idempotent_batch(pid, 1, 2, ["c"]))
        assert bad["error_code"] == ErrorCode.OUT_OF_ORDER_SEQUENCE_NUMBER
        bumped = wire.produce(topic, 0, idempotent_batch(pid, 1, 0, ["c"]))
        assert (bumped["error_code"], bumped["base_offset"]) == (ErrorCode.NONE, 2)
        old = wire.produce(topic, 0, idempotent_batch(pid, 0, 2, ["d"]))
        assert old["error_code"] == ErrorCode.INVALID_PRODUCER_EPOCH
        assert values_in(wire.fetch_all(topic)) == [b"a", b"b", b"c"]


def test_unknown_producer_may_start_anywhere(broker, new_topic) -> None:
    topic = new_topic()
    with Wire(broker.host, broker.port) as wire:
        pid = wire.init_producer_id()["producer_id"]
        response = wire.produce(topic, 0, idempotent_batch(pid, 0, 42, ["x"]))
        assert (response["error_code"], response["base_offset"]) == (ErrorCode.NONE, 0)


# --- real clients -----------------------------------------------------------------------------


def test_confluent_idempotent_producer_no_duplicates(broker, new_topic) -> None:
    topic = new_topic(partitions=3)
    count = 3000
    producer = Producer(
        {
            "bootstrap.servers": broker.bootstrap,
            "enable.idempotence": True,
            "linger.ms": 5,
            "batch.num.messages": 100,
        }
    )
    errors: list[KafkaError] = []

    def on_delivery(err, msg) -> None:
        if err is not None:
            errors.append(err)

    for i in range(count):
        producer.produce(topic, value=f"m-{i}".encode(), key=str(i % 17), on_delivery=on_delivery)
        producer.poll(0)
    assert producer.flush(60) == 0
    assert errors == []

    consumer = Consumer(
        {
            "bootstrap.servers": broker.bootstrap,
            "group.id": f"idempotence-{time.monotonic_ns()}",
            "enable.auto.commit": False,
            "auto.offset.reset": "earliest",
        }
    )
    consumer.assign([TopicPartition(topic, p, 0) for p in range(3)])
    got: list = []
    deadline = time.monotonic() + 60
    while len(got) < count and time.monotonic() < deadline:
        for msg in consumer.consume(num_messages=1000, timeout=1.0):
            assert msg.error() is None, msg.error()
            got.append(msg)
    consumer.close()
    assert Counter(m.value() for m in got) == Counter(f"m-{i}".encode() for i in range(count))
    for p in range(3):
        offsets = [m.offset() for m in got if m.partition() == p]
        assert offsets == list(range(len(offsets)))
    with Wire(broker.host, broker.port) as wire:
        headers = headers_in(wire.fetch_all(topic, 0))
    assert headers and all(h.producer_id >= 0 and h.base_sequence >= 0 for h in headers)


def test_kafka_python_default_producer_no_duplicates(broker, new_topic) -> None:
    from kafka import KafkaConsumer, KafkaProducer
    from kafka import TopicPartition as KTopicPartition

    topic = new_topic(partitions=2)
    count = 1000
    producer = KafkaProducer(bootstrap_servers=broker.bootstrap, linger_ms=5)  # idempotent
    try:
        futures = [producer.send(topic, value=f"k-{i}".encode()) for i in range(count)]
        producer.flush(timeout=60)
        metadata = [f.get(timeout=60) for f in futures]
    finally:
        producer.close(timeout=30)
    for p in range(2):
        offsets = sorted(m.offset for m in metadata if m.partition == p)
        assert offsets == list(range(len(offsets)))

    consumer = KafkaConsumer(
        bootstrap_servers=broker.bootstrap,
        group_id=None,
        enable_auto_commit=False,
        auto_offset_reset="earliest",
    )
    try:
        tps = [KTopicPartition(topic, p) for p in range(2)]
        consumer.assign(tps)
        for tp in tps:
            consumer.seek(tp, 0)
        got: list = []
        deadline = time.monotonic() + 60
        while len(got) < count and time.monotonic() < deadline:
            for records in consumer.poll(timeout_ms=1000).values():
                got.extend(records)
    finally:
        consumer.close()
    assert Counter(r.value for r in got) == Counter(f"k-{i}".encode() for i in range(count))
    with Wire(broker.host, broker.port) as wire:
        headers = headers_in(wire.fetch_all(topic, 0)) + headers_in(wire.fetch_all(topic, 1))
    assert headers and all(h.producer_id >= 0 for h in headers)


# --- restarts -------------------------------------------------------------------------------


@pytest.mark.parametrize("kill", [True, False], ids=["kill", "clean"])
def test_deduplication_survives_a_restart(broker_factory, kill: bool) -> None:
    server = broker_factory()
    topic = create_topic(server.bootstrap, f"idempotent-restart-{int(kill)}")
    with Wire(server.host, server.port) as wire:
        pid = wire.init_producer_id()["producer_id"]
        batches = [
            idempotent_batch(pid, 0, 2 * i, [f"r{2 * i}", f"r{2 * i + 1}"]) for i in range(4)
        ]
        for i, b in enumerate(batches):
            assert wire.produce(topic, 0, b)["base_offset"] == 2 * i

    partition_dir = server.data_dir / f"{topic}-0"
    if kill:
        server.kill()  # no snapshot: the state is rebuilt from the log
    else:
        server.stop()  # a clean shutdown leaves Kafka's <log end offset>.snapshot
        assert (partition_dir / f"{8:020d}.snapshot").exists()
    server.start()

    with Wire(server.host, server.port) as wire:
        # The producer never saw the answer to its last batch and sends it again.
        retry = wire.produce(topic, 0, batches[-1])
        assert (retry["error_code"], retry["base_offset"]) == (ErrorCode.NONE, 6)
        gap = wire.produce(topic, 0, idempotent_batch(pid, 0, 9, ["r9"]))
        assert gap["error_code"] == ErrorCode.OUT_OF_ORDER_SEQUENCE_NUMBER
        nxt = wire.produce(topic, 0, idempotent_batch(pid, 0, 8, ["r8"]))
        assert (nxt["error_code"], nxt["base_offset"]) == (ErrorCode.NONE, 8)
        # Producer ids are not handed out twice across restarts.
        assert wire.init_producer_id()["producer_id"] > pid
        data = wire.fetch_all(topic)
    assert values_in(data) == [f"r{i}".encode() for i in range(9)]
