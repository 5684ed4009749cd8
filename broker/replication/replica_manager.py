"""The partitions this broker hosts, and the produce/fetch operations on them.

The controller tells the replica manager which partitions it leads (become_leader) and which
to drop (stop_replicas); request handlers call append/read. Nothing here parses requests.
"""

from __future__ import annotations

import asyncio
import logging
import time
import uuid
from collections.abc import Callable, Iterable
from dataclasses import dataclass

from ..cluster.control import (
    LeaderAndIsrRequest,
    PartitionErrors,
    StopReplicaRequest,
)
from ..protocol.errors import ErrorCode, KafkaError
from ..records.validation import validate_for_append
from ..storage.log_config import LogConfig
from ..storage.log_manager import LogManager
from .partition import Partition, PartitionState

log = logging.getLogger(__name__)


@dataclass
class AppendOutcome:
    error: ErrorCode = ErrorCode.NONE
    base_offset: int = -1
    log_append_time: int = -1
    log_start_offset: int = -1
    message: str | None = None


class ReplicaManager:
    def __init__(
        self,
        broker_id: int,
        log_manager: LogManager,
        topic_config: Callable[[str], LogConfig],
    ) -> None:
        self.broker_id = broker_id
        self.log_manager = log_manager
        self.topic_config = topic_config
        self.partitions: dict[tuple[str, int], Partition] = {}

    # --- leadership, as the controller decides it -------------------------------------------

    def become_leader_or_follower(
        self, topic: str, index: int, topic_id: uuid.UUID | None, state: PartitionState
    ) -> Partition:
        key = (topic, index)
        partition = self.partitions.get(key)
        if partition is None:
            log_ = self.log_manager.get_or_create_log(
                topic, index, self.topic_config(topic), topic_id=topic_id
            )
            partition = Partition(topic, index, topic_id, log_, state, self.broker_id)
            self.partitions[key] = partition
        else:
            partition.state = state
        return partition

    def leader_and_isr(self, request: LeaderAndIsrRequest) -> PartitionErrors:
        errors = PartitionErrors()
        for p in request.partitions:
            state = PartitionState(
                leader=p.leader,
                leader_epoch=p.leader_epoch,
                isr=list(p.isr),
                replicas=list(p.replicas),
                partition_epoch=p.partition_epoch,
                adding_replicas=list(p.adding_replicas),
                removing_replicas=list(p.removing_replicas),
            )
            current = self.partitions.get((p.topic, p.partition))
            if current is not None and p.leader_epoch < current.state.leader_epoch:
                errors.partitions[(p.topic, p.partition)] = ErrorCode.STALE_CONTROLLER_EPOCH
                continue
            try:
                self.become_leader_or_follower(p.topic, p.partition, p.topic_id, state)
            except OSError as e:
                log.error("cannot host %s-%d: %s", p.topic, p.partition, e)
                errors.partitions[(p.topic, p.partition)] = ErrorCode.KAFKA_STORAGE_ERROR
            else:
                errors.partitions[(p.topic, p.partition)] = ErrorCode.NONE
        return errors

    def stop_replica(self, request: StopReplicaRequest) -> PartitionErrors:
        errors = PartitionErrors()
        for p in request.partitions:
            self.stop_replicas([(p.topic, p.partition)], p.delete)
            errors.partitions[(p.topic, p.partition)] = ErrorCode.NONE
        return errors

    def stop_replicas(self, partitions: Iterable[tuple[str, int]], delete: bool) -> None:
        for topic, index in partitions:
            partition = self.partitions.pop((topic, index), None)
            if partition is not None:
                partition.wake_fetchers()
            if delete:
                self.log_manager.delete_log(topic, index)

    def update_topic_config(self, topic: str) -> None:
        config = self.topic_config(topic)
        for (t, _), partition in self.partitions.items():
            if t == topic:
                partition.log.update_config(config)

    def get(self, topic: str, index: int) -> Partition | None:
        return self.partitions.get((topic, index))

    def leader_partition(self, topic: str, index: int, known: bool) -> Partition:
        """The partition if this broker leads it; `known`: the metadata has the partition."""
        partition = self.partitions.get((topic, index))
        if partition is None:
            code = (
                ErrorCode.NOT_LEADER_OR_FOLLOWER if known else ErrorCode.UNKNOWN_TOPIC_OR_PARTITION
            )
            raise KafkaError(code)
        if not partition.is_leader:
            raise KafkaError(ErrorCode.NOT_LEADER_OR_FOLLOWER)
        return partition

    # --- produce --------------------------------------------------------------------------

    def append(
        self, partition: Partition, records: memoryview | None, produce_version: int, acks: int
    ) -> AppendOutcome:
        config = partition.log.config
        if acks == -1 and len(partition.state.isr) < config.min_insync_replicas:
            return AppendOutcome(
                ErrorCode.NOT_ENOUGH_REPLICAS, log_start_offset=partition.log.log_start_offset
            )
        now = int(time.time() * 1000)
        try:
            if records is None:
                raise KafkaError(ErrorCode.INVALID_RECORD, "produce request without records")
            data = validate_for_append(
                records,
                produce_version=produce_version,
                now_ms=now,
                compression_type=config.compression_type,
                timestamp_type=config.message_timestamp_type,
                max_message_bytes=config.max_message_bytes,
                timestamp_difference_max_ms=config.message_timestamp_difference_max_ms,
                require_keys=config.compact,
            )
            if not data:
                return AppendOutcome(
                    base_offset=partition.log.log_end_offset,
                    log_start_offset=partition.log.log_start_offset,
                )
            result = partition.append_as_leader(data)
        except KafkaError as e:
            return AppendOutcome(
                e.code, log_start_offset=partition.log.log_start_offset, message=e.message
            )
        return AppendOutcome(
            base_offset=result.first_offset,
            # result.max_timestamp: the stamped append time (the original one for a retried batch)
            log_append_time=(
                result.max_timestamp if config.message_timestamp_type == "LogAppendTime" else -1
            ),
            log_start_offset=result.log_start_offset,
        )

    # --- fetch wake-ups ---------------------------------------------------------------------

    async def wait_for_data(self, partitions: list[Partition], timeout_s: float) -> None:
        """Return when any of `partitions` gets new data, or after `timeout_s`."""
        if timeout_s <= 0 or not partitions:
            if timeout_s > 0:
                await asyncio.sleep(timeout_s)
            return
        fut: asyncio.Future[None] = asyncio.get_running_loop().create_future()
        for p in partitions:
            p.add_waiter(fut)
        try:
            await asyncio.wait_for(asyncio.shield(fut), timeout_s)
        except TimeoutError:
            pass
        finally:
            for p in partitions:
                p.remove_waiter(fut)
