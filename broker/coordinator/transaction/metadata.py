"""One transactional id's state at its coordinator, and the transitions between states.

Pure bookkeeping, as Kafka's TransactionMetadata: a change is first *prepared* (the coordinator
gets a `TxnTransit`, the metadata remembers the pending state, nothing else changes), written to
`__transaction_state`, and only then *completed* (the metadata takes the transit's values). A
metadata with a pending state refuses further changes (CONCURRENT_TRANSACTIONS at the caller).

Producers that do not bump their epoch on EndTxn (transaction.version 0 and 1, every client
against a ZooKeeper-mode broker) are what this models: the epoch moves on InitProducerId and
when the coordinator fences a producer (PrepareEpochFence).
"""

from __future__ import annotations

from dataclasses import dataclass, field, replace
from enum import Enum

from ...protocol.errors import ErrorCode

NO_PRODUCER_ID = -1
NO_PRODUCER_EPOCH = -1
INT16_MAX = 32767

TopicPartition = tuple[str, int]


class TxnState(Enum):
    # value: (id written to the log, Kafka's name)
    EMPTY = (0, "Empty")
    ONGOING = (1, "Ongoing")
    PREPARE_COMMIT = (2, "PrepareCommit")
    PREPARE_ABORT = (3, "PrepareAbort")
    COMPLETE_COMMIT = (4, "CompleteCommit")
    COMPLETE_ABORT = (5, "CompleteAbort")
    DEAD = (6, "Dead")
    PREPARE_EPOCH_FENCE = (7, "PrepareEpochFence")

    @property
    def id(self) -> int:
        return self.value[0]

    @property
    def state_name(self) -> str:
        return self.value[1]

    @classmethod
    def from_id(cls, state_id: int) -> TxnState:
        for s in cls:
            if s.id == state_id:
                return s
        raise ValueError(f"unknown transaction state id {state_id}")

    @classmethod
    def from_name(cls, name: str) -> TxnState | None:
        return next((s for s in cls if s.state_name == name), None)

    @property
    def expiration_allowed(self) -> bool:
        return self in (TxnState.EMPTY, TxnState.COMPLETE_COMMIT, TxnState.COMPLETE_ABORT)

    @property
    def is_prepare(self) -> bool:
        return self in (TxnState.PREPARE_COMMIT, TxnState.PREPARE_ABORT)


S = TxnState
_VALID_PREVIOUS: dict[TxnState, frozenset[TxnState]] = {
    S.EMPTY: frozenset({S.EMPTY, S.COMPLETE_COMMIT, S.COMPLETE_ABORT}),
    S.ONGOING: frozenset({S.ONGOING, S.EMPTY, S.COMPLETE_COMMIT, S.COMPLETE_ABORT}),
    S.PREPARE_COMMIT: frozenset({S.ONGOING}),
    S.PREPARE_ABORT: frozenset({S.ONGOING, S.PREPARE_EPOCH_FENCE}),
    S.COMPLETE_COMMIT: frozenset({S.PREPARE_COMMIT}),
    S.COMPLETE_ABORT: frozenset({S.PREPARE_ABORT}),
    S.DEAD: frozenset({S.EMPTY, S.COMPLETE_ABORT, S.COMPLETE_COMMIT}),
    S.PREPARE_EPOCH_FENCE: frozenset({S.ONGOING}),
}


class IllegalTransition(Exception):
    """A transition the state machine forbids: a bug, never a client's doing."""


def is_epoch_exhausted(epoch: int) -> bool:
    return epoch >= INT16_MAX - 1


@dataclass(frozen=True)
class TxnTransit:
    """The metadata a prepared transition will have once written to the log."""

    producer_id: int
    prev_producer_id: int
    producer_epoch: int
    last_producer_epoch: int
    timeout_ms: int
    state: TxnState
    partitions: frozenset[TopicPartition]
    start_ms: int
    last_update_ms: int


@dataclass(eq=False)
class TransactionMetadata:
    transactional_id: str
    producer_id: int
    producer_epoch: int
    timeout_ms: int
    state: TxnState
    last_update_ms: int
    start_ms: int = -1
    previous_producer_id: int = NO_PRODUCER_ID
    last_producer_epoch: int = NO_PRODUCER_EPOCH
    partitions: set[TopicPartition] = field(default_factory=set)
    pending_state: TxnState | None = None
    # An epoch fence whose log write failed: the next fence reuses the bumped epoch.
    has_failed_epoch_fence: bool = False

    @property
    def pending(self) -> bool:
        return self.pending_state is not None

    @property
    def epoch_exhausted(self) -> bool:
        return is_epoch_exhausted(self.producer_epoch)

    def _transit(self, state: TxnState, **changes: object) -> TxnTransit:
        if self.pending_state is not None:
            raise IllegalTransition(
                f"{self.transactional_id}: preparing {state.state_name} while "
                f"{self.pending_state.state_name} is pending"
            )
        if self.state not in _VALID_PREVIOUS[state]:
            raise IllegalTransition(
                f"{self.transactional_id}: {self.state.state_name} -> {state.state_name}"
            )
        base = TxnTransit(
            producer_id=self.producer_id,
            prev_producer_id=self.producer_id,
            producer_epoch=self.producer_epoch,
            last_producer_epoch=self.last_producer_epoch,
            timeout_ms=self.timeout_ms,
            state=state,
            partitions=frozenset(self.partitions),
            start_ms=self.start_ms,
            last_update_ms=self.last_update_ms,
        )
        transit = replace(base, **changes)  # type: ignore[arg-type]
        if transit.producer_id < 0 or (state is not S.DEAD and transit.producer_epoch < 0):
            raise IllegalTransition(f"{self.transactional_id}: invalid producer id or epoch")
        self.pending_state = state
        return transit

    # -- preparing transitions ------------------------------------------------------------

    def prepare_fence_producer_epoch(self) -> TxnTransit:
        """Ongoing -> PrepareEpochFence with the epoch bumped: the current producer is fenced
        and its transaction will be aborted under the new epoch."""
        if self.producer_epoch == INT16_MAX:
            raise IllegalTransition("cannot fence a producer whose epoch is already the maximum")
        epoch = self.producer_epoch if self.has_failed_epoch_fence else self.producer_epoch + 1
        return self._transit(
            S.PREPARE_EPOCH_FENCE, producer_epoch=epoch, last_producer_epoch=NO_PRODUCER_EPOCH
        )

    def prepare_increment_producer_epoch(
        self, timeout_ms: int, expected_epoch: int | None, now_ms: int
    ) -> TxnTransit | ErrorCode:
        """InitProducerId on an idle transactional id: the next epoch, or (KIP-360) the epoch
        the producer already got when this is a retry of that bump."""
        if self.epoch_exhausted:
            raise IllegalTransition(f"producer id {self.producer_id} has no epochs left")
        bumped = self.producer_epoch + 1
        if expected_epoch is None:
            epoch, last = bumped, NO_PRODUCER_EPOCH
        elif self.producer_epoch == NO_PRODUCER_EPOCH or expected_epoch == self.producer_epoch:
            epoch, last = bumped, self.producer_epoch
        elif expected_epoch == self.last_producer_epoch:
            epoch, last = self.producer_epoch, self.last_producer_epoch
        else:
            return ErrorCode.PRODUCER_FENCED
        return self._transit(
            S.EMPTY,
            producer_epoch=epoch,
            last_producer_epoch=last,
            timeout_ms=timeout_ms,
            partitions=frozenset(),
            start_ms=-1,
            last_update_ms=now_ms,
        )

    def prepare_producer_id_rotation(
        self, new_producer_id: int, timeout_ms: int, now_ms: int, record_last_epoch: bool
    ) -> TxnTransit:
        """The epoch is exhausted: continue under a new producer id at epoch 0."""
        if self.state in (S.ONGOING, S.PREPARE_ABORT, S.PREPARE_COMMIT):
            raise IllegalTransition("cannot rotate the producer id of an open transaction")
        return self._transit(
            S.EMPTY,
            producer_id=new_producer_id,
            producer_epoch=0,
            last_producer_epoch=self.producer_epoch if record_last_epoch else NO_PRODUCER_EPOCH,
            timeout_ms=timeout_ms,
            partitions=frozenset(),
            start_ms=-1,
            last_update_ms=now_ms,
        )

    def prepare_add_partitions(self, added: set[TopicPartition], now_ms: int) -> TxnTransit:
        starting = self.state in (S.EMPTY, S.COMPLETE_ABORT, S.COMPLETE_COMMIT)
        return self._transit(
            S.ONGOING,
            partitions=frozenset(self.partitions | added),
            start_ms=now_ms if starting else self.start_ms,
            last_update_ms=now_ms,
        )

    def prepare_abort_or_commit(self, state: TxnState, now_ms: int) -> TxnTransit:
        return self._transit(state, last_update_ms=now_ms)

    def prepare_complete(self, now_ms: int) -> TxnTransit:
        """PrepareCommit/PrepareAbort -> CompleteCommit/CompleteAbort once every marker is in."""
        state = S.COMPLETE_COMMIT if self.state is S.PREPARE_COMMIT else S.COMPLETE_ABORT
        self.has_failed_epoch_fence = False
        return self._transit(
            state,
            last_producer_epoch=self.producer_epoch,
            partitions=frozenset(),
            last_update_ms=now_ms,
        )

    def prepare_dead(self) -> TxnTransit:
        return self._transit(S.DEAD, partitions=frozenset())

    def remove_partition(self, tp: TopicPartition) -> None:
        """A marker for `tp` is written (or `tp` is gone): no marker is owed there any more."""
        if not self.state.is_prepare:
            raise IllegalTransition(
                f"{self.transactional_id}: removing a marked partition in {self.state.state_name}"
            )
        self.partitions.discard(tp)

    # -- completing ----------------------------------------------------------------------

    def complete_transition(self, t: TxnTransit) -> None:
        """The transit is in the log: take its values (Kafka's sanity checks included)."""
        to = self.pending_state
        if to is None or to is not t.state:
            raise IllegalTransition(
                f"{self.transactional_id}: completing {t.state.state_name} while "
                f"{to.state_name if to else 'nothing'} is pending"
            )
        same_producer = t.producer_id == self.producer_id and t.producer_epoch == (
            self.producer_epoch
        )
        if to is S.EMPTY:
            bumped = t.producer_epoch == self.producer_epoch + 1 or (
                t.producer_epoch == 0 and t.producer_id != self.producer_id
            )
            if (not same_producer and not bumped) or t.partitions or t.start_ms != -1:
                raise IllegalTransition(f"{self.transactional_id}: bad InitProducerId transit")
            self.timeout_ms = t.timeout_ms
            self.producer_epoch = t.producer_epoch
            self.last_producer_epoch = t.last_producer_epoch
            self.previous_producer_id = t.prev_producer_id
            self.producer_id = t.producer_id
        elif to is S.ONGOING:
            if not same_producer or not self.partitions <= t.partitions:
                raise IllegalTransition(f"{self.transactional_id}: bad AddPartitions transit")
            self.start_ms = t.start_ms
            self.partitions |= t.partitions
        elif to.is_prepare:
            if not same_producer or set(t.partitions) != self.partitions:
                raise IllegalTransition(f"{self.transactional_id}: bad EndTxn transit")
        elif to in (S.COMPLETE_COMMIT, S.COMPLETE_ABORT):
            if not same_producer or t.start_ms == -1:
                raise IllegalTransition(f"{self.transactional_id}: bad completion transit")
            self.partitions.clear()
        else:
            raise IllegalTransition(f"{self.transactional_id}: {to.state_name} is never written")
        self.last_update_ms = t.last_update_ms
        self.pending_state = None
        self.state = to

    def to_transit(self) -> TxnTransit:
        """The current state as a transit (what loading from the log produced)."""
        return TxnTransit(
            self.producer_id, self.previous_producer_id, self.producer_epoch,
            self.last_producer_epoch, self.timeout_ms, self.state, frozenset(self.partitions),
            self.start_ms, self.last_update_ms,
        )  # fmt: skip
