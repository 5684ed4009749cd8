"""Sending transaction markers: WriteTxnMarkers to the leader of every partition of a
transaction, then the CompleteCommit/CompleteAbort record once all of them are written.

Markers are queued per destination broker; one task per broker sends whatever is queued as one
request, so many transactions ending together share requests. Retriable errors and lost
connections put the affected partitions back in the queues after a short backoff, with their
leaders looked up again. The network itself is the caller's: `send(broker_id, markers)`
returns, per producer id, each partition's error code, and raises when there is no answer.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field

from ...protocol.errors import ErrorCode
from .manager import TransactionStateManager
from .metadata import TopicPartition, TransactionMetadata, TxnTransit

log = logging.getLogger(__name__)

RETRY_BACKOFF_S = 0.1

# A partition's leader: a broker id, UNKNOWN_LEADER while there is none, None when the
# partition no longer exists (no marker is owed there).
UNKNOWN_LEADER = -1

_RETRIABLE = frozenset(
    {
        ErrorCode.UNKNOWN_TOPIC_OR_PARTITION,
        ErrorCode.NOT_LEADER_OR_FOLLOWER,
        ErrorCode.NOT_ENOUGH_REPLICAS,
        ErrorCode.NOT_ENOUGH_REPLICAS_AFTER_APPEND,
        ErrorCode.REQUEST_TIMED_OUT,
        ErrorCode.KAFKA_STORAGE_ERROR,
        ErrorCode.NETWORK_EXCEPTION,
        ErrorCode.COORDINATOR_LOAD_IN_PROGRESS,
    }
)
# The producer or coordinator moved on: this transaction's markers are obsolete.
_OBSOLETE = frozenset({ErrorCode.INVALID_PRODUCER_EPOCH, ErrorCode.TRANSACTION_COORDINATOR_FENCED})
_SKIP_PARTITION = frozenset(
    {ErrorCode.UNSUPPORTED_FOR_MESSAGE_FORMAT, ErrorCode.UNSUPPORTED_VERSION}
)


@dataclass(frozen=True)
class MarkerEntry:
    """One WriteTxnMarkers entry: a producer's result for some partitions of one broker."""

    producer_id: int
    producer_epoch: int
    committed: bool
    coordinator_epoch: int
    partitions: frozenset[TopicPartition]


@dataclass
class PendingCompletion:
    """A transaction whose markers are being written; `complete` is written after them."""

    transactional_id: str
    coordinator_epoch: int
    metadata: TransactionMetadata
    complete: TxnTransit


@dataclass
class _Queued:
    pending: PendingCompletion
    entry: MarkerEntry


@dataclass
class _Destination:
    queue: list[_Queued] = field(default_factory=list)
    wake: asyncio.Event = field(default_factory=asyncio.Event)
    task: asyncio.Task[None] | None = None


Send = Callable[[int, list[MarkerEntry]], Awaitable[dict[int, dict[TopicPartition, ErrorCode]]]]
LeaderOf = Callable[[str, int], int | None]


class MarkerChannel:
    def __init__(self, state: TransactionStateManager, send: Send, leader_of: LeaderOf) -> None:
        self.state = state
        self._send = send
        self._leader_of = leader_of
        self._destinations: dict[int, _Destination] = {}
        self._unknown: list[_Queued] = []  # partitions without a leader right now
        self._pending: dict[str, PendingCompletion] = {}
        self._tasks: set[asyncio.Task[None]] = set()
        self._closed = False

    @property
    def pending_transactions(self) -> int:
        return len(self._pending)

    # -- entry points -------------------------------------------------------------------

    def add_markers(
        self, coordinator_epoch: int, committed: bool, md: TransactionMetadata, complete: TxnTransit
    ) -> None:
        """Write `md`'s result to all its partitions, then `complete` to the log."""
        pending = PendingCompletion(md.transactional_id, coordinator_epoch, md, complete)
        previous = self._pending.get(md.transactional_id)
        if previous is not None:
            log.info("replacing the pending completion of %s", md.transactional_id)
        self._pending[md.transactional_id] = pending
        self._enqueue(pending, md.producer_id, md.producer_epoch, committed, set(md.partitions))
        self._maybe_complete(md.transactional_id)

    def remove_for_partition(self, txn_partition: int) -> None:
        """Forget the markers of transactions of a __transaction_state partition we resigned."""
        part = self.state.partition_for
        for dest in self._destinations.values():
            dest.queue = [
                q for q in dest.queue if part(q.pending.transactional_id) != txn_partition
            ]
        self._unknown = [
            q for q in self._unknown if part(q.pending.transactional_id) != txn_partition
        ]
        for txn_id in [t for t in self._pending if part(t) == txn_partition]:
            del self._pending[txn_id]

    async def shutdown(self) -> None:
        self._closed = True
        tasks = [d.task for d in self._destinations.values() if d.task is not None]
        tasks += list(self._tasks)
        for t in tasks:
            t.cancel()
        await asyncio.gather(*tasks, return_exceptions=True)
        self._destinations.clear()
        self._pending.clear()

    # -- queues ---------------------------------------------------------------------------

    def _enqueue(
        self,
        pending: PendingCompletion,
        producer_id: int,
        producer_epoch: int,
        committed: bool,
        partitions: set[TopicPartition],
    ) -> None:
        by_leader: dict[int | None, set[TopicPartition]] = {}
        for tp in partitions:
            by_leader.setdefault(self._leader_of(*tp), set()).add(tp)
        for leader, tps in by_leader.items():
            entry = MarkerEntry(
                producer_id, producer_epoch, committed, pending.coordinator_epoch, frozenset(tps)
            )
            if leader is None:
                self._drop_deleted_partitions(pending, tps)
            elif leader == UNKNOWN_LEADER:
                self._unknown.append(_Queued(pending, entry))
                self._spawn(self._retry_unknown_later())
            else:
                dest = self._destinations.get(leader)
                if dest is None:
                    dest = self._destinations[leader] = _Destination()
                dest.queue.append(_Queued(pending, entry))
                dest.wake.set()
                if (dest.task is None or dest.task.done()) and not self._closed:
                    dest.task = asyncio.get_running_loop().create_task(
                        self._sender(leader, dest), name=f"txn-markers-{leader}"
                    )

    def _drop_deleted_partitions(
        self, pending: PendingCompletion, tps: set[TopicPartition]
    ) -> None:
        if not self._current(pending):
            self._pending.pop(pending.transactional_id, None)
            return
        log.info("partitions %s of %s no longer exist: no markers for them",
                 sorted(tps), pending.transactional_id)  # fmt: skip
        for tp in tps:
            pending.metadata.remove_partition(tp)
        self._maybe_complete(pending.transactional_id)

    async def _retry_unknown_later(self) -> None:
        await asyncio.sleep(RETRY_BACKOFF_S * 5)
        waiting, self._unknown = self._unknown, []
        for q in waiting:
            if self._still_pending(q.pending):
                e = q.entry
                self._enqueue(
                    q.pending, e.producer_id, e.producer_epoch, e.committed, set(e.partitions)
                )

    def _spawn(self, coro: Awaitable[None]) -> None:
        if self._closed:
            if hasattr(coro, "close"):
                coro.close()  # type: ignore[union-attr]
            return
        task = asyncio.get_running_loop().create_task(coro)  # type: ignore[arg-type]
        self._tasks.add(task)
        task.add_done_callback(self._task_done)

    def _task_done(self, task: asyncio.Task[None]) -> None:
        self._tasks.discard(task)
        if not task.cancelled() and task.exception() is not None:
            log.error("transaction marker task failed", exc_info=task.exception())

    # -- state checks -------------------------------------------------------------------

    def _still_pending(self, pending: PendingCompletion) -> bool:
        return self._pending.get(pending.transactional_id) is pending

    def _current(self, pending: PendingCompletion) -> bool:
        """This broker still coordinates the transaction, at the same coordinator epoch."""
        got = self.state.get(pending.transactional_id)
        if isinstance(got, ErrorCode):
            return False
        epoch, md = got
        return md is pending.metadata and epoch == pending.coordinator_epoch

    # -- sending ------------------------------------------------------------------------

    async def _sender(self, broker_id: int, dest: _Destination) -> None:
        while not self._closed:
            if not dest.queue:
                dest.wake.clear()
                await dest.wake.wait()
                continue
            batch, dest.queue = dest.queue, []
            batch = [q for q in batch if self._still_pending(q.pending)]
            if not batch:
                continue
            try:
                errors = await self._send(broker_id, [q.entry for q in batch])
            except asyncio.CancelledError:
                raise
            except Exception as e:  # noqa: BLE001 - no answer: try again, leaders may move
                log.info("WriteTxnMarkers to broker %d failed: %s; retrying", broker_id, e)
                await asyncio.sleep(RETRY_BACKOFF_S)
                for q in batch:
                    self._requeue(q, set(q.entry.partitions))
                continue
            retry_later: list[tuple[_Queued, set[TopicPartition]]] = []
            for q in batch:
                retry = self._on_response(q, errors.get(q.entry.producer_id, {}))
                if retry:
                    retry_later.append((q, retry))
            if retry_later:
                self._spawn(self._requeue_after_backoff(retry_later))

    async def _requeue_after_backoff(
        self, items: list[tuple[_Queued, set[TopicPartition]]]
    ) -> None:
        await asyncio.sleep(RETRY_BACKOFF_S)
        for q, tps in items:
            self._requeue(q, tps)

    def _requeue(self, q: _Queued, partitions: set[TopicPartition]) -> None:
        if not self._still_pending(q.pending):
            return
        if not self._current(q.pending):
            self._pending.pop(q.pending.transactional_id, None)
            return
        e = q.entry
        self._enqueue(q.pending, e.producer_id, e.producer_epoch, e.committed, partitions)

    def _on_response(
        self, q: _Queued, errors: dict[TopicPartition, ErrorCode]
    ) -> set[TopicPartition]:
        """Apply one entry's answers; returns the partitions to send again."""
        pending = q.pending
        if not self._still_pending(pending):
            return set()
        if not self._current(pending):
            log.info("no longer coordinating %s at epoch %d: its markers are dropped",
                     pending.transactional_id, pending.coordinator_epoch)  # fmt: skip
            self._pending.pop(pending.transactional_id, None)
            return set()
        md = pending.metadata
        retry: set[TopicPartition] = set()
        for tp in q.entry.partitions:
            code = errors.get(tp)
            if code is None:
                retry.add(tp)
            elif code == ErrorCode.NONE or code in _SKIP_PARTITION:
                md.remove_partition(tp)
            elif code in _OBSOLETE:
                log.info("marker of %s for %s refused (%s): the transaction is obsolete",
                         pending.transactional_id, tp, code.name)  # fmt: skip
                self._pending.pop(pending.transactional_id, None)
                return set()
            else:
                if code not in _RETRIABLE:
                    log.warning("marker of %s for %s failed: %s; retrying",
                                pending.transactional_id, tp, code.name)  # fmt: skip
                retry.add(tp)
        if not retry:
            self._maybe_complete(pending.transactional_id)
        return retry

    # -- completion ---------------------------------------------------------------------

    def _maybe_complete(self, txn_id: str) -> None:
        pending = self._pending.get(txn_id)
        if pending is None or pending.metadata.partitions:
            return
        del self._pending[txn_id]
        if self._current(pending):
            self._spawn(self._write_completion(pending))

    async def _write_completion(self, pending: PendingCompletion) -> None:
        while not self._closed:
            code = await self.state.append(
                pending.transactional_id,
                pending.coordinator_epoch,
                pending.complete,
                keep_pending_on=frozenset({ErrorCode.COORDINATOR_NOT_AVAILABLE}),
            )
            if code != ErrorCode.COORDINATOR_NOT_AVAILABLE:
                if code != ErrorCode.NONE:
                    log.info("completing %s: %s", pending.transactional_id, code.name)
                return
            await asyncio.sleep(RETRY_BACKOFF_S * 5)
            if not self._current(pending):
                return
