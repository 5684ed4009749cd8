"""Topics: create, delete, list, describe, and add partitions (through the controller)."""

from __future__ import annotations

import uuid
from collections.abc import Awaitable, Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import TypeVar

from ...protocol.api_keys import ApiKey
from ...protocol.errors import ErrorCode, KafkaError
from ..cluster import ZERO_UUID, PartitionMetadata, TopicMetadata, error_of, raise_first
from .base import AdminBase
from .configs import ConfigEntry, config_entry

R = TypeVar("R")


@dataclass(slots=True)
class NewTopic:
    """A topic to create. -1 partitions / replication factor: the broker's defaults.

    `assignments` (partition -> broker ids) replaces both counts when given.
    """

    name: str
    num_partitions: int = -1
    replication_factor: int = -1
    configs: dict[str, str] = field(default_factory=dict)
    assignments: dict[int, list[int]] | None = None


@dataclass(slots=True)
class TopicResult:
    """Outcome of an operation on one topic (delete, create_partitions)."""

    name: str
    error: KafkaError | None = None
    topic_id: uuid.UUID = ZERO_UUID


@dataclass(slots=True)
class CreateTopicResult:
    name: str
    topic_id: uuid.UUID = ZERO_UUID
    num_partitions: int = -1
    replication_factor: int = -1
    configs: dict[str, ConfigEntry] = field(default_factory=dict)
    error: KafkaError | None = None


@dataclass(slots=True)
class TopicDescription:
    name: str
    topic_id: uuid.UUID
    is_internal: bool
    partitions: list[PartitionMetadata]  # the cluster's own, by partition

    @property
    def replication_factor(self) -> int:
        return len(self.partitions[0].replicas) if self.partitions else 0


def _new_topic_body(t: NewTopic) -> dict:
    if t.assignments:
        assignments = [
            {"partition_index": p, "broker_ids": list(ids)}
            for p, ids in sorted(t.assignments.items())
        ]
        num_partitions, replication_factor = -1, -1
    else:
        assignments, num_partitions, replication_factor = (
            [],
            t.num_partitions,
            t.replication_factor,
        )
    return {
        "name": t.name,
        "num_partitions": num_partitions,
        "replication_factor": replication_factor,
        "assignments": assignments,
        "configs": [{"name": k, "value": v} for k, v in t.configs.items()],
    }


def _topic_error(t: dict) -> KafkaError | None:
    return error_of(t["error_code"], t.get("error_message"), f"topic {t['name']!r}", t["name"])


class TopicsAdmin(AdminBase):
    async def _each_topic(
        self,
        names: Sequence[str],
        send: Callable[[list[str]], Awaitable[list[dict]]],
        result: Callable[[dict, KafkaError | None], R],
        missing: Callable[[str, KafkaError], R],
        what: str,
    ) -> dict[str, R]:
        """A per-topic request to the controller: topics answered NOT_CONTROLLER are sent
        again (to the controller the refreshed metadata names) until the retry deadline;
        `send(pending names)` returns the response's topic entries."""
        pending = list(dict.fromkeys(names))
        results: dict[str, R] = {}

        async def attempt() -> None:
            retry: KafkaError | None = None
            for t in await send(pending):
                error = _topic_error(t)
                if error is not None and error.code == ErrorCode.NOT_CONTROLLER:
                    retry = error
                    continue
                results[t["name"]] = result(t, error)
                if t["name"] in pending:
                    pending.remove(t["name"])
            if retry is not None:
                self.cluster.mark_stale()
                raise retry

        if pending:
            await self.cluster.retry(attempt, what=what)
        for name in pending:
            error = KafkaError(ErrorCode.UNKNOWN_SERVER_ERROR, f"topic {name!r}: no result")
            results[name] = missing(name, error)
        return results

    async def create_topics(
        self,
        topics: Sequence[NewTopic],
        *,
        validate_only: bool = False,
        raise_errors: bool = True,
    ) -> dict[str, CreateTopicResult]:
        """Create topics (through the controller). Results carry the broker's effective
        partition count, replication factor and configs (CreateTopics v5+)."""
        by_name = {t.name: t for t in topics}

        async def send(pending: list[str]) -> list[dict]:
            body = {
                "topics": [_new_topic_body(by_name[n]) for n in pending],
                "timeout_ms": self._timeout_ms,
                "validate_only": validate_only,
            }
            conn = await self.cluster.controller_connection()
            version = conn.version_for(ApiKey.CREATE_TOPICS)
            if validate_only and version < 1:
                raise KafkaError(ErrorCode.UNSUPPORTED_VERSION, "validate_only needs v1+")
            return (await conn.request(ApiKey.CREATE_TOPICS, body, version))["topics"]

        def result(t: dict, error: KafkaError | None) -> CreateTopicResult:
            return CreateTopicResult(
                t["name"],
                t.get("topic_id") or ZERO_UUID,
                t.get("num_partitions", -1),
                t.get("replication_factor", -1),
                {c["name"]: config_entry(c, 1) for c in t.get("configs") or []},
                error,
            )

        def missing(name: str, error: KafkaError) -> CreateTopicResult:
            return CreateTopicResult(name, error=error)

        results = await self._each_topic(list(by_name), send, result, missing, "CreateTopics")
        if not validate_only and any(r.error is None for r in results.values()):
            self.cluster.mark_stale()
        if raise_errors:
            raise_first(r.error for r in results.values())
        return results

    async def create_topic(
        self,
        name: str,
        num_partitions: int = -1,
        replication_factor: int = -1,
        configs: Mapping[str, str] | None = None,
        *,
        validate_only: bool = False,
    ) -> CreateTopicResult:
        topic = NewTopic(name, num_partitions, replication_factor, dict(configs or {}))
        return (await self.create_topics([topic], validate_only=validate_only))[name]

    async def delete_topics(
        self, names: Sequence[str], *, raise_errors: bool = True
    ) -> dict[str, TopicResult]:
        """Delete topics by name (through the controller)."""

        async def send(pending: list[str]) -> list[dict]:
            body = {
                "topics": [{"name": n, "topic_id": ZERO_UUID} for n in pending],
                "topic_names": pending,
                "timeout_ms": self._timeout_ms,
            }
            resp = await self.cluster.request_controller(ApiKey.DELETE_TOPICS, body)
            return resp["responses"]

        def result(t: dict, error: KafkaError | None) -> TopicResult:
            return TopicResult(t["name"], error, t.get("topic_id") or ZERO_UUID)

        results = await self._each_topic(names, send, result, TopicResult, "DeleteTopics")
        self.cluster.mark_stale()
        if raise_errors:
            raise_first(r.error for r in results.values())
        return results

    async def list_topics(self, *, include_internal: bool = False) -> list[str]:
        """Names of all topics, sorted."""
        resp = await self.cluster.retry(
            lambda: self.cluster.refresh_metadata(None), what="Metadata"
        )
        return sorted(
            t["name"]
            for t in resp["topics"]
            if t["name"] is not None and (include_internal or not t["is_internal"])
        )

    async def describe_topics(
        self, names: Sequence[str] | None = None
    ) -> dict[str, TopicDescription]:
        """Partitions, leaders, replicas and ISR of `names` (None: every topic)."""
        resp = await self.cluster.retry(
            lambda: self.cluster.refresh_metadata(None if names is None else list(names)),
            what="Metadata",
        )
        out: dict[str, TopicDescription] = {}
        for t in resp["topics"]:
            name = t["name"]
            error = error_of(t["error_code"], None, f"topic {name!r}")
            if error is not None:
                raise error
            tm: TopicMetadata = self.cluster.topics[name]
            partitions = sorted(tm.partitions.values(), key=lambda p: p.partition)
            out[name] = TopicDescription(name, tm.topic_id, tm.is_internal, partitions)
        if names is not None:
            for name in names:
                if name not in out:
                    raise KafkaError(ErrorCode.UNKNOWN_TOPIC_OR_PARTITION, f"topic {name!r}")
            return {name: out[name] for name in names}
        return dict(sorted(out.items()))

    async def describe_topic(self, name: str) -> TopicDescription:
        return (await self.describe_topics([name]))[name]

    async def create_partitions(
        self,
        new_totals: Mapping[str, int],
        *,
        assignments: Mapping[str, Sequence[Sequence[int]]] | None = None,
        validate_only: bool = False,
        raise_errors: bool = True,
    ) -> dict[str, TopicResult]:
        """Grow topics to `new_totals[name]` partitions; `assignments` places the new ones."""
        body = {
            "topics": [
                {
                    "name": name,
                    "count": count,
                    "assignments": (
                        [{"broker_ids": list(ids)} for ids in assignments[name]]
                        if assignments and name in assignments
                        else None
                    ),
                }
                for name, count in new_totals.items()
            ],
            "timeout_ms": self._timeout_ms,
            "validate_only": validate_only,
        }
        results: dict[str, TopicResult] = {}

        async def attempt() -> None:
            resp = await self.cluster.request_controller(ApiKey.CREATE_PARTITIONS, body)
            for r in resp["results"]:
                error = _topic_error(r)
                if error is not None and error.code == ErrorCode.NOT_CONTROLLER:
                    self.cluster.mark_stale()
                    raise error
                results[r["name"]] = TopicResult(r["name"], error)

        await self.cluster.retry(attempt, what="CreatePartitions")
        self.cluster.mark_stale()
        if raise_errors:
            raise_first(r.error for r in results.values())
        return results
