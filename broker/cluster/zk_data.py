"""Kafka's ZooKeeper layout: znode paths and the exact JSON each one holds.

Formats are Apache Kafka's ZK-mode ones (compact JSON, the same keys and value types, e.g.
timestamps and producer-id block bounds as strings), so Kafka's tools can read what Odradek
writes and the other way round. Decoders accept the older versions Kafka still parses.
"""

from __future__ import annotations

import base64
import json
import urllib.parse
import uuid
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from ..config import Endpoint

# -- paths -------------------------------------------------------------------------------------

CLUSTER_ID = "/cluster/id"
CONTROLLER = "/controller"
CONTROLLER_EPOCH = "/controller_epoch"
BROKERS = "/brokers"
BROKER_IDS = "/brokers/ids"
BROKER_TOPICS = "/brokers/topics"
BROKER_SEQID = "/brokers/seqid"
CONFIG = "/config"
CONFIG_CHANGES = "/config/changes"
CONFIG_CHANGE_PREFIX = "config_change_"
ADMIN = "/admin"
DELETE_TOPICS = "/admin/delete_topics"
REASSIGN_PARTITIONS = "/admin/reassign_partitions"
PREFERRED_REPLICA_ELECTION = "/admin/preferred_replica_election"
ISR_CHANGE_NOTIFICATION = "/isr_change_notification"
ISR_CHANGE_PREFIX = "isr_change_"
LOG_DIR_EVENT_NOTIFICATION = "/log_dir_event_notification"
LOG_DIR_EVENT_PREFIX = "log_dir_event_"
LATEST_PRODUCER_ID_BLOCK = "/latest_producer_id_block"
FEATURE = "/feature"
CONSUMERS = "/consumers"

# Entity types under /config (Kafka's ConfigType).
TOPICS = "topics"
CLIENTS = "clients"
USERS = "users"
BROKERS_ENTITY = "brokers"
IPS = "ips"
CONFIG_ENTITY_TYPES = (TOPICS, CLIENTS, USERS, BROKERS_ENTITY, IPS)
DEFAULT_ENTITY = "<default>"

# Created empty at broker startup (Kafka's PersistentZkPaths).
PERSISTENT_PATHS = (
    CONSUMERS,
    BROKER_IDS,
    BROKER_TOPICS,
    CONFIG_CHANGES,
    DELETE_TOPICS,
    BROKER_SEQID,
    ISR_CHANGE_NOTIFICATION,
    LATEST_PRODUCER_ID_BLOCK,
    LOG_DIR_EVENT_NOTIFICATION,
) + tuple(f"{CONFIG}/{t}" for t in CONFIG_ENTITY_TYPES)


def broker_path(broker_id: int) -> str:
    return f"{BROKER_IDS}/{broker_id}"


def topic_path(topic: str) -> str:
    return f"{BROKER_TOPICS}/{topic}"


def topic_partitions_path(topic: str) -> str:
    return f"{topic_path(topic)}/partitions"


def partition_path(topic: str, partition: int) -> str:
    return f"{topic_partitions_path(topic)}/{partition}"


def partition_state_path(topic: str, partition: int) -> str:
    return f"{partition_path(topic, partition)}/state"


def delete_topic_path(topic: str) -> str:
    return f"{DELETE_TOPICS}/{topic}"


def entity_type_path(entity_type: str) -> str:
    return f"{CONFIG}/{entity_type}"


def entity_config_path(entity_type: str, entity_name: str) -> str:
    """`entity_name` must already be sanitized (or be `<default>`); see `sanitize`."""
    return f"{entity_type_path(entity_type)}/{entity_name}"


# -- helpers -----------------------------------------------------------------------------------


def _dumps(obj: Any) -> bytes:
    return json.dumps(obj, separators=(",", ":"), ensure_ascii=False).encode("utf-8")


def _loads(data: bytes | None) -> Any:
    if not data:
        return None
    return json.loads(bytes(data).decode("utf-8"))


def uuid_to_base64(u: uuid.UUID) -> str:
    """Kafka's Uuid.toString: URL-safe base64 of the 16 bytes, without padding (22 chars)."""
    return base64.urlsafe_b64encode(u.bytes).rstrip(b"=").decode("ascii")


def base64_to_uuid(text: str) -> uuid.UUID:
    raw = base64.urlsafe_b64decode(text + "=" * (-len(text) % 4))
    if len(raw) != 16:
        raise ValueError(f"Input string with prefix `{text[:22]}` is not a valid Uuid")
    return uuid.UUID(bytes=raw)


ZERO_UUID = uuid.UUID(int=0)
METADATA_TOPIC_ID = uuid.UUID(int=1)


def new_uuid() -> uuid.UUID:
    """A random id as Kafka generates them: never zero, never reserved, never `-`-leading in
    base64 (so it cannot be mistaken for a command-line option)."""
    while True:
        u = uuid.uuid4()
        if u not in (ZERO_UUID, METADATA_TOPIC_ID) and not uuid_to_base64(u).startswith("-"):
            return u


def new_cluster_id() -> str:
    return uuid_to_base64(new_uuid())


def sanitize(name: str) -> str:
    """Kafka's Sanitizer: URL-encode an entity name for use as a znode name (`*` and space
    percent-encoded too)."""
    out = []
    for b in name.encode("utf-8"):
        c = chr(b)
        if c.isascii() and (c.isalnum() or c in ".-_"):
            out.append(c)
        else:
            out.append(f"%{b:02X}")
    return "".join(out)


def desanitize(name: str) -> str:
    return urllib.parse.unquote_plus(name, encoding="utf-8", errors="strict")


# -- /cluster/id -------------------------------------------------------------------------------


def encode_cluster_id(cluster_id: str) -> bytes:
    return _dumps({"version": "1", "id": cluster_id})


def decode_cluster_id(data: bytes) -> str:
    return _loads(data)["id"]


# -- /controller, /controller_epoch ------------------------------------------------------------


def encode_controller(broker_id: int, timestamp_ms: int, kraft_controller_epoch: int = -1) -> bytes:
    return _dumps(
        {
            "version": 2,
            "brokerid": broker_id,
            "timestamp": str(timestamp_ms),
            "kraftControllerEpoch": kraft_controller_epoch,
        }
    )


def decode_controller(data: bytes) -> int:
    """The controller's broker id (versions 1 and 2)."""
    return int(_loads(data)["brokerid"])


def encode_controller_epoch(epoch: int) -> bytes:
    return str(epoch).encode("ascii")


def decode_controller_epoch(data: bytes) -> int:
    return int(bytes(data).decode("ascii"))


# -- /brokers/ids/<id> -------------------------------------------------------------------------


@dataclass(frozen=True)
class BrokerRegistration:
    """What a broker publishes about itself; `epoch` is the znode's czxid (set on read)."""

    id: int
    endpoints: tuple[Endpoint, ...]
    rack: str | None = None
    jmx_port: int = -1
    timestamp: int = 0
    features: Mapping[str, tuple[int, int]] = field(default_factory=dict)  # name -> (min, max)
    epoch: int = -1

    def endpoint(self, listener: str) -> Endpoint | None:
        for ep in self.endpoints:
            if ep.listener == listener:
                return ep
        return None


def encode_broker(info: BrokerRegistration) -> bytes:
    """Version 5 (IBP >= 2.7): endpoints, protocol map, rack (only when set), features."""
    plaintext = next((e for e in info.endpoints if e.security_protocol == "PLAINTEXT"), None)
    obj: dict[str, Any] = {
        "version": 5,
        "host": plaintext.host if plaintext else None,
        "port": plaintext.port if plaintext else -1,
        "endpoints": [e.connection_string() for e in info.endpoints],
        "listener_security_protocol_map": {e.listener: e.security_protocol for e in info.endpoints},
    }
    if info.rack is not None:
        obj["rack"] = info.rack
    obj["jmx_port"] = info.jmx_port
    obj["timestamp"] = str(info.timestamp)
    obj["features"] = {
        name: {"min_version": lo, "max_version": hi} for name, (lo, hi) in info.features.items()
    }
    return _dumps(obj)


def _parse_endpoint(text: str, protocol_map: Mapping[str, str]) -> Endpoint:
    listener, _, rest = text.partition("://")
    host, _, port = rest.rpartition(":")
    if host.startswith("[") and host.endswith("]"):
        host = host[1:-1]
    listener = listener.upper()
    return Endpoint(listener, host, int(port), protocol_map.get(listener, listener))


def decode_broker(broker_id: int, data: bytes, epoch: int = -1) -> BrokerRegistration:
    obj = _loads(data)
    version = obj.get("version", 1)
    if version <= 1:
        endpoints: tuple[Endpoint, ...] = (
            Endpoint("PLAINTEXT", obj["host"], int(obj["port"]), "PLAINTEXT"),
        )
    else:
        pmap = obj.get("listener_security_protocol_map") or {}
        pmap = {k.upper(): v for k, v in pmap.items()}
        endpoints = tuple(_parse_endpoint(e, pmap) for e in obj.get("endpoints", []))
    features = {
        name: (int(v.get("min_version", 1)), int(v["max_version"]))
        for name, v in (obj.get("features") or {}).items()
    }
    return BrokerRegistration(
        id=broker_id,
        endpoints=endpoints,
        rack=obj.get("rack"),
        jmx_port=int(obj.get("jmx_port", -1)),
        timestamp=int(obj.get("timestamp", 0)),
        features=features,
        epoch=epoch,
    )


# -- /brokers/topics/<topic> -------------------------------------------------------------------


@dataclass(frozen=True)
class ReplicaAssignment:
    """Replicas of one partition (first = preferred leader), plus a reassignment in flight."""

    replicas: tuple[int, ...]
    adding: tuple[int, ...] = ()
    removing: tuple[int, ...] = ()

    @property
    def being_reassigned(self) -> bool:
        return bool(self.adding or self.removing)


@dataclass(frozen=True)
class TopicAssignment:
    topic_id: uuid.UUID | None
    partitions: Mapping[int, ReplicaAssignment]


def encode_topic(
    topic_id: uuid.UUID | None,
    partitions: Mapping[int, ReplicaAssignment | Sequence[int]],
) -> bytes:
    """Version 3: topic_id (when known), partitions, adding/removing replicas (always present,
    only non-empty entries listed)."""
    assignments = {
        p: a if isinstance(a, ReplicaAssignment) else ReplicaAssignment(tuple(a))
        for p, a in partitions.items()
    }
    order = sorted(assignments)
    obj: dict[str, Any] = {"version": 3}
    if topic_id is not None:
        obj["topic_id"] = uuid_to_base64(topic_id)
    obj["partitions"] = {str(p): list(assignments[p].replicas) for p in order}
    obj["adding_replicas"] = {
        str(p): list(assignments[p].adding) for p in order if assignments[p].adding
    }
    obj["removing_replicas"] = {
        str(p): list(assignments[p].removing) for p in order if assignments[p].removing
    }
    return _dumps(obj)


def decode_topic(data: bytes) -> TopicAssignment:
    obj = _loads(data) or {}
    adding = obj.get("adding_replicas") or {}
    removing = obj.get("removing_replicas") or {}
    partitions = {
        int(p): ReplicaAssignment(
            tuple(replicas), tuple(adding.get(p, ())), tuple(removing.get(p, ()))
        )
        for p, replicas in (obj.get("partitions") or {}).items()
    }
    tid = obj.get("topic_id")
    return TopicAssignment(base64_to_uuid(tid) if tid else None, partitions)


# -- /brokers/topics/<t>/partitions/<p>/state --------------------------------------------------

NO_LEADER = -1
LEADER_DURING_DELETE = -2
RECOVERED = 0
RECOVERING = 1


@dataclass(frozen=True)
class PartitionState:
    """Leader and ISR of a partition; `partition_epoch` is the state znode's version."""

    leader: int
    leader_epoch: int
    isr: tuple[int, ...]
    controller_epoch: int
    leader_recovery_state: int = RECOVERED
    partition_epoch: int = 0


def encode_partition_state(state: PartitionState) -> bytes:
    obj: dict[str, Any] = {
        "controller_epoch": state.controller_epoch,
        "leader": state.leader,
        "version": 1,
        "leader_epoch": state.leader_epoch,
        "isr": list(state.isr),
    }
    if state.leader_recovery_state != RECOVERED:
        obj["leader_recovery_state"] = state.leader_recovery_state
    return _dumps(obj)


def decode_partition_state(data: bytes, zk_version: int = 0) -> PartitionState:
    obj = _loads(data)
    return PartitionState(
        leader=int(obj["leader"]),
        leader_epoch=int(obj["leader_epoch"]),
        isr=tuple(int(b) for b in obj["isr"]),
        controller_epoch=int(obj["controller_epoch"]),
        leader_recovery_state=int(obj.get("leader_recovery_state", RECOVERED)),
        partition_epoch=zk_version,
    )


# -- /config/<type>/<name> and /config/changes -------------------------------------------------


def encode_entity_config(config: Mapping[str, str]) -> bytes:
    return _dumps({"version": 1, "config": dict(config)})


def decode_entity_config(data: bytes | None) -> dict[str, str]:
    obj = _loads(data)
    if not obj:
        return {}
    return {k: str(v) for k, v in (obj.get("config") or {}).items()}


def encode_config_change(entity_path: str) -> bytes:
    """`entity_path` as `topics/<t>`, `brokers/<id>`, `brokers/<default>`, `users/<u>/clients/<c>`."""
    return _dumps({"version": 2, "entity_path": entity_path})


def decode_config_change(data: bytes) -> str:
    """Entity path of a notification (version 2, or the legacy version 1 type+name form)."""
    obj = _loads(data)
    if obj.get("version") == 1:
        return f"{obj['entity_type']}/{obj['entity_name']}"
    return obj["entity_path"]


def sequence_number(child_name: str) -> int:
    """The counter ZooKeeper appended to a sequential node's name."""
    return int(child_name[-10:])


# -- /latest_producer_id_block -----------------------------------------------------------------


@dataclass(frozen=True)
class ProducerIdBlock:
    broker: int
    block_start: int
    block_end: int  # inclusive


def encode_producer_id_block(block: ProducerIdBlock) -> bytes:
    return _dumps(
        {
            "version": 1,
            "broker": block.broker,
            "block_start": str(block.block_start),
            "block_end": str(block.block_end),
        }
    )


def decode_producer_id_block(data: bytes) -> ProducerIdBlock | None:
    obj = _loads(data)
    if not obj:
        return None
    return ProducerIdBlock(int(obj["broker"]), int(obj["block_start"]), int(obj["block_end"]))


# -- /feature ----------------------------------------------------------------------------------


def encode_feature(features: Mapping[str, int], enabled: bool = True) -> bytes:
    """Version 2: finalized feature levels (a ZK cluster normally has none)."""
    return _dumps(
        {
            "version": 2,
            "status": 1 if enabled else 0,
            "features": {k: {"max_version_level": v} for k, v in features.items()},
        }
    )


def decode_feature(data: bytes) -> tuple[bool, dict[str, int]]:
    obj = _loads(data)
    feats = {k: int(v["max_version_level"]) for k, v in (obj.get("features") or {}).items()}
    return obj.get("status", 1) == 1, feats


# -- /admin/reassign_partitions, /admin/preferred_replica_election, notifications ----------------


def encode_reassignment(assignments: Mapping[tuple[str, int], Sequence[int]]) -> bytes:
    return _dumps(
        {
            "version": 1,
            "partitions": [
                {"topic": t, "partition": p, "replicas": list(r)}
                for (t, p), r in sorted(assignments.items())
            ],
        }
    )


def decode_reassignment(data: bytes) -> dict[tuple[str, int], tuple[int, ...]]:
    obj = _loads(data)
    return {
        (e["topic"], int(e["partition"])): tuple(e["replicas"]) for e in obj.get("partitions", [])
    }


def encode_partition_list(partitions: Iterable[tuple[str, int]]) -> bytes:
    """Preferred-replica-election and ISR-change-notification payload."""
    return _dumps(
        {"version": 1, "partitions": [{"topic": t, "partition": p} for t, p in partitions]}
    )


def decode_partition_list(data: bytes) -> list[tuple[str, int]]:
    obj = _loads(data)
    return [(e["topic"], int(e["partition"])) for e in obj.get("partitions", [])]


LOG_DIR_FAILURE = 1


def encode_log_dir_event(broker_id: int, event: int = LOG_DIR_FAILURE) -> bytes:
    return _dumps({"version": 1, "broker": broker_id, "event": event})


def decode_log_dir_event(data: bytes) -> tuple[int, int]:
    obj = _loads(data)
    return int(obj["broker"]), int(obj["event"])
