"""One partition hosted by this broker: its log, its leadership state, and fetch wake-ups."""

from __future__ import annotations

import asyncio
import uuid
from dataclasses import dataclass, field

from ..storage.log import Log
from .producer_state import LogProducerState


@dataclass
class PartitionState:
    """Leadership as the controller decided it (the LeaderAndIsr view of one partition)."""

    leader: int
    leader_epoch: int
    isr: list[int]
    replicas: list[int]
    partition_epoch: int = 0
    adding_replicas: list[int] = field(default_factory=list)
    removing_replicas: list[int] = field(default_factory=list)


class Partition:
    def __init__(
        self,
        topic: str,
        index: int,
        topic_id: uuid.UUID | None,
        log: Log,
        state: PartitionState,
        local_broker_id: int,
    ) -> None:
        self.topic = topic
        self.index = index
        self.topic_id = topic_id
        self.log = log
        self.state = state
        self.local_broker_id = local_broker_id
        self._waiters: list[asyncio.Future[None]] = []
        # Idempotent producers' epochs and last batches, rebuilt from snapshots and the log.
        self.producer_state = LogProducerState(log)

    @property
    def is_leader(self) -> bool:
        return self.state.leader == self.local_broker_id

    @property
    def high_watermark(self) -> int:
        return self.log.high_watermark

    def append_as_leader(self, records: bytearray):  # -> storage AppendResult
        # Until replication arrives, the log's high watermark follows its end (storage default).
        pending = self.producer_state.prepare_leader_append(records)  # may raise KafkaError
        if pending.duplicate is not None:
            # A producer's retry of a batch already in the log: answer with the original offsets.
            return self.producer_state.duplicate_result(pending.duplicate)
        result = self.log.append(records, assign_offsets=True, leader_epoch=self.state.leader_epoch)
        self.producer_state.complete_append(pending, result.last_offset + 1)
        self.wake_fetchers()
        return result

    def add_waiter(self, fut: asyncio.Future[None]) -> None:
        self._waiters.append(fut)

    def remove_waiter(self, fut: asyncio.Future[None]) -> None:
        try:
            self._waiters.remove(fut)
        except ValueError:
            pass

    def wake_fetchers(self) -> None:
        waiters, self._waiters = self._waiters, []
        for fut in waiters:
            if not fut.done():
                fut.set_result(None)
