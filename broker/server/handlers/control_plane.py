"""LeaderAndIsr (4), StopReplica (5), UpdateMetadata (6): the controller's orders to a broker;
ControlledShutdown (7): a stopping broker asks the controller to move its leadership away.

Every broker serves 4-6. As in Kafka, a request from a controller older than the newest one this
broker has heard from is refused with STALE_CONTROLLER_EPOCH (the newer epoch is remembered), and
one addressed to an earlier registration of this broker (its broker epoch is lower than the
current one; -1 means "unknown") with STALE_BROKER_EPOCH. Only the active controller answers
ControlledShutdown; the others say NOT_CONTROLLER and the sender looks the controller up again.
"""

from __future__ import annotations

from typing import Any

from ...cluster.control import PartitionErrors
from ...protocol.api_keys import ApiKey
from ...protocol.errors import ErrorCode
from ...security.acl import AclOperation as Op
from .. import authz
from ..controller_channel import (
    leader_and_isr_from_body,
    leader_and_isr_response_body,
    stop_replica_from_body,
    stop_replica_response_body,
    update_metadata_from_body,
)
from .registry import RequestContext, handles


def _denied(ctx: RequestContext) -> ErrorCode:
    """Controller requests need CLUSTER_ACTION (the inter-broker principal must have it)."""
    if authz.cluster(ctx, Op.CLUSTER_ACTION):
        return ErrorCode.NONE
    return ErrorCode.CLUSTER_AUTHORIZATION_FAILED


def _fence(ctx: RequestContext, controller_epoch: int, broker_epoch: int) -> ErrorCode:
    """Kafka's checks, in its order: broker epoch first, then controller epoch."""
    broker = ctx.broker
    if broker_epoch != -1 and broker_epoch < broker.broker_epoch:
        return ErrorCode.STALE_BROKER_EPOCH
    if controller_epoch < broker.controller_epoch_seen:
        return ErrorCode.STALE_CONTROLLER_EPOCH
    broker.controller_epoch_seen = controller_epoch
    return ErrorCode.NONE


@handles(ApiKey.LEADER_AND_ISR, "0-7")
async def handle_leader_and_isr(ctx: RequestContext, req: dict[str, Any]) -> dict[str, Any]:
    broker = ctx.broker
    request = leader_and_isr_from_body(req, ctx.version, broker.config.inter_broker_listener)
    error = _denied(ctx) or _fence(ctx, request.controller_epoch, request.broker_epoch)
    if error != ErrorCode.NONE:
        errors = PartitionErrors(error)
    else:
        errors = await broker.leader_and_isr(request)
    return leader_and_isr_response_body(request, errors, ctx.version)


@handles(ApiKey.STOP_REPLICA, "0-4")
async def handle_stop_replica(ctx: RequestContext, req: dict[str, Any]) -> dict[str, Any]:
    request = stop_replica_from_body(req, ctx.version)
    error = _denied(ctx) or _fence(ctx, request.controller_epoch, request.broker_epoch)
    if error != ErrorCode.NONE:
        errors = PartitionErrors(error)
    else:
        errors = await ctx.broker.stop_replica(request)
    return stop_replica_response_body(request, errors)


@handles(ApiKey.UPDATE_METADATA, "0-8")
async def handle_update_metadata(ctx: RequestContext, req: dict[str, Any]) -> dict[str, Any]:
    request = update_metadata_from_body(req, ctx.version)
    error = _denied(ctx) or _fence(ctx, request.controller_epoch, request.broker_epoch)
    if error == ErrorCode.NONE:
        error = await ctx.broker.update_metadata(request)
    return {"error_code": error}


@handles(ApiKey.CONTROLLED_SHUTDOWN, "0-3")
async def handle_controlled_shutdown(ctx: RequestContext, req: dict[str, Any]) -> dict[str, Any]:
    if _denied(ctx):
        return {"error_code": ErrorCode.CLUSTER_AUTHORIZATION_FAILED, "remaining_partitions": []}
    controller = ctx.broker.controller
    if controller is None or not controller.active:
        return {"error_code": ErrorCode.NOT_CONTROLLER, "remaining_partitions": []}
    error, remaining = await controller.controlled_shutdown(
        req["broker_id"], req.get("broker_epoch", -1)
    )
    return {
        "error_code": error,
        "remaining_partitions": [
            {"topic_name": t, "partition_index": p} for t, p in sorted(remaining)
        ],
    }
