"""InitProducerId (22): producer ids for idempotent producers.

Without a transactional id any broker answers, as Kafka does: a fresh producer id from this
broker's block, epoch 0. Kafka never bumps the epoch of a non-transactional producer here, even
when a v3+ request carries its current id and epoch (the client bumps idempotent epochs itself,
KIP-360); such a request also gets a new id. A request naming a transactional id needs the
transaction coordinator of that id; until transactions exist no broker is that coordinator, so it
is answered NOT_COORDINATOR, Kafka's answer from a broker that does not own the id's
__transaction_state partition.
"""

from __future__ import annotations

import logging
from typing import Any

from ...protocol.api_keys import ApiKey
from ...protocol.errors import ErrorCode
from ...replication.producer_ids import ProducerIdManager, ProducerIdsUnavailable
from ...security.acl import AclOperation as Op
from ...security.acl import AclResourceType as RT
from .. import authz
from .registry import RequestContext, handles

log = logging.getLogger(__name__)

NO_PRODUCER_ID = -1
NO_PRODUCER_EPOCH = -1


def producer_id_manager(broker: Any) -> ProducerIdManager:
    """The broker's producer id allocator, made on first use."""
    manager = getattr(broker, "producer_ids", None)
    if manager is None:

        async def allocate() -> Any:
            return await broker._io(broker.zk.allocate_producer_id_block, broker.broker_id)

        manager = ProducerIdManager(allocate)
        broker.producer_ids = manager
    return manager


def _error(code: ErrorCode) -> dict[str, Any]:
    return {
        "throttle_time_ms": 0,
        "error_code": code,
        "producer_id": NO_PRODUCER_ID,
        "producer_epoch": NO_PRODUCER_EPOCH,
    }


@handles(ApiKey.INIT_PRODUCER_ID, "0-5")
async def handle_init_producer_id(ctx: RequestContext, req: dict[str, Any]) -> dict[str, Any]:
    pid, epoch = req.get("producer_id", -1), req.get("producer_epoch", -1)
    if (pid == NO_PRODUCER_ID) != (epoch == NO_PRODUCER_EPOCH):
        return _error(ErrorCode.INVALID_REQUEST)
    transactional_id = req.get("transactional_id")
    if transactional_id is not None:
        if not authz.authorized(ctx, Op.WRITE, RT.TRANSACTIONAL_ID, transactional_id):
            return _error(ErrorCode.TRANSACTIONAL_ID_AUTHORIZATION_FAILED)
    elif not authz.cluster(ctx, Op.IDEMPOTENT_WRITE) and not authz.authorized_any(
        ctx, Op.WRITE, RT.TOPIC
    ):
        # Idempotence needs IDEMPOTENT_WRITE on the cluster or WRITE on some topic.
        return _error(ErrorCode.CLUSTER_AUTHORIZATION_FAILED)
    if transactional_id is not None:
        if transactional_id == "":
            return _error(ErrorCode.INVALID_REQUEST)
        timeout = req["transaction_timeout_ms"]
        if not 0 < timeout <= ctx.broker.config.get("transaction.max.timeout.ms"):
            return _error(ErrorCode.INVALID_TRANSACTION_TIMEOUT)
        return _error(ErrorCode.NOT_COORDINATOR)
    try:
        producer_id = await producer_id_manager(ctx.broker).generate()
    except ProducerIdsUnavailable:
        # Kafka's answer while its producer id block is not yet available: retriable.
        return _error(ErrorCode.COORDINATOR_LOAD_IN_PROGRESS)
    return {
        "throttle_time_ms": 0,
        "error_code": ErrorCode.NONE,
        "producer_id": producer_id,
        "producer_epoch": 0,
    }
