"""The controller's partition state machine: leader elections (new, offline, controlled shutdown,
preferred and unclean on request, auto rebalance) and ISR shrinking, each written to the
partition's state znode conditionally on its partition epoch."""

from __future__ import annotations

import logging
from collections.abc import Awaitable, Callable

from ..protocol.errors import ErrorCode
from . import zk_data as zk
from .control import TopicPartition
from .controller_context import _Decision, raise_not_controller
from .controller_requests import _Batch
from .metadata_store import BadVersionError

log = logging.getLogger(__name__)


class LeadershipMixin:
    """Leader and ISR decisions: part of `Controller` (controller.py), which holds
    the state (`ctx`, `epoch`, `zk`) and the event queue these handlers run on."""

    # -- leadership

    def _needing_leader(self) -> list[TopicPartition]:
        ctx = self.ctx
        return [
            tp
            for tp in ctx.all_partitions()
            if tp[0] not in ctx.to_delete
            and ((st := ctx.states.get(tp)) is None or not ctx.replica_online(st.leader, tp))
        ]

    def _unclean_allowed(self, topic: str) -> bool:
        overrides = self.zk.get_entity_config(zk.TOPICS, topic)
        return bool(self.config.topic_config(overrides)["unclean.leader.election.enable"])

    async def _elect_leaders(self, batch: _Batch, partitions: list[TopicPartition]) -> None:
        """New partitions get their first state; offline ones an offline election."""
        ctx = self.ctx
        new: dict[str, dict[int, zk.PartitionState]] = {}
        for tp in partitions:
            live = [r for r in ctx.replicas(tp) if ctx.replica_online(r, tp)]
            if tp not in ctx.states:
                if live:
                    new.setdefault(tp[0], {})[tp[1]] = zk.PartitionState(
                        leader=live[0], leader_epoch=0, isr=tuple(live), controller_epoch=self.epoch
                    )
                continue
            await self._offline_election(batch, tp)
        for topic, states in new.items():
            created = await self._io(
                self.zk.create_partition_states, topic, states, self.epoch_zk_version
            )
            for p, state in sorted(created.items()):
                ctx.states[(topic, p)] = state
                fresh = state.leader_epoch == 0 and state.partition_epoch == 0
                batch.add_leader_and_isr(ctx.replicas((topic, p)), (topic, p), is_new=fresh)

    async def _offline_election(self, batch: _Batch, tp: TopicPartition) -> None:
        """Leader = first live ISR member in assignment order; else, when allowed, the first
        live replica (unclean, RECOVERING); else no leader."""

        async def decide(state: zk.PartitionState) -> _Decision | None:
            ctx = self.ctx
            replicas = ctx.replicas(tp)
            live_isr = [
                r
                for r in replicas
                if ctx.replica_online(r, tp) and r in state.isr and r not in ctx.shutting_down
            ]
            if live_isr:
                isr = tuple(r for r in state.isr if ctx.replica_online(r, tp))
                return live_isr[0], isr, zk.RECOVERED
            live = [r for r in replicas if ctx.replica_online(r, tp)]
            if live and await self._io(self._unclean_allowed, tp[0]):
                log.warning("Unclean leader election for %s-%d: broker %d", tp[0], tp[1], live[0])
                return live[0], (live[0],), zk.RECOVERING
            isr = self._shrunk_isr(state.isr, tp)
            if state.leader == zk.NO_LEADER and isr == state.isr:
                return None
            return zk.NO_LEADER, isr, state.leader_recovery_state

        await self._change_state(batch, tp, decide)

    async def _shrink_isr(self, batch: _Batch, tp: TopicPartition) -> None:
        """Remove dead brokers from the ISR of a partition whose leader lives."""

        async def decide(state: zk.PartitionState) -> _Decision | None:
            if not self.ctx.replica_online(state.leader, tp):
                return None
            isr = self._shrunk_isr(state.isr, tp)
            return None if isr == state.isr else (state.leader, isr, state.leader_recovery_state)

        await self._change_state(batch, tp, decide)

    def _shrunk_isr(self, isr: tuple[int, ...], tp: TopicPartition) -> tuple[int, ...]:
        """ISR without dead brokers; the last member is never removed (it may be the only
        replica with every acknowledged record, so it must be the next clean leader)."""
        alive = tuple(r for r in isr if self.ctx.replica_online(r, tp))
        return alive or isr[-1:]

    async def _change_state(
        self,
        batch: _Batch,
        tp: TopicPartition,
        decide: Callable[[zk.PartitionState], Awaitable[_Decision | None]],
    ) -> None:
        """Write the decided leader/ISR with the next leader epoch (conditional on the
        partition epoch), then tell the replicas. On a concurrent write, re-read and decide
        again."""
        for _ in range(3):
            old = self.ctx.states[tp]
            decision = await decide(old)
            if decision is None:
                return
            leader, isr, recovery = decision
            new = zk.PartitionState(
                leader=leader,
                leader_epoch=old.leader_epoch + 1,
                isr=isr,
                controller_epoch=self.epoch,
                leader_recovery_state=recovery,
                partition_epoch=old.partition_epoch,
            )
            try:
                self.ctx.states[tp] = await self._io(
                    self.zk.update_partition_state, tp[0], tp[1], new, self.epoch_zk_version
                )
            except BadVersionError:
                fresh = await self._io(self.zk.get_partition_state, tp[0], tp[1])
                if fresh is None:
                    return
                self.ctx.states[tp] = fresh
                continue
            batch.add_leader_and_isr(self.ctx.replicas(tp), tp)
            return
        log.warning("Giving up updating the state of %s-%d: concurrent writes", tp[0], tp[1])

    # -- controlled shutdown (the ControlledShutdown RPC; reference §2.4)

    async def controlled_shutdown(
        self, broker_id: int, broker_epoch: int
    ) -> tuple[ErrorCode, list[TopicPartition]]:
        """Move leadership off `broker_id` and drop it from ISRs; return the error and the
        partitions it still leads (with replication factor > 1). Runs on the event queue."""
        return await self.call(lambda: self._controlled_shutdown(broker_id, broker_epoch))

    async def _controlled_shutdown(
        self, broker_id: int, broker_epoch: int
    ) -> tuple[ErrorCode, list[TopicPartition]]:
        ctx = self.ctx
        if not self.active:
            return ErrorCode.NOT_CONTROLLER, []
        reg = ctx.live.get(broker_id)
        if reg is None:
            return ErrorCode.BROKER_NOT_AVAILABLE, []
        if broker_epoch != -1 and broker_epoch < reg.epoch:
            return ErrorCode.STALE_BROKER_EPOCH, []
        ctx.shutting_down.add(broker_id)
        log.info("Controlled shutdown of broker %d", broker_id)
        batch = _Batch(self)
        for tp in ctx.all_partitions():
            state = ctx.states.get(tp)
            replicas = ctx.replicas(tp)
            if state is None or tp[0] in ctx.to_delete or broker_id not in replicas:
                continue
            if state.leader == broker_id:
                if len(replicas) > 1:
                    await self._shutdown_election(batch, tp)
            else:
                # Follower: stop fetching, leave the ISR (the last member stays, as always).
                batch.add_stop_replica(broker_id, tp, False, state.leader_epoch)
                await self._leave_isr(batch, tp, broker_id)
        batch.send()
        remaining = [
            tp
            for tp in ctx.all_partitions()
            if (st := ctx.states.get(tp)) is not None
            and st.leader == broker_id
            and len(ctx.replicas(tp)) > 1
        ]
        return ErrorCode.NONE, remaining

    async def _shutdown_election(self, batch: _Batch, tp: TopicPartition) -> None:
        """Leader = first assigned replica alive, in the ISR and not shutting down; the ISR
        loses the shutting-down brokers. No such replica: leave the partition as it is."""

        async def decide(state: zk.PartitionState) -> _Decision | None:
            ctx = self.ctx
            down = ctx.shutting_down
            candidates = [
                r for r in ctx.replicas(tp) if r in ctx.live and r in state.isr and r not in down
            ]
            if not candidates:
                return None
            isr = tuple(r for r in state.isr if r not in down)
            return candidates[0], isr, state.leader_recovery_state

        await self._change_state(batch, tp, decide)

    async def _leave_isr(self, batch: _Batch, tp: TopicPartition, broker_id: int) -> None:
        async def decide(state: zk.PartitionState) -> _Decision | None:
            if broker_id not in state.isr or len(state.isr) == 1:
                return None
            isr = tuple(r for r in state.isr if r != broker_id)
            return state.leader, isr, state.leader_recovery_state

        await self._change_state(batch, tp, decide)

    # -- leader election on request (ElectLeaders) and auto rebalance (reference §2)

    async def elect_leaders(
        self, election_type: int, partitions: list[TopicPartition] | None
    ) -> dict[TopicPartition, ErrorCode]:
        """ElectLeaders: PREFERRED (0) or UNCLEAN (1) election; None means every partition."""
        return await self.call(lambda: self._elect_on_request(election_type, partitions))

    async def _elect_on_request(
        self, election_type: int, partitions: list[TopicPartition] | None
    ) -> dict[TopicPartition, ErrorCode]:
        ctx = self.ctx
        if not self.active:
            raise_not_controller()
        wanted = ctx.all_partitions() if partitions is None else partitions
        results: dict[TopicPartition, ErrorCode] = {}
        batch = _Batch(self)
        for tp in wanted:
            state = ctx.states.get(tp)
            if state is None or tp[0] in ctx.to_delete:
                results[tp] = ErrorCode.UNKNOWN_TOPIC_OR_PARTITION
            elif election_type == 0:
                results[tp] = await self._preferred_election(batch, tp)
            else:
                results[tp] = await self._unclean_election(batch, tp)
        batch.send()
        return results

    async def _preferred_election(self, batch: _Batch, tp: TopicPartition) -> ErrorCode:
        """Kafka's PreferredReplicaPartitionLeaderElectionStrategy: the first assigned replica,
        if alive and in the ISR."""
        ctx = self.ctx
        replicas = ctx.replicas(tp)
        state = ctx.states[tp]
        preferred = replicas[0] if replicas else zk.NO_LEADER
        if state.leader == preferred:
            return ErrorCode.ELECTION_NOT_NEEDED
        if (
            preferred not in ctx.live
            or preferred not in state.isr
            or preferred in ctx.shutting_down
        ):
            return ErrorCode.PREFERRED_LEADER_NOT_AVAILABLE

        async def decide(st: zk.PartitionState) -> _Decision | None:
            if st.leader == preferred or preferred not in st.isr:
                return None
            return preferred, st.isr, st.leader_recovery_state

        await self._change_state(batch, tp, decide)
        won = ctx.states[tp].leader == preferred
        return ErrorCode.NONE if won else ErrorCode.PREFERRED_LEADER_NOT_AVAILABLE

    async def _unclean_election(self, batch: _Batch, tp: TopicPartition) -> ErrorCode:
        """UNCLEAN: only for a partition without a live leader; an ISR member is still
        preferred, else the first live replica (recovering)."""
        ctx = self.ctx
        state = ctx.states[tp]
        if state.leader in ctx.live:
            return ErrorCode.ELECTION_NOT_NEEDED

        async def decide(st: zk.PartitionState) -> _Decision | None:
            live = [r for r in ctx.replicas(tp) if r in ctx.live and r not in ctx.shutting_down]
            in_isr = [r for r in live if r in st.isr]
            if in_isr:
                return in_isr[0], tuple(r for r in st.isr if r in ctx.live), zk.RECOVERED
            if live:
                log.warning("Unclean leader election for %s-%d: broker %d", tp[0], tp[1], live[0])
                return live[0], (live[0],), zk.RECOVERING
            return None

        await self._change_state(batch, tp, decide)
        if ctx.states[tp].leader in ctx.live:
            return ErrorCode.NONE
        return ErrorCode.ELIGIBLE_LEADERS_NOT_AVAILABLE

    def _schedule_rebalance(self) -> None:
        if not self.active or not self.config.get("auto.leader.rebalance.enable"):
            return
        assert self._loop is not None
        delay = float(self.config.get("leader.imbalance.check.interval.seconds"))
        if self._rebalance_timer is not None:
            self._rebalance_timer.cancel()
        self._rebalance_timer = self._loop.call_later(delay, self._enqueue, "auto_rebalance")

    async def _on_auto_rebalance(self) -> None:
        """Kafka's checkAndTriggerAutoLeaderRebalance: per preferred broker, when the share of
        its partitions led by someone else exceeds leader.imbalance.per.broker.percentage, move
        those (not being reassigned or deleted) back to it."""
        ctx = self.ctx
        try:
            limit = self.config.get("leader.imbalance.per.broker.percentage") / 100.0
            by_preferred: dict[int, list[TopicPartition]] = {}
            for tp in ctx.all_partitions():
                replicas = ctx.replicas(tp)
                if replicas and tp in ctx.states and tp[0] not in ctx.to_delete:
                    by_preferred.setdefault(replicas[0], []).append(tp)
            batch = _Batch(self)
            for broker, tps in sorted(by_preferred.items()):
                if broker not in ctx.live or broker in ctx.shutting_down:
                    continue
                off = [tp for tp in tps if ctx.states[tp].leader != broker]
                if not off or len(off) / len(tps) <= limit:
                    continue
                log.info("Leader imbalance on broker %d: %d/%d", broker, len(off), len(tps))
                for tp in off:
                    if not ctx.assignments[tp[0]][tp[1]].being_reassigned:
                        await self._preferred_election(batch, tp)
            batch.send()
        finally:
            self._schedule_rebalance()
