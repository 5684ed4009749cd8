"""Control requests through the real codec, at every version, in both directions; and the
controller's side of ControlledShutdown on the embedded store."""

from __future__ import annotations

import asyncio
import dataclasses
import uuid

import pytest
from odradek.broker.cluster import zk_data as zk
from odradek.broker.cluster.control import (
    LeaderAndIsrPartition,
    LeaderAndIsrRequest,
    PartitionErrors,
    StopReplicaPartition,
    StopReplicaRequest,
    UpdateMetadataPartition,
    UpdateMetadataRequest,
)
from odradek.broker.cluster.embedded_store import EmbeddedStore
from odradek.broker.config import Endpoint
from odradek.broker.protocol import codec
from odradek.broker.protocol.api_keys import ApiKey
from odradek.broker.protocol.errors import ErrorCode
from odradek.broker.server import controller_channel as wire
from test_cluster_controller import Broker, LocalBroker, settle, state

TID = uuid.UUID("0f1e2d3c-4b5a-6978-8796-a5b4c3d2e1f0")
REG = zk.BrokerRegistration(
    2,
    (
        Endpoint("INTERNAL", "10.0.0.2", 9093, "SASL_SSL"),
        Endpoint("PLAINTEXT", "10.0.0.2", 9092, "PLAINTEXT"),
    ),
    rack="r1",
)


def _through_codec(api_key: int, version: int, body: dict) -> dict:
    frame = codec.encode_request(api_key, version, 7, "test", body)
    header, offset = codec.read_request_header(frame)
    assert (header.api_key, header.api_version) == (api_key, version)
    return codec.decode_request(api_key, version, frame, offset)


def _response_through_codec(api_key: int, version: int, body: dict) -> dict:
    chunks = codec.encode_response(api_key, version, 7, body)
    _, decoded = codec.decode_response(api_key, version, b"".join(bytes(c) for c in chunks))
    return decoded


def _lai() -> LeaderAndIsrRequest:
    parts = tuple(
        LeaderAndIsrPartition(
            topic=t,
            topic_id=TID if t == "a" else None,
            partition=p,
            controller_epoch=4,
            leader=2,
            leader_epoch=9,
            isr=(2, 3),
            partition_epoch=11,
            replicas=(2, 3, 1),
            adding_replicas=(1,),
            removing_replicas=(),
            is_new=True,
            leader_recovery_state=1,
        )
        for t in ("a", "b")
        for p in (0, 1)
    )
    return LeaderAndIsrRequest(3, 5, 1234, parts, (REG,))


@pytest.mark.parametrize("version", range(0, 8))
def test_leader_and_isr_every_version(version: int) -> None:
    req = _lai()
    body = _through_codec(
        ApiKey.LEADER_AND_ISR, version, wire.leader_and_isr_body(req, version, "INTERNAL")
    )
    back = wire.leader_and_isr_from_body(body, version, "INTERNAL")
    assert (back.controller_id, back.controller_epoch) == (3, 5)
    assert back.broker_epoch == (1234 if version >= 2 else -1)
    assert back.live_leaders[0].endpoint("INTERNAL")[1:3] == ("10.0.0.2", 9093)
    for mine, theirs in zip(req.partitions, back.partitions, strict=True):
        expected = mine
        if version < 6:
            expected = _replace(expected, leader_recovery_state=0)
        if version < 5:
            expected = _replace(expected, topic_id=None)
        if version < 3:
            expected = _replace(expected, adding_replicas=())
        if version < 1:
            expected = _replace(expected, is_new=False)
        assert theirs == expected
    errors = PartitionErrors(partitions={("a", 1): ErrorCode.KAFKA_STORAGE_ERROR})
    resp = _response_through_codec(
        ApiKey.LEADER_AND_ISR, version, wire.leader_and_isr_response_body(back, errors, version)
    )
    mapped = wire.leader_and_isr_errors(req, resp, version)
    assert mapped.error_for(("a", 1)) == ErrorCode.KAFKA_STORAGE_ERROR
    assert mapped.error_for(("b", 0)) == ErrorCode.NONE
    assert len(mapped.partitions) == 4


def _replace(p: LeaderAndIsrPartition, **kw: object) -> LeaderAndIsrPartition:
    return dataclasses.replace(p, **kw)  # type: ignore[arg-type]


@pytest.mark.parametrize("version", range(0, 5))
def test_stop_replica_every_version(version: int) -> None:
    req = StopReplicaRequest(
        1, 6, 77, (StopReplicaPartition("t", 0, 3, True), StopReplicaPartition("t", 2, 3, True))
    )
    body = _through_codec(ApiKey.STOP_REPLICA, version, wire.stop_replica_body(req, version))
    back = wire.stop_replica_from_body(body, version)
    assert back.broker_epoch == (77 if version >= 1 else -1)
    assert [(p.topic, p.partition, p.delete) for p in back.partitions] == [
        ("t", 0, True),
        ("t", 2, True),
    ]
    assert all(p.leader_epoch == (3 if version >= 3 else -1) for p in back.partitions)
    errors = PartitionErrors(partitions={("t", 2): ErrorCode.KAFKA_STORAGE_ERROR})
    resp = _response_through_codec(
        ApiKey.STOP_REPLICA, version, wire.stop_replica_response_body(back, errors)
    )
    mapped = wire.stop_replica_errors(resp)
    assert mapped.partitions == {("t", 0): ErrorCode.NONE, ("t", 2): ErrorCode.KAFKA_STORAGE_ERROR}


@pytest.mark.parametrize("version", range(0, 9))
def test_update_metadata_every_version(version: int) -> None:
    part = UpdateMetadataPartition("t", TID, 1, 4, 2, 8, (2, 3), 5, (2, 3, 1), (1,))
    req = UpdateMetadataRequest(3, 5, 99, (part,), (REG,))
    body = _through_codec(ApiKey.UPDATE_METADATA, version, wire.update_metadata_body(req, version))
    back = wire.update_metadata_from_body(body, version)
    expected = part
    if version < 7:
        expected = UpdateMetadataPartition(**{**part.__dict__, "topic_id": None})
    if version < 4:
        expected = UpdateMetadataPartition(**{**expected.__dict__, "offline_replicas": ()})
    assert back.partitions == (expected,)
    broker = back.live_brokers[0]
    assert broker.id == 2
    plain = broker.endpoint("PLAINTEXT")
    assert plain is not None and plain.port == 9092
    if version >= 3:
        assert broker.endpoint("INTERNAL") == Endpoint("INTERNAL", "10.0.0.2", 9093, "SASL_SSL")
    if version >= 2:
        assert broker.rack == "r1"


def test_controlled_shutdown_moves_leaders_and_shrinks_isrs(tmp_path) -> None:
    store = EmbeddedStore(str(tmp_path / "meta"))

    async def scenario() -> None:
        locals_: dict[int, LocalBroker] = {}
        brokers = [Broker(store, i, locals_) for i in (1, 2, 3)]
        for b in brokers:
            await b.start()
        await settle(store, *brokers)
        ctl = next(b for b in brokers if b.controller.active).controller
        await brokers[0].admin.create_topic("t", assignments={0: [2, 1, 3], 1: [1, 2, 3]})
        await brokers[0].admin.create_topic("u", assignments={0: [3, 2]})
        await brokers[0].admin.create_topic("single", assignments={0: [2]})
        await settle(store, *brokers)
        other = next(b for b in brokers if not b.controller.active)
        assert (await other.controller.controlled_shutdown(2, -1))[0] == ErrorCode.NOT_CONTROLLER
        epoch = ctl.ctx.live[2].epoch
        assert (await ctl.controlled_shutdown(2, epoch - 1))[0] == ErrorCode.STALE_BROKER_EPOCH
        assert (await ctl.controlled_shutdown(9, -1))[0] == ErrorCode.BROKER_NOT_AVAILABLE

        error, remaining = await ctl.controlled_shutdown(2, epoch)
        await settle(store, *brokers)
        assert (error, remaining) == (ErrorCode.NONE, [])  # RF 1 partitions do not count
        p0 = state(store, "t", 0)[0]
        assert (p0["leader"], p0["isr"], p0["leader_epoch"]) == (1, [1, 3], 1)
        p1 = state(store, "t", 1)[0]  # follower there: left the ISR, leader unchanged
        assert (p1["leader"], p1["isr"]) == (1, [1, 3])
        p2 = state(store, "u", 0)[0]
        assert (p2["leader"], p2["isr"]) == (3, [3])
        assert state(store, "single", 0)[0]["leader"] == 2
        stops = [p for r in locals_[2].stop_requests for p in r.partitions]
        stopped = {(p.topic, p.partition, p.delete) for p in stops}
        assert stopped == {("t", 1, False), ("u", 0, False)}
        # A later failure of broker 1 does not elect the shutting-down broker.
        await brokers[0].stop()
        await settle(store, *brokers[1:])
        assert state(store, "t", 1)[0]["leader"] == 3
        for b in brokers[1:]:
            await b.stop()

    try:
        asyncio.run(scenario())
    finally:
        store.close()
