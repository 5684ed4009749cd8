"""Waiting, through confluent-kafka's admin client, until a new topic can be used."""

from __future__ import annotations

import time

from confluent_kafka.admin import AdminClient


def wait_for_topic(admin: AdminClient, name: str, partitions: int, timeout: float = 60.0) -> None:
    """Until metadata shows `name` with `partitions` partitions, each with a leader: creation
    returns before the controller has elected them, and a client that writes earlier fails."""
    deadline = time.monotonic() + timeout
    while True:
        meta = admin.list_topics(name, timeout=10).topics.get(name)
        if (
            meta is not None
            and meta.error is None
            and len(meta.partitions) == partitions
            and all(p.leader >= 0 for p in meta.partitions.values())
        ):
            return
        assert time.monotonic() < deadline, f"topic {name} not ready with {partitions}: {meta}"
        time.sleep(0.1)
