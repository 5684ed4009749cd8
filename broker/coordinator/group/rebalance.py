"""The timers of a classic group's rebalance: the join phase (with
group.initial.rebalance.delay.ms for an empty group), the sync deadline and each member's session.

Kafka's purgatories (DelayedJoin, DelayedSync, DelayedHeartbeat) become loop.call_later handles
kept on the group; the request handling that starts them is in membership.py.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Callable, Coroutine
from dataclasses import dataclass
from typing import Any

from ...protocol.errors import ErrorCode
from .manager import GroupCoordinatorConfig, GroupMetadataManager, now_ms
from .metadata import GroupMetadata, GroupState, JoinResult, MemberMetadata, SyncResult

log = logging.getLogger(__name__)

Spawn = Callable[[Coroutine[Any, Any, Any]], None]


@dataclass
class _JoinOp:
    """A pending completion of the join phase (Kafka's DelayedJoin / InitialDelayedJoin)."""

    initial: bool
    delay_ms: int
    remaining_ms: int
    handle: asyncio.TimerHandle | None = None


def join_result(
    group: GroupMetadata,
    member_id: str,
    *,
    with_members: bool,
    leader_id: str | None = None,
    skip_assignment: bool = False,
) -> JoinResult:
    """The JoinGroup answer of `member_id` at the group's generation (members: leader only)."""
    members = group.current_member_metadata() if with_members and group.is_leader(member_id) else []
    leader = group.leader_id if leader_id is None else leader_id
    return JoinResult(
        member_id=member_id,
        error=ErrorCode.NONE,
        generation_id=group.generation_id,
        protocol_type=group.protocol_type,
        protocol_name=group.protocol_name,
        leader_id=leader or "",
        skip_assignment=skip_assignment,
        members=members,
    )


def resolve(fut: asyncio.Future[Any], value: Any) -> None:
    """Answer a parked JoinGroup or SyncGroup unless it was answered (or gave up) already."""
    if not fut.done():
        fut.set_result(value)


class Rebalancer:
    """Drives each group's rebalances and member sessions on the broker's event loop."""

    def __init__(
        self, manager: GroupMetadataManager, config: GroupCoordinatorConfig, spawn: Spawn
    ) -> None:
        self.manager = manager
        self.config = config
        self._spawn = spawn

    # --- loading and unloading ----------------------------------------------------------------

    def on_group_loaded(self, group: GroupMetadata) -> None:
        if group.size > self.config.max_size:
            self._prepare_rebalance(group, "freshly loaded group is over capacity")
        for member in list(group.members.values()):
            self.schedule_heartbeat(group, member)

    def on_group_unloaded(self, group: GroupMetadata) -> None:
        previous = group.state
        if previous is not GroupState.DEAD:
            group.transition_to(GroupState.DEAD, now_ms())
        self._cancel_join_op(group)
        self._remove_sync_expiration(group)
        for handle in group.pending_expiry.values():
            handle.cancel()
        group.pending_expiry.clear()
        for member in group.members.values():
            group.maybe_invoke_join(member, JoinResult(member.member_id, ErrorCode.NOT_COORDINATOR))
            group.maybe_invoke_sync(member, SyncResult(ErrorCode.NOT_COORDINATOR))
            member.cancel_expiry()

    # --- join phase ---------------------------------------------------------------------------

    def maybe_prepare_rebalance(self, group: GroupMetadata, reason: str) -> None:
        if group.can_rebalance():
            self._prepare_rebalance(group, reason)

    def _prepare_rebalance(self, group: GroupMetadata, reason: str) -> None:
        if group.is_(GroupState.COMPLETING_REBALANCE):
            self.reset_and_propagate_assignment_error(group, ErrorCode.REBALANCE_IN_PROGRESS)
        self._remove_sync_expiration(group)
        if group.is_(GroupState.EMPTY):
            delay = self.config.initial_rebalance_delay_ms
            op = _JoinOp(True, delay, max(group.rebalance_timeout_ms() - delay, 0))
        else:
            op = _JoinOp(False, group.rebalance_timeout_ms(), 0)
        group.transition_to(GroupState.PREPARING_REBALANCE, now_ms())
        log.info(
            "preparing to rebalance group %s (generation %d): %s",
            group.group_id, group.generation_id, reason,
        )  # fmt: skip
        self._watch_join(group, op)

    def _watch_join(self, group: GroupMetadata, op: _JoinOp) -> None:
        if not op.initial and group.has_all_members_joined():
            self._complete_join(group)
            return
        group.join_op = op
        op.handle = asyncio.get_running_loop().call_later(
            op.delay_ms / 1000, self._on_join_timer, group, op
        )

    def _cancel_join_op(self, group: GroupMetadata) -> None:
        op = group.join_op
        if isinstance(op, _JoinOp) and op.handle is not None:
            op.handle.cancel()
        group.join_op = None

    def check_join(self, group: GroupMetadata) -> None:
        """Complete the join phase early once every member has rejoined."""
        op = group.join_op
        if isinstance(op, _JoinOp) and not op.initial and group.has_all_members_joined():
            self._cancel_join_op(group)
            self._complete_join(group)

    def _on_join_timer(self, group: GroupMetadata, op: _JoinOp) -> None:
        if group.join_op is not op:
            return
        group.join_op = None
        if op.initial and group.new_member_added and op.remaining_ms != 0:
            # More members arrived during the initial delay: wait a little longer.
            group.new_member_added = False
            delay = min(self.config.initial_rebalance_delay_ms, op.remaining_ms)
            remaining = max(op.remaining_ms - op.delay_ms, 0)
            self._watch_join(group, _JoinOp(True, delay, remaining))
        else:
            self._complete_join(group)

    def _complete_join(self, group: GroupMetadata) -> None:
        for member in [m for m in group.not_yet_rejoined() if not m.is_static]:
            log.info(
                "group %s: member %s did not rejoin in time, removing it",
                group.group_id, member.member_id,
            )  # fmt: skip
            group.remove(member.member_id)
            member.cancel_expiry()
        if group.is_(GroupState.DEAD):
            return
        if not group.maybe_elect_new_joined_leader() and group.members:
            # Nobody rejoined: wait again until session expiry removes the silent members.
            log.error("group %s could not rebalance: no member rejoined", group.group_id)
            self._watch_join(group, _JoinOp(False, group.rebalance_timeout_ms(), 0))
            return
        group.init_next_generation(now_ms())
        if group.is_(GroupState.EMPTY):
            log.info("group %s is empty at generation %d", group.group_id, group.generation_id)
            self._spawn(self.manager.store_group(group, {}))
            return
        log.info(
            "group %s: generation %d with %d members, protocol %s",
            group.group_id, group.generation_id, group.size, group.protocol_name,
        )  # fmt: skip
        for member in list(group.members.values()):
            group.maybe_invoke_join(member, join_result(group, member.member_id, with_members=True))
            self.schedule_heartbeat(group, member)
            member.is_new = False
            group.pending_sync_members.add(member.member_id)
        self._schedule_pending_sync(group)

    # --- sync phase ---------------------------------------------------------------------------

    def _schedule_pending_sync(self, group: GroupMetadata) -> None:
        generation = group.generation_id
        if self._sync_complete(group, generation):
            return
        handle = asyncio.get_running_loop().call_later(
            group.rebalance_timeout_ms() / 1000, self._on_sync_expired, group, generation
        )
        group.sync_op = (generation, handle)

    @staticmethod
    def _sync_complete(group: GroupMetadata, generation: int) -> bool:
        if generation != group.generation_id:
            return True
        if group.state in (
            GroupState.DEAD,
            GroupState.EMPTY,
            GroupState.PREPARING_REBALANCE,
        ):
            return True
        return not group.pending_sync_members

    def remove_pending_sync_member(self, group: GroupMetadata, member_id: str) -> None:
        group.pending_sync_members.discard(member_id)
        op = group.sync_op
        if op is not None and self._sync_complete(group, op[0]):
            op[1].cancel()
            group.sync_op = None

    def _remove_sync_expiration(self, group: GroupMetadata) -> None:
        group.pending_sync_members.clear()
        if group.sync_op is not None:
            group.sync_op[1].cancel()
            group.sync_op = None

    def _on_sync_expired(self, group: GroupMetadata, generation: int) -> None:
        group.sync_op = None
        if generation != group.generation_id:
            return
        if group.state in (GroupState.COMPLETING_REBALANCE, GroupState.STABLE):
            missing = list(group.pending_sync_members)
            if not missing:
                return
            for member_id in missing:
                member = group.members.get(member_id)
                group.remove(member_id)
                if member is not None:
                    member.cancel_expiry()
            self._prepare_rebalance(group, f"members {missing} did not send SyncGroup in time")

    def reset_and_propagate_assignment_error(self, group: GroupMetadata, error: ErrorCode) -> None:
        for member in group.members.values():
            member.assignment = b""
        self.propagate_assignment(group, error)

    def propagate_assignment(self, group: GroupMetadata, error: ErrorCode) -> None:
        ok = error == ErrorCode.NONE
        ptype = group.protocol_type if ok else None
        pname = group.protocol_name if ok else None
        for member in list(group.members.values()):
            result = SyncResult(error, ptype, pname, member.assignment)
            if group.maybe_invoke_sync(member, result):
                # Sessions restart once members have their assignment.
                self.schedule_heartbeat(group, member)

    # --- sessions -----------------------------------------------------------------------------

    def schedule_heartbeat(
        self, group: GroupMetadata, member: MemberMetadata, timeout_ms: int | None = None
    ) -> None:
        member.cancel_expiry()
        delay = member.session_timeout_ms if timeout_ms is None else timeout_ms
        member.expiry = asyncio.get_running_loop().call_later(
            delay / 1000, self._on_expire_heartbeat, group, member.member_id, member
        )

    def _on_expire_heartbeat(
        self, group: GroupMetadata, member_id: str, member: MemberMetadata
    ) -> None:
        member.expiry = None
        if group.is_(GroupState.DEAD) or group.members.get(member_id) is not member:
            return
        # Members parked in a rebalance count as alive, except new ones that never completed.
        if not member.is_new and (member.is_awaiting_join or member.is_awaiting_sync):
            return
        log.info(
            "member %s of group %s failed (session timeout), removing it",
            member_id, group.group_id,
        )  # fmt: skip
        self.remove_member_and_update_group(
            group, member, f"removing member {member_id} on heartbeat expiration"
        )

    def on_expire_pending(self, group: GroupMetadata, member_id: str) -> None:
        group.pending_expiry.pop(member_id, None)
        if group.is_(GroupState.DEAD) or member_id not in group.pending_members:
            return
        log.info("pending member %s of group %s expired", member_id, group.group_id)
        self.remove_pending_member_and_update_group(group, member_id)

    def remove_pending_member_and_update_group(self, group: GroupMetadata, member_id: str) -> None:
        group.remove(member_id)
        handle = group.pending_expiry.pop(member_id, None)
        if handle is not None:
            handle.cancel()
        if group.is_(GroupState.PREPARING_REBALANCE):
            self.check_join(group)

    def remove_member_and_update_group(
        self, group: GroupMetadata, member: MemberMetadata, reason: str
    ) -> None:
        # A parked JoinGroup of a new member must not wait forever: it gets UNKNOWN_MEMBER_ID
        # and retries, as does a parked SyncGroup.
        group.maybe_invoke_join(member, JoinResult("", ErrorCode.UNKNOWN_MEMBER_ID))
        group.maybe_invoke_sync(member, SyncResult(ErrorCode.UNKNOWN_MEMBER_ID))
        group.remove(member.member_id)
        member.cancel_expiry()
        state = group.state
        if state in (GroupState.STABLE, GroupState.COMPLETING_REBALANCE):
            self.maybe_prepare_rebalance(group, reason)
        elif state is GroupState.PREPARING_REBALANCE:
            self.check_join(group)
