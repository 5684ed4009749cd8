"""The transaction coordinator: InitProducerId with transactional ids, AddPartitionsToTxn,
EndTxn, the timeout of open transactions and the admin views (reference §5.3).

Everything runs on the broker's event loop. A request first checks and *prepares* a transition
of the transactional id's metadata (synchronously, so no other request interleaves), then awaits
the write to `__transaction_state`; a metadata with a transition in flight answers
CONCURRENT_TRANSACTIONS. EndTxn answers once PrepareCommit/PrepareAbort is written; the markers
and the final CompleteCommit/CompleteAbort follow in the background (markers.py). The producer's
next AddPartitionsToTxn, which races them, is held until they are done (SETTLE_HOLD_S at most).
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Callable
from concurrent.futures import Executor
from dataclasses import dataclass, field
from typing import Any

from ...protocol.errors import ErrorCode
from ...replication.producer_ids import ProducerIdManager, ProducerIdsUnavailable
from ...replication.replica_manager import ReplicaManager
from .manager import TransactionConfig, TransactionStateManager, now_ms
from .markers import LeaderOf, MarkerChannel, Send
from .metadata import (
    NO_PRODUCER_EPOCH,
    NO_PRODUCER_ID,
    IllegalTransition,
    TopicPartition,
    TransactionMetadata,
    TxnState,
    TxnTransit,
    is_epoch_exhausted,
)

log = logging.getLogger(__name__)

# How long an AddPartitionsToTxn waits for the markers of the producer's previous transaction.
SETTLE_HOLD_S = 0.5


@dataclass(frozen=True)
class InitResult:
    error: ErrorCode
    producer_id: int = NO_PRODUCER_ID
    producer_epoch: int = NO_PRODUCER_EPOCH


@dataclass
class TransactionDescription:
    error: ErrorCode
    state: str = ""
    producer_id: int = NO_PRODUCER_ID
    producer_epoch: int = NO_PRODUCER_EPOCH
    timeout_ms: int = 0
    start_ms: int = -1
    partitions: list[TopicPartition] = field(default_factory=list)


class _NeedProducerId(Exception):
    """Preparing InitProducerId needs a fresh producer id (the epoch is exhausted)."""


class TransactionCoordinator:
    def __init__(
        self,
        replica_manager: ReplicaManager,
        config: TransactionConfig,
        producer_ids: ProducerIdManager,
        *,
        send_markers: Send,
        leader_of: LeaderOf,
        partition_count: Callable[[], int | None] | None = None,
        executor: Executor | None = None,
        clock: Callable[[], int] = now_ms,
    ) -> None:
        self.config = config
        self.clock = clock
        self.producer_ids = producer_ids
        self.state = TransactionStateManager(
            replica_manager, config, partition_count=partition_count, executor=executor,
            clock=clock,
        )  # fmt: skip
        self.markers = MarkerChannel(self.state, send_markers, leader_of)
        self._active = False
        self._loops: list[asyncio.Task[None]] = []
        self._tasks: set[asyncio.Task[Any]] = set()

    # --- lifecycle and leadership ------------------------------------------------------

    async def start(self) -> None:
        self._active = True
        loop = asyncio.get_running_loop()
        self._loops = [
            loop.create_task(self._every(self.config.abort_interval_ms, self.abort_timed_out)),
            loop.create_task(
                self._every(self.config.remove_expired_interval_ms, self.state.remove_expired_ids)
            ),
        ]

    async def shutdown(self) -> None:
        self._active = False
        for task in [*self._loops, *self._tasks]:
            task.cancel()
        await asyncio.gather(*self._loops, *self._tasks, return_exceptions=True)
        await self.markers.shutdown()
        self.state.shutdown()

    async def _every(self, interval_ms: int, fn: Callable[[], Any]) -> None:
        while True:
            await asyncio.sleep(interval_ms / 1000)
            try:
                await fn()
            except Exception:
                log.exception("periodic transaction coordinator work failed")

    def on_elected(self, partition: int, epoch: int) -> None:
        """This broker now leads __transaction_state-`partition` (at leader epoch `epoch`)."""
        self.markers.remove_for_partition(partition)
        self.state.schedule_load(partition, epoch, self.markers.add_markers)

    def on_resigned(self, partition: int) -> None:
        self.state.unload(partition)
        self.markers.remove_for_partition(partition)

    def partition_for(self, transactional_id: str) -> int:
        return self.state.partition_for(transactional_id)

    def is_loaded(self, partition: int) -> bool:
        return partition in self.state.partitions

    def _spawn(self, coro: Any) -> None:
        task = asyncio.get_running_loop().create_task(coro)
        self._tasks.add(task)
        task.add_done_callback(self._tasks.discard)

    # --- InitProducerId ----------------------------------------------------------------

    async def init_producer_id(
        self, txn_id: str, timeout_ms: int, expected: tuple[int, int] | None = None
    ) -> InitResult:
        """A producer (re)starts with `txn_id`: its producer id and a bumped epoch. An open
        transaction of an earlier incarnation is aborted first (CONCURRENT_TRANSACTIONS: the
        client retries). `expected` (v3+) is the id and epoch the producer had (KIP-360)."""
        if txn_id == "":
            return InitResult(ErrorCode.INVALID_REQUEST)
        if not self.state.validate_timeout(timeout_ms):
            return InitResult(ErrorCode.INVALID_TRANSACTION_TIMEOUT)
        got = self.state.get(txn_id)
        if isinstance(got, ErrorCode):
            return InitResult(got)
        if got[1] is None:
            try:
                pid = await self.producer_ids.generate()
            except ProducerIdsUnavailable:
                return InitResult(ErrorCode.COORDINATOR_LOAD_IN_PROGRESS)
            created = TransactionMetadata(
                txn_id, pid, NO_PRODUCER_EPOCH, timeout_ms, TxnState.EMPTY, self.clock()
            )
            got = self.state.put_if_absent(created)
            if isinstance(got, ErrorCode):
                return InitResult(got)
        epoch, md = got
        assert md is not None
        try:
            prepared = self._prepare_init(md, timeout_ms, expected, None)
        except _NeedProducerId:
            try:
                new_pid = await self.producer_ids.generate()
            except ProducerIdsUnavailable:
                return InitResult(ErrorCode.COORDINATOR_LOAD_IN_PROGRESS)
            got = self.state.get(txn_id)
            if isinstance(got, ErrorCode):
                return InitResult(got)
            if got[1] is not md:
                return InitResult(ErrorCode.CONCURRENT_TRANSACTIONS)
            epoch = got[0]
            prepared = self._prepare_init(md, timeout_ms, expected, new_pid)
        if isinstance(prepared, ErrorCode):
            return InitResult(prepared)
        if prepared.state is TxnState.PREPARE_EPOCH_FENCE:
            # Abort the open transaction under the bumped epoch; the client retries and then
            # gets the epoch after that one.
            code = await self._end_transaction(
                txn_id, prepared.producer_id, prepared.producer_epoch, False, from_client=False
            )
            return InitResult(code if code != ErrorCode.NONE else ErrorCode.CONCURRENT_TRANSACTIONS)
        code = await self.state.append(txn_id, epoch, prepared)
        if code != ErrorCode.NONE:
            log.info("InitProducerId of %s failed: %s", txn_id, code.name)
            return InitResult(code)
        log.info(
            "initialized transactional id %s with producer id %d and epoch %d",
            txn_id, prepared.producer_id, prepared.producer_epoch,
        )  # fmt: skip
        return InitResult(ErrorCode.NONE, prepared.producer_id, prepared.producer_epoch)

    def _prepare_init(
        self,
        md: TransactionMetadata,
        timeout_ms: int,
        expected: tuple[int, int] | None,
        new_pid: int | None,
    ) -> TxnTransit | ErrorCode:
        if md.pending:
            return ErrorCode.CONCURRENT_TRANSACTIONS
        if expected is not None:
            pid, exp_epoch = expected
            valid = (
                md.producer_epoch == NO_PRODUCER_EPOCH
                or pid == md.producer_id
                or (pid == md.previous_producer_id and is_epoch_exhausted(exp_epoch))
            )
            if not valid:
                return ErrorCode.PRODUCER_FENCED
        state = md.state
        if state.is_prepare:
            return ErrorCode.CONCURRENT_TRANSACTIONS
        if state in (TxnState.COMPLETE_ABORT, TxnState.COMPLETE_COMMIT, TxnState.EMPTY):
            if md.epoch_exhausted and (expected is None or expected[1] == md.producer_epoch):
                if new_pid is None:
                    raise _NeedProducerId
                return md.prepare_producer_id_rotation(
                    new_pid, timeout_ms, self.clock(), expected is not None
                )
            return md.prepare_increment_producer_epoch(
                timeout_ms, None if expected is None else expected[1], self.clock()
            )
        if state is TxnState.ONGOING:
            return md.prepare_fence_producer_epoch()
        raise IllegalTransition(f"{md.transactional_id} is {state.state_name} in the cache")

    # --- AddPartitionsToTxn ------------------------------------------------------------

    def _producer_txn(
        self, txn_id: str, producer_id: int, epoch: int, *, newer_epoch_ok: bool = False
    ) -> tuple[int, TransactionMetadata] | ErrorCode:
        """The check of every request a transactional producer makes: the id is coordinated
        here and belongs to this producer at this epoch (or, for the coordinator's own aborts
        with `newer_epoch_ok`, a later one). (coordinator epoch, metadata), or the error."""
        if not txn_id:
            return ErrorCode.INVALID_REQUEST
        got = self.state.get(txn_id)
        if isinstance(got, ErrorCode):
            return got
        coordinator_epoch, md = got
        if md is None or md.producer_id != producer_id:
            return ErrorCode.INVALID_PRODUCER_ID_MAPPING
        if epoch < md.producer_epoch or (epoch != md.producer_epoch and not newer_epoch_ok):
            return ErrorCode.PRODUCER_FENCED
        return coordinator_epoch, md

    async def add_partitions(
        self, txn_id: str, producer_id: int, epoch: int, partitions: set[TopicPartition]
    ) -> ErrorCode:
        got = self._producer_txn(txn_id, producer_id, epoch)
        if isinstance(got, ErrorCode):
            return got
        coordinator_epoch, md = got
        if md.pending or md.state.is_prepare:
            # The producer's next transaction raced the markers of its last one (EndTxn
            # answers before them). Held until they are written, the request costs their
            # write (about a millisecond) rather than the client's backoff and retry (20 ms
            # in librdkafka); CONCURRENT_TRANSACTIONS only if they take longer than the hold.
            got = await self._settled(txn_id, producer_id, epoch)
            if isinstance(got, ErrorCode):
                return got
            coordinator_epoch, md = got
        if md.state is TxnState.ONGOING and partitions <= md.partitions:
            return ErrorCode.NONE
        transit = md.prepare_add_partitions(partitions, self.clock())
        return await self.state.append(txn_id, coordinator_epoch, transit)

    async def _settled(
        self, txn_id: str, producer_id: int, epoch: int
    ) -> tuple[int, TransactionMetadata] | ErrorCode:
        """The producer's metadata once no transition is in flight or being completed, within
        SETTLE_HOLD_S; CONCURRENT_TRANSACTIONS after that."""
        loop = asyncio.get_running_loop()
        deadline = loop.time() + SETTLE_HOLD_S
        while (left := deadline - loop.time()) > 0:
            await self.state.wait_settled(txn_id, left)
            got = self._producer_txn(txn_id, producer_id, epoch)
            if isinstance(got, ErrorCode) or not (got[1].pending or got[1].state.is_prepare):
                return got
        return ErrorCode.CONCURRENT_TRANSACTIONS

    def verify_partitions(
        self, txn_id: str, producer_id: int, epoch: int, partitions: set[TopicPartition]
    ) -> dict[TopicPartition, ErrorCode]:
        """AddPartitionsToTxn v4 verify_only: are these partitions in the open transaction?"""
        got = self._producer_txn(txn_id, producer_id, epoch)
        if isinstance(got, ErrorCode):
            return dict.fromkeys(partitions, got)
        _, md = got
        if md.state.is_prepare:
            return dict.fromkeys(partitions, ErrorCode.CONCURRENT_TRANSACTIONS)
        return {
            tp: ErrorCode.NONE if tp in md.partitions else ErrorCode.TRANSACTION_ABORTABLE
            for tp in partitions
        }

    # --- EndTxn ------------------------------------------------------------------------

    async def end_transaction(
        self, txn_id: str, producer_id: int, epoch: int, committed: bool
    ) -> ErrorCode:
        return await self._end_transaction(txn_id, producer_id, epoch, committed, from_client=True)

    async def _end_transaction(
        self, txn_id: str, producer_id: int, epoch: int, committed: bool, *, from_client: bool
    ) -> ErrorCode:
        got = self._producer_txn(txn_id, producer_id, epoch, newer_epoch_ok=not from_client)
        if isinstance(got, ErrorCode):
            return got
        coordinator_epoch, md = got
        fencing = md.pending_state is TxnState.PREPARE_EPOCH_FENCE
        if md.pending and not fencing:
            return ErrorCode.CONCURRENT_TRANSACTIONS
        state = md.state
        if state is TxnState.ONGOING:
            target = TxnState.PREPARE_COMMIT if committed else TxnState.PREPARE_ABORT
            if fencing:
                if committed:
                    raise IllegalTransition(f"{txn_id}: committing during an epoch fence")
                md.pending_state = None
                md.producer_epoch = epoch
                md.last_producer_epoch = NO_PRODUCER_EPOCH
            transit = md.prepare_abort_or_commit(target, self.clock())
        elif state is TxnState.COMPLETE_COMMIT:
            return ErrorCode.NONE if committed else ErrorCode.INVALID_TXN_STATE
        elif state is TxnState.COMPLETE_ABORT:
            return ErrorCode.INVALID_TXN_STATE if committed else ErrorCode.NONE
        elif state is TxnState.PREPARE_COMMIT:
            return ErrorCode.CONCURRENT_TRANSACTIONS if committed else ErrorCode.INVALID_TXN_STATE
        elif state is TxnState.PREPARE_ABORT:
            return ErrorCode.INVALID_TXN_STATE if committed else ErrorCode.CONCURRENT_TRANSACTIONS
        elif state is TxnState.EMPTY:
            return ErrorCode.INVALID_TXN_STATE
        else:
            raise IllegalTransition(f"{txn_id} is {state.state_name} in the cache")

        code = await self.state.append(txn_id, coordinator_epoch, transit)
        if code != ErrorCode.NONE:
            if fencing:
                got = self.state.get(txn_id)
                if not isinstance(got, ErrorCode) and got[0] == coordinator_epoch and got[1]:
                    got[1].has_failed_epoch_fence = True
                    log.warning("fencing %s failed (%s); epoch %d was not returned to any client",
                                txn_id, code.name, epoch)  # fmt: skip
            return code
        got = self.state.get(txn_id)
        if isinstance(got, ErrorCode):
            return got
        if got[1] is None or got[0] != coordinator_epoch:
            return ErrorCode.NOT_COORDINATOR
        md = got[1]
        if md.producer_id != producer_id:
            return ErrorCode.INVALID_PRODUCER_ID_MAPPING
        if md.producer_epoch != epoch:
            return ErrorCode.PRODUCER_FENCED
        if md.pending:
            return ErrorCode.CONCURRENT_TRANSACTIONS
        if md.state is not target:
            return ErrorCode.INVALID_TXN_STATE
        complete = md.prepare_complete(self.clock())
        log.debug("%s %s: writing markers to %d partitions", txn_id,
                  "commit" if committed else "abort", len(md.partitions))  # fmt: skip
        self.markers.add_markers(coordinator_epoch, committed, md, complete)
        return ErrorCode.NONE

    async def abort_timed_out(self) -> int:
        """Abort (fencing the producer) every Ongoing transaction past its timeout."""
        expired = self.state.timed_out(self.clock())
        for txn_id, producer_id, _ in expired:
            self._spawn(self._abort_timed_out(txn_id, producer_id))
        return len(expired)

    async def _abort_timed_out(self, txn_id: str, producer_id: int) -> None:
        # Checked and fenced right before the abort starts: no request runs in between.
        got = self.state.get(txn_id)
        if isinstance(got, ErrorCode) or got[1] is None:
            return
        md = got[1]
        if md.producer_id != producer_id or md.pending or md.state is not TxnState.ONGOING:
            return
        transit = md.prepare_fence_producer_epoch()
        log.info("aborting the transaction of %s: open longer than its timeout of %d ms",
                 txn_id, md.timeout_ms)  # fmt: skip
        code = await self._end_transaction(
            txn_id, transit.producer_id, transit.producer_epoch, False, from_client=False
        )
        if code not in (ErrorCode.NONE, ErrorCode.CONCURRENT_TRANSACTIONS):
            log.info("aborting the timed-out transaction of %s: %s", txn_id, code.name)

    # --- admin views -------------------------------------------------------------------

    def describe(self, txn_id: str) -> TransactionDescription:
        if not self._active:
            return TransactionDescription(ErrorCode.COORDINATOR_NOT_AVAILABLE)
        if not txn_id:
            return TransactionDescription(ErrorCode.INVALID_REQUEST)
        got = self.state.get(txn_id)
        if isinstance(got, ErrorCode):
            return TransactionDescription(got)
        md = got[1]
        if md is None or md.state is TxnState.DEAD:
            return TransactionDescription(ErrorCode.TRANSACTIONAL_ID_NOT_FOUND)
        return TransactionDescription(
            ErrorCode.NONE, md.state.state_name, md.producer_id, md.producer_epoch,
            md.timeout_ms, md.start_ms, sorted(md.partitions),
        )  # fmt: skip

    def list_transactions(
        self, states: list[str], producer_ids: list[int], duration_ms: int = -1
    ) -> tuple[ErrorCode, list[str], list[tuple[str, int, str]]]:
        """(error, unknown state filters, [(transactional id, producer id, state)])."""
        if not self._active:
            return ErrorCode.COORDINATOR_NOT_AVAILABLE, [], []
        if self.state.loading:
            return ErrorCode.COORDINATOR_LOAD_IN_PROGRESS, [], []
        wanted: set[TxnState] = set()
        unknown = []
        for name in states:
            s = TxnState.from_name(name)
            if s is None:
                unknown.append(name)
            else:
                wanted.add(s)
        pids = set(producer_ids)
        now = self.clock()
        out = []
        for md in self.state.all_transactions():
            if md.state is TxnState.DEAD:
                continue
            if pids and md.producer_id not in pids:
                continue
            if states and md.state not in wanted:
                continue
            if duration_ms >= 0 and now - md.start_ms <= duration_ms:
                continue
            out.append((md.transactional_id, md.producer_id, md.state.state_name))
        return ErrorCode.NONE, unknown, out
