"""How a coordinator writes to a partition it leads: like a produce with acks=all.

The batch (built by the coordinator, so not validated as a client's) goes to the leader's log
through the replica manager; the write counts only once the high watermark passes it
(replicated to the ISR), or fails after `timeout_s`.
"""

from __future__ import annotations

import inspect

from ..protocol.errors import ErrorCode, KafkaError
from ..replication.producer_state import AppendOrigin
from ..replication.replica_manager import ReplicaManager

# Produce version whose validation rules apply to the coordinators' own batches (v2 records).
PRODUCE_VERSION = 9


async def append_committed(
    replica_manager: ReplicaManager,
    topic: str,
    partition: int,
    batch: bytes,
    timeout_s: float,
    *,
    records: int,
) -> tuple[ErrorCode, int]:
    """Append `batch` (holding `records` records) to our leader replica of `topic-partition`
    and wait for the ISR; (error, base offset)."""
    try:
        hosted = replica_manager.leader_partition(topic, partition, True)
    except KafkaError as e:
        return ErrorCode.of(e.code), -1
    outcome = replica_manager.append(
        hosted, memoryview(batch), PRODUCE_VERSION, -1, AppendOrigin.COORDINATOR
    )
    if inspect.isawaitable(outcome):
        outcome = await outcome
    if outcome.error != ErrorCode.NONE:
        return ErrorCode.of(outcome.error), -1
    code = await replica_manager.wait_for_replication(
        hosted, outcome.base_offset + records, timeout_s
    )
    if code != ErrorCode.NONE:
        return ErrorCode.of(code), -1
    return ErrorCode.NONE, outcome.base_offset
