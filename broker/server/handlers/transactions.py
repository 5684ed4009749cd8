"""Transactions: AddPartitionsToTxn (24), AddOffsetsToTxn (25), EndTxn (26), WriteTxnMarkers
(27), DescribeTransactions (65) and ListTransactions (66).

The client APIs go to the transaction coordinator (coordinator/transaction); WriteTxnMarkers
is the coordinator's request to a partition leader (server/txn_markers.py). Authorization is
Kafka's: WRITE on the transactional id (and on the topics added, READ on the group for
offsets), CLUSTER_ACTION (or ALTER) on the cluster for markers, DESCRIBE on transactional ids
for the admin views.
"""

from __future__ import annotations

from typing import Any

from ...config import INTERNAL_TOPICS
from ...coordinator.group import OFFSETS_TOPIC
from ...protocol.api_keys import ApiKey
from ...protocol.errors import ErrorCode
from ...security.acl import AclOperation as Op
from ...security.acl import AclResourceType as RT
from .. import authz
from ..services import partition_error
from ..txn_markers import errors_body, markers_from_body, write_markers
from .registry import RequestContext, handles

TopicPartition = tuple[str, int]


def _fenced_for(version: int, first_with_fenced: int, code: ErrorCode) -> ErrorCode:
    """Clients older than PRODUCER_FENCED (KIP-588) understand INVALID_PRODUCER_EPOCH."""
    if version < first_with_fenced and code == ErrorCode.PRODUCER_FENCED:
        return ErrorCode.INVALID_PRODUCER_EPOCH
    return code


def _topic_results(errors: dict[TopicPartition, ErrorCode]) -> list[dict[str, Any]]:
    topics: dict[str, list[dict[str, Any]]] = {}
    for (topic, partition), code in errors.items():
        topics.setdefault(topic, []).append(
            {"partition_index": partition, "partition_error_code": code}
        )
    return [{"name": t, "results_by_partition": ps} for t, ps in topics.items()]


# --- AddPartitionsToTxn ------------------------------------------------------------------------


@handles(ApiKey.ADD_PARTITIONS_TO_TXN, "0-3")
async def handle_add_partitions_to_txn(ctx: RequestContext, req: dict[str, Any]) -> dict[str, Any]:
    broker = ctx.broker
    txn_id = req["v3_and_below_transactional_id"]
    wanted = [(t["name"], p) for t in req["v3_and_below_topics"] for p in t["partitions"]]
    errors: dict[TopicPartition, ErrorCode]
    if not authz.authorized(ctx, Op.WRITE, RT.TRANSACTIONAL_ID, txn_id):
        errors = dict.fromkeys(wanted, ErrorCode.TRANSACTIONAL_ID_AUTHORIZATION_FAILED)
    else:
        # Internal topics are never written by producers directly (as Kafka).
        writable = authz.authorized_names(
            ctx, Op.WRITE, RT.TOPIC, (t for t, _ in wanted if t not in INTERNAL_TOPICS)
        )
        failed: dict[TopicPartition, ErrorCode] = {}
        ok: list[TopicPartition] = []
        for tp in wanted:
            error = partition_error(broker, tp, writable)
            if error is not None:
                failed[tp] = error
            else:
                ok.append(tp)
        if failed:
            errors = {**failed, **dict.fromkeys(ok, ErrorCode.OPERATION_NOT_ATTEMPTED)}
        else:
            code = await broker.txn_coordinator.add_partitions(
                txn_id,
                req["v3_and_below_producer_id"],
                req["v3_and_below_producer_epoch"],
                set(ok),
            )
            errors = dict.fromkeys(ok, _fenced_for(ctx.version, 2, code))
    return {"throttle_time_ms": 0, "results_by_topic_v3_and_below": _topic_results(errors)}


# --- AddOffsetsToTxn ---------------------------------------------------------------------------


@handles(ApiKey.ADD_OFFSETS_TO_TXN, "0-4")
async def handle_add_offsets_to_txn(ctx: RequestContext, req: dict[str, Any]) -> dict[str, Any]:
    broker = ctx.broker
    txn_id = req["transactional_id"]
    if not authz.authorized(ctx, Op.WRITE, RT.TRANSACTIONAL_ID, txn_id):
        code = ErrorCode.TRANSACTIONAL_ID_AUTHORIZATION_FAILED
    elif not authz.authorized(ctx, Op.READ, RT.GROUP, req["group_id"]):
        code = ErrorCode.GROUP_AUTHORIZATION_FAILED
    else:
        tp = (OFFSETS_TOPIC, broker.group_coordinator.partition_for(req["group_id"]))
        code = await broker.txn_coordinator.add_partitions(
            txn_id, req["producer_id"], req["producer_epoch"], {tp}
        )
        code = _fenced_for(ctx.version, 2, code)
    return {"throttle_time_ms": 0, "error_code": code}


# --- EndTxn ------------------------------------------------------------------------------------


@handles(ApiKey.END_TXN, "0-4")
async def handle_end_txn(ctx: RequestContext, req: dict[str, Any]) -> dict[str, Any]:
    txn_id = req["transactional_id"]
    if not authz.authorized(ctx, Op.WRITE, RT.TRANSACTIONAL_ID, txn_id):
        return {
            "throttle_time_ms": 0,
            "error_code": ErrorCode.TRANSACTIONAL_ID_AUTHORIZATION_FAILED,
        }
    code = await ctx.broker.txn_coordinator.end_transaction(
        txn_id, req["producer_id"], req["producer_epoch"], req["committed"]
    )
    return {"throttle_time_ms": 0, "error_code": _fenced_for(ctx.version, 2, code)}


# --- WriteTxnMarkers (inter-broker) ------------------------------------------------------------


@handles(ApiKey.WRITE_TXN_MARKERS, "0-1")
async def handle_write_txn_markers(ctx: RequestContext, req: dict[str, Any]) -> dict[str, Any]:
    markers = markers_from_body(req)
    if not authz.cluster(ctx, Op.ALTER) and not authz.cluster(ctx, Op.CLUSTER_ACTION):
        denied = {
            m.producer_id: dict.fromkeys(m.partitions, ErrorCode.CLUSTER_AUTHORIZATION_FAILED)
            for m in markers
        }
        return errors_body(denied)
    return errors_body(await write_markers(ctx.broker, markers))


# --- admin views -------------------------------------------------------------------------------


@handles(ApiKey.DESCRIBE_TRANSACTIONS, "0")
async def handle_describe_transactions(ctx: RequestContext, req: dict[str, Any]) -> dict[str, Any]:
    coordinator = ctx.broker.txn_coordinator
    states = []
    for txn_id in req["transactional_ids"]:
        entry: dict[str, Any] = {"transactional_id": txn_id, "topics": []}
        if not authz.authorized(ctx, Op.DESCRIBE, RT.TRANSACTIONAL_ID, txn_id):
            entry["error_code"] = ErrorCode.TRANSACTIONAL_ID_AUTHORIZATION_FAILED
            states.append(entry)
            continue
        d = coordinator.describe(txn_id)
        entry["error_code"] = d.error
        if d.error == ErrorCode.NONE:
            # Partitions of topics the principal may not describe are left out, as in Kafka.
            topics: dict[str, list[int]] = {}
            for topic, partition in d.partitions:
                topics.setdefault(topic, []).append(partition)
            visible = authz.authorized_names(ctx, Op.DESCRIBE, RT.TOPIC, topics)
            entry.update(
                transaction_state=d.state,
                transaction_timeout_ms=d.timeout_ms,
                transaction_start_time_ms=d.start_ms,
                producer_id=d.producer_id,
                producer_epoch=d.producer_epoch,
                topics=[{"topic": t, "partitions": ps} for t, ps in topics.items() if t in visible],
            )
        states.append(entry)
    return {"throttle_time_ms": 0, "transaction_states": states}


@handles(ApiKey.LIST_TRANSACTIONS, "0-1")
async def handle_list_transactions(ctx: RequestContext, req: dict[str, Any]) -> dict[str, Any]:
    error, unknown, found = ctx.broker.txn_coordinator.list_transactions(
        req["state_filters"], req["producer_id_filters"], req.get("duration_filter", -1)
    )
    visible = authz.authorized_names(
        ctx, Op.DESCRIBE, RT.TRANSACTIONAL_ID, (t for t, _, _ in found)
    )
    return {
        "throttle_time_ms": 0,
        "error_code": error,
        "unknown_state_filters": unknown,
        "transaction_states": [
            {"transactional_id": t, "producer_id": pid, "transaction_state": state}
            for t, pid, state in found
            if t in visible
        ],
    }
