"""Where replicas live: the cluster's brokers, their log dirs, and partition reassignments
(KIP-455) that move replicas between brokers."""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field

from ...protocol.api_keys import ApiKey
from ...protocol.errors import ErrorCode, KafkaError
from ..cluster import BrokerNode, TopicPartition, error_of
from .base import AdminBase, partition_indexes


@dataclass(slots=True)
class ClusterDescription:
    cluster_id: str | None
    controller_id: int
    brokers: list[BrokerNode]


@dataclass(slots=True)
class ReplicaLogDirInfo:
    size: int
    offset_lag: int
    is_future: bool


@dataclass(slots=True)
class LogDirDescription:
    path: str
    error: ErrorCode
    replicas: dict[TopicPartition, ReplicaLogDirInfo] = field(default_factory=dict)
    total_bytes: int = -1
    usable_bytes: int = -1


@dataclass(slots=True)
class PartitionReassignment:
    """A reassignment in progress (KIP-455): the full target replica list and its delta."""

    replicas: list[int]
    adding_replicas: list[int]
    removing_replicas: list[int]


def _node_key(node: BrokerNode) -> int:
    return node.node_id


class PlacementAdmin(AdminBase):
    async def describe_cluster(self) -> ClusterDescription:
        """Cluster id, controller and brokers (DescribeCluster, or Metadata on old brokers)."""

        async def attempt() -> ClusterDescription:
            conn = await self.cluster.any_connection()
            if conn.supports(ApiKey.DESCRIBE_CLUSTER):
                resp = await conn.request(
                    ApiKey.DESCRIBE_CLUSTER, {"include_cluster_authorized_operations": False}
                )
                error = error_of(resp["error_code"], resp.get("error_message"), "DescribeCluster")
                if error is not None:
                    raise error
                brokers = [
                    BrokerNode(b["broker_id"], b["host"], b["port"], b["rack"])
                    for b in resp["brokers"]
                ]
                return ClusterDescription(
                    resp["cluster_id"], resp["controller_id"], sorted(brokers, key=_node_key)
                )
            await self.cluster.refresh_metadata([])
            return ClusterDescription(
                self.cluster.cluster_id,
                self.cluster.controller_id,
                sorted(self.cluster.brokers.values(), key=_node_key),
            )

        return await self.cluster.retry(attempt, what="DescribeCluster")

    # -- log dirs -------------------------------------------------------------------------

    async def describe_log_dirs(
        self,
        broker_ids: Sequence[int] | None = None,
        topics: Mapping[str, Sequence[int]] | None = None,
    ) -> dict[int, list[LogDirDescription]]:
        """Log directories of each broker (default: all) with the sizes of their replicas;
        `topics` (name -> partitions) narrows the replicas reported."""
        if broker_ids is None:
            await self.cluster.retry(lambda: self.cluster.refresh_metadata([]), what="Metadata")
            broker_ids = sorted(self.cluster.brokers)
        body = {
            "topics": None
            if topics is None
            else [{"topic": t, "partitions": list(ps)} for t, ps in topics.items()]
        }
        out: dict[int, list[LogDirDescription]] = {}
        for node_id in broker_ids:
            resp = await self.cluster.retry(
                lambda n=node_id: self.cluster.request_node(n, ApiKey.DESCRIBE_LOG_DIRS, body),
                what="DescribeLogDirs",
            )
            error = error_of(resp.get("error_code", 0), None, f"broker {node_id}")
            if error is not None:
                raise error
            dirs = []
            for r in resp["results"]:
                d = LogDirDescription(
                    r["log_dir"],
                    ErrorCode.of(r["error_code"]),
                    total_bytes=r.get("total_bytes", -1),
                    usable_bytes=r.get("usable_bytes", -1),
                )
                for t in r["topics"]:
                    for p in t["partitions"]:
                        d.replicas[TopicPartition(t["name"], p["partition_index"])] = (
                            ReplicaLogDirInfo(
                                p["partition_size"], p["offset_lag"], p["is_future_key"]
                            )
                        )
                dirs.append(d)
            out[node_id] = dirs
        return out

    async def alter_replica_log_dirs(
        self, moves: Mapping[tuple[TopicPartition, int], str]
    ) -> dict[tuple[TopicPartition, int], KafkaError | None]:
        """Move replicas, given as (partition, broker id), to a log dir of their broker
        (AlterReplicaLogDirs). Returns each one's error, None when the broker took it (the
        copy then runs in the background; describe_log_dirs shows its future replica).
        REPLICA_NOT_AVAILABLE: the broker does not host it yet, and will create it there."""
        by_broker: dict[int, dict[str, dict[str, list[int]]]] = {}
        for (tp, broker), path in moves.items():
            topics = by_broker.setdefault(broker, {}).setdefault(path, {})
            topics.setdefault(tp.topic, []).append(tp.partition)
        out: dict[tuple[TopicPartition, int], KafkaError | None] = {}
        for broker, dirs in by_broker.items():
            body = {
                "dirs": [
                    {"path": path,
                     "topics": [{"name": t, "partitions": ps} for t, ps in topics.items()]}
                    for path, topics in dirs.items()
                ]
            }  # fmt: skip
            resp = await self.cluster.retry(
                lambda b=broker, body=body: self.cluster.request_node(
                    b, ApiKey.ALTER_REPLICA_LOG_DIRS, body
                ),
                what="AlterReplicaLogDirs",
            )
            for t in resp["results"]:
                for p in t["partitions"]:
                    tp = TopicPartition(t["topic_name"], p["partition_index"])
                    out[(tp, broker)] = error_of(
                        p["error_code"], None, f"replica of {tp} on broker {broker}"
                    )
        return out

    # -- partition reassignment (KIP-455) -----------------------------------------------

    async def alter_partition_reassignments(
        self, targets: Mapping[TopicPartition, Sequence[int] | None]
    ) -> dict[TopicPartition, KafkaError | None]:
        """Move each (topic, partition) to its target replicas (None cancels its reassignment);
        returns each partition's error, None where the controller accepted it."""
        by_topic: dict[str, list[dict]] = {}
        for (topic, partition), replicas in targets.items():
            by_topic.setdefault(topic, []).append(
                {
                    "partition_index": partition,
                    "replicas": None if replicas is None else list(replicas),
                }
            )
        body = {
            "timeout_ms": self._timeout_ms,
            "topics": [{"name": t, "partitions": ps} for t, ps in by_topic.items()],
        }
        results: dict[TopicPartition, KafkaError | None] = {}

        async def attempt() -> None:
            resp = await self._controller_request(
                ApiKey.ALTER_PARTITION_REASSIGNMENTS, body, "reassignment"
            )
            for t in resp["responses"]:
                for p in t["partitions"]:
                    where = f"partition {t['name']}-{p['partition_index']}"
                    results[TopicPartition(t["name"], p["partition_index"])] = error_of(
                        p["error_code"], p.get("error_message"), where
                    )

        await self.cluster.retry(attempt, what="AlterPartitionReassignments")
        self.cluster.mark_stale()
        return results

    async def list_partition_reassignments(
        self, partitions: Iterable[TopicPartition] | None = None
    ) -> dict[TopicPartition, PartitionReassignment]:
        """Reassignments in progress, of `partitions` or (None) of every topic."""
        body = {"timeout_ms": self._timeout_ms, "topics": partition_indexes(partitions)}

        resp = await self.cluster.retry(
            lambda: self._controller_request(
                ApiKey.LIST_PARTITION_REASSIGNMENTS, body, "reassignments"
            ),
            what="ListPartitionReassignments",
        )
        return {
            TopicPartition(t["name"], p["partition_index"]): PartitionReassignment(
                list(p["replicas"]), list(p["adding_replicas"]), list(p["removing_replicas"])
            )
            for t in resp["topics"]
            for p in t["partitions"]
        }
