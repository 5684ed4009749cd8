"""A consume-transform-produce application with exactly-once semantics (confluent-kafka), run
as its own process by the transaction tests so that it can be killed with SIGKILL.

    python txn_app.py BOOTSTRAP INPUT OUTPUT GROUP TRANSACTIONAL_ID TOTAL [PAUSE_S]

It reads INPUT (read_committed) in a consumer group, writes each value upper-cased to OUTPUT,
and commits the consumed offsets with the output in one transaction per poll batch. PAUSE_S
seconds are spent inside each transaction, after producing, so a test can kill it there. It
prints "begin N", "produced N", "committed N" (N counts transactions) and exits once TOTAL
input records are committed in the group.
"""

from __future__ import annotations

import sys
import time

from confluent_kafka import Consumer, KafkaException, Producer, TopicPartition


def committed_total(consumer: Consumer, topic: str, partitions: int) -> int:
    tps = consumer.committed([TopicPartition(topic, p) for p in range(partitions)], timeout=30)
    return sum(max(tp.offset, 0) for tp in tps)


def main() -> int:
    bootstrap, src, dst, group, txn_id, total = sys.argv[1:7]
    pause = float(sys.argv[7]) if len(sys.argv) > 7 else 0.0
    total_n = int(total)
    consumer = Consumer(
        {
            "bootstrap.servers": bootstrap,
            "group.id": group,
            "isolation.level": "read_committed",
            "enable.auto.commit": False,
            "auto.offset.reset": "earliest",
            "session.timeout.ms": 6000,
            "heartbeat.interval.ms": 500,
        }
    )
    producer = Producer(
        {
            "bootstrap.servers": bootstrap,
            "transactional.id": txn_id,
            "transaction.timeout.ms": 60000,
            "linger.ms": 5,
        }
    )
    producer.init_transactions(60)
    consumer.subscribe([src])
    n = 0
    partitions = 0
    while True:
        meta = consumer.list_topics(src, timeout=10).topics[src]
        partitions = len(meta.partitions)
        if committed_total(consumer, src, partitions) >= total_n:
            break
        msgs = [m for m in consumer.consume(50, timeout=1.0) if m.error() is None]
        if not msgs:
            continue
        n += 1
        producer.begin_transaction()
        print(f"begin {n}", flush=True)
        for m in msgs:
            producer.produce(dst, key=m.key(), value=m.value().upper(), partition=m.partition())
        producer.flush(30)
        print(f"produced {n}", flush=True)
        time.sleep(pause)
        positions = consumer.position(consumer.assignment())
        try:
            producer.send_offsets_to_transaction(positions, consumer.consumer_group_metadata(), 30)
            producer.commit_transaction(60)
        except KafkaException as e:
            if e.args[0].txn_requires_abort():
                producer.abort_transaction(60)
                # Rewind to what the group has committed and try again.
                committed = consumer.committed(consumer.assignment(), timeout=30)
                for tp in committed:
                    if tp.offset >= 0:
                        consumer.seek(tp)
                continue
            raise
        print(f"committed {n}", flush=True)
    consumer.close()
    print("done", flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
