"""Where a consumer group member starts reading: the check that a group resumes from its
committed offsets."""

from __future__ import annotations

import time

from confluent_kafka import Consumer


def first_offsets(
    consumer: Consumer, topic: str, partitions: int, timeout: float
) -> dict[int, int]:
    """Subscribe `consumer` to `topic` and poll until each of its `partitions` partitions has
    delivered a record (or `timeout` seconds): partition -> offset of the first record read."""
    consumer.subscribe([topic])
    firsts: dict[int, int] = {}
    deadline = time.monotonic() + timeout
    while len(firsts) < partitions and time.monotonic() < deadline:
        msg = consumer.poll(0.5)
        if msg is not None and msg.error() is None:
            firsts.setdefault(msg.partition(), msg.offset())
    return firsts
