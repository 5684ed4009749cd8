"""What a partition remembers of one producer: its epoch and the metadata of its last batches,
with the int32 sequence arithmetic (wrapping after 2^31-1) that checks them.

`producer_state.py` keeps one `ProducerStateEntry` per producer id and decides, batch by batch,
whether an append is new, a retry or out of order.
"""

from __future__ import annotations

from collections import deque
from dataclasses import dataclass, field

from ..records.batch import BatchHeader

NUM_BATCHES_TO_RETAIN = 5
NO_PRODUCER_EPOCH = -1
NO_SEQUENCE = -1
INT32_MAX = (1 << 31) - 1


def increment_sequence(sequence: int, increment: int) -> int:
    """`sequence + increment` in the int32 sequence space, which wraps to 0 after 2^31-1."""
    if sequence > INT32_MAX - increment:
        return increment - (INT32_MAX - sequence) - 1
    return sequence + increment


def decrement_sequence(sequence: int, decrement: int) -> int:
    if sequence < decrement:
        return INT32_MAX - (decrement - sequence) + 1
    return sequence - decrement


def in_sequence(last_seq: int, next_seq: int) -> bool:
    return next_seq == last_seq + 1 or (next_seq == 0 and last_seq == INT32_MAX)


def last_sequence(header: BatchHeader) -> int:
    return increment_sequence(header.base_sequence, header.last_offset_delta)


class BatchMetadata:
    """One appended batch of a producer: enough to recognise its retry and answer it."""

    __slots__ = ("last_seq", "last_offset", "offset_delta", "timestamp")

    def __init__(self, last_seq: int, last_offset: int, offset_delta: int, timestamp: int) -> None:
        self.last_seq = last_seq
        self.last_offset = last_offset
        self.offset_delta = offset_delta
        self.timestamp = timestamp

    @property
    def first_seq(self) -> int:
        return decrement_sequence(self.last_seq, self.offset_delta)

    @property
    def first_offset(self) -> int:
        return self.last_offset - self.offset_delta

    def __repr__(self) -> str:
        return (
            f"BatchMetadata(seq={self.first_seq}..{self.last_seq}, "
            f"offsets={self.first_offset}..{self.last_offset}, ts={self.timestamp})"
        )


@dataclass
class ProducerStateEntry:
    producer_id: int
    epoch: int = NO_PRODUCER_EPOCH
    batches: deque[BatchMetadata] = field(
        default_factory=lambda: deque(maxlen=NUM_BATCHES_TO_RETAIN)
    )
    last_timestamp: int = -1
    coordinator_epoch: int = -1
    current_txn_first_offset: int = -1

    @property
    def last_seq(self) -> int:
        return self.batches[-1].last_seq if self.batches else NO_SEQUENCE

    @property
    def first_seq(self) -> int:
        return self.batches[0].first_seq if self.batches else NO_SEQUENCE

    @property
    def last_offset(self) -> int:
        return self.batches[-1].last_offset if self.batches else -1

    @property
    def last_offset_delta(self) -> int:
        return self.batches[-1].offset_delta if self.batches else 0

    def same_epoch_no_batches(self) -> ProducerStateEntry:
        """The starting point of an append: this entry's epoch and metadata, no batches yet."""
        return ProducerStateEntry(
            self.producer_id,
            self.epoch,
            last_timestamp=self.last_timestamp,
            coordinator_epoch=self.coordinator_epoch,
            current_txn_first_offset=self.current_txn_first_offset,
        )

    def maybe_update_epoch(self, epoch: int) -> None:
        if epoch != self.epoch:
            self.batches.clear()
            self.epoch = epoch

    def add_batch(
        self, epoch: int, last_seq: int, last_offset: int, offset_delta: int, timestamp: int
    ) -> None:
        self.maybe_update_epoch(epoch)
        self.batches.append(BatchMetadata(last_seq, last_offset, offset_delta, timestamp))
        self.last_timestamp = timestamp

    def update(self, other: ProducerStateEntry) -> None:
        """Fold in the result of an append (`other` started from this entry)."""
        self.maybe_update_epoch(other.epoch)
        self.coordinator_epoch = other.coordinator_epoch
        self.last_timestamp = other.last_timestamp
        self.current_txn_first_offset = other.current_txn_first_offset
        self.batches.extend(other.batches)

    def find_duplicate(self, epoch: int, first_seq: int, last_seq: int) -> BatchMetadata | None:
        if epoch != self.epoch:
            return None
        for b in self.batches:
            if b.last_seq == last_seq and b.first_seq == first_seq:
                return b
        return None
