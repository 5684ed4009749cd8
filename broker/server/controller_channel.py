"""The controller's channel to a remote broker, and the wire form of the control requests.

`RemoteBroker` is the `BrokerControl` of a broker in another process: it turns the controller's
LeaderAndIsr/StopReplica/UpdateMetadata dataclasses into RPCs over the inter-broker listener
(endpoint from the target's registration) and maps the replies back. Any failure to get an
answer raises, and the controller's per-broker sender retries in order.

The request versions are those a Kafka 3.9 controller sends at inter.broker.protocol.version
3.4+ (LeaderAndIsr v7, StopReplica v4, UpdateMetadata v8; ControlledShutdown v3 from a broker),
lowered to what the target announces in ApiVersions. `*_body`/`*_from_body` convert both ways
for every version, so the receiving handlers (handlers/control_plane.py) share them.
"""

from __future__ import annotations

import asyncio
import logging
import uuid
from collections.abc import Callable, Iterable
from typing import Any, TypeVar

from ..client.connection import BrokerConnection
from ..client.security import ClientSecurity
from ..cluster import zk_data as zk
from ..cluster.control import (
    BrokerControl,
    LeaderAndIsrPartition,
    LeaderAndIsrRequest,
    PartitionErrors,
    StopReplicaPartition,
    StopReplicaRequest,
    UpdateMetadataPartition,
    UpdateMetadataRequest,
)
from ..config import Endpoint
from ..protocol.api_keys import ApiKey
from ..protocol.errors import ErrorCode

log = logging.getLogger(__name__)

# What a 3.9 ZooKeeper-mode controller sends (inter.broker.protocol.version >= 3.4).
LEADER_AND_ISR_VERSION = 7
STOP_REPLICA_VERSION = 4
UPDATE_METADATA_VERSION = 8
CONTROLLED_SHUTDOWN_VERSION = 3

SECURITY_PROTOCOL_IDS = {"PLAINTEXT": 0, "SSL": 1, "SASL_PLAINTEXT": 2, "SASL_SSL": 3}
SECURITY_PROTOCOL_NAMES = {v: k for k, v in SECURITY_PROTOCOL_IDS.items()}


class BrokerUnreachableError(Exception):
    """The target broker has no inter-broker endpoint, or did not answer."""


# --- LeaderAndIsr ------------------------------------------------------------------------------


def _partition_state_body(
    p: LeaderAndIsrPartition | UpdateMetadataPartition, with_topic: bool, **extra: Any
) -> dict[str, Any]:
    """A partition state of LeaderAndIsr or UpdateMetadata: the fields both requests share,
    plus `extra`; the topic name only where the version lists partitions ungrouped."""
    out: dict[str, Any] = {
        "partition_index": p.partition,
        "controller_epoch": p.controller_epoch,
        "leader": p.leader,
        "leader_epoch": p.leader_epoch,
        "isr": list(p.isr),
        "replicas": list(p.replicas),
        **extra,
    }
    if with_topic:
        out["topic_name"] = p.topic
    return out


def _lai_partition(p: LeaderAndIsrPartition, with_topic: bool) -> dict[str, Any]:
    return _partition_state_body(
        p,
        with_topic,
        partition_epoch=p.partition_epoch,
        adding_replicas=list(p.adding_replicas),
        removing_replicas=list(p.removing_replicas),
        is_new=p.is_new,
        leader_recovery_state=p.leader_recovery_state,
    )


def leader_and_isr_body(req: LeaderAndIsrRequest, version: int, listener: str) -> dict[str, Any]:
    body: dict[str, Any] = {
        "controller_id": req.controller_id,
        "is_kraft_controller": False,
        "controller_epoch": req.controller_epoch,
        "broker_epoch": req.broker_epoch,
        "type": 0,
        "live_leaders": [
            {"broker_id": b.id, "host_name": ep.host, "port": ep.port}
            for b in req.live_leaders
            if (ep := _endpoint(b, listener)) is not None
        ],
    }
    if version <= 1:
        body["ungrouped_partition_states"] = [_lai_partition(p, True) for p in req.partitions]
        body["topic_states"] = []
    else:
        topics: dict[str, dict[str, Any]] = {}
        for p in req.partitions:
            t = topics.setdefault(
                p.topic,
                {"topic_name": p.topic, "topic_id": p.topic_id or _ZERO, "partition_states": []},
            )
            t["partition_states"].append(_lai_partition(p, False))
        body["topic_states"] = list(topics.values())
        body["ungrouped_partition_states"] = []
    return body


_P = TypeVar("_P")


def _partition_states(
    body: dict[str, Any], ungrouped: bool, make: Callable[..., _P], **extra: Callable[[dict], Any]
) -> tuple[_P, ...]:
    """The partition states of a LeaderAndIsr or UpdateMetadata body, ungrouped (old versions)
    or grouped by topic: the fields both requests share, plus `extra` (field -> reader)."""

    def part(topic: str, topic_id: uuid.UUID | None, s: dict[str, Any]) -> _P:
        return make(
            topic=topic,
            topic_id=topic_id,
            partition=s["partition_index"],
            controller_epoch=s["controller_epoch"],
            leader=s["leader"],
            leader_epoch=s["leader_epoch"],
            isr=tuple(s["isr"]),
            replicas=tuple(s["replicas"]),
            **{name: read(s) for name, read in extra.items()},
        )

    if ungrouped:
        return tuple(part(s["topic_name"], None, s) for s in body["ungrouped_partition_states"])
    parts: list[_P] = []
    for t in body["topic_states"]:
        tid = t.get("topic_id")
        tid = None if tid in (None, _ZERO) else tid
        parts.extend(part(t["topic_name"], tid, s) for s in t["partition_states"])
    return tuple(parts)


def leader_and_isr_from_body(
    body: dict[str, Any], version: int, listener: str
) -> LeaderAndIsrRequest:
    parts = _partition_states(
        body,
        version <= 1,
        LeaderAndIsrPartition,
        partition_epoch=lambda s: s["partition_epoch"],
        adding_replicas=lambda s: tuple(s.get("adding_replicas") or ()),
        removing_replicas=lambda s: tuple(s.get("removing_replicas") or ()),
        is_new=lambda s: bool(s.get("is_new", False)),
        leader_recovery_state=lambda s: s.get("leader_recovery_state", 0),
    )
    leaders = tuple(
        zk.BrokerRegistration(
            id=b["broker_id"],
            endpoints=(Endpoint(listener, b["host_name"], b["port"], "PLAINTEXT"),),
        )
        for b in body["live_leaders"]
    )
    return LeaderAndIsrRequest(
        controller_id=body["controller_id"],
        controller_epoch=body["controller_epoch"],
        broker_epoch=body.get("broker_epoch", -1),
        partitions=parts,
        live_leaders=leaders,
    )


def _flat_errors_body(
    partitions: Iterable[LeaderAndIsrPartition | StopReplicaPartition], errors: PartitionErrors
) -> dict[str, Any]:
    """The error list of StopReplica and of LeaderAndIsr up to v4: one entry per partition."""
    return {
        "error_code": errors.error,
        "partition_errors": [
            {
                "topic_name": p.topic,
                "partition_index": p.partition,
                "error_code": errors.error_for((p.topic, p.partition)),
            }
            for p in partitions
        ],
    }


def _flat_errors(body: dict[str, Any]) -> PartitionErrors:
    """The errors of a StopReplica or LeaderAndIsr (up to v4) response."""
    out = PartitionErrors(_code(body["error_code"]))
    for e in body.get("partition_errors") or ():
        out.partitions[(e["topic_name"], e["partition_index"])] = _code(e["error_code"])
    return out


def leader_and_isr_response_body(
    req: LeaderAndIsrRequest, errors: PartitionErrors, version: int
) -> dict[str, Any]:
    if version <= 4:
        return _flat_errors_body(req.partitions, errors)
    topics: dict[str, dict[str, Any]] = {}
    for p in req.partitions:
        t = topics.setdefault(p.topic, {"topic_id": p.topic_id or _ZERO, "partition_errors": []})
        t["partition_errors"].append(
            {"partition_index": p.partition, "error_code": errors.error_for((p.topic, p.partition))}
        )
    return {"error_code": errors.error, "topics": list(topics.values())}


def leader_and_isr_errors(
    req: LeaderAndIsrRequest, body: dict[str, Any], version: int
) -> PartitionErrors:
    if version <= 4:
        return _flat_errors(body)
    out = PartitionErrors(_code(body["error_code"]))
    names = {p.topic_id or _ZERO: p.topic for p in req.partitions}
    for t in body.get("topics") or ():
        topic = names.get(t["topic_id"])
        if topic is None:
            continue
        for e in t["partition_errors"]:
            out.partitions[(topic, e["partition_index"])] = _code(e["error_code"])
    return out


# --- StopReplica -------------------------------------------------------------------------------


def stop_replica_body(req: StopReplicaRequest, version: int) -> dict[str, Any]:
    body: dict[str, Any] = {
        "controller_id": req.controller_id,
        "is_kraft_controller": False,
        "controller_epoch": req.controller_epoch,
        "broker_epoch": req.broker_epoch,
        "ungrouped_partitions": [],
        "topics": [],
        "topic_states": [],
    }
    if version <= 2:
        # One delete flag for the whole request: split mixed requests before calling this.
        body["delete_partitions"] = any(p.delete for p in req.partitions)
    if version == 0:
        body["ungrouped_partitions"] = [
            {"topic_name": p.topic, "partition_index": p.partition} for p in req.partitions
        ]
    elif version <= 2:
        topics: dict[str, list[int]] = {}
        for p in req.partitions:
            topics.setdefault(p.topic, []).append(p.partition)
        body["topics"] = [{"name": t, "partition_indexes": ps} for t, ps in topics.items()]
    else:
        states: dict[str, list[dict[str, Any]]] = {}
        for p in req.partitions:
            states.setdefault(p.topic, []).append(
                {
                    "partition_index": p.partition,
                    "leader_epoch": p.leader_epoch,
                    "delete_partition": p.delete,
                }
            )
        body["topic_states"] = [
            {"topic_name": t, "partition_states": ps} for t, ps in states.items()
        ]
    return body


def stop_replica_from_body(body: dict[str, Any], version: int) -> StopReplicaRequest:
    delete = bool(body.get("delete_partitions", False))
    if version == 0:
        parts = [
            StopReplicaPartition(p["topic_name"], p["partition_index"], -1, delete)
            for p in body["ungrouped_partitions"]
        ]
    elif version <= 2:
        parts = [
            StopReplicaPartition(t["name"], i, -1, delete)
            for t in body["topics"]
            for i in t["partition_indexes"]
        ]
    else:
        parts = [
            StopReplicaPartition(
                t["topic_name"], s["partition_index"], s["leader_epoch"], s["delete_partition"]
            )
            for t in body["topic_states"]
            for s in t["partition_states"]
        ]
    return StopReplicaRequest(
        controller_id=body["controller_id"],
        controller_epoch=body["controller_epoch"],
        broker_epoch=body.get("broker_epoch", -1),
        partitions=tuple(parts),
    )


def stop_replica_response_body(req: StopReplicaRequest, errors: PartitionErrors) -> dict[str, Any]:
    return _flat_errors_body(req.partitions, errors)


def stop_replica_errors(body: dict[str, Any]) -> PartitionErrors:
    return _flat_errors(body)


# --- UpdateMetadata ----------------------------------------------------------------------------


def _um_partition(p: UpdateMetadataPartition, with_topic: bool) -> dict[str, Any]:
    return _partition_state_body(
        p, with_topic, zk_version=p.zk_version, offline_replicas=list(p.offline_replicas)
    )


def update_metadata_body(req: UpdateMetadataRequest, version: int) -> dict[str, Any]:
    brokers = []
    for b in req.live_brokers:
        plain = next((e for e in b.endpoints if e.security_protocol == "PLAINTEXT"), None)
        brokers.append(
            {
                "id": b.id,
                "v0_host": plain.host if plain else "",
                "v0_port": plain.port if plain else -1,
                "endpoints": [
                    {
                        "port": e.port,
                        "host": e.host,
                        "listener": e.listener,
                        "security_protocol": SECURITY_PROTOCOL_IDS.get(e.security_protocol, 0),
                    }
                    for e in b.endpoints
                ],
                "rack": b.rack,
            }
        )
    body: dict[str, Any] = {
        "controller_id": req.controller_id,
        "is_kraft_controller": False,
        "controller_epoch": req.controller_epoch,
        "broker_epoch": req.broker_epoch,
        "live_brokers": brokers,
        "ungrouped_partition_states": [],
        "topic_states": [],
    }
    if version <= 4:
        body["ungrouped_partition_states"] = [_um_partition(p, True) for p in req.partitions]
    else:
        topics: dict[str, dict[str, Any]] = {}
        for p in req.partitions:
            topics.setdefault(
                p.topic,
                {"topic_name": p.topic, "topic_id": p.topic_id or _ZERO, "partition_states": []},
            )["partition_states"].append(_um_partition(p, False))
        body["topic_states"] = list(topics.values())
    return body


def update_metadata_from_body(body: dict[str, Any], version: int) -> UpdateMetadataRequest:
    parts = _partition_states(
        body,
        version <= 4,
        UpdateMetadataPartition,
        zk_version=lambda s: s["zk_version"],
        offline_replicas=lambda s: tuple(s.get("offline_replicas") or ()),
    )
    brokers = []
    for b in body["live_brokers"]:
        if version == 0:
            eps = [Endpoint("PLAINTEXT", b["v0_host"], b["v0_port"], "PLAINTEXT")]
        else:
            eps = []
            for e in b["endpoints"]:
                proto = SECURITY_PROTOCOL_NAMES.get(e["security_protocol"], "PLAINTEXT")
                # Before v3 endpoints are named by their security protocol, as Kafka does.
                name = e.get("listener") if version >= 3 else None
                eps.append(Endpoint((name or proto).upper(), e["host"], e["port"], proto))
        brokers.append(zk.BrokerRegistration(id=b["id"], endpoints=tuple(eps), rack=b.get("rack")))
    return UpdateMetadataRequest(
        controller_id=body["controller_id"],
        controller_epoch=body["controller_epoch"],
        broker_epoch=body.get("broker_epoch", -1),
        partitions=parts,
        live_brokers=tuple(brokers),
    )


# --- helpers -----------------------------------------------------------------------------------

_ZERO = uuid.UUID(int=0)


def _code(value: int) -> ErrorCode:
    try:
        return ErrorCode(value)
    except ValueError:
        return ErrorCode.UNKNOWN_SERVER_ERROR


def _endpoint(reg: zk.BrokerRegistration, listener: str) -> Endpoint | None:
    return reg.endpoint(listener)


# --- the remote BrokerControl ------------------------------------------------------------------


class RemoteBroker(BrokerControl):
    """The controller's view of a broker in another process, over one pipelined connection."""

    def __init__(
        self,
        registration: zk.BrokerRegistration,
        listener: str,
        *,
        controller_id: int,
        request_timeout: float = 30.0,
        connect_timeout: float = 10.0,
        security: ClientSecurity | None = None,
    ) -> None:
        self.registration = registration
        self.security = security
        self.listener = listener
        self.controller_id = controller_id
        self.request_timeout = request_timeout
        self.connect_timeout = connect_timeout
        self._conn: BrokerConnection | None = None
        self._lock = asyncio.Lock()

    def __repr__(self) -> str:
        return f"<RemoteBroker {self.registration.id} via {self.listener}>"

    async def _connection(self) -> BrokerConnection:
        async with self._lock:
            if self._conn is not None and self._conn.connected:
                return self._conn
            if self._conn is not None:
                await self._conn.close()
                self._conn = None
            ep = self.registration.endpoint(self.listener)
            if ep is None:
                raise BrokerUnreachableError(
                    f"broker {self.registration.id} has no endpoint for listener {self.listener}"
                )
            self._conn = await BrokerConnection.open(
                ep.host,
                ep.port,
                client_id=f"controller-{self.controller_id}",
                request_timeout=self.request_timeout,
                connect_timeout=self.connect_timeout,
                node_id=self.registration.id,
                security=self.security,
            )
            return self._conn

    async def _send(self, api_key: int, max_version: int, build: Any) -> tuple[dict, int]:
        conn = await self._connection()
        try:
            version = conn.version_for(api_key, max_version=max_version)
            return await conn.request(api_key, build(version), version), version
        except Exception:
            # Whatever failed, the next attempt starts on a fresh connection.
            await self.close()
            raise

    async def leader_and_isr(self, request: LeaderAndIsrRequest) -> PartitionErrors:
        body, version = await self._send(
            ApiKey.LEADER_AND_ISR,
            LEADER_AND_ISR_VERSION,
            lambda v: leader_and_isr_body(request, v, self.listener),
        )
        return leader_and_isr_errors(request, body, version)

    async def stop_replica(self, request: StopReplicaRequest) -> PartitionErrors:
        conn = await self._connection()
        version = conn.version_for(ApiKey.STOP_REPLICA, max_version=STOP_REPLICA_VERSION)
        if version >= 3 or len({p.delete for p in request.partitions}) <= 1:
            body, _ = await self._send(
                ApiKey.STOP_REPLICA, version, lambda v: stop_replica_body(request, v)
            )
            return stop_replica_errors(body)
        # Old versions carry one delete flag per request: one request per flag.
        out = PartitionErrors()
        for delete in (False, True):
            sub = StopReplicaRequest(
                request.controller_id,
                request.controller_epoch,
                request.broker_epoch,
                tuple(p for p in request.partitions if p.delete == delete),
            )
            body, _ = await self._send(
                ApiKey.STOP_REPLICA, version, lambda v, s=sub: stop_replica_body(s, v)
            )
            errors = stop_replica_errors(body)
            if errors.error != ErrorCode.NONE:
                out.error = errors.error
            out.partitions.update(errors.partitions)
        return out

    async def update_metadata(self, request: UpdateMetadataRequest) -> ErrorCode:
        body, _ = await self._send(
            ApiKey.UPDATE_METADATA,
            UPDATE_METADATA_VERSION,
            lambda v: update_metadata_body(request, v),
        )
        return _code(body["error_code"])

    async def close(self) -> None:
        conn, self._conn = self._conn, None
        if conn is not None:
            try:
                await conn.close()
            except Exception:  # noqa: BLE001 - closing a broken connection
                log.debug("closing the connection to broker %d failed", self.registration.id)


__all__ = [
    "CONTROLLED_SHUTDOWN_VERSION",
    "BrokerUnreachableError",
    "RemoteBroker",
    "leader_and_isr_body",
    "leader_and_isr_errors",
    "leader_and_isr_from_body",
    "leader_and_isr_response_body",
    "stop_replica_body",
    "stop_replica_errors",
    "stop_replica_from_body",
    "stop_replica_response_body",
    "update_metadata_body",
    "update_metadata_from_body",
]
