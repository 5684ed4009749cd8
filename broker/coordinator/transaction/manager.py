"""The transactions kept in `__transaction_state`: which partitions this broker coordinates,
loading them when it becomes their leader, and writing each state change.

A change is written as one record (key: transactional id, value: the new metadata) with
acks=all; the metadata in memory takes the new values only once the record is committed, and
only if the partition was not reloaded meanwhile (its coordinator epoch, the partition's leader
epoch at loading, is unchanged).
"""

from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import Callable, Iterable
from concurrent.futures import Executor
from dataclasses import dataclass, field

from ...protocol.errors import ErrorCode
from ...records.record import Record, build_batch, decode_all
from ...replication.replica_manager import ReplicaManager
from ..log_append import append_committed
from ..partitions import CoordinatorPartitions, append_error
from . import formats as fmt
from .metadata import TransactionMetadata, TxnState, TxnTransit

log = logging.getLogger(__name__)

TOPIC = fmt.TRANSACTION_STATE_TOPIC


def now_ms() -> int:
    return int(time.time() * 1000)


@dataclass(frozen=True)
class TransactionConfig:
    """The transaction.* broker settings (Kafka's defaults)."""

    num_partitions: int = 50
    replication_factor: int = 3
    min_isr: int = 2
    segment_bytes: int = 100 * 1024 * 1024
    load_buffer_size: int = 5 * 1024 * 1024
    max_timeout_ms: int = 900_000
    id_expiration_ms: int = 604_800_000
    abort_interval_ms: int = 10_000
    remove_expired_interval_ms: int = 3_600_000
    request_timeout_ms: int = 30_000

    @classmethod
    def from_broker_config(cls, config: object) -> TransactionConfig:
        get = config.get  # type: ignore[attr-defined]
        return cls(
            num_partitions=get("transaction.state.log.num.partitions"),
            replication_factor=get("transaction.state.log.replication.factor"),
            min_isr=get("transaction.state.log.min.isr"),
            segment_bytes=get("transaction.state.log.segment.bytes"),
            load_buffer_size=get("transaction.state.log.load.buffer.size"),
            max_timeout_ms=get("transaction.max.timeout.ms"),
            id_expiration_ms=get("transactional.id.expiration.ms"),
            abort_interval_ms=get("transaction.abort.timed.out.transaction.cleanup.interval.ms"),
            remove_expired_interval_ms=get(
                "transaction.remove.expired.transaction.cleanup.interval.ms"
            ),
            request_timeout_ms=get("request.timeout.ms"),
        )

    def topic_configs(self) -> dict[str, str]:
        """What __transaction_state is created with (Kafka's enforced settings)."""
        return {
            "cleanup.policy": "compact",
            "compression.type": "uncompressed",
            "unclean.leader.election.enable": "false",
            "min.insync.replicas": str(self.min_isr),
            "segment.bytes": str(self.segment_bytes),
        }


@dataclass
class PartitionTxns:
    """The transactions of one __transaction_state partition this broker leads."""

    coordinator_epoch: int
    txns: dict[str, TransactionMetadata] = field(default_factory=dict)


# What a transactional client sees for an append error beyond the shared mapping (Kafka's).
_TXN_APPEND_ERRORS = {
    ErrorCode.REQUEST_TIMED_OUT: ErrorCode.COORDINATOR_NOT_AVAILABLE,
    ErrorCode.MESSAGE_TOO_LARGE: ErrorCode.UNKNOWN_SERVER_ERROR,
    ErrorCode.RECORD_LIST_TOO_LARGE: ErrorCode.UNKNOWN_SERVER_ERROR,
}


def metadata_from(txn_id: str, v: fmt.TxnLogValue) -> TransactionMetadata:
    return TransactionMetadata(
        transactional_id=txn_id,
        producer_id=v.producer_id,
        producer_epoch=v.producer_epoch,
        timeout_ms=v.timeout_ms,
        state=TxnState.from_id(v.state_id),
        last_update_ms=v.last_update_ms,
        start_ms=v.start_ms,
        partitions=set(v.partitions),
    )


def value_of(t: TxnTransit) -> fmt.TxnLogValue:
    return fmt.TxnLogValue(
        t.producer_id, t.producer_epoch, t.timeout_ms, t.state.id, t.partitions,
        t.last_update_ms, t.start_ms,
    )  # fmt: skip


def _decode_chunk(data: bytes) -> list[tuple[int, list[tuple[str, fmt.TxnLogValue | None]]]]:
    """(last offset, [(transactional id, value or None)]) per batch (runs in a worker thread)."""
    out = []
    for header, records in decode_all(data, allow_partial_tail=True):
        entries: list[tuple[str, fmt.TxnLogValue | None]] = []
        if not header.is_control:
            for r in records:
                if r.key is None:
                    continue
                try:
                    txn_id = fmt.parse_key(r.key)
                    if txn_id is None:
                        log.warning("skipping %s record %d: unknown key version", TOPIC, r.offset)
                        continue
                    entries.append((txn_id, None if r.value is None else fmt.parse_value(r.value)))
                except fmt.FormatError as e:
                    log.warning("skipping unreadable %s record %d: %s", TOPIC, r.offset, e)
        out.append((header.last_offset, entries))
    return out


# Called when a loaded partition holds transactions in PrepareCommit/PrepareAbort: their
# markers must be (re)sent. (coordinator epoch, committed, metadata, completion transit)
ResumeMarkers = Callable[[int, bool, TransactionMetadata, TxnTransit], None]


class TransactionStateManager(CoordinatorPartitions):
    def __init__(
        self,
        replica_manager: ReplicaManager,
        config: TransactionConfig,
        *,
        partition_count: Callable[[], int | None] | None = None,
        executor: Executor | None = None,
        clock: Callable[[], int] = now_ms,
    ) -> None:
        super().__init__(
            replica_manager,
            TOPIC,
            fmt.partition_for,
            default_partitions=config.num_partitions,
            load_buffer_size=config.load_buffer_size,
            partition_count=partition_count,
            executor=executor,
        )
        self.config = config
        self.clock = clock
        self.partitions: dict[int, PartitionTxns] = {}
        # Requests waiting for a transactional id's transition to settle (wait_settled).
        self._settle_waiters: dict[str, list[asyncio.Future[None]]] = {}

    # -- partitions ---------------------------------------------------------------------

    def validate_timeout(self, timeout_ms: int) -> bool:
        return 0 < timeout_ms <= self.config.max_timeout_ms

    def get(self, txn_id: str) -> tuple[int, TransactionMetadata | None] | ErrorCode:
        """(coordinator epoch, metadata or None) when this broker coordinates `txn_id`;
        COORDINATOR_LOAD_IN_PROGRESS or NOT_COORDINATOR otherwise."""
        partition = self.partition_for(txn_id)
        if partition in self.loading:
            return ErrorCode.COORDINATOR_LOAD_IN_PROGRESS
        entry = self.partitions.get(partition)
        if entry is None:
            return ErrorCode.NOT_COORDINATOR
        return entry.coordinator_epoch, entry.txns.get(txn_id)

    def put_if_absent(self, md: TransactionMetadata) -> tuple[int, TransactionMetadata] | ErrorCode:
        got = self.get(md.transactional_id)
        if isinstance(got, ErrorCode):
            return got
        epoch, current = got
        if current is not None:
            return epoch, current
        self.partitions[self.partition_for(md.transactional_id)].txns[md.transactional_id] = md
        return epoch, md

    def all_transactions(self) -> Iterable[TransactionMetadata]:
        for entry in self.partitions.values():
            yield from entry.txns.values()

    # -- loading ------------------------------------------------------------------------

    def schedule_load(self, partition: int, epoch: int, resume: ResumeMarkers) -> None:
        """Become the coordinator of `partition` (leader epoch `epoch`): load its state."""
        current = self.partitions.get(partition)
        if (current is not None and current.coordinator_epoch >= epoch) or self.loading.get(
            partition, -1
        ) >= epoch:
            return
        self.partitions.pop(partition, None)
        self.start_load(partition, epoch, lambda: self._load(partition, epoch, resume))

    async def _load(self, partition: int, epoch: int, resume: ResumeMarkers) -> None:
        started = time.monotonic()
        loaded: dict[str, TransactionMetadata] = {}
        async for _, entries in self.read_batches(partition, epoch, _decode_chunk):
            for txn_id, value in entries:
                if value is None:
                    loaded.pop(txn_id, None)
                else:
                    loaded[txn_id] = metadata_from(txn_id, value)
        if not self.is_current_load(partition, epoch):
            return
        self.partitions[partition] = PartitionTxns(epoch, loaded)
        del self.loading[partition]
        now = self.clock()
        resumed = 0
        for md in loaded.values():
            if md.state.is_prepare:
                committed = md.state is TxnState.PREPARE_COMMIT
                resume(epoch, committed, md, md.prepare_complete(now))
                resumed += 1
        log.info(
            "loaded %d transactional ids of %s-%d (coordinator epoch %d, %d to complete) in %.0f ms",
            len(loaded), TOPIC, partition, epoch, resumed, (time.monotonic() - started) * 1000,
        )  # fmt: skip

    def unload(self, partition: int) -> None:
        """No longer the coordinator of `partition`: forget its transactions."""
        self.stop_load(partition)
        if self.partitions.pop(partition, None) is not None:
            log.info("unloaded the transactions of %s-%d", TOPIC, partition)

    def shutdown(self) -> None:
        self.stop_all_loads()
        self.partitions.clear()

    # -- writes -------------------------------------------------------------------------

    async def _write(self, partition: int, records: list[Record], timeout_ms: int) -> ErrorCode:
        batch = build_batch(records)
        code, _ = await append_committed(
            self.replica_manager, TOPIC, partition, batch, timeout_ms / 1000, records=len(records)
        )
        return append_error(code, _TXN_APPEND_ERRORS)

    async def append(
        self,
        txn_id: str,
        coordinator_epoch: int,
        transit: TxnTransit,
        *,
        keep_pending_on: frozenset[ErrorCode] = frozenset(),
    ) -> ErrorCode:
        """Write `transit` for `txn_id` and complete the transition once it is committed.

        On failure the pending state is dropped (so the producer can retry), unless the error
        is in `keep_pending_on` (the caller retries the same write)."""
        got = self.get(txn_id)
        if isinstance(got, ErrorCode):
            return got
        epoch, md = got
        if md is None or epoch != coordinator_epoch:
            return ErrorCode.NOT_COORDINATOR
        record = Record(
            timestamp=self.clock(),
            key=fmt.key_bytes(txn_id),
            value=fmt.value_bytes(value_of(transit)),
        )
        code = await self._write(self.partition_for(txn_id), [record], transit.timeout_ms)
        try:
            got = self.get(txn_id)
            if code == ErrorCode.NONE:
                if isinstance(got, ErrorCode):
                    return got
                epoch, md = got
                if md is None or epoch != coordinator_epoch:
                    return ErrorCode.NOT_COORDINATOR
                md.complete_transition(transit)
                return ErrorCode.NONE
            log.info("writing %s of %s failed: %s", transit.state.state_name, txn_id, code.name)
            if not isinstance(got, ErrorCode):
                epoch, md = got
                if md is not None and epoch == coordinator_epoch and code not in keep_pending_on:
                    md.pending_state = None
            return code
        finally:
            for waiter in self._settle_waiters.pop(txn_id, ()):
                if not waiter.done():
                    waiter.set_result(None)

    async def wait_settled(self, txn_id: str, timeout: float) -> None:
        """Return once a write of `txn_id`'s metadata has finished (written or failed), or
        after `timeout` seconds: the caller then looks at the metadata again."""
        waiter: asyncio.Future[None] = asyncio.get_running_loop().create_future()
        waiters = self._settle_waiters.setdefault(txn_id, [])
        waiters.append(waiter)
        try:
            await asyncio.wait([waiter], timeout=timeout)
        finally:
            if waiter in waiters:
                waiters.remove(waiter)
                if not waiters and self._settle_waiters.get(txn_id) is waiters:
                    del self._settle_waiters[txn_id]

    # -- timeouts and expiration ----------------------------------------------------------

    def timed_out(self, now: int) -> list[tuple[str, int, int]]:
        """(transactional id, producer id, epoch) of Ongoing transactions past their timeout."""
        return [
            (md.transactional_id, md.producer_id, md.producer_epoch)
            for md in self.all_transactions()
            if md.state is TxnState.ONGOING and not md.pending and md.start_ms + md.timeout_ms < now
        ]

    async def remove_expired_ids(self, now: int | None = None) -> int:
        """Tombstone transactional ids idle past transactional.id.expiration.ms."""
        now = self.clock() if now is None else now
        removed = 0
        for partition, entry in list(self.partitions.items()):
            expired = [
                md
                for md in entry.txns.values()
                if not md.pending
                and md.state.expiration_allowed
                and md.last_update_ms <= now - self.config.id_expiration_ms
            ]
            if not expired:
                continue
            transits = {md.transactional_id: md.prepare_dead() for md in expired}
            records = [
                Record(offset=i, timestamp=now, key=fmt.key_bytes(md.transactional_id))
                for i, md in enumerate(expired)
            ]
            code = await self._write(partition, records, self.config.request_timeout_ms)
            current = self.partitions.get(partition)
            for md in expired:
                still = (
                    current is not None
                    and current.coordinator_epoch == entry.coordinator_epoch
                    and current.txns.get(md.transactional_id) is md
                    and md.pending_state is TxnState.DEAD
                    and md.producer_epoch == transits[md.transactional_id].producer_epoch
                )
                if code == ErrorCode.NONE and still:
                    del current.txns[md.transactional_id]  # type: ignore[union-attr]
                    removed += 1
                else:
                    md.pending_state = None
            if code != ErrorCode.NONE:
                log.warning("expiring transactional ids in %s-%d failed: %s", TOPIC, partition,
                            code.name)  # fmt: skip
        if removed:
            log.info("expired %d transactional ids", removed)
        return removed
