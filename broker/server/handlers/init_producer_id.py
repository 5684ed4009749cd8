"""InitProducerId (22): producer ids for idempotent and transactional producers.

Without a transactional id any broker answers, as Kafka does: a fresh producer id from this
broker's block, epoch 0. Kafka never bumps the epoch of a non-transactional producer here, even
when a v3+ request carries its current id and epoch (the client bumps idempotent epochs itself,
KIP-360); such a request also gets a new id. A request naming a transactional id goes to the
transaction coordinator of that id (NOT_COORDINATOR from any other broker), which bumps the
id's epoch and so fences the producers that had it before.
"""

from __future__ import annotations

import logging
from typing import Any

from ...protocol.api_keys import ApiKey
from ...protocol.errors import ErrorCode
from ...replication.producer_ids import ProducerIdsUnavailable
from ...security.acl import AclOperation as Op
from ...security.acl import AclResourceType as RT
from .. import authz
from .registry import RequestContext, handles

log = logging.getLogger(__name__)

NO_PRODUCER_ID = -1
NO_PRODUCER_EPOCH = -1


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
        expected = None if pid == NO_PRODUCER_ID else (pid, epoch)
        result = await ctx.broker.txn_coordinator.init_producer_id(
            transactional_id, req["transaction_timeout_ms"], expected
        )
        error = result.error
        if ctx.version < 4 and error == ErrorCode.PRODUCER_FENCED:
            error = ErrorCode.INVALID_PRODUCER_EPOCH  # what clients before KIP-588 understand
        return {
            "throttle_time_ms": 0,
            "error_code": error,
            "producer_id": result.producer_id,
            "producer_epoch": result.producer_epoch,
        }
    try:
        producer_id = await ctx.broker.producer_ids.generate()
    except ProducerIdsUnavailable:
        # Kafka's answer while its producer id block is not yet available: retriable.
        return _error(ErrorCode.COORDINATOR_LOAD_IN_PROGRESS)
    return {
        "throttle_time_ms": 0,
        "error_code": ErrorCode.NONE,
        "producer_id": producer_id,
        "producer_epoch": 0,
    }
