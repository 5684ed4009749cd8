"""ClusterClient: bootstrap parsing, and metadata-driven routing and retries against the tiny
codec-backed server of test_client_connection."""

from __future__ import annotations

import pytest
from odradek.broker.client.admin import AdminClient, OffsetSpec
from odradek.broker.client.cluster import ClusterClient, TopicPartition, parse_bootstrap
from odradek.broker.protocol.api_keys import ApiKey
from odradek.broker.protocol.errors import ErrorCode, KafkaError
from test_client_connection import TinyBroker, run

RANGES = {
    ApiKey.API_VERSIONS: (0, 4),
    ApiKey.METADATA: (0, 12),
    ApiKey.LIST_OFFSETS: (0, 9),
    ApiKey.CREATE_TOPICS: (0, 7),
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
        super().__init__(RANGES, self.handle)
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
