"""A producer and a consumer that report authorization failures instead of retrying past them,
for the tests that check what a principal's ACLs let it do (broker ACL tests, the User operator)."""

from __future__ import annotations

import time

from confluent_kafka import Consumer, KafkaError, Producer

DENIED = {KafkaError.TOPIC_AUTHORIZATION_FAILED, KafkaError.GROUP_AUTHORIZATION_FAILED}


def produce_errors(conf: dict, topic: str, n: int = 1) -> list[int]:
    """Produce n values; the delivery error codes (empty when all were written)."""
    failures: list[int] = []

    def report(err: KafkaError | None, _msg: object) -> None:
        if err is not None:
            failures.append(err.code())

    producer = Producer({**conf, "message.timeout.ms": 10000, "error_cb": lambda e: None})
    for i in range(n):
        producer.produce(topic, value=f"m{i}".encode(), on_delivery=report)
    producer.flush(30)
    return failures


def consume(
    conf: dict, topic: str, group: str, n: int, timeout: float = 60
) -> tuple[list[bytes], set[int]]:
    """Subscribe with `group` and read until `n` values, an authorization error or `timeout`
    seconds; the values and every error code seen."""
    errors: set[int] = set()
    consumer = Consumer(
        {
            **conf,
            "group.id": group,
            "auto.offset.reset": "earliest",
            "error_cb": lambda e: errors.add(e.code()),
        }
    )
    consumer.subscribe([topic])
    got: list[bytes] = []
    deadline = time.monotonic() + timeout
    while len(got) < n and not errors & DENIED and time.monotonic() < deadline:
        msg = consumer.poll(0.5)
        if msg is None:
            continue
        if msg.error() is not None:
            errors.add(msg.error().code())
        else:
            got.append(msg.value())
    consumer.close()
    return got, errors
