"""The requests of a classic group's members: JoinGroup, SyncGroup, Heartbeat and LeaveGroup.

A JoinGroup or SyncGroup that must wait for the rest of the group parks on a future that the
rebalance (rebalance.py) resolves. Every request of a known member passes the same check,
`member_error`.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Callable, Coroutine
from typing import Any

from ...protocol.api_keys import ApiKey
from ...protocol.errors import ErrorCode
from ...wait_time import waiting
from .manager import GroupCoordinatorConfig, GroupMetadataManager, now_ms
from .metadata import (
    GroupMetadata,
    GroupState,
    JoinRequest,
    JoinResult,
    MemberMetadata,
    SyncResult,
)
from .rebalance import Rebalancer, Spawn, join_result, resolve

log = logging.getLogger(__name__)

# A member that joined but never finished a rebalance expires after this long.
NEW_MEMBER_JOIN_TIMEOUT_MS = 300_000

GroupError = Callable[[str | None, int], ErrorCode | None]


def member_error(
    group: GroupMetadata | None,
    member_id: str,
    instance_id: str | None,
    generation_id: int | None = None,
) -> ErrorCode | None:
    """The check every request of a known member passes: the group is known and alive, the
    member is known (a static member: under its current member id, else it is fenced), and the
    generation, when the request names one, is the group's."""
    if group is None:
        return ErrorCode.UNKNOWN_MEMBER_ID
    if group.is_(GroupState.DEAD):
        return ErrorCode.COORDINATOR_NOT_AVAILABLE
    if group.has_static_member(instance_id):
        if group.static_member_id(instance_id) != member_id:
            log.info(
                "static member %s of group %s with unknown member id %s is fenced",
                instance_id, group.group_id, member_id,
            )  # fmt: skip
            return ErrorCode.FENCED_INSTANCE_ID
    elif not group.has(member_id):
        return ErrorCode.UNKNOWN_MEMBER_ID
    if generation_id is not None and generation_id != group.generation_id:
        return ErrorCode.ILLEGAL_GENERATION
    return None


class GroupMembership:
    """Joins, syncs, heartbeats and departures of the members of the groups loaded here."""

    def __init__(
        self,
        manager: GroupMetadataManager,
        config: GroupCoordinatorConfig,
        rebalancer: Rebalancer,
        group_error: GroupError,
        spawn: Spawn,
    ) -> None:
        """`group_error(group_id, api)`: why this broker cannot serve the group now, if so."""
        self.manager = manager
        self.config = config
        self.rebalancer = rebalancer
        self._group_error = group_error
        self._spawn = spawn

    # --- JoinGroup ----------------------------------------------------------------------------

    async def join_group(self, req: JoinRequest) -> JoinResult:
        member_id = req.member_id
        error = self._group_error(req.group_id, ApiKey.JOIN_GROUP)
        if error is not None:
            return JoinResult(member_id, error)
        if not (
            self.config.min_session_timeout_ms
            <= req.session_timeout_ms
            <= self.config.max_session_timeout_ms
        ):
            return JoinResult(member_id, ErrorCode.INVALID_SESSION_TIMEOUT)
        is_unknown = member_id == ""
        group = self.manager.get_group(req.group_id)
        if group is None:
            if not is_unknown:
                return JoinResult(member_id, ErrorCode.UNKNOWN_MEMBER_ID)
            group = self.manager.add_group(GroupMetadata(req.group_id, GroupState.EMPTY, now_ms()))
        fut: asyncio.Future[JoinResult] = asyncio.get_running_loop().create_future()
        if not self._accept_joining_member(group, member_id):
            member = group.members.get(member_id)
            if member is not None:
                group.maybe_invoke_join(member, JoinResult("", ErrorCode.GROUP_MAX_SIZE_REACHED))
                member.cancel_expiry()
            group.remove(member_id)
            resolve(fut, JoinResult("", ErrorCode.GROUP_MAX_SIZE_REACHED))
        elif is_unknown:
            self._new_member_join(group, req, fut)
        else:
            self._current_member_join(group, req, fut)
        if group.is_(GroupState.PREPARING_REBALANCE):
            self.rebalancer.check_join(group)
        with waiting():  # until the rebalance (or the leader's assignment) completes
            return await fut

    def _accept_joining_member(self, group: GroupMetadata, member_id: str) -> bool:
        state = group.state
        if state in (GroupState.EMPTY, GroupState.DEAD):
            return True
        if state is GroupState.PREPARING_REBALANCE:
            member = group.members.get(member_id)
            return (
                member is not None and member.is_awaiting_join
            ) or group.num_awaiting_join < self.config.max_size
        return group.has(member_id) or group.size < self.config.max_size

    def _protocol_error(self, group: GroupMetadata, req: JoinRequest) -> ErrorCode | None:
        if group.is_(GroupState.DEAD):
            return ErrorCode.COORDINATOR_NOT_AVAILABLE
        if not group.supports_protocols(req.protocol_type, {name for name, _ in req.protocols}):
            return ErrorCode.INCONSISTENT_GROUP_PROTOCOL
        return None

    def _new_member_join(
        self, group: GroupMetadata, req: JoinRequest, fut: asyncio.Future[JoinResult]
    ) -> None:
        error = self._protocol_error(group, req)
        if error is not None:
            resolve(fut, JoinResult("", error))
            return
        instance_id = req.instance_id
        new_member_id = group.generate_member_id(req.client_id, instance_id)
        if instance_id is not None:
            old_member_id = group.static_member_id(instance_id)
            if old_member_id is not None:
                log.info(
                    "static member %s of group %s rejoins (%s): %s replaces %s",
                    instance_id, group.group_id, group.state.value, new_member_id, old_member_id,
                )  # fmt: skip
                self._update_static_member_and_rebalance(
                    group, old_member_id, new_member_id, req, fut
                )
            else:
                self._add_member_and_rebalance(group, new_member_id, instance_id, req, fut)
        elif req.require_known_member_id:
            # KIP-394: hand out the id first; the member joins for real with it.
            group.pending_members.add(new_member_id)
            loop = asyncio.get_running_loop()
            group.pending_expiry[new_member_id] = loop.call_later(
                req.session_timeout_ms / 1000,
                self.rebalancer.on_expire_pending,
                group,
                new_member_id,
            )
            resolve(fut, JoinResult(new_member_id, ErrorCode.MEMBER_ID_REQUIRED))
        else:
            self._add_member_and_rebalance(group, new_member_id, None, req, fut)

    def _current_member_join(
        self, group: GroupMetadata, req: JoinRequest, fut: asyncio.Future[JoinResult]
    ) -> None:
        member_id = req.member_id
        error = self._protocol_error(group, req)
        if error is not None:
            resolve(fut, JoinResult(member_id, error))
            return
        if group.is_pending_member(member_id):
            if req.instance_id is not None:
                # A pending member id was never handed to a static member.
                resolve(fut, JoinResult(member_id, ErrorCode.UNKNOWN_MEMBER_ID))
                return
            self._add_member_and_rebalance(group, member_id, None, req, fut)
            return
        error = member_error(group, member_id, req.instance_id)
        if error is not None:
            resolve(fut, JoinResult(member_id, error))
            return
        member = group.get(member_id)
        protocols = req.protocols
        state = group.state
        if state is GroupState.PREPARING_REBALANCE:
            self._update_member_and_rebalance(group, member, protocols, req.reason, fut)
        elif state is GroupState.COMPLETING_REBALANCE:
            if member.matches(protocols):
                # The member missed the join response: answer with this generation again.
                resolve(fut, join_result(group, member_id, with_members=True))
            else:
                self._update_member_and_rebalance(
                    group, member, protocols, f"metadata of {member_id} changed", fut
                )
        elif state is GroupState.STABLE:
            if group.is_leader(member_id):
                # The leader rejoins to make the group reassign (e.g. topic metadata changed).
                self._update_member_and_rebalance(
                    group, member, protocols, f"leader {member_id} rejoins", fut
                )
            elif not member.matches(protocols):
                self._update_member_and_rebalance(
                    group, member, protocols, f"metadata of {member_id} changed", fut
                )
            else:
                resolve(fut, join_result(group, member_id, with_members=False))
        else:
            resolve(fut, JoinResult(member_id, ErrorCode.UNKNOWN_MEMBER_ID))

    def _add_member_and_rebalance(
        self,
        group: GroupMetadata,
        member_id: str,
        instance_id: str | None,
        req: JoinRequest,
        fut: asyncio.Future[JoinResult],
    ) -> None:
        member = req.new_member(member_id, instance_id)
        member.is_new = True
        if group.is_(GroupState.PREPARING_REBALANCE) and group.generation_id == 0:
            group.new_member_added = True
        pending = group.pending_expiry.pop(member_id, None)
        if pending is not None:
            pending.cancel()
        group.add(member, fut)
        # Until its first rebalance completes a new member has no session to time out; the
        # join timeout removes members whose client gave up.
        self.rebalancer.schedule_heartbeat(group, member, NEW_MEMBER_JOIN_TIMEOUT_MS)
        self.rebalancer.maybe_prepare_rebalance(
            group, f"adding member {member_id} (instance {instance_id}); reason: {req.reason}"
        )

    def _update_member_and_rebalance(
        self,
        group: GroupMetadata,
        member: MemberMetadata,
        protocols: list[tuple[str, bytes]],
        reason: str,
        fut: asyncio.Future[JoinResult],
    ) -> None:
        group.update_member(member, protocols, fut)
        self.rebalancer.maybe_prepare_rebalance(group, reason)

    def _update_static_member_and_rebalance(
        self,
        group: GroupMetadata,
        old_member_id: str,
        new_member_id: str,
        req: JoinRequest,
        fut: asyncio.Future[JoinResult],
    ) -> None:
        instance_id = req.instance_id
        assert instance_id is not None
        protocols = req.protocols
        reason = req.reason
        supports_skip_assignment = req.supports_skip_assignment
        current_leader = group.leader_id
        member = group.replace_static_member(instance_id, old_member_id, new_member_id)
        self.rebalancer.schedule_heartbeat(group, member)
        old_protocols = member.supported_protocols
        group.update_member(member, protocols, fut)
        state = group.state
        if state is GroupState.STABLE:
            if group.protocol_name == group.select_protocol():
                # Same protocol next generation: no rebalance, persist the new member id.
                assignment = {m.member_id: m.assignment for m in group.members.values()}
                write = self.manager.store_group(group, assignment)
                self._spawn(
                    self._finish_static_rejoin(
                        group, member, write, old_member_id, new_member_id, instance_id,
                        old_protocols, current_leader, supports_skip_assignment,
                    )
                )  # fmt: skip
            else:
                self.rebalancer.maybe_prepare_rebalance(
                    group, f"static member {instance_id} rejoined with another protocol"
                )
        elif state is GroupState.COMPLETING_REBALANCE:
            self.rebalancer.maybe_prepare_rebalance(
                group, f"static member {instance_id} rejoined during the sync phase; {reason}"
            )
        # PreparingRebalance: the member simply takes part in the rebalance under way.

    async def _finish_static_rejoin(
        self,
        group: GroupMetadata,
        member: MemberMetadata,
        write: Coroutine[Any, Any, ErrorCode],
        old_member_id: str,
        new_member_id: str,
        instance_id: str,
        old_protocols: list[tuple[str, bytes]],
        current_leader: str | None,
        supports_skip_assignment: bool,
    ) -> None:
        error = await write
        if group.members.get(new_member_id) is not member:
            return
        if error != ErrorCode.NONE:
            log.warning(
                "group %s: persisting static member %s failed (%s); reverting",
                group.group_id, instance_id, error.name,
            )  # fmt: skip
            fut = member.join_future
            group.update_member(member, old_protocols, None)
            old = group.replace_static_member(instance_id, new_member_id, old_member_id)
            self.rebalancer.schedule_heartbeat(group, old)
            result = JoinResult(
                "", error, group.generation_id, group.protocol_type, group.protocol_name,
                current_leader or "",
            )  # fmt: skip
            resolve(fut, result)
            return
        if supports_skip_assignment:
            # JoinGroup v9+: the leader learns it leads but keeps the current assignment.
            is_leader = group.is_leader(new_member_id)
            result = join_result(
                group, new_member_id, with_members=is_leader, skip_assignment=is_leader
            )
        else:
            # Older clients: name the old leader so that nobody runs a pointless assignment.
            result = join_result(group, new_member_id, with_members=False, leader_id=current_leader)
        group.maybe_invoke_join(member, result)

    # --- SyncGroup ----------------------------------------------------------------------------

    async def sync_group(
        self,
        group_id: str,
        generation_id: int,
        member_id: str,
        group_instance_id: str | None,
        protocol_type: str | None,
        protocol_name: str | None,
        assignments: dict[str, bytes],
    ) -> SyncResult:
        error = self._group_error(group_id, ApiKey.SYNC_GROUP)
        if error == ErrorCode.COORDINATOR_LOAD_IN_PROGRESS:
            # The rebalance state was lost with the old coordinator: rejoin (older clients
            # do not expect the loading error here).
            return SyncResult(ErrorCode.REBALANCE_IN_PROGRESS)
        if error is not None:
            return SyncResult(error)
        group = self.manager.get_group(group_id)
        error = member_error(group, member_id, group_instance_id, generation_id)
        if error is not None:
            return SyncResult(error)
        assert group is not None
        if (protocol_type is not None and protocol_type != group.protocol_type) or (
            protocol_name is not None and protocol_name != group.protocol_name
        ):
            return SyncResult(ErrorCode.INCONSISTENT_GROUP_PROTOCOL)
        state = group.state
        if state is GroupState.EMPTY:
            return SyncResult(ErrorCode.UNKNOWN_MEMBER_ID)
        if state is GroupState.PREPARING_REBALANCE:
            return SyncResult(ErrorCode.REBALANCE_IN_PROGRESS)
        member = group.get(member_id)
        if state is GroupState.STABLE:
            self.rebalancer.remove_pending_sync_member(group, member_id)
            self.rebalancer.schedule_heartbeat(group, member)
            return SyncResult(
                ErrorCode.NONE, group.protocol_type, group.protocol_name, member.assignment
            )
        # CompletingRebalance: park until the leader's assignment is stored.
        fut: asyncio.Future[SyncResult] = asyncio.get_running_loop().create_future()
        member.sync_future = fut
        self.rebalancer.remove_pending_sync_member(group, member_id)
        if group.is_leader(member_id):
            log.info(
                "group %s: leader %s sent the assignment of generation %d",
                group.group_id, member_id, group.generation_id,
            )  # fmt: skip
            assignment = {mid: bytes(assignments.get(mid, b"")) for mid in group.members}
            write = self.manager.store_group(group, assignment)
            self._spawn(self._finish_sync(group, generation_id, member_id, assignment, write))
        with waiting():  # until the rebalance (or the leader's assignment) completes
            return await fut

    async def _finish_sync(
        self,
        group: GroupMetadata,
        generation_id: int,
        member_id: str,
        assignment: dict[str, bytes],
        write: Coroutine[Any, Any, ErrorCode],
    ) -> None:
        error = await write
        # Another member may have joined meanwhile: only act on the same generation.
        if not group.is_(GroupState.COMPLETING_REBALANCE) or generation_id != group.generation_id:
            return
        if error != ErrorCode.NONE:
            self.rebalancer.reset_and_propagate_assignment_error(group, error)
            self.rebalancer.maybe_prepare_rebalance(
                group, f"storing the assignment failed (SyncGroup of {member_id})"
            )
            return
        for member in group.members.values():
            member.assignment = assignment.get(member.member_id, b"")
        self.rebalancer.propagate_assignment(group, ErrorCode.NONE)
        group.transition_to(GroupState.STABLE, now_ms())
        log.info("group %s is stable at generation %d", group.group_id, group.generation_id)

    # --- Heartbeat and LeaveGroup -------------------------------------------------------------

    def heartbeat(
        self, group_id: str, member_id: str, group_instance_id: str | None, generation_id: int
    ) -> ErrorCode:
        error = self._group_error(group_id, ApiKey.HEARTBEAT)
        if error == ErrorCode.COORDINATOR_LOAD_IN_PROGRESS:
            return ErrorCode.NONE  # the group is still loading: answer blindly
        if error is not None:
            return error
        group = self.manager.get_group(group_id)
        error = member_error(group, member_id, group_instance_id)
        if error is not None:
            return error
        assert group is not None
        state = group.state
        if state is GroupState.EMPTY:
            return ErrorCode.UNKNOWN_MEMBER_ID
        member = group.get(member_id)
        if state is GroupState.COMPLETING_REBALANCE:
            self.rebalancer.schedule_heartbeat(group, member)
            return ErrorCode.NONE
        if state is GroupState.PREPARING_REBALANCE:
            self.rebalancer.schedule_heartbeat(group, member)
            return ErrorCode.REBALANCE_IN_PROGRESS
        if generation_id != group.generation_id:
            return ErrorCode.ILLEGAL_GENERATION
        self.rebalancer.schedule_heartbeat(group, member)
        return ErrorCode.NONE

    def leave_group(
        self, group_id: str, members: list[tuple[str, str | None]]
    ) -> tuple[ErrorCode, list[ErrorCode]]:
        """Members leave (v3+: several, static ones by instance id alone). Returns the
        top-level error and one error per member."""
        error = self._group_error(group_id, ApiKey.LEAVE_GROUP)
        if error is not None:
            return error, []
        group = self.manager.get_group(group_id)
        if group is None:
            return ErrorCode.NONE, [ErrorCode.UNKNOWN_MEMBER_ID] * len(members)
        if group.is_(GroupState.DEAD):
            return ErrorCode.COORDINATOR_NOT_AVAILABLE, []
        results = []
        for member_id, instance_id in members:
            if member_id == "":
                current = group.static_member_id(instance_id)
                if current is None:
                    results.append(ErrorCode.UNKNOWN_MEMBER_ID)
                    continue
                self._remove_leaving_member(group, current, "removed by instance id")
                results.append(ErrorCode.NONE)
            elif group.is_pending_member(member_id):
                self.rebalancer.remove_pending_member_and_update_group(group, member_id)
                results.append(ErrorCode.NONE)
            else:
                error = member_error(group, member_id, instance_id)
                if error is None:
                    self._remove_leaving_member(group, member_id, "LeaveGroup")
                    results.append(ErrorCode.NONE)
                else:
                    results.append(error)
        return ErrorCode.NONE, results

    def _remove_leaving_member(self, group: GroupMetadata, member_id: str, why: str) -> None:
        member = group.get(member_id)
        log.info("member %s leaves group %s (%s)", member_id, group.group_id, why)
        self.rebalancer.remove_member_and_update_group(
            group, member, f"removing member {member_id} on LeaveGroup ({why})"
        )
