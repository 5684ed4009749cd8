"""The cluster as the client sees it: bootstrap, metadata, one connection per broker, retries.

Requests go to a partition's leader, to the controller, to a given broker or to any broker.
Retriable errors (lost connections, NOT_LEADER_OR_FOLLOWER, UNKNOWN_TOPIC_OR_PARTITION,
NOT_CONTROLLER, ...) refresh the metadata and try again with exponential backoff until a
deadline; anything else reaches the caller at once.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import random
import time
import uuid
from collections.abc import Awaitable, Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, NamedTuple, Self, TypedDict, TypeVar

from ..protocol.api_keys import ApiKey
from ..protocol.errors import ErrorCode, KafkaError
from .connection import BrokerConnection
from .errors import BrokerConnectionError
from .security import ClientSecurity

log = logging.getLogger(__name__)

T = TypeVar("T")
V = TypeVar("V")
R = TypeVar("R")

DEFAULT_PORT = 9092
ZERO_UUID = uuid.UUID(int=0)

# Errors after which the cached metadata is probably stale.
_METADATA_ERRORS = frozenset(
    {
        ErrorCode.NOT_LEADER_OR_FOLLOWER,
        ErrorCode.LEADER_NOT_AVAILABLE,
        ErrorCode.UNKNOWN_TOPIC_OR_PARTITION,
        ErrorCode.NOT_CONTROLLER,
        ErrorCode.NETWORK_EXCEPTION,
        ErrorCode.REQUEST_TIMED_OUT,
        ErrorCode.FENCED_LEADER_EPOCH,
        ErrorCode.UNKNOWN_LEADER_EPOCH,
        ErrorCode.UNKNOWN_TOPIC_ID,
        ErrorCode.REPLICA_NOT_AVAILABLE,
        ErrorCode.BROKER_NOT_AVAILABLE,
        ErrorCode.KAFKA_STORAGE_ERROR,
    }
)


def parse_bootstrap(servers: str | Sequence[str]) -> list[tuple[str, int]]:
    """ "host:port,host2:port2" (or a list of them) -> [(host, port)]; IPv6 as "[::1]:9092"."""
    items = servers.split(",") if isinstance(servers, str) else list(servers)
    out: list[tuple[str, int]] = []
    for raw in items:
        item = raw.strip()
        if not item:
            continue
        if "://" in item:  # "PLAINTEXT://host:port", as listeners are written
            item = item.split("://", 1)[1]
        if item.startswith("["):
            host, _, rest = item[1:].partition("]")
            port_text = rest[1:] if rest.startswith(":") else ""
        elif item.count(":") == 1:
            host, port_text = item.split(":")
        else:
            host, port_text = item, ""
        try:
            port = int(port_text) if port_text else DEFAULT_PORT
        except ValueError:
            raise ValueError(f"invalid port in bootstrap server {raw.strip()!r}") from None
        if not host or not 0 < port < 65536:
            raise ValueError(f"invalid bootstrap server {raw.strip()!r}")
        out.append((host, port))
    if not out:
        raise ValueError("no bootstrap servers given")
    return out


class TopicPartition(NamedTuple):
    topic: str
    partition: int

    def __str__(self) -> str:
        return f"{self.topic}-{self.partition}"


def group_by_topic(items: Iterable[tuple[TopicPartition, V]]) -> dict[str, list[V]]:
    """Values per topic, in first-seen order: how requests list their partitions."""
    out: dict[str, list[V]] = {}
    for tp, value in items:
        out.setdefault(tp.topic, []).append(value)
    return out


def partitions_by_topic(tps: Iterable[TopicPartition]) -> dict[str, list[int]]:
    """Partition numbers per topic, in first-seen order."""
    return group_by_topic((tp, tp.partition) for tp in tps)


@dataclass(frozen=True, slots=True)
class BrokerNode:
    node_id: int
    host: str
    port: int
    rack: str | None = None


@dataclass(slots=True)
class PartitionMetadata:
    topic: str
    partition: int
    leader: int
    leader_epoch: int
    replicas: list[int]
    isr: list[int]
    offline_replicas: list[int]
    error: ErrorCode = ErrorCode.NONE


@dataclass(slots=True)
class TopicMetadata:
    name: str
    topic_id: uuid.UUID
    is_internal: bool
    partitions: dict[int, PartitionMetadata] = field(default_factory=dict)
    error: ErrorCode = ErrorCode.NONE


def error_of(
    code: int, message: str | None = None, what: str = "", name: str | None = None
) -> KafkaError | None:
    """A KafkaError for a non-zero response code, with the broker's message; `what` (e.g.
    "topic 'x'") prefixes it unless the message already mentions `name`."""
    if code == 0:
        return None
    if not message:
        return KafkaError(code, what or None)
    if what and (name is None or name not in message):
        return KafkaError(code, f"{what}: {message}")
    return KafkaError(code, message)


REQUEST_TIMEOUT = 30.0  # seconds a client waits for a response unless told otherwise


class ClusterClient:
    """Shared connections and metadata for the admin client, producer and consumer.

    `retry_timeout` bounds how long an operation keeps retrying retriable errors.
    """

    def __init__(
        self,
        bootstrap_servers: str | Sequence[str],
        *,
        client_id: str = "odradek-client",
        request_timeout: float = REQUEST_TIMEOUT,
        connect_timeout: float = 10.0,
        retry_timeout: float = 30.0,
        retry_backoff: float = 0.05,
        max_retry_backoff: float = 1.0,
        security: ClientSecurity | None = None,
    ) -> None:
        self.bootstrap = parse_bootstrap(bootstrap_servers)
        self.security = security
        self.client_id = client_id
        self.request_timeout = request_timeout
        self.connect_timeout = connect_timeout
        self.retry_timeout = retry_timeout
        self.retry_backoff = retry_backoff
        self.max_retry_backoff = max_retry_backoff
        self.brokers: dict[int, BrokerNode] = {}
        self.cluster_id: str | None = None
        self.controller_id: int = -1
        self.topics: dict[str, TopicMetadata] = {}
        self._conns: dict[int, BrokerConnection] = {}
        self._bootstrap_conn: BrokerConnection | None = None
        self._connect_locks: dict[int, asyncio.Lock] = {}
        self._closing: set[asyncio.Task[None]] = set()
        self._metadata_lock = asyncio.Lock()
        self._stale = True
        self._closed = False

    # -- lifecycle ------------------------------------------------------------------------

    async def start(self) -> ClusterClient:
        """Connect to a bootstrap server and load the broker list."""
        await self.retry(lambda: self.refresh_metadata([]), what="bootstrap")
        return self

    async def close(self) -> None:
        self._closed = True
        conns = list(self._conns.values())
        if self._bootstrap_conn is not None:
            conns.append(self._bootstrap_conn)
        self._conns.clear()
        self._bootstrap_conn = None
        for conn in conns:
            await conn.close()

    async def __aenter__(self) -> ClusterClient:
        return await self.start()

    async def __aexit__(self, *exc: object) -> None:
        await self.close()

    # -- connections ----------------------------------------------------------------------

    def _new_connection(self, host: str, port: int, node_id: int | None) -> BrokerConnection:
        return BrokerConnection(
            host,
            port,
            client_id=self.client_id,
            request_timeout=self.request_timeout,
            connect_timeout=self.connect_timeout,
            node_id=node_id,
            security=self.security,
        )

    async def connection(self, node_id: int) -> BrokerConnection:
        """The open connection to broker `node_id`, connecting when needed."""
        if self._closed:
            raise BrokerConnectionError("client is closed")
        conn = self._conns.get(node_id)
        if conn is not None and conn.connected:
            return conn
        lock = self._connect_locks.setdefault(node_id, asyncio.Lock())
        async with lock:
            conn = self._conns.get(node_id)
            if conn is not None and conn.connected:
                return conn
            node = self.brokers.get(node_id)
            if node is None:
                self._stale = True
                raise KafkaError(
                    ErrorCode.BROKER_NOT_AVAILABLE, f"broker {node_id} is not in the metadata"
                )
            conn = self._new_connection(node.host, node.port, node_id)
            await conn.connect()
            self._conns[node_id] = conn
            return conn

    async def any_connection(self) -> BrokerConnection:
        """An open connection to some broker: an existing one, a known broker, or bootstrap."""
        if self._closed:
            raise BrokerConnectionError("client is closed")
        for conn in self._conns.values():
            if conn.connected:
                return conn
        if self._bootstrap_conn is not None and self._bootstrap_conn.connected:
            return self._bootstrap_conn
        errors: list[str] = []
        nodes = list(self.brokers)
        random.shuffle(nodes)
        for node_id in nodes:
            try:
                return await self.connection(node_id)
            except KafkaError as e:
                if not e.retriable:
                    raise  # e.g. failed authentication: another broker will not differ
                errors.append(str(e))
        for host, port in self.bootstrap:
            conn = self._new_connection(host, port, None)
            try:
                await conn.connect()
            except KafkaError as e:
                if not e.retriable:
                    raise
                errors.append(e.message or str(e))
                continue
            self._bootstrap_conn = conn
            return conn
        raise BrokerConnectionError("no broker reachable: " + "; ".join(errors))

    # -- metadata -------------------------------------------------------------------------

    async def refresh_metadata(
        self, topics: Iterable[str] | None = None, *, allow_auto_create: bool = False
    ) -> dict:
        """Fetch Metadata for `topics` (None: all topics, []: brokers only) and update the cache.

        Returns the raw response body.
        """
        names = None if topics is None else list(dict.fromkeys(topics))
        async with self._metadata_lock:
            conn = await self.any_connection()
            version = conn.version_for(ApiKey.METADATA)
            if names is None:
                req_topics = None if version >= 1 else []
            else:
                if not names and version == 0:
                    # v0 reads an empty list as "all topics"; any name keeps it small.
                    names = ["__odradek_no_such_topic__"]
                req_topics = [{"name": n, "topic_id": ZERO_UUID} for n in names]
            resp = await conn.request(
                ApiKey.METADATA,
                {
                    "topics": req_topics,
                    "allow_auto_topic_creation": allow_auto_create,
                    "include_topic_authorized_operations": False,
                },
                version,
            )
            self._apply_metadata(resp, replace_all=names is None)
            return resp

    def _apply_metadata(self, resp: dict, *, replace_all: bool) -> None:
        brokers = {
            b["node_id"]: BrokerNode(b["node_id"], b["host"], b["port"], b.get("rack"))
            for b in resp["brokers"]
        }
        for node_id, conn in list(self._conns.items()):
            node = brokers.get(node_id)
            if node is None or (node.host, node.port) != (conn.host, conn.port):
                del self._conns[node_id]
                task = asyncio.get_running_loop().create_task(conn.close())
                self._closing.add(task)
                task.add_done_callback(self._closing.discard)
        self.brokers = brokers
        self.cluster_id = resp.get("cluster_id")
        self.controller_id = resp.get("controller_id", -1)
        seen: dict[str, TopicMetadata] = {}
        for t in resp["topics"]:
            name = t["name"]
            if name is None:
                continue
            error = ErrorCode.of(t["error_code"])
            if error in (ErrorCode.UNKNOWN_TOPIC_OR_PARTITION, ErrorCode.INVALID_TOPIC_EXCEPTION):
                self.topics.pop(name, None)
                continue
            tm = TopicMetadata(name, t.get("topic_id") or ZERO_UUID, t["is_internal"], error=error)
            for p in t["partitions"]:
                tm.partitions[p["partition_index"]] = PartitionMetadata(
                    name,
                    p["partition_index"],
                    p["leader_id"],
                    p["leader_epoch"],
                    list(p["replica_nodes"]),
                    list(p["isr_nodes"]),
                    list(p["offline_replicas"]),
                    ErrorCode.of(p["error_code"]),
                )
            seen[name] = tm
        if replace_all:
            self.topics = seen
        else:
            self.topics.update(seen)
        self._stale = False

    def mark_stale(self) -> None:
        """Refresh the metadata before the next routing decision."""
        self._stale = True

    async def topic(self, name: str, *, allow_auto_create: bool = False) -> TopicMetadata:
        """Metadata of one topic; UNKNOWN_TOPIC_OR_PARTITION (retriable) when it does not exist."""
        tm = self.topics.get(name)
        if tm is None or self._stale or tm.error != ErrorCode.NONE:
            resp = await self.refresh_metadata([name], allow_auto_create=allow_auto_create)
            for t in resp["topics"]:
                if t["name"] == name and t["error_code"] != 0:
                    raise KafkaError(t["error_code"], f"topic {name!r}")
            tm = self.topics.get(name)
            if tm is None:
                raise KafkaError(ErrorCode.UNKNOWN_TOPIC_OR_PARTITION, f"topic {name!r}")
        return tm

    async def leader_for(self, topic: str, partition: int) -> int:
        """The leader's node id; LEADER_NOT_AVAILABLE / UNKNOWN_TOPIC_OR_PARTITION otherwise."""
        tm = await self.topic(topic)
        pm = tm.partitions.get(partition)
        if pm is None:
            self._stale = True
            raise KafkaError(ErrorCode.UNKNOWN_TOPIC_OR_PARTITION, f"partition {topic}-{partition}")
        if pm.leader < 0 or pm.leader not in self.brokers:
            self._stale = True
            raise KafkaError(
                ErrorCode.LEADER_NOT_AVAILABLE, f"partition {topic}-{partition} has no leader"
            )
        return pm.leader

    async def controller_connection(self) -> BrokerConnection:
        if self._stale or self.controller_id not in self.brokers:
            await self.refresh_metadata([])
        if self.controller_id < 0 or self.controller_id not in self.brokers:
            self._stale = True
            raise KafkaError(ErrorCode.NOT_CONTROLLER, "no controller is known")
        return await self.connection(self.controller_id)

    # -- requests -------------------------------------------------------------------------

    async def request_any(self, api_key: int, body: dict, **kwargs: Any) -> dict:
        return await (await self.any_connection()).request(api_key, body, **kwargs)

    async def request_node(self, node_id: int, api_key: int, body: dict, **kwargs: Any) -> dict:
        return await (await self.connection(node_id)).request(api_key, body, **kwargs)

    async def request_controller(self, api_key: int, body: dict, **kwargs: Any) -> dict:
        return await (await self.controller_connection()).request(api_key, body, **kwargs)

    async def retry(
        self,
        op: Callable[[], Awaitable[T]],
        *,
        what: str = "request",
        timeout: float | None = None,
    ) -> T:
        """Run `op` until it succeeds, raises a non-retriable error, or the deadline passes.

        Before each retry the metadata is refreshed when the error suggests it is stale.
        """
        deadline = time.monotonic() + (self.retry_timeout if timeout is None else timeout)
        backoff = self.retry_backoff
        attempt = 0
        while True:
            attempt += 1
            try:
                if self._stale and attempt > 1:
                    with contextlib.suppress(KafkaError):
                        await self.refresh_metadata(list(self.topics) or [])
                return await op()
            except KafkaError as e:
                if not e.retriable or self._closed:
                    raise
                if e.code in _METADATA_ERRORS:
                    self._stale = True
                remaining = deadline - time.monotonic()
                if remaining <= 0:
                    raise
                delay = min(backoff, remaining, self.max_retry_backoff)
                log.debug("%s: %s; retry %d in %.2fs", what, e, attempt, delay)
                await asyncio.sleep(delay * (0.8 + 0.4 * random.random()))
                backoff = min(backoff * 2, self.max_retry_backoff)

    async def route_to_leaders(
        self,
        items: Mapping[TopicPartition, V],
        send: Callable[
            [BrokerConnection, dict[TopicPartition, V]],
            Awaitable[Mapping[TopicPartition, R | KafkaError]],
        ],
        *,
        what: str = "request",
        timeout: float | None = None,
        wait_for_topics: bool = False,
    ) -> dict[TopicPartition, R | KafkaError]:
        """Send `items` to their partition leaders, one request per broker, in parallel.

        `send(conn, part)` returns a result or a KafkaError per partition. Partitions that fail
        retriably are re-routed after a metadata refresh until the deadline; a topic that still
        does not exist after a refresh fails at once unless `wait_for_topics`.
        """
        deadline = time.monotonic() + (self.retry_timeout if timeout is None else timeout)
        remaining = dict(items)
        results: dict[TopicPartition, R | KafkaError] = {}
        unknown: dict[TopicPartition, int] = {}
        backoff = self.retry_backoff
        while remaining:
            errors: dict[TopicPartition, KafkaError] = {}
            groups: dict[int, dict[TopicPartition, V]] = {}
            for tp, value in remaining.items():
                try:
                    leader = await self.leader_for(tp.topic, tp.partition)
                except KafkaError as e:
                    errors[tp] = e
                    continue
                groups.setdefault(leader, {})[tp] = value

            async def one(
                node_id: int, part: dict[TopicPartition, V]
            ) -> Mapping[TopicPartition, R | KafkaError]:
                try:
                    return await send(await self.connection(node_id), part)
                except KafkaError as exc:
                    return dict.fromkeys(part, exc)

            outcomes = await asyncio.gather(*(one(n, part) for n, part in groups.items()))
            for part, outcome in zip(groups.values(), outcomes, strict=True):
                for tp in part:
                    r = outcome.get(tp)
                    if r is None:
                        errors[tp] = KafkaError(ErrorCode.UNKNOWN_SERVER_ERROR, f"{tp}: no result")
                    elif isinstance(r, KafkaError):
                        errors[tp] = r
                    else:
                        results[tp] = r
                        del remaining[tp]
            retry = False
            for tp, e in errors.items():
                if e.code == ErrorCode.UNKNOWN_TOPIC_OR_PARTITION and not wait_for_topics:
                    unknown[tp] = unknown.get(tp, 0) + 1
                    final = unknown[tp] > 1
                else:
                    final = not e.retriable
                if e.code in _METADATA_ERRORS:
                    self._stale = True
                if final or time.monotonic() >= deadline:
                    results[tp] = e
                    del remaining[tp]
                else:
                    retry = True
            if retry and remaining:
                log.debug("%s: retrying %d partitions", what, len(remaining))
                await asyncio.sleep(min(backoff, max(deadline - time.monotonic(), 0)))
                backoff = min(backoff * 2, self.max_retry_backoff)
                with contextlib.suppress(KafkaError):
                    await self.refresh_metadata({tp.topic for tp in remaining})
        return results


class ConnectionOptions(TypedDict, total=False):
    """How the admin client, the producer and the consumer reach the cluster: the keyword
    options all three take, declared once here (a missing one takes ClusterClient's default,
    and client_id the client's own)."""

    cluster: ClusterClient | None  # a ClusterClient shared with other clients
    client_id: str
    request_timeout: float  # seconds for one response
    security: ClientSecurity | None  # security protocol, SASL and TLS settings


class ClusterUser:
    """Base of the admin client, producer and consumer: the ClusterClient they work through,
    either their own (started and closed with them) or one shared with other clients."""

    default_client_id = "odradek-client"

    def __init__(
        self,
        bootstrap_servers: str | Sequence[str] | None,
        connection: ConnectionOptions,
        *,
        retry_timeout: float,
    ) -> None:
        unknown = connection.keys() - ConnectionOptions.__optional_keys__
        if unknown:
            raise TypeError(
                f"{type(self).__name__}() got unexpected keyword arguments: {sorted(unknown)}"
            )
        cluster = connection.get("cluster")
        self._owns_cluster = cluster is None
        if cluster is None:
            if bootstrap_servers is None:
                raise ValueError("bootstrap_servers or cluster is required")
            cluster = ClusterClient(
                bootstrap_servers,
                client_id=connection.get("client_id", self.default_client_id),
                request_timeout=connection.get("request_timeout", REQUEST_TIMEOUT),
                retry_timeout=retry_timeout,
                security=connection.get("security"),
            )
        self.cluster = cluster

    async def start(self) -> Self:
        if self._owns_cluster:
            await self.cluster.start()
        return self

    async def close(self) -> None:
        if self._owns_cluster:
            await self.cluster.close()

    async def __aenter__(self) -> Self:
        return await self.start()

    async def __aexit__(self, *exc: object) -> None:
        await self.close()


def raise_first(errors: Iterable[KafkaError | None]) -> None:
    """Raise the first error of a multi-item operation's outcomes, if any."""
    for error in errors:
        if error is not None:
            raise error


def unwrap(outcome: Mapping[TopicPartition, R | KafkaError]) -> dict[TopicPartition, R]:
    """The results of route_to_leaders, raising the first partition's error instead."""
    out: dict[TopicPartition, R] = {}
    for tp, r in outcome.items():
        if isinstance(r, KafkaError):
            raise r
        out[tp] = r
    return out
