"""Controller events about brokers: arrival, departure and bounce (/brokers/ids), ISR changes
announced by partition leaders (/isr_change_notification) and failed log dirs
(/log_dir_event_notification and KAFKA_STORAGE_ERROR answers)."""

from __future__ import annotations

import logging

from .control import TopicPartition
from .controller_requests import _Batch

log = logging.getLogger(__name__)

# A broker refused its broker epoch but ZooKeeper still shows that registration: look again
# this often, this many times (the watch on /brokers/ids reports the change too).
STALE_EPOCH_RECHECK_S = 1.0
STALE_EPOCH_RECHECKS = 30


class BrokerEventsMixin:
    """Broker membership and replica health: part of `Controller` (controller.py), which holds
    the state (`ctx`, `epoch`, `zk`) and the event queue these handlers run on."""

    # -- brokers

    async def _on_broker_change(self) -> None:
        ctx = self.ctx
        await self._io(self.zk.get_broker_ids, self._watch_brokers)
        current = await self._io(self.zk.get_all_brokers)
        dead = set(ctx.live) - set(current)
        new = set(current) - set(ctx.live)
        bounced = {b for b in set(current) & set(ctx.live) if current[b].epoch > ctx.live[b].epoch}
        if not (dead or new or bounced):
            return
        log.info("Brokers: new %s, dead %s, bounced %s", sorted(new), sorted(dead), sorted(bounced))
        for b in dead | bounced:
            ctx.live.pop(b, None)
            ctx.shutting_down.discard(b)
            ctx.offline_replicas.pop(b, None)  # a restarted broker reports its dirs afresh
            await self._close_channel(b)
        if dead or bounced:
            await self._on_brokers_failure(dead | bounced)
        for b in new | bounced:
            ctx.live[b] = current[b]
            await self._open_channel(current[b])
        await self._on_brokers_startup(new | bounced)

    async def _on_stale_broker_epoch(self, broker: int, epoch: int, attempt: int) -> None:
        """`broker` refused a request addressed to its registration of epoch `epoch`: a newer
        process of that id has registered. Kafka counts on the broker change event for that;
        should this controller have missed it, the broker would never hear from it again and
        the partitions it hosts would stay without their leader or follower. So look at the
        registration now: a newer (or no) znode goes through the broker change handling, which
        treats the broker as bounced and sends everything again with its new epoch."""
        known = self.ctx.live.get(broker)
        if known is None or known.epoch != epoch:
            return  # already handled: the requests since carry the epoch now known
        current = await self._io(self.zk.get_broker, broker)
        if current is None or current.epoch != known.epoch:
            log.info(
                "Broker %d refused broker epoch %d: its registration changed; handling it",
                broker,
                epoch,
            )
            await self._on_broker_change()
            return
        # The refusing process registered after what this controller can read yet: look again.
        if attempt < STALE_EPOCH_RECHECKS:
            assert self._loop is not None
            self._loop.call_later(
                STALE_EPOCH_RECHECK_S,
                self._enqueue,
                "stale_broker_epoch",
                broker,
                epoch,
                attempt + 1,
            )

    async def _on_brokers_failure(self, dead: set[int]) -> None:
        ctx = self.ctx
        batch = _Batch(self)
        for tp in ctx.all_partitions():
            state = ctx.states.get(tp)
            if state is None or tp[0] in ctx.to_delete:
                continue
            if state.leader in dead:
                await self._offline_election(batch, tp)
            elif dead & set(state.isr):
                await self._shrink_isr(batch, tp)
        batch.add_update_metadata(ctx.live)
        batch.send()

    async def _on_brokers_startup(self, new: set[int]) -> None:
        if not new:
            return
        ctx = self.ctx
        existing = _Batch(self)
        existing.add_update_metadata(set(ctx.live) - new)
        existing.send()
        batch = _Batch(self)
        batch.add_update_metadata(new, [tp for tp in ctx.all_partitions() if tp in ctx.states])
        for tp in ctx.all_partitions():
            if tp in ctx.states and tp[0] not in ctx.to_delete and new & set(ctx.replicas(tp)):
                batch.add_leader_and_isr(new & set(ctx.replicas(tp)), tp)
        await self._elect_leaders(batch, self._needing_leader())
        batch.send()
        await self._resume_deletions()

    # -- ISR changes made by partition leaders (reference §2.4, §3.4)

    async def _on_isr_change(self) -> None:
        """Re-read the announced partitions' states and tell every live broker; the
        notifications are deleted even when handling them fails, as Kafka does."""
        ctx = self.ctx
        names = await self._io(self.zk.get_isr_change_notifications, self._watch_isr_changes)
        if not names:
            return
        try:
            listed = await self._io(self.zk.get_isr_change_partitions, names)
            changed = []
            for tp in sorted(set(listed)):
                if tp[1] not in ctx.assignments.get(tp[0], {}):
                    continue
                fresh = await self._io(self.zk.get_partition_state, tp[0], tp[1])
                if fresh is not None:
                    ctx.states[tp] = fresh
                    changed.append(tp)
            if changed:
                log.debug("ISR changes announced for %s", changed)
                batch = _Batch(self)
                batch.add_update_metadata(ctx.live, changed)
                batch.send()
            for tp in changed:
                if ctx.assignments[tp[0]][tp[1]].being_reassigned:
                    await self._maybe_complete_reassignment(tp)
        finally:
            await self._io(self.zk.delete_isr_change_notifications, names, self.epoch_zk_version)

    # -- log dir failures (Kafka's LogDirEventNotification handling)

    async def _on_log_dir_event(self) -> None:
        """A broker announced a failed log dir: send it LeaderAndIsr for all its replicas;
        it answers KAFKA_STORAGE_ERROR for those it lost (handled by `_on_replicas_offline`)."""
        ctx = self.ctx
        names = await self._io(self.zk.get_log_dir_event_notifications, self._watch_log_dir_events)
        if not names:
            return
        try:
            brokers = set(await self._io(self.zk.get_log_dir_event_brokers, names)) & set(ctx.live)
            log.info("Log dir failures reported by brokers %s", sorted(brokers))
            batch = _Batch(self)
            for tp in ctx.all_partitions():
                on = brokers & set(ctx.replicas(tp))
                if on and tp in ctx.states and tp[0] not in ctx.to_delete:
                    batch.add_leader_and_isr(on, tp)
            batch.send()
        finally:
            await self._io(self.zk.delete_log_dir_event_notifications, names, self.epoch_zk_version)

    async def _on_replicas_offline(self, broker: int, partitions: list[TopicPartition]) -> None:
        """`broker` lost these replicas with a log dir: leaders move elsewhere, ISRs shrink."""
        ctx = self.ctx
        if broker not in ctx.live:
            return
        known = ctx.offline_replicas.setdefault(broker, set())
        new = sorted(set(partitions) - known)
        if not new:
            return
        known.update(new)
        log.warning("Replicas on broker %d are offline: %s", broker, new)
        batch = _Batch(self)
        for tp in new:
            st = ctx.states.get(tp)
            if st is None or tp[0] in ctx.to_delete:
                continue
            if st.leader == broker:
                await self._offline_election(batch, tp)
            elif broker in st.isr:
                await self._shrink_isr(batch, tp)
        batch.add_update_metadata(ctx.live, new)
        batch.send()
