"""Data replication on three real brokers and a real ZooKeeper ensemble: acks=all writes survive
kill -9 of the partition leader, and acks=all is refused while the ISR is below
min.insync.replicas (reference §3)."""

from __future__ import annotations

import json
import socket
import struct
import threading
import time

import pytest
from background_producer import BackgroundProducer
from cluster import Cluster, cluster_factory_fixture, consume_all  # noqa: F401  (fixture)
from odradek.broker.protocol import codec
from odradek.broker.protocol.api_keys import ApiKey
from odradek.broker.protocol.errors import ErrorCode
from odradek.broker.records.record import Record, build_batch
from raw_wire import recv_frame

TOPIC = "replicated"
OVERRIDES = {"min.insync.replicas": "2", "replica.lag.time.max.ms": "10000"}
KILLS = 5


def partition_state(c: Cluster, topic: str = TOPIC) -> dict:
    data, _ = c.zk.get(f"/brokers/topics/{topic}/partitions/0/state")
    return json.loads(data)


def leader_serving(c: Cluster, topic: str = TOPIC) -> int | None:
    """The leader named by the state znode, once that broker answers Metadata with it."""
    state = partition_state(c, topic)
    leader = state["leader"]
    if leader < 0 or not c[leader].running:
        return None
    view = c[leader].metadata([topic])
    parts = view["topics"][0]["partitions"]
    if parts and parts[0]["leader_id"] == leader:
        return leader
    return None


def full_isr(c: Cluster, topic: str = TOPIC) -> bool:
    return sorted(partition_state(c, topic)["isr"]) == [1, 2, 3]


def create(c: Cluster, topic: str = TOPIC) -> None:
    c.create_topic(topic, 1, 3)
    c.wait_until(lambda: leader_serving(c, topic), f"a leader for {topic}")
    c.wait_until(lambda: full_isr(c, topic), f"three in-sync replicas of {topic}")


@pytest.mark.parametrize("idempotent", [False, True], ids=["plain", "idempotent"])
def test_acks_all_survives_kill_9_of_the_leader(cluster_factory, idempotent: bool) -> None:
    c = cluster_factory(3, OVERRIDES)
    create(c)
    bootstrap = ",".join(b.bootstrap for b in c.brokers.values())
    with BackgroundProducer(bootstrap, TOPIC, **{"enable.idempotence": idempotent}) as writer:
        acked = writer.acked
        for _ in range(KILLS):
            before = len(acked)
            c.wait_until(lambda b=before: len(acked) > b + 20, "acknowledged writes")
            leader = c.wait_until(lambda: leader_serving(c), "a serving leader")
            c[leader].kill()
            c.wait_until(
                lambda old=leader: (leader_serving(c) or old) != old, "a new leader elsewhere"
            )
            c[leader].start()
            c.wait_until(lambda: full_isr(c), "the restarted broker back in the ISR")
        before = len(acked)
        c.wait_until(lambda: len(acked) > before + 20, "writes after the last restart")
    assert not writer.thread.is_alive()
    assert acked, [str(e) for e in writer.errors]
    assert not writer.no_offset, "acknowledged records without an offset"
    consumed = consume_all(bootstrap, TOPIC)
    offsets = [o for o, _ in consumed]
    assert offsets == list(range(len(offsets))), "offsets have gaps or duplicates"
    values = dict(consumed)
    missing = [o for o, v in acked.items() if values.get(o) != v]
    assert not missing, f"{len(missing)} acknowledged records lost, e.g. offset {missing[:5]}"
    if idempotent:
        # Producer state reached the followers: retries after a failover are deduplicated.
        seen = [v for _, v in consumed]
        assert len(seen) == len(set(seen)), "a record was written twice"


def log_end(c: Cluster, broker: int) -> int:
    body = {
        "replica_id": -1,
        "isolation_level": 0,
        "topics": [{"name": TOPIC, "partitions": [{"partition_index": 0, "timestamp": -1}]}],
    }
    resp = c[broker].request(ApiKey.LIST_OFFSETS, body)
    return resp["topics"][0]["partitions"][0]["offset"]


def test_acks_all_refused_with_one_in_sync_replica(cluster_factory) -> None:
    c = cluster_factory(3, OVERRIDES)
    create(c)
    leader = c.wait_until(lambda: leader_serving(c), "a serving leader")
    assert c[leader].produce_one(TOPIC, b"x", -1)["error_code"] == ErrorCode.NONE
    for b in (1, 2, 3):
        if b != leader:
            c[b].kill()
    # acks=1 is not bound by min.insync.replicas; the followers now lag behind this write, and
    # the leader removes them from the ISR after replica.lag.time.max.ms.
    assert c[leader].produce_one(TOPIC, b"x", 1)["error_code"] == ErrorCode.NONE
    c.wait_until(lambda: partition_state(c)["isr"] == [leader], "the ISR down to the leader")
    c.wait_until(lambda: leader_serving(c) == leader, "the leader serving alone")
    end = c.wait_until(lambda: log_end(c, leader) == 2 and 2, "the high watermark at 2")
    result = c[leader].produce_one(TOPIC, b"x", -1)
    assert result["error_code"] == ErrorCode.NOT_ENOUGH_REPLICAS
    assert log_end(c, leader) == end


def test_pipelined_acks_all_produce_is_appended_and_answered_in_order(cluster_factory) -> None:
    """A producer that does not wait for its acks=all responses (librdkafka sends a request
    every linger.ms): the leader reads on while earlier requests wait for the followers, yet
    appends in request order and answers in request order, a Metadata request among them too,
    and answers them all although the client stopped sending."""
    c = cluster_factory(3, OVERRIDES)
    create(c)
    leader = c.wait_until(lambda: leader_serving(c), "a serving leader")
    requests: list[tuple[int, int, int]] = []  # (api key, correlation id, records in it)
    payload = bytearray()
    for i in range(40):
        correlation_id = 0x20000 + i * 7919  # not consecutive: the order must come from requests
        if i == 17:
            key, version = ApiKey.METADATA, 9
            body: dict = {"topics": [{"name": TOPIC}], "allow_auto_topic_creation": False}
            count = 0
        else:
            key, version, count = ApiKey.PRODUCE, 9, 1 + i % 3
            now = int(time.time() * 1000)
            batch = build_batch(
                [Record(offset=n, timestamp=now, value=b"v%d" % i) for n in range(count)]
            )
            body = {
                "transactional_id": None,
                "acks": -1,
                "timeout_ms": 30000,
                "topic_data": [{"name": TOPIC, "partition_data": [{"index": 0, "records": batch}]}],
            }
        frame = codec.encode_request(key, version, correlation_id, "pipelined", body)
        payload += struct.pack(">i", len(frame)) + frame
        requests.append((key, correlation_id, count))
    expected_offset = 0
    with socket.create_connection((c[leader].host, c[leader].port), timeout=60) as sock:
        sock.settimeout(60)
        sock.sendall(payload)  # all forty in one write
        sock.shutdown(socket.SHUT_WR)  # done sending: every answer is still due
        for key, correlation_id, count in requests:
            got, response = codec.decode_response(key, 9, recv_frame(sock))
            assert got == correlation_id, f"response out of order: {got:#x} != {correlation_id:#x}"
            if key == ApiKey.METADATA:
                assert response["topics"][0]["partitions"][0]["leader_id"] == leader
                continue
            part = response["responses"][0]["partition_responses"][0]
            assert part["error_code"] == ErrorCode.NONE
            assert part["base_offset"] == expected_offset
            expected_offset += count
    assert log_end(c, leader) == expected_offset


def test_pipelined_requests_held_by_a_connection_are_bounded(cluster_factory) -> None:
    """While the followers stall, a producer that keeps sending acks=all requests is held back
    at its socket once its connection holds a few MiB of requests waiting for them: the broker
    keeps each such request until it answers, so its memory must not grow with the backlog.
    When the followers return, every request is appended and answered, in order."""
    c = cluster_factory(3, OVERRIDES)
    create(c)
    leader = c.wait_until(lambda: leader_serving(c), "a serving leader")
    value = b"v" * (512 * 1024)
    count = 24  # 12 MiB of requests
    payload = bytearray()
    for i in range(count):
        batch = build_batch([Record(offset=0, timestamp=int(time.time() * 1000), value=value)])
        body = {
            "transactional_id": None,
            "acks": -1,
            "timeout_ms": 60000,
            "topic_data": [{"name": TOPIC, "partition_data": [{"index": 0, "records": batch}]}],
        }
        frame = codec.encode_request(ApiKey.PRODUCE, 9, 0x30000 + i, "flood", body)
        payload += struct.pack(">i", len(frame)) + frame
    followers = [b for b in (1, 2, 3) if b != leader]
    log = c[leader].data_dir / f"{TOPIC}-0" / "00000000000000000000.log"
    for b in followers:
        c[b].pause()
    with socket.create_connection((c[leader].host, c[leader].port), timeout=60) as sock:
        sock.settimeout(60)
        sender = threading.Thread(target=sock.sendall, args=(payload,), daemon=True)
        sender.start()
        time.sleep(3)  # the leader reads and appends what its bound lets it, then stops reading
        held = log.stat().st_size
        for b in followers:
            c[b].resume()
        # 4 MiB of requests owed, plus the one read after them that waits in turn
        assert len(value) <= held <= 4 * 1024 * 1024 + 2 * len(value), held
        for i in range(count):
            got, response = codec.decode_response(ApiKey.PRODUCE, 9, recv_frame(sock))
            assert got == 0x30000 + i
            part = response["responses"][0]["partition_responses"][0]
            assert part["error_code"] == ErrorCode.NONE
            assert part["base_offset"] == i
        sender.join(timeout=60)
    assert log_end(c, leader) == count


def segment(c: Cluster, broker: int, topic: str = TOPIC) -> bytes:
    return (c[broker].data_dir / f"{topic}-0" / "00000000000000000000.log").read_bytes()


def test_divergent_logs_end_byte_identical(cluster_factory) -> None:
    c = cluster_factory(3, OVERRIDES)
    create(c)
    old = c.wait_until(lambda: leader_serving(c), "a serving leader")
    for _ in range(3):
        assert c[old].produce_one(TOPIC, b"x", -1)["error_code"] == ErrorCode.NONE
    followers = [b for b in (1, 2, 3) if b != old]
    for b in followers:
        c[b].pause()
    # Let the followers' pending long polls (replica.fetch.wait.max.ms) end empty, then write
    # a tail that only the old leader gets: acks=1 does not wait for anyone.
    time.sleep(1.0)
    for _ in range(2):
        assert c[old].produce_one(TOPIC, b"x", 1)["error_code"] == ErrorCode.NONE
    c[old].kill()
    for b in followers:
        c[b].resume()
    new = c.wait_until(
        lambda: (leader_serving(c) or old) != old and leader_serving(c), "a new leader"
    )
    c.wait_until(
        lambda: c[new].produce_one(TOPIC, b"x", -1)["error_code"] == ErrorCode.NONE,
        "an acks=all write",
    )
    c[old].start()
    c.wait_until(lambda: full_isr(c), "the old leader back in the ISR")
    c.wait_until(lambda: segment(c, 1) == segment(c, 2) == segment(c, 3), "byte-identical segments")
    consumed = consume_all(c[new].bootstrap, TOPIC)
    assert [o for o, _ in consumed] == [0, 1, 2, 3]
