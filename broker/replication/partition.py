"""One partition hosted by this broker: its log, leadership, follower tracking, HW and ISR.

As leader it keeps, per follower, the log end offset and fetch times reported by that
follower's fetches (reference §3.1-3.3); the high watermark is the smallest log end offset
of the ISR and never moves back. ISR changes are proposed one at a time and written by the
replica manager's `IsrWriter` (the leader's direct ZooKeeper write, §3.4); while an expansion
is pending the HW already counts the new member ("maximal ISR", KIP-497).

Choice: the HW advances even when the ISR is smaller than min.insync.replicas (Kafka 2.x
behaviour); acks=all is refused or fails after the append in that case, so nothing
acknowledged with acks=all depends on it.
"""

from __future__ import annotations

import time
import uuid
from dataclasses import dataclass, field

from ..storage.log import Log
from .log_producer_state import LogProducerState
from .producer_state import AppendOrigin
from .waiters import Waiters

UNKNOWN_OFFSET = -1


def now_ms() -> int:
    return int(time.time() * 1000)


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
    controller_epoch: int = 0


@dataclass
class FollowerState:
    """What the leader knows of one follower, from its fetches."""

    log_end_offset: int = UNKNOWN_OFFSET
    log_start_offset: int = UNKNOWN_OFFSET
    last_fetch_time_ms: int = 0
    last_caught_up_time_ms: int = 0
    # The leader's LEO and the time at the previous fetch (for the caught-up rule, §3.2).
    last_fetch_leader_leo: int = UNKNOWN_OFFSET
    prev_fetch_time_ms: int = 0

    def update(self, fetch_offset: int, log_start: int, leader_leo: int, now: int) -> None:
        if fetch_offset >= leader_leo:
            self.last_caught_up_time_ms = max(self.last_caught_up_time_ms, now)
        elif fetch_offset >= self.last_fetch_leader_leo >= 0:
            self.last_caught_up_time_ms = max(self.last_caught_up_time_ms, self.prev_fetch_time_ms)
        self.log_end_offset = fetch_offset
        self.log_start_offset = log_start
        self.last_fetch_leader_leo = leader_leo
        self.prev_fetch_time_ms = now
        self.last_fetch_time_ms = now

    def caught_up(self, leader_leo: int, now: int, lag_max_ms: int) -> bool:
        return self.log_end_offset == leader_leo or now - self.last_caught_up_time_ms <= lag_max_ms


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
        # Consumers' fetches waiting for records to become visible (the HW, and with it the
        # LSO, to move).
        self.fetch_waiters = Waiters()
        # Followers' fetches waiting for the log end to move. Kept apart so an append does not
        # wake every consumer to find nothing visible yet, nor an HW move every follower: on
        # the acks=all path that was half the fetches woken, each re-reading its partitions.
        self.replica_waiters = Waiters()
        # acks=all produce requests waiting for the HW (or an ISR/leadership change).
        self.hw_waiters = Waiters()
        # Idempotent producers' epochs and last batches, rebuilt from snapshots and the log.
        self.producer_state = LogProducerState(log)
        self.followers: dict[int, FollowerState] = {}
        # The ISR proposed to the metadata store and not yet confirmed (one at a time).
        self.pending_isr: list[int] | None = None
        self.leader_epoch_start_offset = 0
        # Bumped each time this broker stops leading: acks=all waiters fail only then, not on
        # the epoch bumps the controller makes while this broker stays leader (ISR changes).
        self.leadership_losses = 0

    @property
    def is_leader(self) -> bool:
        return self.state.leader == self.local_broker_id

    @property
    def high_watermark(self) -> int:
        return self.log.high_watermark

    @property
    def effective_min_isr(self) -> int:
        """min.insync.replicas, capped by the replication factor (reference §3.6)."""
        return min(self.log.config.min_insync_replicas, max(len(self.state.replicas), 1))

    @property
    def replicated(self) -> bool:
        return len(self.state.replicas) > 1 or any(
            r != self.local_broker_id for r in self.state.replicas
        )

    def replace_log(self, new_log: Log) -> None:
        """The replica moved to another log dir: `new_log`, a complete copy of the current log,
        serves from now on, with the same high watermark, leader epochs and producer state."""
        old = self.log
        new_log.hw_tracks_leo = old.hw_tracks_leo
        new_log.high_watermark = old.high_watermark
        new_log.epoch_cache.replace(old.epoch_cache.entries)
        self.log = new_log
        self.producer_state.rebind(new_log)

    # --- leadership transitions ---------------------------------------------------------------

    def make_leader(self, state: PartitionState, checkpointed_hw: int | None, now: int) -> None:
        """Become (or stay) leader with `state`; followers' positions restart unknown."""
        new_epoch = not self.is_leader or state.leader_epoch != self.state.leader_epoch
        self.state = state
        self.pending_isr = None
        log = self.log
        if self.replicated:
            self._stop_tracking_leo(checkpointed_hw)
        else:
            log.hw_tracks_leo = True
            log.high_watermark = log.log_end_offset
        if new_epoch:
            latest = log.epoch_cache.latest_epoch
            if state.leader_epoch >= 0 and (latest is None or state.leader_epoch > latest):
                log.epoch_cache.assign(state.leader_epoch, log.log_end_offset)
            self.leader_epoch_start_offset = log.log_end_offset
            self.followers = {}
        for r in state.replicas:
            if r != self.local_broker_id and r not in self.followers:
                f = FollowerState()
                if r in state.isr:
                    f.last_caught_up_time_ms = now
                self.followers[r] = f
        for r in list(self.followers):
            if r not in state.replicas:
                del self.followers[r]
        self.maybe_increment_hw()
        self.hw_waiters.wake()

    def make_follower(self, state: PartitionState, checkpointed_hw: int | None) -> None:
        self.leadership_losses += 1
        self.state = state
        self.pending_isr = None
        self.followers = {}
        self._stop_tracking_leo(checkpointed_hw)
        self.hw_waiters.wake()
        self.fetch_waiters.wake()
        self.replica_waiters.wake()

    def _stop_tracking_leo(self, checkpointed_hw: int | None) -> None:
        log = self.log
        if log.hw_tracks_leo:
            # First time replicated since the log was loaded: resume from the checkpoint.
            log.hw_tracks_leo = False
            hw = checkpointed_hw if checkpointed_hw is not None else log.log_start_offset
            log.high_watermark = max(log.log_start_offset, min(hw, log.log_end_offset))

    # --- leader: appends, follower fetches, HW, ISR ------------------------------------------------

    @property
    def last_stable_offset(self) -> int:
        """The offset below which every transaction is decided and replicated (LSO)."""
        return self.producer_state.last_stable_offset(self.log.high_watermark)

    def append_as_leader(
        self, records: bytearray, origin: AppendOrigin = AppendOrigin.CLIENT
    ):  # -> storage AppendResult
        pending = self.producer_state.prepare_leader_append(records, origin)  # may raise
        if pending.duplicate is not None:
            # A producer's retry of a batch already in the log: answer with the original offsets.
            return self.producer_state.duplicate_result(pending.duplicate)
        result = self.log.append(records, assign_offsets=True, leader_epoch=self.state.leader_epoch)
        self.producer_state.complete_append(pending, result.last_offset + 1)
        self.replica_waiters.wake()
        if self.maybe_increment_hw() or self.log.hw_tracks_leo:  # visible at once
            self.hw_waiters.wake()
            self.fetch_waiters.wake()
        return result

    @property
    def maximal_isr(self) -> list[int]:
        """The ISR the HW must respect: a pending expansion already counts."""
        if self.pending_isr is not None and len(self.pending_isr) > len(self.state.isr):
            return self.pending_isr
        return self.state.isr

    def update_follower_fetch(
        self, replica_id: int, fetch_offset: int, log_start: int, now: int, lag_max_ms: int
    ) -> list[int] | None:
        """Record a follower's fetch; returns an ISR expansion to propose, if one is due."""
        follower = self.followers.get(replica_id)
        if follower is None:
            follower = self.followers[replica_id] = FollowerState()
        follower.update(fetch_offset, log_start, self.log.log_end_offset, now)
        if self.maybe_increment_hw():
            self.hw_waiters.wake()
            # Consumers parked at the old HW (or LSO, for transactions) can read on.
            self.fetch_waiters.wake()
        if self.pending_isr is not None or replica_id in self.state.isr:
            return None
        if (
            replica_id in self.state.replicas
            and fetch_offset >= self.high_watermark
            and fetch_offset >= self.leader_epoch_start_offset
        ):
            return [*self.state.isr, replica_id]
        return None

    def maybe_increment_hw(self) -> bool:
        """Move the HW to the smallest LEO in the maximal ISR, never backwards."""
        log = self.log
        if log.hw_tracks_leo or not self.is_leader:
            return False
        candidate = log.log_end_offset
        for r in self.maximal_isr:
            if r == self.local_broker_id:
                continue
            f = self.followers.get(r)
            leo = f.log_end_offset if f is not None else UNKNOWN_OFFSET
            candidate = min(candidate, leo)
        if candidate > log.high_watermark:
            log.high_watermark = candidate
            return True
        return False

    def out_of_sync_replicas(self, now: int, lag_max_ms: int) -> list[int]:
        leo = self.log.log_end_offset
        out = []
        for r in self.state.isr:
            if r == self.local_broker_id:
                continue
            f = self.followers.get(r)
            if f is None or not f.caught_up(leo, now, lag_max_ms):
                out.append(r)
        return out

    def isr_shrink(self, now: int, lag_max_ms: int) -> list[int] | None:
        """The ISR without lagging followers, if any lag (and no change is in flight)."""
        if not self.is_leader or self.pending_isr is not None:
            return None
        lagging = self.out_of_sync_replicas(now, lag_max_ms)
        if not lagging:
            return None
        return [r for r in self.state.isr if r not in lagging]

    def isr_committed(self, isr: list[int], partition_epoch: int) -> None:
        """The metadata store accepted `isr` with the new partition epoch."""
        self.state.isr = list(isr)
        self.state.partition_epoch = partition_epoch
        self.pending_isr = None
        if self.maybe_increment_hw():
            self.fetch_waiters.wake()
        self.hw_waiters.wake()

    # --- follower ---------------------------------------------------------------------------------

    def update_follower_hw(self, leader_hw: int) -> None:
        """Take the leader's HW (up to this replica's log end); consumers reading from this
        follower see the records it passed."""
        log = self.log
        hw = max(log.log_start_offset, min(leader_hw, log.log_end_offset))
        if hw > log.high_watermark:
            log.high_watermark = hw
            self.fetch_waiters.wake()
