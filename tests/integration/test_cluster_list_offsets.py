"""ListOffsets across a leader change, as Apache Kafka answers it: a new leader whose high
watermark is still below the log end it started its epoch with answers OFFSET_NOT_AVAILABLE to
clients (a retriable error the Java clients retry) instead of an end offset lower than the one
the old leader gave out. Spark's Kafka source with failOnDataLoss=true fails a query whose
partition end moves backwards, so this is what lets it ride through a leader election.

The lagging state is made deterministic: followers park their fetches for 30 s, so the future
leader holds the records without having heard the high watermark that covers them; the old
leader leaves by controlled shutdown, and the third replica, still in the ISR, is paused so it
cannot fetch from the new leader until the test resumes it.
"""

from __future__ import annotations

import signal

from cluster import cluster_factory_fixture  # noqa: F401  (fixture: cluster_factory)
from confluent_kafka import Producer
from odradek.broker.protocol.api_keys import ApiKey
from odradek.broker.protocol.errors import ErrorCode

LATEST, EARLIEST = -1, -2
TOPIC = "hw-lag"


def list_offsets(broker, timestamp: int, *, replica_id: int = -1, epoch: int = -1) -> dict:
    body = {
        "replica_id": replica_id,
        "isolation_level": 0,
        "topics": [
            {
                "name": TOPIC,
                "partitions": [
                    {"partition_index": 0, "timestamp": timestamp, "current_leader_epoch": epoch}
                ],
            }
        ],
    }
    return broker.request(ApiKey.LIST_OFFSETS, body)["topics"][0]["partitions"][0]


def test_new_leader_with_a_lagging_high_watermark_answers_offset_not_available(
    cluster_factory,
) -> None:
    c = cluster_factory(
        3, {"replica.fetch.wait.max.ms": "30000", "replica.lag.time.max.ms": "120000"}
    )
    controller = c.controller().broker_id
    # The controller becomes the new leader; the two others are the old leader and the replica
    # that gets paused (a paused controller would stall the election).
    old, paused = (b for b in c.brokers if b != controller)
    body = {
        "topics": [
            {
                "name": TOPIC,
                "num_partitions": -1,
                "replication_factor": -1,
                "assignments": [{"partition_index": 0, "broker_ids": [old, controller, paused]}],
                "configs": [],
            }
        ],
        "timeout_ms": 30000,
        "validate_only": False,
    }
    assert c[controller].request(ApiKey.CREATE_TOPICS, body)["topics"][0]["error_code"] == 0
    c.wait_until(
        lambda: (
            (v := c.converged([TOPIC]))
            and v["topics"].get(TOPIC, {}).get(0, (None,))[0] == old
            and len(v["topics"][TOPIC][0][3]) == 3
        ),
        "the topic led by its first replica with a full ISR",
    )
    producer = Producer({"bootstrap.servers": c[old].bootstrap, "acks": "all"})
    for i in range(10):
        producer.produce(TOPIC, f"v{i}".encode(), partition=0)
    assert producer.flush(60) == 0
    assert list_offsets(c[old], LATEST)["offset"] == 10

    c[paused].pause()
    try:
        c[old].proc.send_signal(signal.SIGTERM)  # controlled shutdown: leadership moves now
        new = c[controller]
        state = c.wait_until(
            lambda: (
                (p := new.metadata([TOPIC])["topics"][0]["partitions"][0])["leader_id"]
                == controller
                and p
            ),
            "the controller to lead the partition",
        )
        epoch = state["leader_epoch"]
        lagging = list_offsets(new, LATEST, epoch=epoch)
        assert lagging["error_code"] == ErrorCode.OFFSET_NOT_AVAILABLE, lagging
        # A timestamp lookup that would land past the high watermark is not available either;
        # the earliest offset is, and so is the whole log for a replica or a debugging tool.
        assert list_offsets(new, 0)["error_code"] == ErrorCode.OFFSET_NOT_AVAILABLE
        earliest = list_offsets(new, EARLIEST)
        assert (earliest["error_code"], earliest["offset"]) == (ErrorCode.NONE, 0)
        tool = list_offsets(new, LATEST, replica_id=-2)
        assert (tool["error_code"], tool["offset"]) == (ErrorCode.NONE, 10)
        # The client's leader epoch is checked as Kafka checks it.
        stale = list_offsets(new, LATEST, epoch=epoch - 1)["error_code"]
        assert stale == ErrorCode.FENCED_LEADER_EPOCH
        assert list_offsets(new, LATEST, epoch=epoch + 1)["error_code"] == (
            ErrorCode.UNKNOWN_LEADER_EPOCH
        )
    finally:
        c[paused].resume()
    # The paused replica fetches from the new leader, the high watermark reaches the records,
    # and the end offset is the one the old leader gave out: it never went backwards.
    caught_up = c.wait_until(
        lambda: (r := list_offsets(c[controller], LATEST))["error_code"] == 0 and r,
        "the new leader's high watermark",
    )
    assert caught_up["offset"] == 10
    # The old leader's controlled shutdown (SIGTERM above) ends cleanly.
    assert c[old].proc.wait(60) == 0
