"""What the group and transaction coordinators share about their internal topic's partitions.

Each coordinator serves the partitions of `__consumer_offsets` or `__transaction_state` that
this broker leads. Becoming a leader starts a load: the partition's log is read in chunks,
decoded in a worker thread, and the load stops as soon as another load (a newer leader epoch)
or an unload replaced it. The managers keep what a load produced; this piece keeps which loads
are under way, reads the log, and maps append errors to what the clients of a coordinator see.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import AsyncIterator, Callable, Coroutine, Mapping
from concurrent.futures import Executor
from typing import Any, TypeVar

from ..protocol.errors import ErrorCode
from ..replication.replica_manager import ReplicaManager

log = logging.getLogger(__name__)

# A decoded batch: a tuple whose first item is the batch's last offset.
B = TypeVar("B", bound=tuple)

# Append errors every coordinator maps alike: the partition or its ISR is gone for now
# (retry with the same coordinator), or this broker no longer leads it (find the new one).
_APPEND_ERRORS: Mapping[ErrorCode, ErrorCode] = {
    ErrorCode.UNKNOWN_TOPIC_OR_PARTITION: ErrorCode.COORDINATOR_NOT_AVAILABLE,
    ErrorCode.NOT_ENOUGH_REPLICAS: ErrorCode.COORDINATOR_NOT_AVAILABLE,
    ErrorCode.NOT_ENOUGH_REPLICAS_AFTER_APPEND: ErrorCode.COORDINATOR_NOT_AVAILABLE,
    ErrorCode.NOT_LEADER_OR_FOLLOWER: ErrorCode.NOT_COORDINATOR,
    ErrorCode.KAFKA_STORAGE_ERROR: ErrorCode.NOT_COORDINATOR,
}


def append_error(code: ErrorCode, specific: Mapping[ErrorCode, ErrorCode]) -> ErrorCode:
    """What a coordinator's client sees for an append error: the shared mapping, then the
    mapping `specific` to one kind of write (Kafka maps each write its own way)."""
    mapped = _APPEND_ERRORS.get(code)
    if mapped is not None:
        return mapped
    return specific.get(code, code)


class CoordinatorPartitions:
    """The partitions of one internal topic being loaded, and reading them from the log."""

    def __init__(
        self,
        replica_manager: ReplicaManager,
        topic: str,
        key_partition: Callable[[str, int], int],
        *,
        default_partitions: int,
        load_buffer_size: int,
        partition_count: Callable[[], int | None] | None = None,
        executor: Executor | None = None,
    ) -> None:
        """`key_partition(key, partitions)`: the partition of a group id or transactional id;
        `partition_count()`: the topic's partition count once it exists (None before);
        `default_partitions` (the broker setting) stands in until then."""
        self.replica_manager = replica_manager
        self.topic = topic
        self._key_partition = key_partition
        self._default_partitions = default_partitions
        self._load_buffer_size = load_buffer_size
        self._partition_count = partition_count
        self._executor = executor
        self.loading: dict[int, int] = {}  # partition -> leader epoch being loaded
        self._load_tasks: dict[int, asyncio.Task[None]] = {}

    def num_partitions(self) -> int:
        n = self._partition_count() if self._partition_count is not None else None
        return n if n else self._default_partitions

    def partition_for(self, key: str) -> int:
        """The partition of a group id or transactional id."""
        return self._key_partition(key, self.num_partitions())

    def start_load(
        self, partition: int, epoch: int, load: Callable[[], Coroutine[Any, Any, None]]
    ) -> None:
        """Run `load()` as the load of `partition` at `epoch`, replacing any earlier one."""
        self.loading[partition] = epoch
        old = self._load_tasks.pop(partition, None)
        if old is not None:
            old.cancel()
        task = asyncio.get_running_loop().create_task(load())
        self._load_tasks[partition] = task
        task.add_done_callback(lambda t, p=partition: self._load_done(p, t))

    def _load_done(self, partition: int, task: asyncio.Task[None]) -> None:
        if self._load_tasks.get(partition) is task:
            del self._load_tasks[partition]
        if not task.cancelled() and task.exception() is not None:
            log.error("loading %s-%d failed", self.topic, partition, exc_info=task.exception())
            self.loading.pop(partition, None)

    def is_current_load(self, partition: int, epoch: int) -> bool:
        return self.loading.get(partition) == epoch

    def stop_load(self, partition: int) -> None:
        self.loading.pop(partition, None)
        task = self._load_tasks.pop(partition, None)
        if task is not None:
            task.cancel()

    def stop_all_loads(self) -> None:
        for task in self._load_tasks.values():
            task.cancel()
        self._load_tasks.clear()
        self.loading.clear()

    async def read_batches(
        self, partition: int, epoch: int, decode: Callable[[bytes], list[B]]
    ) -> AsyncIterator[B]:
        """The decoded batches of our replica of `partition`, from its log start to its log
        end; stops early once this load is no longer the current one.

        Like Kafka, read to the log end: as the new leader its whole log is authoritative,
        while its high watermark may lag until the followers fetch again."""
        hosted = self.replica_manager.get(self.topic, partition)
        if hosted is None:
            return
        log_ = hosted.log
        position = log_.log_start_offset
        end = log_.log_end_offset
        loop = asyncio.get_running_loop()
        while position < end:
            chunk = log_.read(position, self._load_buffer_size, max_offset=end)
            if chunk is None:
                break
            batches = await loop.run_in_executor(self._executor, lambda c=chunk: decode(c.read()))
            if not self.is_current_load(partition, epoch) or not batches:
                return
            for batch in batches:
                yield batch
                position = batch[0] + 1
