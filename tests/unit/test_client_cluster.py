"""ClusterClient: bootstrap parsing, and metadata-driven routing and retries against the tiny
codec-backed server of test_client_connection."""

from __future__ import annotations

import pytest
from odradek.broker.client.admin import AdminClient, OffsetSpec
from odradek.broker.client.cluster import ZERO_UUID, ClusterClient, TopicPartition, parse_bootstrap
from odradek.broker.client.consumer import Consumer
from odradek.broker.client.producer import Producer
from odradek.broker.protocol.api_keys import ApiKey
from odradek.broker.protocol.errors import ErrorCode, KafkaError
from odradek.broker.records.record import decode_batch
from test_client_connection import TinyBroker, run

RANGES = {
    ApiKey.API_VERSIONS: (0, 4),
    ApiKey.METADATA: (0, 12),
    ApiKey.LIST_OFFSETS: (0, 9),
    ApiKey.CREATE_TOPICS: (0, 7),
    ApiKey.PRODUCE: (3, 11),
}


def test_parse_bootstrap() -> None:
    assert parse_bootstrap("a:1,b:2") == [("a", 1), ("b", 2)]
    assert parse_bootstrap(" a:1 , ") == [("a", 1)]
    assert parse_bootstrap("host") == [("host", 9092)]
    assert parse_bootstrap("[::1]:9093,[fe80::1]") == [("::1", 9093), ("fe80::1", 9092)]
    assert parse_bootstrap("PLAINTEXT://k:9094") == [("k", 9094)]
    assert parse_bootstrap(["x:1", "y:2"]) == [("x", 1), ("y", 2)]
    for bad in ("", ",", "a:b", "a:0", "a:70000", ":9092"):
        with pytest.raises(ValueError):
            parse_bootstrap(bad)


class OneBrokerCluster(TinyBroker):
    """A one-broker cluster: Metadata names this server as node 7, the leader of t-0 and t-1
    and the controller; other APIs go to `scripted` answers, in order."""

    def __init__(self) -> None:
        super().__init__(dict(RANGES), self.handle)
        self.leader = 7
        self.scripted: dict[int, list[dict]] = {}
        self.calls: dict[int, int] = {}

    async def handle(self, api_key: int, version: int, correlation_id: int, body: dict) -> dict:
        self.calls[api_key] = self.calls.get(api_key, 0) + 1
        if api_key == ApiKey.METADATA:
            topics = []
            names = ["t"] if body["topics"] is None else [t["name"] for t in body["topics"]]
            for name in names:
                if name != "t":
                    topics.append({"error_code": 3, "name": name, "partitions": []})
                    continue
                parts = [
                    {
                        "error_code": 0,
                        "partition_index": i,
                        "leader_id": self.leader,
                        "replica_nodes": [7],
                        "isr_nodes": [7],
                    }
                    for i in range(2)
                ]
                topics.append({"error_code": 0, "name": "t", "partitions": parts})
            return {
                "brokers": [{"node_id": 7, "host": "127.0.0.1", "port": self.port}],
                "cluster_id": "tiny",
                "controller_id": 7,
                "topics": topics,
            }
        return self.scripted[api_key].pop(0)


def offsets_body(code: int, offset: int = 42) -> dict:
    return {
        "topics": [
            {
                "name": "t",
                "partitions": [
                    {"partition_index": 0, "error_code": code, "offset": offset, "timestamp": -1}
                ],
            }
        ]
    }


def test_bootstrap_loads_brokers_and_controller() -> None:
    async def main() -> None:
        async with OneBrokerCluster() as srv:
            async with ClusterClient(f"127.0.0.1:{srv.port}") as cluster:
                assert list(cluster.brokers) == [7]
                assert cluster.controller_id == 7
                assert cluster.cluster_id == "tiny"
                assert await cluster.leader_for("t", 1) == 7
                conn = await cluster.controller_connection()
                assert conn.node_id == 7

    run(main())


def test_not_leader_refreshes_metadata_and_retries() -> None:
    async def main() -> None:
        async with OneBrokerCluster() as srv:
            srv.scripted[ApiKey.LIST_OFFSETS] = [
                offsets_body(ErrorCode.NOT_LEADER_OR_FOLLOWER),
                offsets_body(ErrorCode.NONE, 42),
            ]
            async with AdminClient(f"127.0.0.1:{srv.port}") as admin:
                before = srv.calls[ApiKey.METADATA]
                got = await admin.list_offsets({TopicPartition("t", 0): OffsetSpec.LATEST})
                assert got[TopicPartition("t", 0)].offset == 42
                assert srv.calls[ApiKey.LIST_OFFSETS] == 2
                # one lookup for the leader, one refresh after NOT_LEADER_OR_FOLLOWER
                assert srv.calls[ApiKey.METADATA] - before >= 2

    run(main())


def test_non_retriable_error_is_raised_at_once() -> None:
    async def main() -> None:
        async with OneBrokerCluster() as srv:
            srv.scripted[ApiKey.LIST_OFFSETS] = [offsets_body(ErrorCode.UNSUPPORTED_VERSION)]
            async with AdminClient(f"127.0.0.1:{srv.port}") as admin:
                with pytest.raises(KafkaError) as info:
                    await admin.list_offsets({TopicPartition("t", 0): OffsetSpec.LATEST})
                assert info.value.code == ErrorCode.UNSUPPORTED_VERSION
                assert srv.calls[ApiKey.LIST_OFFSETS] == 1

    run(main())


def test_unknown_topic_fails_after_one_refresh() -> None:
    async def main() -> None:
        async with OneBrokerCluster() as srv:
            async with AdminClient(f"127.0.0.1:{srv.port}") as admin:
                with pytest.raises(KafkaError) as info:
                    await admin.list_offsets({TopicPartition("nope", 0): OffsetSpec.LATEST})
                assert info.value.code == ErrorCode.UNKNOWN_TOPIC_OR_PARTITION
                assert "nope" in str(info.value)

    run(main())


def test_create_topics_retries_not_controller_then_reports_errors() -> None:
    async def main() -> None:
        async with OneBrokerCluster() as srv:
            srv.scripted[ApiKey.CREATE_TOPICS] = [
                {"topics": [{"name": "a", "error_code": ErrorCode.NOT_CONTROLLER}]},
                {
                    "topics": [
                        {
                            "name": "a",
                            "error_code": ErrorCode.TOPIC_ALREADY_EXISTS,
                            "error_message": "Topic 'a' already exists.",
                        }
                    ]
                },
            ]
            async with AdminClient(f"127.0.0.1:{srv.port}") as admin:
                with pytest.raises(KafkaError) as info:
                    await admin.create_topic("a", 1, 1)
                assert info.value.code == ErrorCode.TOPIC_ALREADY_EXISTS
                assert info.value.message == "Topic 'a' already exists."
                assert srv.calls[ApiKey.CREATE_TOPICS] == 2

    run(main())


def test_retry_gives_up_at_the_deadline() -> None:
    async def main() -> None:
        async with OneBrokerCluster() as srv:
            srv.scripted[ApiKey.LIST_OFFSETS] = [
                offsets_body(ErrorCode.LEADER_NOT_AVAILABLE) for _ in range(1000)
            ]
            async with AdminClient(f"127.0.0.1:{srv.port}", retry_timeout=0.5) as admin:
                with pytest.raises(KafkaError) as info:
                    await admin.list_offsets({TopicPartition("t", 0): OffsetSpec.LATEST})
                assert info.value.code == ErrorCode.LEADER_NOT_AVAILABLE
                assert srv.calls[ApiKey.LIST_OFFSETS] > 1

    run(main())


def produce_body(code: int, base_offset: int = 0, partition: int = 0) -> dict:
    return {
        "responses": [
            {
                "name": "t",
                "partition_responses": [
                    {"index": partition, "error_code": code, "base_offset": base_offset}
                ],
            }
        ]
    }


def test_producer_retries_a_batch_after_not_leader() -> None:
    async def main() -> None:
        async with OneBrokerCluster() as srv:
            srv.scripted[ApiKey.PRODUCE] = [
                produce_body(ErrorCode.NOT_LEADER_OR_FOLLOWER),
                produce_body(ErrorCode.NONE, 100),
            ]
            payloads: list[bytes] = []
            original = srv.handle

            async def spy(api_key: int, version: int, correlation_id: int, body: dict) -> dict:
                if api_key == ApiKey.PRODUCE:
                    payloads.append(bytes(body["topic_data"][0]["partition_data"][0]["records"]))
                return await original(api_key, version, correlation_id, body)

            srv.handler = spy
            async with Producer(f"127.0.0.1:{srv.port}", linger_ms=50) as producer:
                futures = [await producer.send("t", f"v{i}", partition=0) for i in range(3)]
                metas = [await f for f in futures]
            assert [m.offset for m in metas] == [100, 101, 102]
            assert len(payloads) == 2 and payloads[0] == payloads[1]  # one batch, resent as is
            _, recs = decode_batch(payloads[0])
            assert [r.value for r in recs] == [b"v0", b"v1", b"v2"]

    run(main())


def test_producer_fails_records_on_a_non_retriable_error() -> None:
    async def main() -> None:
        async with OneBrokerCluster() as srv:
            srv.scripted[ApiKey.PRODUCE] = [produce_body(ErrorCode.INVALID_RECORD)]
            async with Producer(f"127.0.0.1:{srv.port}") as producer:
                with pytest.raises(KafkaError) as info:
                    await producer.send_and_wait("t", b"v", partition=0)
                assert info.value.code == ErrorCode.INVALID_RECORD

    run(main())


def fetch_response(session_id: int, error: int = 0) -> dict:
    return {"error_code": error, "session_id": session_id, "responses": []}


def test_consumer_fetch_sessions_send_only_changes() -> None:
    async def main() -> None:
        async with OneBrokerCluster() as srv:
            srv.api_ranges[ApiKey.FETCH] = (4, 12)
            requests: list[dict] = []
            replies = [
                fetch_response(77),
                fetch_response(77),
                fetch_response(77),
                fetch_response(77),
                fetch_response(0, ErrorCode.FETCH_SESSION_ID_NOT_FOUND),
                fetch_response(78),
            ]
            original = srv.handle

            async def fetch(api_key: int, version: int, correlation_id: int, body: dict) -> dict:
                if api_key == ApiKey.FETCH:
                    requests.append(body)
                    return replies.pop(0)
                return await original(api_key, version, correlation_id, body)

            srv.handler = fetch

            def sent(i: int) -> dict[tuple[str, int], int]:
                return {
                    (t["topic"], p["partition"]): p["fetch_offset"]
                    for t in requests[i]["topics"]
                    for p in t["partitions"]
                }

            def session(i: int) -> tuple[int, int]:
                return requests[i]["session_id"], requests[i]["session_epoch"]

            async with Consumer(f"127.0.0.1:{srv.port}", fetch_max_wait_ms=10) as consumer:
                tp0, tp1 = TopicPartition("t", 0), TopicPartition("t", 1)
                consumer.assign([tp0, tp1])
                consumer.seek(tp0, 5)
                consumer.seek(tp1, 9)
                await consumer.poll(0)
                assert session(0) == (0, 0)  # a full request opens a session
                assert sent(0) == {("t", 0): 5, ("t", 1): 9}
                await consumer.poll(0)
                assert session(1) == (77, 1)
                assert sent(1) == {}  # nothing changed
                consumer.seek(tp0, 3)
                await consumer.poll(0)
                assert session(2) == (77, 2)
                assert sent(2) == {("t", 0): 3}
                consumer.assign([tp1])
                await consumer.poll(0)
                assert session(3) == (77, 3)
                assert sent(3) == {}
                assert requests[3]["forgotten_topics_data"] == [
                    {"topic": "t", "topic_id": ZERO_UUID, "partitions": [0]}
                ]
                await consumer.poll(0)  # the broker lost the session
                await consumer.poll(0)
                assert session(5) == (0, 0)
                assert sent(5) == {("t", 1): 9}

    run(main())
