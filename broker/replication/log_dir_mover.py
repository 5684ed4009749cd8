"""Moving a replica between this broker's log dirs (AlterReplicaLogDirs; Kafka's
ReplicaAlterLogDirsThread).

The partition keeps serving from its current log while a task copies that log, batch by batch
in offset order, into the `-future` log the log manager created in the destination dir, as a
follower would (offsets, leader epochs and aborted-transaction index entries kept). Whatever happens to the current log meanwhile
is followed: its log start moving up (retention, DeleteRecords) moves the future's, a truncation
is reconciled with leader epochs as followers do (KIP-101). Once the future log has every offset
of the current one, the two are swapped on the event loop with no await in between, so no
append can slip between the check and the swap. `replica.alter.log.dirs.io.max.bytes.per.second`
throttles the copy.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
from collections.abc import Callable
from typing import Any

from ..storage.log import Log
from .partition import Partition
from .truncation import UNDEFINED, truncation_for

log = logging.getLogger(__name__)

CHUNK_BYTES = 1 << 20

TopicPartition = tuple[str, int]


class LogDirMover:
    """One copy task per partition being moved."""

    def __init__(
        self,
        swap: Callable[[Partition], None],
        rate_bytes_per_s: float = float("inf"),
        chunk_bytes: int = CHUNK_BYTES,
    ) -> None:
        self.swap = swap
        self.rate = rate_bytes_per_s
        self.chunk_bytes = chunk_bytes
        self.tasks: dict[TopicPartition, asyncio.Task[None]] = {}

    def moving(self, tp: TopicPartition) -> bool:
        task = self.tasks.get(tp)
        return task is not None and not task.done()

    def start(self, partition: Partition, future: Log) -> None:
        tp = (partition.topic, partition.index)
        self.stop(tp)
        task = asyncio.get_running_loop().create_task(
            self._move(partition, future), name=f"alter-log-dir-{tp[0]}-{tp[1]}"
        )
        self.tasks[tp] = task
        task.add_done_callback(lambda t, tp=tp: self._done(tp, t))

    def _done(self, tp: TopicPartition, task: asyncio.Task[None]) -> None:
        if self.tasks.get(tp) is task:
            del self.tasks[tp]
        if not task.cancelled() and task.exception() is not None:
            log.error("moving %s-%d failed", *tp, exc_info=task.exception())

    def stop(self, tp: TopicPartition) -> None:
        task = self.tasks.pop(tp, None)
        if task is not None:
            task.cancel()

    async def shutdown(self) -> None:
        tasks = list(self.tasks.values())
        self.tasks.clear()
        for task in tasks:
            task.cancel()
        for task in tasks:
            with contextlib.suppress(asyncio.CancelledError, Exception):
                await task

    async def _move(self, partition: Partition, future: Log) -> None:
        name = f"{partition.topic}-{partition.index}"
        loop = asyncio.get_running_loop()
        log.info("moving %s to %s", name, future.dir.parent)
        source: Log | None = None
        generation = -1
        started = loop.time()
        copied = 0
        while True:
            current = partition.log
            if current is not source or current.generation != generation:
                self._reconcile(current, future)
                source, generation = current, current.generation
            if future.log_end_offset < current.log_start_offset:
                future.truncate_fully_and_start_at(current.log_start_offset)
            elif current.log_start_offset > future.log_start_offset:
                future.delete_records_before(current.log_start_offset)
            chunk = current.read(future.log_end_offset, self.chunk_bytes)
            if chunk is not None:
                data = chunk.read()
                first = future.log_end_offset
                future.append(data, assign_offsets=False)
                copied += len(data)
                # The aborted transactions whose markers were copied: the future's .txnindex.
                for txn in current.collect_aborted(first, future.log_end_offset):
                    if first <= txn.last_offset < future.log_end_offset:
                        future.append_aborted_txn(txn)
            if future.log_end_offset >= current.log_end_offset:
                # Every offset of the current log is in the future one: swap, with no await
                # between this check and the swap.
                log.info("%s caught up in %s; swapping it in", name, future.dir.parent)
                self.swap(partition)
                return
            await self._throttle(loop, started, copied)

    @staticmethod
    def _reconcile(current: Log, future: Log) -> None:
        """Cut the future log where it diverges from the current one (after a truncation),
        with the leader epochs a follower uses against its leader."""
        for _ in range(100):
            latest = future.epoch_cache.latest_epoch
            if latest is None:
                if future.log_end_offset > current.log_end_offset:
                    future.truncate_to(current.log_end_offset)
                return
            epoch, end = current.epoch_cache.end_offset_for(latest, current.log_end_offset)
            step = truncation_for(
                epoch,
                end if epoch != UNDEFINED else UNDEFINED,
                future.epoch_cache,
                future.log_end_offset,
                future.high_watermark,
            )
            if step.offset < future.log_end_offset:
                future.truncate_to(step.offset)
            if step.done:
                return

    async def _throttle(self, loop: Any, started: float, copied: int) -> None:
        delay = 0.0
        if self.rate != float("inf") and self.rate > 0:
            delay = copied / self.rate - (loop.time() - started)
        await asyncio.sleep(max(delay, 0.0))
