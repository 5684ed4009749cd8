"""The classic group coordinator: JoinGroup/SyncGroup rebalances, heartbeats, leaving, offset
commits and fetches, and the admin views of groups (reference §4.3).

Everything runs on the broker's event loop. A JoinGroup or SyncGroup that must wait for the
rest of the group parks on a future that the state machine resolves; timers (loop.call_later)
stand in for Kafka's purgatories: the join completion (with group.initial.rebalance.delay.ms for
an empty group), the sync deadline and each member's session expiry. State changes happen
synchronously between awaits, so no locks are needed; the only awaits are the writes to
__consumer_offsets, after which the state is checked again (as Kafka's callbacks do).
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
from collections.abc import Callable, Coroutine
from concurrent.futures import Executor
from dataclasses import dataclass
from typing import Any

from ...protocol.api_keys import ApiKey
from ...protocol.errors import ErrorCode
from ...replication.replica_manager import ReplicaManager
from ...wait_time import waiting
from .manager import GroupCoordinatorConfig, GroupMetadataManager, now_ms
from .metadata import (
    GroupMetadata,
    GroupState,
    GroupSummary,
    JoinRequest,
    JoinResult,
    MemberMetadata,
    OffsetAndMetadata,
    SyncResult,
    TopicPartition,
)

log = logging.getLogger(__name__)

# A member that joined but never finished a rebalance expires after this long.
NEW_MEMBER_JOIN_TIMEOUT_MS = 300_000
# APIs that accept the empty group id (offsets of the "" group, admin views of every group).
_EMPTY_ID_ALLOWED = frozenset(
    {ApiKey.OFFSET_COMMIT, ApiKey.OFFSET_FETCH, ApiKey.DESCRIBE_GROUPS, ApiKey.DELETE_GROUPS}
)

PartitionOffset = tuple[int, int, str, ErrorCode]  # offset, leader epoch, metadata, error

__all__ = ["GroupCoordinator", "GroupCoordinatorConfig", "JoinResult", "SyncResult"]


@dataclass
class _JoinOp:
    """A pending completion of the join phase (Kafka's DelayedJoin / InitialDelayedJoin)."""

    initial: bool
    delay_ms: int
    remaining_ms: int
    handle: asyncio.TimerHandle | None = None


class GroupCoordinator:
    def __init__(
        self,
        replica_manager: ReplicaManager,
        config: GroupCoordinatorConfig,
        *,
        partition_count: Callable[[], int | None] | None = None,
        executor: Executor | None = None,
        fenced: Callable[[], bool] = lambda: False,
    ) -> None:
        """`fenced()`: the broker cannot vouch for its leadership right now (ZooKeeper session
        in doubt); every group request is then answered COORDINATOR_NOT_AVAILABLE."""
        self.config = config
        self._fenced = fenced
        self.manager = GroupMetadataManager(
            replica_manager, config, partition_count=partition_count, executor=executor
        )
        self._active = False
        self._tasks: set[asyncio.Task[Any]] = set()
        self._expiry_task: asyncio.Task[None] | None = None

    # --- lifecycle and leadership ------------------------------------------------------

    async def start(self) -> None:
        self._active = True
        self._expiry_task = asyncio.get_running_loop().create_task(self._expiry_loop())

    async def shutdown(self) -> None:
        self._active = False
        if self._expiry_task is not None:
            self._expiry_task.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await self._expiry_task
        self.manager.shutdown(self._on_group_unloaded)
        for task in list(self._tasks):
            task.cancel()
        await asyncio.gather(*self._tasks, return_exceptions=True)

    def on_elected(self, partition: int, epoch: int) -> None:
        """This broker now leads __consumer_offsets-`partition`: load its groups."""
        self.manager.schedule_load(partition, epoch, self._on_group_loaded)

    def on_resigned(self, partition: int) -> None:
        """This broker no longer leads __consumer_offsets-`partition`."""
        self.manager.unload_partition(partition, self._on_group_unloaded)

    def partition_for(self, group_id: str) -> int:
        return self.manager.partition_for(group_id)

    def is_loaded(self, partition: int) -> bool:
        return partition in self.manager.owned

    def _spawn(self, coro: Coroutine[Any, Any, Any]) -> None:
        task = asyncio.get_running_loop().create_task(coro)
        self._tasks.add(task)
        task.add_done_callback(self._task_done)

    def _task_done(self, task: asyncio.Task[Any]) -> None:
        self._tasks.discard(task)
        if not task.cancelled() and task.exception() is not None:
            log.error("group coordinator task failed", exc_info=task.exception())

    def _on_group_loaded(self, group: GroupMetadata) -> None:
        if group.size > self.config.max_size:
            self._prepare_rebalance(group, "freshly loaded group is over capacity")
        for member in list(group.members.values()):
            self._schedule_heartbeat(group, member)

    def _on_group_unloaded(self, group: GroupMetadata) -> None:
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

    # --- validation --------------------------------------------------------------------

    def _group_error(self, group_id: str | None, api: int) -> ErrorCode | None:
        if group_id is None or (group_id == "" and api not in _EMPTY_ID_ALLOWED):
            return ErrorCode.INVALID_GROUP_ID
        if not self._active or self._fenced():
            return ErrorCode.COORDINATOR_NOT_AVAILABLE
        if self.manager.is_loading(group_id):
            return ErrorCode.COORDINATOR_LOAD_IN_PROGRESS
        if not self.manager.is_local(group_id):
            return ErrorCode.NOT_COORDINATOR
        return None

    @staticmethod
    def _validate_member(
        group: GroupMetadata, member_id: str, instance_id: str | None
    ) -> ErrorCode | None:
        if group.has_static_member(instance_id):
            if group.static_member_id(instance_id) != member_id:
                log.info(
                    "static member %s of group %s with unknown member id %s is fenced",
                    instance_id, group.group_id, member_id,
                )  # fmt: skip
                return ErrorCode.FENCED_INSTANCE_ID
            return None
        if not group.has(member_id):
            return ErrorCode.UNKNOWN_MEMBER_ID
        return None

    # --- JoinGroup ---------------------------------------------------------------------

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
            _resolve(fut, JoinResult("", ErrorCode.GROUP_MAX_SIZE_REACHED))
        elif is_unknown:
            self._new_member_join(group, req, fut)
        else:
            self._current_member_join(group, req, fut)
        if group.is_(GroupState.PREPARING_REBALANCE):
            self._check_join(group)
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
            _resolve(fut, JoinResult("", error))
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
                req.session_timeout_ms / 1000, self._on_expire_pending, group, new_member_id
            )
            _resolve(fut, JoinResult(new_member_id, ErrorCode.MEMBER_ID_REQUIRED))
        else:
            self._add_member_and_rebalance(group, new_member_id, None, req, fut)

    def _current_member_join(
        self, group: GroupMetadata, req: JoinRequest, fut: asyncio.Future[JoinResult]
    ) -> None:
        member_id = req.member_id
        error = self._protocol_error(group, req)
        if error is not None:
            _resolve(fut, JoinResult(member_id, error))
            return
        if group.is_pending_member(member_id):
            if req.instance_id is not None:
                # A pending member id was never handed to a static member.
                _resolve(fut, JoinResult(member_id, ErrorCode.UNKNOWN_MEMBER_ID))
                return
            self._add_member_and_rebalance(group, member_id, None, req, fut)
            return
        error = self._validate_member(group, member_id, req.instance_id)
        if error is not None:
            _resolve(fut, JoinResult(member_id, error))
            return
        member = group.get(member_id)
        protocols = req.protocols
        state = group.state
        if state is GroupState.PREPARING_REBALANCE:
            self._update_member_and_rebalance(group, member, protocols, req.reason, fut)
        elif state is GroupState.COMPLETING_REBALANCE:
            if member.matches(protocols):
                # The member missed the join response: answer with this generation again.
                _resolve(fut, self._join_result(group, member_id, with_members=True))
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
                _resolve(fut, self._join_result(group, member_id, with_members=False))
        else:
            _resolve(fut, JoinResult(member_id, ErrorCode.UNKNOWN_MEMBER_ID))

    def _join_result(
        self,
        group: GroupMetadata,
        member_id: str,
        *,
        with_members: bool,
        leader_id: str | None = None,
        skip_assignment: bool = False,
    ) -> JoinResult:
        members = (
            group.current_member_metadata() if with_members and group.is_leader(member_id) else []
        )
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
        self._schedule_heartbeat(group, member, NEW_MEMBER_JOIN_TIMEOUT_MS)
        self._maybe_prepare_rebalance(
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
        self._maybe_prepare_rebalance(group, reason)

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
        self._schedule_heartbeat(group, member)
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
                self._maybe_prepare_rebalance(
                    group, f"static member {instance_id} rejoined with another protocol"
                )
        elif state is GroupState.COMPLETING_REBALANCE:
            self._maybe_prepare_rebalance(
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
            self._schedule_heartbeat(group, old)
            result = JoinResult(
                "", error, group.generation_id, group.protocol_type, group.protocol_name,
                current_leader or "",
            )  # fmt: skip
            _resolve(fut, result)
            return
        if supports_skip_assignment:
            # JoinGroup v9+: the leader learns it leads but keeps the current assignment.
            is_leader = group.is_leader(new_member_id)
            result = self._join_result(
                group, new_member_id, with_members=is_leader, skip_assignment=is_leader
            )
        else:
            # Older clients: name the old leader so that nobody runs a pointless assignment.
            result = self._join_result(
                group, new_member_id, with_members=False, leader_id=current_leader
            )
        group.maybe_invoke_join(member, result)

    # --- rebalance machinery -----------------------------------------------------------

    def _maybe_prepare_rebalance(self, group: GroupMetadata, reason: str) -> None:
        if group.can_rebalance():
            self._prepare_rebalance(group, reason)

    def _prepare_rebalance(self, group: GroupMetadata, reason: str) -> None:
        if group.is_(GroupState.COMPLETING_REBALANCE):
            self._reset_and_propagate_assignment_error(group, ErrorCode.REBALANCE_IN_PROGRESS)
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

    def _check_join(self, group: GroupMetadata) -> None:
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
            group.maybe_invoke_join(
                member, self._join_result(group, member.member_id, with_members=True)
            )
            self._schedule_heartbeat(group, member)
            member.is_new = False
            group.pending_sync_members.add(member.member_id)
        self._schedule_pending_sync(group)

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

    def _remove_pending_sync_member(self, group: GroupMetadata, member_id: str) -> None:
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

    def _reset_and_propagate_assignment_error(self, group: GroupMetadata, error: ErrorCode) -> None:
        for member in group.members.values():
            member.assignment = b""
        self._propagate_assignment(group, error)

    def _propagate_assignment(self, group: GroupMetadata, error: ErrorCode) -> None:
        ok = error == ErrorCode.NONE
        ptype = group.protocol_type if ok else None
        pname = group.protocol_name if ok else None
        for member in list(group.members.values()):
            result = SyncResult(error, ptype, pname, member.assignment)
            if group.maybe_invoke_sync(member, result):
                # Sessions restart once members have their assignment.
                self._schedule_heartbeat(group, member)

    # --- sessions ----------------------------------------------------------------------

    def _schedule_heartbeat(
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
        self._remove_member_and_update_group(
            group, member, f"removing member {member_id} on heartbeat expiration"
        )

    def _on_expire_pending(self, group: GroupMetadata, member_id: str) -> None:
        group.pending_expiry.pop(member_id, None)
        if group.is_(GroupState.DEAD) or member_id not in group.pending_members:
            return
        log.info("pending member %s of group %s expired", member_id, group.group_id)
        self._remove_pending_member_and_update_group(group, member_id)

    def _remove_pending_member_and_update_group(self, group: GroupMetadata, member_id: str) -> None:
        group.remove(member_id)
        handle = group.pending_expiry.pop(member_id, None)
        if handle is not None:
            handle.cancel()
        if group.is_(GroupState.PREPARING_REBALANCE):
            self._check_join(group)

    def _remove_member_and_update_group(
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
            self._maybe_prepare_rebalance(group, reason)
        elif state is GroupState.PREPARING_REBALANCE:
            self._check_join(group)

    # --- SyncGroup ---------------------------------------------------------------------

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
        if group is None:
            return SyncResult(ErrorCode.UNKNOWN_MEMBER_ID)
        if group.is_(GroupState.DEAD):
            return SyncResult(ErrorCode.COORDINATOR_NOT_AVAILABLE)
        error = self._validate_member(group, member_id, group_instance_id)
        if error is None:
            if generation_id != group.generation_id:
                error = ErrorCode.ILLEGAL_GENERATION
            elif (protocol_type is not None and protocol_type != group.protocol_type) or (
                protocol_name is not None and protocol_name != group.protocol_name
            ):
                error = ErrorCode.INCONSISTENT_GROUP_PROTOCOL
        if error is not None:
            return SyncResult(error)
        state = group.state
        if state is GroupState.EMPTY:
            return SyncResult(ErrorCode.UNKNOWN_MEMBER_ID)
        if state is GroupState.PREPARING_REBALANCE:
            return SyncResult(ErrorCode.REBALANCE_IN_PROGRESS)
        member = group.get(member_id)
        if state is GroupState.STABLE:
            self._remove_pending_sync_member(group, member_id)
            self._schedule_heartbeat(group, member)
            return SyncResult(
                ErrorCode.NONE, group.protocol_type, group.protocol_name, member.assignment
            )
        # CompletingRebalance: park until the leader's assignment is stored.
        fut: asyncio.Future[SyncResult] = asyncio.get_running_loop().create_future()
        member.sync_future = fut
        self._remove_pending_sync_member(group, member_id)
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
            self._reset_and_propagate_assignment_error(group, error)
            self._maybe_prepare_rebalance(
                group, f"storing the assignment failed (SyncGroup of {member_id})"
            )
            return
        for member in group.members.values():
            member.assignment = assignment.get(member.member_id, b"")
        self._propagate_assignment(group, ErrorCode.NONE)
        group.transition_to(GroupState.STABLE, now_ms())
        log.info("group %s is stable at generation %d", group.group_id, group.generation_id)

    # --- Heartbeat and LeaveGroup ------------------------------------------------------

    def heartbeat(
        self, group_id: str, member_id: str, group_instance_id: str | None, generation_id: int
    ) -> ErrorCode:
        error = self._group_error(group_id, ApiKey.HEARTBEAT)
        if error == ErrorCode.COORDINATOR_LOAD_IN_PROGRESS:
            return ErrorCode.NONE  # the group is still loading: answer blindly
        if error is not None:
            return error
        group = self.manager.get_group(group_id)
        if group is None:
            return ErrorCode.UNKNOWN_MEMBER_ID
        if group.is_(GroupState.DEAD):
            return ErrorCode.COORDINATOR_NOT_AVAILABLE
        error = self._validate_member(group, member_id, group_instance_id)
        if error is not None:
            return error
        state = group.state
        if state is GroupState.EMPTY:
            return ErrorCode.UNKNOWN_MEMBER_ID
        member = group.get(member_id)
        if state is GroupState.COMPLETING_REBALANCE:
            self._schedule_heartbeat(group, member)
            return ErrorCode.NONE
        if state is GroupState.PREPARING_REBALANCE:
            self._schedule_heartbeat(group, member)
            return ErrorCode.REBALANCE_IN_PROGRESS
        if generation_id != group.generation_id:
            return ErrorCode.ILLEGAL_GENERATION
        self._schedule_heartbeat(group, member)
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
                self._remove_pending_member_and_update_group(group, member_id)
                results.append(ErrorCode.NONE)
            else:
                error = self._validate_member(group, member_id, instance_id)
                if error is None:
                    self._remove_leaving_member(group, member_id, "LeaveGroup")
                    results.append(ErrorCode.NONE)
                else:
                    results.append(error)
        return ErrorCode.NONE, results

    def _remove_leaving_member(self, group: GroupMetadata, member_id: str, why: str) -> None:
        member = group.get(member_id)
        log.info("member %s leaves group %s (%s)", member_id, group.group_id, why)
        self._remove_member_and_update_group(
            group, member, f"removing member {member_id} on LeaveGroup ({why})"
        )

    # --- offsets -----------------------------------------------------------------------

    async def commit_offsets(
        self,
        group_id: str,
        member_id: str,
        group_instance_id: str | None,
        generation_id: int,
        offsets: dict[TopicPartition, OffsetAndMetadata],
    ) -> dict[TopicPartition, ErrorCode]:
        error = self._group_error(group_id, ApiKey.OFFSET_COMMIT)
        if error is not None:
            return dict.fromkeys(offsets, error)
        group = self.manager.get_group(group_id)
        if group is None:
            if generation_id >= 0:
                # A commit from a generation this coordinator never saw.
                return dict.fromkeys(offsets, ErrorCode.ILLEGAL_GENERATION)
            # Kafka used only for offset storage: the group exists from now on.
            group = self.manager.add_group(GroupMetadata(group_id, GroupState.EMPTY, now_ms()))
        error = self._validate_offset_commit(group, generation_id, member_id, group_instance_id)
        if error is not None:
            return dict.fromkeys(offsets, error)
        state = group.state
        if state is GroupState.COMPLETING_REBALANCE:
            return dict.fromkeys(offsets, ErrorCode.REBALANCE_IN_PROGRESS)
        if state in (GroupState.STABLE, GroupState.PREPARING_REBALANCE):
            self._schedule_heartbeat(group, group.get(member_id))
        return await self.manager.store_offsets(group, offsets)

    async def commit_transactional_offsets(
        self,
        group_id: str,
        producer_id: int,
        producer_epoch: int,
        member_id: str,
        group_instance_id: str | None,
        generation_id: int,
        offsets: dict[TopicPartition, OffsetAndMetadata],
    ) -> dict[TopicPartition, ErrorCode]:
        """TxnOffsetCommit: offsets that take effect when the producer's transaction commits.
        The member and generation are checked when given (KIP-447, v3+)."""
        error = self._group_error(group_id, ApiKey.TXN_OFFSET_COMMIT)
        if error is not None:
            return dict.fromkeys(offsets, error)
        group = self.manager.get_group(group_id)
        if group is None:
            group = self.manager.add_group(GroupMetadata(group_id, GroupState.EMPTY, now_ms()))
        error = self._validate_offset_commit(
            group, generation_id, member_id, group_instance_id, transactional=True
        )
        if error is not None:
            return dict.fromkeys(offsets, error)
        return await self.manager.store_txn_offsets(group, producer_id, producer_epoch, offsets)

    def on_transaction_completed(
        self, producer_id: int, partitions: list[int], committed: bool
    ) -> None:
        """A COMMIT/ABORT marker of `producer_id` is written to these __consumer_offsets
        partitions: its pending transactional offsets become visible, or are dropped."""
        self.manager.complete_txn_offsets(producer_id, set(partitions), committed)

    def _validate_offset_commit(
        self,
        group: GroupMetadata,
        generation_id: int,
        member_id: str,
        instance_id: str | None,
        *,
        transactional: bool = False,
    ) -> ErrorCode | None:
        if group.is_(GroupState.DEAD):
            return ErrorCode.COORDINATOR_NOT_AVAILABLE
        if transactional and generation_id < 0 and group.is_(GroupState.EMPTY):
            return None
        if generation_id >= 0 or member_id != "" or instance_id is not None:
            error = self._validate_member(group, member_id, instance_id)
            if error is not None:
                return error
            if generation_id != group.generation_id:
                return ErrorCode.ILLEGAL_GENERATION
            return None
        if not transactional and not group.is_(GroupState.EMPTY):
            # Only members commit for a group that has members (transactional commits of
            # older producers carry no member: they are let through, as in Kafka).
            return ErrorCode.UNKNOWN_MEMBER_ID
        return None

    def fetch_offsets(
        self,
        group_id: str,
        partitions: list[TopicPartition] | None,
        require_stable: bool = False,
    ) -> tuple[ErrorCode, dict[TopicPartition, PartitionOffset]]:
        """Committed offsets (-1 where none); `partitions` None: all the group has."""
        error = self._group_error(group_id, ApiKey.OFFSET_FETCH)
        if error is not None:
            return error, {}
        none: PartitionOffset = (-1, -1, "", ErrorCode.NONE)
        group = self.manager.get_group(group_id)
        if group is None or group.is_(GroupState.DEAD):
            return ErrorCode.NONE, dict.fromkeys(partitions or [], none)
        wanted = list(group.offsets) if partitions is None else partitions
        out: dict[TopicPartition, PartitionOffset] = {}
        for tp in wanted:
            if require_stable and group.has_pending_commit(tp):
                out[tp] = (-1, -1, "", ErrorCode.UNSTABLE_OFFSET_COMMIT)
                continue
            o = group.offsets.get(tp)
            out[tp] = none if o is None else (o.offset, o.leader_epoch, o.metadata, ErrorCode.NONE)
        return ErrorCode.NONE, out

    # --- admin -------------------------------------------------------------------------

    def list_groups(
        self, states: set[str] | None = None
    ) -> tuple[ErrorCode, list[tuple[str, str, str]]]:
        """(group id, protocol type, state) of every group here; `states` filters."""
        if not self._active:
            return ErrorCode.COORDINATOR_NOT_AVAILABLE, []
        error = ErrorCode.COORDINATOR_LOAD_IN_PROGRESS if self.manager.any_loading else None
        out = []
        for group_id, group in self.manager.groups.items():
            if states and group.state.value not in states:
                continue
            out.append((group_id, group.protocol_type or "", group.state.value))
        return error or ErrorCode.NONE, out

    def describe_group(self, group_id: str) -> tuple[ErrorCode, GroupSummary]:
        error = self._group_error(group_id, ApiKey.DESCRIBE_GROUPS)
        if error is not None:
            return error, GroupSummary("", "", "", [])
        group = self.manager.get_group(group_id)
        if group is None:
            return ErrorCode.NONE, GroupSummary(GroupState.DEAD.value, "", "", [])
        return ErrorCode.NONE, group.summary()

    async def delete_groups(self, group_ids: list[str]) -> dict[str, ErrorCode]:
        errors: dict[str, ErrorCode] = {}
        doomed: list[GroupMetadata] = []
        for group_id in group_ids:
            error = self._group_error(group_id, ApiKey.DELETE_GROUPS)
            if error is not None:
                errors[group_id] = error
                continue
            group = self.manager.get_group(group_id)
            if group is None or group.is_(GroupState.DEAD):
                errors[group_id] = (
                    ErrorCode.GROUP_ID_NOT_FOUND
                    if self.manager.group_not_exists(group_id)
                    else ErrorCode.NOT_COORDINATOR
                )
            elif group.is_(GroupState.EMPTY):
                group.transition_to(GroupState.DEAD, now_ms())
                doomed.append(group)
            else:
                errors[group_id] = ErrorCode.NON_EMPTY_GROUP
        if doomed:
            removed = await self.manager.cleanup_group_metadata(
                doomed, lambda g: g.remove_all_offsets()
            )
            for group in doomed:
                errors[group.group_id] = ErrorCode.NONE
            log.info("deleted groups %s (%d offsets)", [g.group_id for g in doomed], removed)
        return errors

    async def delete_offsets(
        self, group_id: str, partitions: list[TopicPartition]
    ) -> tuple[ErrorCode, dict[TopicPartition, ErrorCode]]:
        error = self._group_error(group_id, ApiKey.OFFSET_DELETE)
        if error is not None:
            return error, {}
        group = self.manager.get_group(group_id)
        if group is None or group.is_(GroupState.DEAD):
            return (
                ErrorCode.GROUP_ID_NOT_FOUND
                if self.manager.group_not_exists(group_id)
                else ErrorCode.NOT_COORDINATOR
            ), {}
        errors: dict[TopicPartition, ErrorCode] = {}
        if group.is_(GroupState.EMPTY):
            eligible = list(partitions)
        elif group.is_consumer_group():
            eligible = []
            for tp in partitions:
                if group.is_subscribed_to_topic(tp[0]):
                    errors[tp] = ErrorCode.GROUP_SUBSCRIBED_TO_TOPIC
                else:
                    eligible.append(tp)
        else:
            return ErrorCode.NON_EMPTY_GROUP, {}
        if eligible:
            await self.manager.cleanup_group_metadata([group], lambda g: g.remove_offsets(eligible))
            for tp in eligible:
                errors[tp] = ErrorCode.NONE
        return ErrorCode.NONE, errors

    # --- expiry ------------------------------------------------------------------------

    async def expire_offsets(self, now: int | None = None) -> int:
        """Drop offsets past offsets.retention.minutes (and groups left without any)."""
        at = now_ms() if now is None else now
        retention = self.config.retention_ms
        return await self.manager.cleanup_group_metadata(
            list(self.manager.groups.values()),
            lambda g: g.remove_expired_offsets(at, retention),
        )

    async def _expiry_loop(self) -> None:
        while True:
            await asyncio.sleep(self.config.retention_check_interval_ms / 1000)
            try:
                removed = await self.expire_offsets()
            except Exception:
                log.exception("offset expiration failed")
                continue
            if removed:
                log.info("removed %d expired offsets", removed)


def _resolve(fut: asyncio.Future[Any], value: Any) -> None:
    if not fut.done():
        fut.set_result(value)
