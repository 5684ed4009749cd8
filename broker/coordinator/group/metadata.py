"""The in-memory state of one classic group: members, generation, protocol and offsets.

Pure bookkeeping, no timers and no I/O: the coordinator drives the state machine and these
classes keep its invariants (which member leads, which protocols every member supports, who
still has to rejoin or sync). Names follow Kafka's GroupMetadata so the logic can be compared.
"""

from __future__ import annotations

import asyncio
import uuid
from collections import Counter
from dataclasses import dataclass, field
from enum import Enum

from ...protocol.errors import ErrorCode
from .formats import GroupValue, MemberValue, subscribed_topics

CONSUMER_PROTOCOL_TYPE = "consumer"

TopicPartition = tuple[str, int]


class GroupState(Enum):
    EMPTY = "Empty"
    PREPARING_REBALANCE = "PreparingRebalance"
    COMPLETING_REBALANCE = "CompletingRebalance"
    STABLE = "Stable"
    DEAD = "Dead"


_VALID_PREVIOUS: dict[GroupState, frozenset[GroupState]] = {
    GroupState.PREPARING_REBALANCE: frozenset(
        {GroupState.STABLE, GroupState.COMPLETING_REBALANCE, GroupState.EMPTY}
    ),
    GroupState.COMPLETING_REBALANCE: frozenset({GroupState.PREPARING_REBALANCE}),
    GroupState.STABLE: frozenset({GroupState.COMPLETING_REBALANCE}),
    GroupState.EMPTY: frozenset({GroupState.PREPARING_REBALANCE}),
    GroupState.DEAD: frozenset(GroupState),
}


@dataclass
class OffsetAndMetadata:
    offset: int
    leader_epoch: int = -1
    metadata: str = ""
    commit_timestamp: int = -1
    expire_timestamp: int = -1  # -1: none (only OffsetCommit v2-v4 retention times set it)
    # Offset of the __consumer_offsets record holding it: of two commits the later record wins.
    record_offset: int = -1


@dataclass
class JoinResult:
    member_id: str
    error: ErrorCode
    generation_id: int = -1
    protocol_type: str | None = None
    protocol_name: str | None = None
    leader_id: str = ""
    skip_assignment: bool = False
    # (member id, group instance id, metadata): filled for the leader only.
    members: list[tuple[str, str | None, bytes]] = field(default_factory=list)


@dataclass(frozen=True, slots=True)
class JoinRequest:
    """What a JoinGroup asks for, as the coordinator's join paths pass it along."""

    group_id: str
    member_id: str
    instance_id: str | None
    client_id: str
    client_host: str
    rebalance_timeout_ms: int
    session_timeout_ms: int
    protocol_type: str
    protocols: list[tuple[str, bytes]]
    require_known_member_id: bool = False
    supports_skip_assignment: bool = False
    reason: str = "not provided"  # JoinGroup v8+ may say why the member (re)joins

    def new_member(self, member_id: str, instance_id: str | None) -> MemberMetadata:
        return MemberMetadata(
            member_id, instance_id, self.client_id, self.client_host,
            self.rebalance_timeout_ms, self.session_timeout_ms, self.protocol_type,
            self.protocols,
        )  # fmt: skip


@dataclass
class SyncResult:
    error: ErrorCode
    protocol_type: str | None = None
    protocol_name: str | None = None
    assignment: bytes = b""


@dataclass
class MemberSummary:
    member_id: str
    group_instance_id: str | None
    client_id: str
    client_host: str
    metadata: bytes
    assignment: bytes


@dataclass
class GroupSummary:
    state: str
    protocol_type: str
    protocol: str
    members: list[MemberSummary]


def _resolve(fut: asyncio.Future | None, value: object) -> bool:
    if fut is None or fut.done():
        return False
    fut.set_result(value)
    return True


class MemberMetadata:
    def __init__(
        self,
        member_id: str,
        group_instance_id: str | None,
        client_id: str,
        client_host: str,
        rebalance_timeout_ms: int,
        session_timeout_ms: int,
        protocol_type: str,
        protocols: list[tuple[str, bytes]],
        assignment: bytes = b"",
    ) -> None:
        self.member_id = member_id
        self.group_instance_id = group_instance_id
        self.client_id = client_id
        self.client_host = client_host
        self.rebalance_timeout_ms = rebalance_timeout_ms
        self.session_timeout_ms = session_timeout_ms
        self.protocol_type = protocol_type
        self.supported_protocols = protocols
        self.assignment = assignment
        # Parked JoinGroup / SyncGroup responses (Kafka's awaiting callbacks).
        self.join_future: asyncio.Future[JoinResult] | None = None
        self.sync_future: asyncio.Future[SyncResult] | None = None
        # Joined but never completed a rebalance: expires after the new-member join timeout.
        self.is_new = False
        self.expiry: asyncio.TimerHandle | None = None

    @property
    def is_static(self) -> bool:
        return self.group_instance_id is not None

    @property
    def is_awaiting_join(self) -> bool:
        return self.join_future is not None

    @property
    def is_awaiting_sync(self) -> bool:
        return self.sync_future is not None

    def protocol_names(self) -> list[str]:
        return [name for name, _ in self.supported_protocols]

    def metadata(self, protocol: str) -> bytes:
        for name, data in self.supported_protocols:
            if name == protocol:
                return data
        raise KeyError(f"member {self.member_id} does not support protocol {protocol}")

    def matches(self, protocols: list[tuple[str, bytes]]) -> bool:
        return self.supported_protocols == protocols

    def vote(self, candidates: set[str]) -> str:
        for name, _ in self.supported_protocols:
            if name in candidates:
                return name
        raise ValueError(f"member {self.member_id} supports none of {sorted(candidates)}")

    def cancel_expiry(self) -> None:
        if self.expiry is not None:
            self.expiry.cancel()
            self.expiry = None


class GroupMetadata:
    def __init__(self, group_id: str, state: GroupState, now_ms: int) -> None:
        self.group_id = group_id
        self.state = state
        self.current_state_timestamp: int | None = now_ms
        self.generation_id = 0
        self.protocol_type: str | None = None
        self.protocol_name: str | None = None
        self.leader_id: str | None = None
        self.members: dict[str, MemberMetadata] = {}
        self.static_members: dict[str, str] = {}  # group instance id -> member id
        self.pending_members: set[str] = set()  # got MEMBER_ID_REQUIRED, not joined yet
        self.pending_sync_members: set[str] = set()
        self._supported = Counter[str]()
        self.new_member_added = False
        self.subscribed_topics: set[str] | None = None
        self.offsets: dict[TopicPartition, OffsetAndMetadata] = {}
        self.pending_offset_commits: Counter[TopicPartition] = Counter()
        # Transactional offset commits (TxnOffsetCommit) per producer id, visible once its
        # COMMIT marker is written; record_offset -1 until the commit record is in the log.
        self.pending_txn_offsets: dict[int, dict[TopicPartition, OffsetAndMetadata]] = {}
        # Timers the coordinator arms: the join completion, the sync deadline, and the
        # expirations of pending members.
        self.join_op: object | None = None
        self.sync_op: tuple[int, asyncio.TimerHandle] | None = None  # (generation, timer)
        self.pending_expiry: dict[str, asyncio.TimerHandle] = {}

    # -- state

    def is_(self, state: GroupState) -> bool:
        return self.state is state

    def can_rebalance(self) -> bool:
        return self.state in _VALID_PREVIOUS[GroupState.PREPARING_REBALANCE]

    def transition_to(self, state: GroupState, now_ms: int) -> None:
        if self.state not in _VALID_PREVIOUS[state]:
            raise RuntimeError(
                f"group {self.group_id} cannot go from {self.state.value} to {state.value}"
            )
        self.state = state
        self.current_state_timestamp = now_ms

    # -- members

    def has(self, member_id: str) -> bool:
        return member_id in self.members

    def get(self, member_id: str) -> MemberMetadata:
        return self.members[member_id]

    @property
    def size(self) -> int:
        return len(self.members)

    def is_leader(self, member_id: str) -> bool:
        return self.leader_id == member_id

    @property
    def num_awaiting_join(self) -> int:
        return sum(1 for m in self.members.values() if m.is_awaiting_join)

    def has_static_member(self, instance_id: str | None) -> bool:
        return instance_id is not None and instance_id in self.static_members

    def static_member_id(self, instance_id: str | None) -> str | None:
        return None if instance_id is None else self.static_members.get(instance_id)

    def is_pending_member(self, member_id: str) -> bool:
        return member_id in self.pending_members

    def generate_member_id(self, client_id: str, instance_id: str | None) -> str:
        prefix = instance_id if instance_id is not None else client_id
        return f"{prefix}-{uuid.uuid4()}"

    def add(self, member: MemberMetadata, join_future: asyncio.Future[JoinResult] | None) -> None:
        if not self.members:
            self.protocol_type = member.protocol_type
        if self.leader_id is None:
            self.leader_id = member.member_id
        self.members[member.member_id] = member
        self._supported.update(set(member.protocol_names()))
        member.join_future = join_future
        if member.group_instance_id is not None:
            self.static_members[member.group_instance_id] = member.member_id
        self.pending_members.discard(member.member_id)

    def remove(self, member_id: str) -> None:
        member = self.members.pop(member_id, None)
        if member is not None:
            self._supported.subtract(set(member.protocol_names()))
            if member.group_instance_id is not None:
                self.static_members.pop(member.group_instance_id, None)
        if self.is_leader(member_id):
            self.leader_id = next(iter(self.members), None)
        self.pending_members.discard(member_id)
        self.pending_sync_members.discard(member_id)

    def update_member(
        self,
        member: MemberMetadata,
        protocols: list[tuple[str, bytes]],
        join_future: asyncio.Future[JoinResult] | None,
    ) -> None:
        self._supported.subtract(set(member.protocol_names()))
        member.supported_protocols = protocols
        self._supported.update(set(member.protocol_names()))
        member.join_future = join_future

    def replace_static_member(
        self, instance_id: str, old_member_id: str, new_member_id: str
    ) -> MemberMetadata:
        member = self.members.pop(old_member_id)
        # Whoever still waits with the old id is fenced at once.
        self.maybe_invoke_join(member, JoinResult(old_member_id, ErrorCode.FENCED_INSTANCE_ID))
        self.maybe_invoke_sync(member, SyncResult(ErrorCode.FENCED_INSTANCE_ID))
        member.member_id = new_member_id
        self.members[new_member_id] = member
        if self.is_leader(old_member_id):
            self.leader_id = new_member_id
        self.static_members[instance_id] = new_member_id
        if old_member_id in self.pending_sync_members:
            self.pending_sync_members.discard(old_member_id)
            self.pending_sync_members.add(new_member_id)
        return member

    def maybe_invoke_join(self, member: MemberMetadata, result: JoinResult) -> None:
        if member.join_future is not None:
            _resolve(member.join_future, result)
            member.join_future = None

    def maybe_invoke_sync(self, member: MemberMetadata, result: SyncResult) -> bool:
        if member.sync_future is None:
            return False
        _resolve(member.sync_future, result)
        member.sync_future = None
        return True

    # -- rebalance bookkeeping

    def has_all_members_joined(self) -> bool:
        return len(self.members) == self.num_awaiting_join and not self.pending_members

    def not_yet_rejoined(self) -> list[MemberMetadata]:
        return [m for m in self.members.values() if not m.is_awaiting_join]

    def rebalance_timeout_ms(self) -> int:
        return max((m.rebalance_timeout_ms for m in self.members.values()), default=0)

    def maybe_elect_new_joined_leader(self) -> bool:
        """Keep a leader that rejoined, else pick any member that did; False if none did."""
        if self.leader_id is None:
            return False
        leader = self.members.get(self.leader_id)
        if leader is not None and leader.is_awaiting_join:
            return True
        for member_id, member in self.members.items():
            if member.is_awaiting_join:
                self.leader_id = member_id
                return True
        return False

    def supports_protocols(self, protocol_type: str, protocols: set[str]) -> bool:
        if self.is_(GroupState.EMPTY):
            return bool(protocol_type) and bool(protocols)
        return self.protocol_type == protocol_type and any(
            self._supported[p] == len(self.members) for p in protocols
        )

    def candidate_protocols(self) -> set[str]:
        n = len(self.members)
        return {p for p, count in self._supported.items() if count == n}

    def select_protocol(self) -> str:
        """The protocol all members support with the most first-choice votes (ties: the one
        voted first)."""
        candidates = self.candidate_protocols()
        votes = Counter(m.vote(candidates) for m in self.members.values())
        return votes.most_common(1)[0][0]

    def init_next_generation(self, now_ms: int) -> None:
        self.generation_id += 1
        if self.members:
            self.protocol_name = self.select_protocol()
            self.subscribed_topics = self._compute_subscribed_topics()
            self.transition_to(GroupState.COMPLETING_REBALANCE, now_ms)
        else:
            self.protocol_name = None
            self.subscribed_topics = self._compute_subscribed_topics()
            self.transition_to(GroupState.EMPTY, now_ms)
        self.pending_sync_members.clear()

    def current_member_metadata(self) -> list[tuple[str, str | None, bytes]]:
        assert self.protocol_name is not None
        return [
            (m.member_id, m.group_instance_id, m.metadata(self.protocol_name))
            for m in self.members.values()
        ]

    def _compute_subscribed_topics(self) -> set[str] | None:
        if self.protocol_type != CONSUMER_PROTOCOL_TYPE:
            return None
        if not self.members:
            return set()
        if self.protocol_name is None:
            return None
        topics: set[str] = set()
        for m in self.members.values():
            parsed = subscribed_topics(m.metadata(self.protocol_name))
            if parsed is None:
                return None
            topics.update(parsed)
        return topics

    def is_subscribed_to_topic(self, topic: str) -> bool:
        """Unknown subscriptions count as subscribed: never delete what might be in use."""
        return True if self.subscribed_topics is None else topic in self.subscribed_topics

    def is_consumer_group(self) -> bool:
        return self.protocol_type == CONSUMER_PROTOCOL_TYPE

    # -- views

    def summary(self) -> GroupSummary:
        if self.is_(GroupState.STABLE):
            protocol = self.protocol_name or ""
            members = [
                MemberSummary(
                    m.member_id,
                    m.group_instance_id,
                    m.client_id,
                    m.client_host,
                    m.metadata(protocol),
                    m.assignment,
                )  # fmt: skip
                for m in self.members.values()
            ]
        else:
            protocol = ""
            members = [
                MemberSummary(
                    m.member_id, m.group_instance_id, m.client_id, m.client_host, b"", b""
                )
                for m in self.members.values()
            ]
        return GroupSummary(self.state.value, self.protocol_type or "", protocol, members)

    def to_value(self, assignment: dict[str, bytes]) -> GroupValue:
        """The group metadata record for this generation with the given assignment."""
        members = tuple(
            MemberValue(
                m.member_id,
                m.group_instance_id,
                m.client_id,
                m.client_host,
                m.rebalance_timeout_ms,
                m.session_timeout_ms,
                m.metadata(self.protocol_name) if self.protocol_name is not None else b"",
                assignment.get(m.member_id, b""),
            )
            for m in self.members.values()
        )
        return GroupValue(
            self.protocol_type or "",
            self.generation_id,
            self.protocol_name,
            self.leader_id,
            self.current_state_timestamp if self.current_state_timestamp is not None else -1,
            members,
        )

    @classmethod
    def from_value(cls, group_id: str, value: GroupValue, now_ms: int) -> GroupMetadata:
        """A group as its last metadata record left it: Stable with members, else Empty."""
        state = GroupState.STABLE if value.members else GroupState.EMPTY
        group = cls(group_id, state, now_ms)
        group.current_state_timestamp = (
            value.current_state_timestamp if value.current_state_timestamp >= 0 else None
        )
        group.generation_id = value.generation
        group.protocol_type = value.protocol_type or None
        group.protocol_name = value.protocol
        group.leader_id = value.leader
        for m in value.members:
            protocols = [(value.protocol or "", m.subscription)]
            member = MemberMetadata(
                m.member_id, m.group_instance_id, m.client_id, m.client_host,
                m.rebalance_timeout, m.session_timeout, value.protocol_type, protocols,
                m.assignment,
            )  # fmt: skip
            group.add(member, None)
        group.leader_id = value.leader if value.leader in group.members else group.leader_id
        group.subscribed_topics = group._compute_subscribed_topics()
        return group

    # -- offsets

    def has_offsets(self) -> bool:
        return (
            bool(self.offsets)
            or bool(self.pending_offset_commits)
            or bool(self.pending_txn_offsets)
        )

    def has_pending_commit(self, tp: TopicPartition) -> bool:
        """A commit of `tp` is on its way (OffsetFetch's UNSTABLE_OFFSET_COMMIT)."""
        return bool(self.pending_offset_commits.get(tp)) or any(
            tp in offsets for offsets in self.pending_txn_offsets.values()
        )

    # -- transactional offsets

    def prepare_txn_offset_commit(
        self, producer_id: int, offsets: dict[TopicPartition, OffsetAndMetadata]
    ) -> None:
        self.pending_txn_offsets.setdefault(producer_id, {}).update(offsets)

    def fail_pending_txn_offset_commit(
        self, producer_id: int, tp: TopicPartition, offset: OffsetAndMetadata
    ) -> None:
        """The commit record was not written: forget it (the client retries)."""
        pending = self.pending_txn_offsets.get(producer_id)
        if pending is not None and pending.get(tp) is offset:
            del pending[tp]
            if not pending:
                del self.pending_txn_offsets[producer_id]

    def complete_pending_txn_offset_commit(self, producer_id: int, committed: bool) -> None:
        """The producer's COMMIT (or ABORT) marker is written: its offsets become the
        committed ones, unless a later record already is (or they are dropped)."""
        pending = self.pending_txn_offsets.pop(producer_id, None)
        if not committed or not pending:
            return
        for tp, o in pending.items():
            if o.record_offset < 0:
                continue  # never written: nothing to materialize
            current = self.offsets.get(tp)
            if current is None or current.record_offset < o.record_offset:
                self.offsets[tp] = o

    def on_offset_commit_append(self, tp: TopicPartition, offset: OffsetAndMetadata) -> None:
        current = self.offsets.get(tp)
        if current is None or current.record_offset <= offset.record_offset:
            self.offsets[tp] = offset

    def remove_offsets(self, partitions: list[TopicPartition]) -> dict[TopicPartition, object]:
        removed = {}
        for tp in partitions:
            for pending in self.pending_txn_offsets.values():
                pending.pop(tp, None)
            found = self.offsets.pop(tp, None)
            if found is not None:
                removed[tp] = found
        return removed

    def remove_all_offsets(self) -> dict[TopicPartition, object]:
        return self.remove_offsets(list(self.offsets))

    def remove_expired_offsets(
        self, now_ms: int, retention_ms: int
    ) -> dict[TopicPartition, object]:
        """Kafka's rules: all offsets of an Empty group once it has been Empty for the
        retention time; in a Stable consumer group, offsets of topics nobody subscribes to
        any more; for standalone committers, each offset by its commit time."""

        def expired(base: int | None, o: OffsetAndMetadata) -> bool:
            if o.expire_timestamp >= 0:
                return now_ms >= o.expire_timestamp
            start = o.commit_timestamp if base is None else base
            return now_ms - start >= retention_ms

        doomed: list[TopicPartition] = []
        if self.protocol_type is not None and self.is_(GroupState.EMPTY):
            doomed = [
                tp
                for tp, o in self.offsets.items()
                if tp not in self.pending_offset_commits
                and expired(self.current_state_timestamp, o)
            ]
        elif (
            self.protocol_type == CONSUMER_PROTOCOL_TYPE
            and self.subscribed_topics is not None
            and self.is_(GroupState.STABLE)
        ):
            doomed = [
                tp
                for tp, o in self.offsets.items()
                if tp[0] not in self.subscribed_topics
                and tp not in self.pending_offset_commits
                and expired(None, o)
            ]
        elif self.protocol_type is None:
            doomed = [
                tp
                for tp, o in self.offsets.items()
                if tp not in self.pending_offset_commits and expired(None, o)
            ]
        return self.remove_offsets(doomed)
