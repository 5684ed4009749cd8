"""Load generator for bench/run.py: one produce or consume phase, run in its own process.

The runner starts this script once per phase so the client never shares an interpreter with the
orchestration code. The last line printed on stdout is a JSON object with the measurement.

    loadgen.py create --bootstrap H:P --topic T --partitions P
    loadgen.py produce --bootstrap H:P --topic T --records N --size B --acks 1|all --duration S
    loadgen.py consume --bootstrap H:P --topic T --records N --partitions P --duration S
    loadgen.py txn-produce --bootstrap H:P --topic T --records N --size B --txn-records K
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import time
import uuid

from confluent_kafka import (
    OFFSET_BEGINNING,
    Consumer,
    KafkaError,
    KafkaException,
    Producer,
    TopicPartition,
)
from confluent_kafka.admin import AdminClient, NewTopic


def create(args: argparse.Namespace) -> dict:
    """Create ``<topic prefix>-<random>`` and wait until every partition has a leader."""
    name = f"{args.topic}-{uuid.uuid4().hex[:8]}"
    admin = AdminClient({"bootstrap.servers": args.bootstrap})
    futures = admin.create_topics([NewTopic(name, args.partitions, 1)], operation_timeout=30)
    futures[name].result(args.duration)
    deadline = time.monotonic() + args.duration
    while time.monotonic() < deadline:
        meta = admin.list_topics(name, timeout=5).topics.get(name)
        if (
            meta is not None
            and meta.error is None
            and len(meta.partitions) == args.partitions
            and all(p.leader >= 0 for p in meta.partitions.values())
        ):
            return {"phase": "create", "topic": name}
        time.sleep(0.2)
    return {"phase": "create", "topic": None, "error": f"no partition leaders for {name}"}


def produce(args: argparse.Namespace) -> dict:
    """Send up to ``records`` values of ``size`` bytes; time from the first send to the last ack."""
    conf = {
        "bootstrap.servers": args.bootstrap,
        "acks": args.acks,
        "linger.ms": args.linger_ms,
        "compression.type": "none",
        "queue.buffering.max.messages": 200_000,
        "queue.buffering.max.kbytes": 256 * 1024,
        "enable.idempotence": False,
        "client.id": "odradek-bench-producer",
    }
    producer = Producer(conf)
    # Several distinct payloads, so no layer can get away with caching one buffer.
    payloads = [os.urandom(args.size) for _ in range(16)]
    delivered = 0
    failed = 0
    first_error: str | None = None

    def on_delivery(err, _msg) -> None:
        nonlocal delivered, failed, first_error
        if err is None:
            delivered += 1
        else:
            failed += 1
            if first_error is None:
                first_error = str(err)

    sent = 0
    start = time.perf_counter()
    stop_at = start + args.duration
    while sent < args.records and time.perf_counter() < stop_at:
        try:
            producer.produce(args.topic, payloads[sent & 15], on_delivery=on_delivery)
            sent += 1
        except BufferError:
            producer.poll(0.05)
            continue
        if sent & 1023 == 0:
            producer.poll(0)
    remaining = producer.flush(max(args.duration, 30.0))
    elapsed = time.perf_counter() - start
    return {
        "phase": "produce",
        "sent": sent,
        "records": delivered,
        "failed": failed,
        "undelivered": remaining,
        "bytes": delivered * args.size,
        "seconds": elapsed,
        "error": first_error,
    }


def txn_produce(args: argparse.Namespace) -> dict:
    """A transactional producer: ``txn_records`` values per transaction, committed one after the
    other; time from the first begin to the last commit, counting committed records only."""
    producer = Producer(
        {
            "bootstrap.servers": args.bootstrap,
            "transactional.id": f"odradek-bench-{uuid.uuid4().hex[:8]}",
            "linger.ms": args.linger_ms,
            "compression.type": "none",
            "client.id": "odradek-bench-txn-producer",
        }
    )
    producer.init_transactions(30)
    payloads = [os.urandom(args.size) for _ in range(16)]
    committed = 0
    start = time.perf_counter()
    stop_at = start + args.duration
    while committed < args.records and time.perf_counter() < stop_at:
        producer.begin_transaction()
        for i in range(args.txn_records):
            producer.produce(args.topic, payloads[i & 15])
        producer.commit_transaction(30)
        committed += args.txn_records
    elapsed = time.perf_counter() - start
    return {
        "phase": "txn-produce",
        "records": committed,
        "bytes": committed * args.size,
        "seconds": elapsed,
        "error": None,
    }


def consume(args: argparse.Namespace) -> dict:
    """Read every partition from the beginning until ``records`` values have arrived."""
    consumer = Consumer(
        {
            "bootstrap.servers": args.bootstrap,
            "group.id": f"odradek-bench-{os.getpid()}",
            "enable.auto.commit": False,
            "auto.offset.reset": "earliest",
            "client.id": "odradek-bench-consumer",
        }
    )
    consumer.assign(
        [TopicPartition(args.topic, p, OFFSET_BEGINNING) for p in range(args.partitions)]
    )
    received = 0
    nbytes = 0
    first_error: str | None = None
    start = time.perf_counter()
    stop_at = start + args.duration
    try:
        while received < args.records and time.perf_counter() < stop_at:
            for msg in consumer.consume(num_messages=10_000, timeout=0.5):
                err = msg.error()
                if err is not None:
                    if first_error is None and err.code() != KafkaError._PARTITION_EOF:
                        first_error = str(err)
                    continue
                received += 1
                nbytes += len(msg.value() or b"")
        elapsed = time.perf_counter() - start
    finally:
        consumer.close()
    return {
        "phase": "consume",
        "records": received,
        "bytes": nbytes,
        "seconds": elapsed,
        "error": first_error if received < args.records else None,
    }


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("phase", choices=["create", "produce", "consume", "txn-produce"])
    parser.add_argument("--bootstrap", required=True)
    parser.add_argument("--topic", required=True)
    parser.add_argument("--records", type=int, default=200_000)
    parser.add_argument("--size", type=int, default=1024)
    parser.add_argument("--acks", default="1")
    parser.add_argument("--linger-ms", type=int, default=5)
    parser.add_argument("--partitions", type=int, default=1)
    parser.add_argument("--duration", type=float, default=30.0)
    parser.add_argument("--txn-records", type=int, default=100)
    args = parser.parse_args(argv)
    phases = {"create": create, "produce": produce, "consume": consume, "txn-produce": txn_produce}
    try:
        result = phases[args.phase](args)
    except KafkaException as exc:
        result = {"phase": args.phase, "records": 0, "bytes": 0, "seconds": 0.0, "error": str(exc)}
    print(json.dumps(result), flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
