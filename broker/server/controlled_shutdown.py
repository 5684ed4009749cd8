"""Controlled shutdown: before its listeners close, a broker asks the controller to move the
leadership of its partitions to other replicas, so that clients see no unavailability."""

from __future__ import annotations

import asyncio
import logging

from ..client.connection import BrokerConnection
from ..protocol.api_keys import ApiKey
from ..protocol.errors import ErrorCode
from .controller_channel import CONTROLLED_SHUTDOWN_VERSION
from .services import BrokerServices

log = logging.getLogger(__name__)


async def controlled_shutdown(broker: BrokerServices) -> bool:
    """Ask the controller to move leadership away, `controlled.shutdown.max.retries` times
    at most; True when it reports no partition left here."""
    retries = max(1, broker.config.get("controlled.shutdown.max.retries"))
    backoff = broker.config.get("controlled.shutdown.retry.backoff.ms") / 1000
    broker.replica_manager.in_controlled_shutdown = True
    for attempt in range(1, retries + 1):
        try:
            error, remaining = await _send_controlled_shutdown(broker)
        except Exception as e:  # noqa: BLE001 - any failure means: retry
            log.warning("controlled shutdown attempt %d failed: %s", attempt, e)
        else:
            if error == ErrorCode.NONE and not remaining:
                log.info("broker %d: controlled shutdown succeeded", broker.broker_id)
                return True
            log.info(
                "controlled shutdown attempt %d: %s, %d partitions still led here",
                attempt,
                error.name,
                len(remaining),
            )
        if attempt < retries:
            await asyncio.sleep(backoff)
    log.warning("broker %d: controlled shutdown failed; shutting down anyway", broker.broker_id)
    return False


async def _send_controlled_shutdown(
    broker: BrokerServices,
) -> tuple[ErrorCode, list[tuple[str, int]]]:
    """One attempt. Like Kafka, the controller and its address come from the metadata
    cache (not ZooKeeper, which may be the reason for the shutdown), and the attempt is
    bounded by request.timeout.ms."""
    timeout = broker.config.get("request.timeout.ms") / 1000
    controller_id = broker.metadata_cache.controller_id
    if controller_id is None or controller_id < 0:
        return ErrorCode.NOT_CONTROLLER, []
    if controller_id == broker.broker_id and broker.controller is not None:
        return await asyncio.wait_for(
            broker.controller.controlled_shutdown(broker.broker_id, broker.broker_epoch), timeout
        )
    ep = broker.metadata_cache.endpoint(controller_id, broker.config.inter_broker_listener)
    if ep is None:
        return ErrorCode.BROKER_NOT_AVAILABLE, []
    conn = await BrokerConnection.open(
        ep.host,
        ep.port,
        client_id=f"broker-{broker.broker_id}",
        request_timeout=timeout,
        connect_timeout=timeout,
        node_id=controller_id,
        security=broker.inter_broker_security,
    )
    try:
        resp = await conn.request(
            ApiKey.CONTROLLED_SHUTDOWN,
            {"broker_id": broker.broker_id, "broker_epoch": broker.broker_epoch},
            max_version=CONTROLLED_SHUTDOWN_VERSION,
        )
    finally:
        await conn.close()
    remaining = [(r["topic_name"], r["partition_index"]) for r in resp["remaining_partitions"]]
    return ErrorCode(resp["error_code"]), remaining
