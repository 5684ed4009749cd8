"""Partition reassignment as in KIP-455: AlterPartitionReassignments and the legacy
/admin/reassign_partitions znode (RS = TRS + ORS, with adding/removing in the topic znode
until every target replica is in the ISR)."""

from __future__ import annotations

import logging
from collections.abc import Callable

from ..protocol.errors import ErrorCode
from . import zk_data as zk
from .control import TopicPartition
from .controller_context import _Decision, raise_not_controller
from .controller_requests import _Batch
from .metadata_store import WatchedEvent

log = logging.getLogger(__name__)


class ReassignmentMixin:
    """Replica moves: part of `Controller` (controller.py), which holds
    the state (`ctx`, `epoch`, `zk`) and the event queue these handlers run on."""

    # -- partition reassignment (KIP-455; reference §1, §2)

    async def alter_reassignments(
        self, targets: dict[TopicPartition, tuple[int, ...] | None]
    ) -> dict[TopicPartition, tuple[ErrorCode, str | None]]:
        """AlterPartitionReassignments: start (or, with None, cancel) moves."""
        return await self.call(lambda: self._alter_reassignments(targets))

    async def list_reassignments(
        self, partitions: list[TopicPartition] | None
    ) -> dict[TopicPartition, zk.ReplicaAssignment]:
        return await self.call(lambda: self._list_reassignments(partitions))

    async def _list_reassignments(
        self, partitions: list[TopicPartition] | None
    ) -> dict[TopicPartition, zk.ReplicaAssignment]:
        if not self.active:
            raise_not_controller()
        ctx = self.ctx
        wanted = ctx.all_partitions() if partitions is None else partitions
        out = {}
        for tp in wanted:
            a = ctx.assignments.get(tp[0], {}).get(tp[1])
            if a is not None and a.being_reassigned:
                out[tp] = a
        return out

    async def _alter_reassignments(
        self, targets: dict[TopicPartition, tuple[int, ...] | None]
    ) -> dict[TopicPartition, tuple[ErrorCode, str | None]]:
        if not self.active:
            raise_not_controller()
        out = {}
        for tp, target in sorted(targets.items()):
            out[tp] = await self._start_reassignment(tp, target)
        return out

    def _validate_target(self, target: tuple[int, ...]) -> str | None:
        if not target:
            return "The replica list is empty."
        if len(set(target)) != len(target):
            return "The replica list has duplicates."
        if any(r < 0 for r in target):
            return "Replica ids must not be negative."
        unknown = [r for r in target if r not in self.ctx.live]
        if unknown:
            return f"Unknown or offline brokers: {unknown}."
        return None

    async def _start_reassignment(
        self, tp: TopicPartition, target: tuple[int, ...] | None
    ) -> tuple[ErrorCode, str | None]:
        """Phase A of KIP-455: RS = TRS + ORS, with adding = TRS - ORS and removing = ORS - TRS
        written to the topic znode, and LeaderAndIsr (with a bumped leader epoch) to all of RS.
        A previous move of the same partition is replaced; its adding replicas that the new
        target does not keep are stopped and deleted."""
        ctx = self.ctx
        current = ctx.assignments.get(tp[0], {}).get(tp[1])
        if current is None or tp[0] in ctx.to_delete or tp not in ctx.states:
            return ErrorCode.UNKNOWN_TOPIC_OR_PARTITION, None
        original = tuple(r for r in current.replicas if r not in current.adding)
        if target is None:
            if not current.being_reassigned:
                return ErrorCode.NO_REASSIGNMENT_IN_PROGRESS, None
            target = original
        else:
            problem = self._validate_target(target)
            if problem is not None:
                return ErrorCode.INVALID_REPLICA_ASSIGNMENT, problem
        if not current.being_reassigned and target == current.replicas:
            return ErrorCode.NONE, None
        replicas = tuple(dict.fromkeys(target + original))
        new = zk.ReplicaAssignment(
            replicas,
            tuple(r for r in target if r not in original),
            tuple(r for r in original if r not in target),
        )
        dropped = [r for r in current.replicas if r not in replicas]
        log.info("Reassigning %s-%d: %s -> %s (now %s)", tp[0], tp[1], original, target, new)
        await self._write_assignment(tp, new)
        batch = _Batch(self)
        for r in dropped:
            batch.add_stop_replica(r, tp, True, ctx.states[tp].leader_epoch)
        await self._bump_epoch(batch, tp, lambda st: (st.leader, st.isr))
        batch.send()
        await self._maybe_complete_reassignment(tp)
        return ErrorCode.NONE, None

    async def _write_assignment(self, tp: TopicPartition, new: zk.ReplicaAssignment) -> None:
        ctx = self.ctx
        parts = dict(ctx.assignments[tp[0]])
        parts[tp[1]] = new
        found = await self._io(self.zk.get_topic_assignment, tp[0])
        version = found[1] if found is not None else -1
        await self._io(
            self.zk.set_topic_assignment,
            tp[0],
            ctx.topic_ids.get(tp[0]),
            parts,
            version,
            self.epoch_zk_version,
        )
        ctx.assignments[tp[0]] = parts

    async def _bump_epoch(
        self,
        batch: _Batch,
        tp: TopicPartition,
        pick: Callable[[zk.PartitionState], tuple[int, tuple[int, ...]] | None],
    ) -> None:
        async def decide(st: zk.PartitionState) -> _Decision | None:
            chosen = pick(st)
            if chosen is None:
                return None
            return chosen[0], chosen[1], st.leader_recovery_state

        await self._change_state(batch, tp, decide)

    async def _maybe_complete_reassignment(self, tp: TopicPartition) -> None:
        """Phase B, once every target replica is in the ISR: the leader comes from TRS, the
        ISR shrinks to TRS, ORS - TRS get StopReplica(delete) and the znode holds just TRS."""
        ctx = self.ctx
        current = ctx.assignments[tp[0]][tp[1]]
        state = ctx.states.get(tp)
        if state is None:
            return
        if not current.being_reassigned:
            await self._finish_legacy_entry(tp)
            return
        target = tuple(r for r in current.replicas if r not in current.removing)
        if not all(r in state.isr for r in target):
            # New replicas that never got their LeaderAndIsr (e.g. after a failover) get it now.
            resend = _Batch(self)
            resend.add_leader_and_isr(current.adding, tp)
            resend.send()
            return
        batch = _Batch(self)
        ctx.assignments[tp[0]][tp[1]] = zk.ReplicaAssignment(target)

        def pick(st: zk.PartitionState) -> tuple[int, tuple[int, ...]] | None:
            isr = tuple(r for r in st.isr if r in target)
            if st.leader in target and st.leader in ctx.live:
                return st.leader, isr
            live = [r for r in target if r in isr and r in ctx.live and r not in ctx.shutting_down]
            return (live[0], isr) if live else None

        if pick(state) is None:
            ctx.assignments[tp[0]][tp[1]] = current
            return  # no live target replica can lead yet: wait for the next change
        await self._bump_epoch(batch, tp, pick)
        for r in current.removing:
            batch.add_stop_replica(r, tp, True, ctx.states[tp].leader_epoch)
        await self._write_assignment(tp, zk.ReplicaAssignment(target))
        batch.add_update_metadata(ctx.live, [tp])
        batch.send()
        log.info("Reassignment of %s-%d completed: %s", tp[0], tp[1], target)
        await self._finish_legacy_entry(tp)

    async def _on_legacy_reassignment(self) -> None:
        """/admin/reassign_partitions (the pre-KIP-455 tools): start every listed move; each
        entry is removed when its move completes, the znode when it is empty."""
        entries = await self._io(self._read_legacy, self._watch_reassign)
        for tp, target in sorted(entries.items()):
            current = self.ctx.assignments.get(tp[0], {}).get(tp[1])
            if current is not None and current.being_reassigned:
                pending = tuple(r for r in current.replicas if r not in current.removing)
                if pending == target:
                    continue
            error, problem = await self._start_reassignment(tp, target)
            current = self.ctx.assignments.get(tp[0], {}).get(tp[1])
            if error == ErrorCode.NONE and current is not None and not current.being_reassigned:
                await self._finish_legacy_entry(tp)  # nothing to move (or already done)
            elif error != ErrorCode.NONE:
                log.warning(
                    "Reassignment of %s-%d refused: %s %s", tp[0], tp[1], error.name, problem
                )
                await self._finish_legacy_entry(tp)

    def _read_legacy(
        self, watch: Callable[[WatchedEvent], None] | None = None
    ) -> dict[TopicPartition, tuple[int, ...]]:
        if self.zk.store.exists(zk.REASSIGN_PARTITIONS, watch=watch) is None:
            return {}
        found = self.zk.get_data(zk.REASSIGN_PARTITIONS)
        return zk.decode_reassignment(found[0]) if found is not None else {}

    async def _finish_legacy_entry(self, tp: TopicPartition) -> None:
        entries = await self._io(self._read_legacy)
        if tp not in entries:
            return
        del entries[tp]
        if entries:
            await self._io(
                self.zk.store.set, zk.REASSIGN_PARTITIONS, zk.encode_reassignment(entries)
            )
        else:
            await self._io(self.zk.delete_recursive, zk.REASSIGN_PARTITIONS, self.epoch_zk_version)
