"""Transaction markers between brokers: writing them as a partition leader, and sending them
as a transaction coordinator.

`write_markers` appends one COMMIT/ABORT control batch per partition led here (producer state
checks the epochs), waits for the ISR as acks=all does, and tells the group coordinator about
markers written to __consumer_offsets so pending transactional offsets become visible or go.
`MarkerSender` is the coordinator's `send`: markers for partitions led by this broker are
written in-process, the others go to their leader as WriteTxnMarkers over the inter-broker
listener (one connection per broker, reopened after a failure).
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import time
from typing import Any

from ..client.connection import BrokerConnection
from ..coordinator.group import OFFSETS_TOPIC
from ..coordinator.transaction import UNKNOWN_LEADER, MarkerEntry
from ..protocol.api_keys import ApiKey
from ..protocol.errors import ErrorCode, KafkaError
from ..records.record import ControlType, build_control_batch
from ..replication.producer_state import AppendOrigin
from .services import BrokerServices, led_partition

log = logging.getLogger(__name__)

TopicPartition = tuple[str, int]
WRITE_TXN_MARKERS_VERSION = 1
_PRODUCE_VERSION = 9


async def write_markers(
    broker: BrokerServices, markers: list[MarkerEntry]
) -> dict[int, dict[TopicPartition, ErrorCode]]:
    """Append each entry's marker to its partitions (led here); errors per producer id."""
    rm = broker.replica_manager
    timeout_s = broker.config.get("request.timeout.ms") / 1000
    out: dict[int, dict[TopicPartition, ErrorCode]] = {}
    waits: list[tuple[MarkerEntry, TopicPartition, Any, int]] = []
    now = int(time.time() * 1000)
    for m in markers:
        errors = out.setdefault(m.producer_id, {})
        kind = ControlType.COMMIT if m.committed else ControlType.ABORT
        for tp in sorted(m.partitions):
            try:
                partition = led_partition(broker, *tp)
            except KafkaError as e:
                errors[tp] = ErrorCode.of(e.code)
                continue
            batch = build_control_batch(
                kind,
                producer_id=m.producer_id,
                producer_epoch=m.producer_epoch,
                coordinator_epoch=m.coordinator_epoch,
                timestamp=now,
            )
            outcome = rm.append(
                partition, memoryview(batch), _PRODUCE_VERSION, -1, AppendOrigin.COORDINATOR
            )
            if outcome.error != ErrorCode.NONE:
                errors[tp] = ErrorCode.of(outcome.error)
                continue
            waits.append((m, tp, partition, outcome.last_offset + 1))
    codes = await asyncio.gather(
        *(rm.wait_for_replication(p, required, timeout_s) for _, _, p, required in waits)
    )
    offsets_done: dict[tuple[int, bool], list[int]] = {}
    for (m, tp, _, _), code in zip(waits, codes, strict=True):
        out[m.producer_id][tp] = ErrorCode.of(code)
        if code == ErrorCode.NONE and tp[0] == OFFSETS_TOPIC:
            offsets_done.setdefault((m.producer_id, m.committed), []).append(tp[1])
    for (producer_id, committed), partitions in offsets_done.items():
        broker.group_coordinator.on_transaction_completed(producer_id, partitions, committed)
    return out


def markers_body(markers: list[MarkerEntry]) -> dict[str, Any]:
    out = []
    for m in markers:
        topics: dict[str, list[int]] = {}
        for topic, partition in sorted(m.partitions):
            topics.setdefault(topic, []).append(partition)
        out.append(
            {
                "producer_id": m.producer_id,
                "producer_epoch": m.producer_epoch,
                "transaction_result": m.committed,
                "topics": [{"name": t, "partition_indexes": ps} for t, ps in topics.items()],
                "coordinator_epoch": m.coordinator_epoch,
            }
        )
    return {"markers": out}


def markers_from_body(body: dict[str, Any]) -> list[MarkerEntry]:
    return [
        MarkerEntry(
            m["producer_id"],
            m["producer_epoch"],
            m["transaction_result"],
            m["coordinator_epoch"],
            frozenset((t["name"], p) for t in m["topics"] for p in t["partition_indexes"]),
        )
        for m in body["markers"]
    ]


def errors_body(errors: dict[int, dict[TopicPartition, ErrorCode]]) -> dict[str, Any]:
    markers = []
    for pid, per_tp in errors.items():
        topics: dict[str, list[dict[str, int]]] = {}
        for (topic, partition), code in sorted(per_tp.items()):
            topics.setdefault(topic, []).append({"partition_index": partition, "error_code": code})
        markers.append(
            {
                "producer_id": pid,
                "topics": [{"name": t, "partitions": ps} for t, ps in topics.items()],
            }
        )
    return {"markers": markers}


def errors_from_body(body: dict[str, Any]) -> dict[int, dict[TopicPartition, ErrorCode]]:
    out: dict[int, dict[TopicPartition, ErrorCode]] = {}
    for m in body["markers"]:
        per_tp = out.setdefault(m["producer_id"], {})
        for t in m["topics"]:
            for p in t["partitions"]:
                per_tp[(t["name"], p["partition_index"])] = ErrorCode.of(p["error_code"])
    return out


class MarkerSender:
    """The transaction coordinator's way to the partition leaders."""

    def __init__(self, broker: BrokerServices) -> None:
        self.broker = broker
        self._conns: dict[int, BrokerConnection] = {}

    def leader_of(self, topic: str, partition: int) -> int | None:
        cache = self.broker.metadata_cache
        p = cache.get_partition(topic, partition)
        if p is None:
            return None
        listener = self.broker.config.inter_broker_listener
        if p.leader < 0 or cache.endpoint(p.leader, listener) is None:
            return UNKNOWN_LEADER
        return p.leader

    async def send(
        self, broker_id: int, markers: list[MarkerEntry]
    ) -> dict[int, dict[TopicPartition, ErrorCode]]:
        broker = self.broker
        if broker_id == broker.broker_id:
            return await write_markers(broker, markers)
        conn = await self._connection(broker_id)
        timeout = broker.config.get("request.timeout.ms") / 1000
        try:
            version = conn.version_for(
                ApiKey.WRITE_TXN_MARKERS, max_version=WRITE_TXN_MARKERS_VERSION
            )
            resp = await conn.request(
                ApiKey.WRITE_TXN_MARKERS, markers_body(markers), version, timeout=timeout + 5
            )
        except BaseException:
            self._conns.pop(broker_id, None)
            with contextlib.suppress(Exception):
                await conn.close()
            raise
        return errors_from_body(resp)

    async def _connection(self, broker_id: int) -> BrokerConnection:
        conn = self._conns.get(broker_id)
        if conn is not None and conn.connected:
            return conn
        broker = self.broker
        ep = broker.metadata_cache.endpoint(broker_id, broker.config.inter_broker_listener)
        if ep is None:
            raise KafkaError(ErrorCode.BROKER_NOT_AVAILABLE, f"broker {broker_id} has no endpoint")
        timeout = broker.config.get("request.timeout.ms") / 1000
        conn = await BrokerConnection.open(
            ep.host,
            ep.port,
            client_id=f"broker-{broker.broker_id}-txn-markers",
            request_timeout=timeout,
            connect_timeout=broker.config.get("socket.connection.setup.timeout.ms") / 1000,
            node_id=broker_id,
            security=broker.inter_broker_security,
        )
        self._conns[broker_id] = conn
        return conn

    async def close(self) -> None:
        conns, self._conns = list(self._conns.values()), {}
        for conn in conns:
            with contextlib.suppress(Exception):
                await conn.close()
