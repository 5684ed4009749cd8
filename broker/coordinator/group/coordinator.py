"""The classic group coordinator: the entry point of every group request, offset commits and
fetches, and the admin views of groups (reference §4.3).

Everything runs on the broker's event loop. The members' requests (JoinGroup, SyncGroup,
Heartbeat, LeaveGroup) are handled in membership.py, the rebalance and session timers that stand
in for Kafka's purgatories in rebalance.py, the reads and writes of __consumer_offsets in
manager.py. State changes happen synchronously between awaits, so no locks are needed; the only
awaits are the writes to __consumer_offsets, after which the state is checked again (as Kafka's
callbacks do).
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
from collections.abc import Callable, Coroutine
from concurrent.futures import Executor
from typing import Any

from ...protocol.api_keys import ApiKey
from ...protocol.errors import ErrorCode
from ...replication.replica_manager import ReplicaManager
from .manager import GroupCoordinatorConfig, GroupMetadataManager, now_ms
from .membership import GroupMembership, member_error
from .metadata import (
    GroupMetadata,
    GroupState,
    GroupSummary,
    JoinResult,
    OffsetAndMetadata,
    SyncResult,
    TopicPartition,
)
from .rebalance import Rebalancer

log = logging.getLogger(__name__)

# APIs that accept the empty group id (offsets of the "" group, admin views of every group).
_EMPTY_ID_ALLOWED = frozenset(
    {ApiKey.OFFSET_COMMIT, ApiKey.OFFSET_FETCH, ApiKey.DESCRIBE_GROUPS, ApiKey.DELETE_GROUPS}
)

PartitionOffset = tuple[int, int, str, ErrorCode]  # offset, leader epoch, metadata, error

__all__ = ["GroupCoordinator", "GroupCoordinatorConfig", "JoinResult", "SyncResult"]


class GroupCoordinator:
    """Serves the groups whose __consumer_offsets partition this broker leads."""

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
        self.rebalancer = Rebalancer(self.manager, config, self._spawn)
        self.membership = GroupMembership(
            self.manager, config, self.rebalancer, self._group_error, self._spawn
        )
        # The members' own requests: JoinGroup, SyncGroup, Heartbeat, LeaveGroup.
        self.join_group = self.membership.join_group
        self.sync_group = self.membership.sync_group
        self.heartbeat = self.membership.heartbeat
        self.leave_group = self.membership.leave_group

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
        self.manager.shutdown(self.rebalancer.on_group_unloaded)
        for task in list(self._tasks):
            task.cancel()
        await asyncio.gather(*self._tasks, return_exceptions=True)

    def on_elected(self, partition: int, epoch: int) -> None:
        """This broker now leads __consumer_offsets-`partition`: load its groups."""
        self.manager.schedule_load(partition, epoch, self.rebalancer.on_group_loaded)

    def on_resigned(self, partition: int) -> None:
        """This broker no longer leads __consumer_offsets-`partition`."""
        self.manager.unload_partition(partition, self.rebalancer.on_group_unloaded)

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
            self.rebalancer.schedule_heartbeat(group, group.get(member_id))
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
            return member_error(group, member_id, instance_id, generation_id)
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
