"""How the controller talks to brokers: one ordered, retrying channel per broker and the
batch of LeaderAndIsr, UpdateMetadata and StopReplica requests built while handling one event."""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Callable, Iterable
from typing import TYPE_CHECKING

from . import zk_data as zk
from .control import (
    BrokerControl,
    LeaderAndIsrPartition,
    LeaderAndIsrRequest,
    StopReplicaPartition,
    StopReplicaRequest,
    TopicPartition,
    UpdateMetadataPartition,
    UpdateMetadataRequest,
)

if TYPE_CHECKING:
    from .controller import Controller

log = logging.getLogger(__name__)


class _BrokerChannel:
    """Ordered delivery of control requests to one broker, retried while it is unreachable."""

    def __init__(
        self,
        broker_id: int,
        control: BrokerControl,
        on_reply: Callable[[int, object, object], None],
    ) -> None:
        self.broker_id = broker_id
        self.control = control
        self.on_reply = on_reply
        self.queue: asyncio.Queue[object] = asyncio.Queue()
        self.task = asyncio.create_task(self._run(), name=f"controller-channel-{broker_id}")

    def send(self, request: object) -> None:
        self.queue.put_nowait(request)

    async def _run(self) -> None:
        while True:
            request = await self.queue.get()
            try:
                reply = await self._deliver(request)
                self.on_reply(self.broker_id, request, reply)
            finally:
                self.queue.task_done()

    async def _deliver(self, request: object) -> object:
        backoff = 0.1
        while True:
            try:
                if isinstance(request, LeaderAndIsrRequest):
                    return await self.control.leader_and_isr(request)
                if isinstance(request, StopReplicaRequest):
                    return await self.control.stop_replica(request)
                if isinstance(request, UpdateMetadataRequest):
                    return await self.control.update_metadata(request)
                raise TypeError(f"unknown control request {request!r}")
            except asyncio.CancelledError:
                raise
            except Exception:
                log.warning(
                    "Control request to broker %d failed; retrying", self.broker_id, exc_info=True
                )
                await asyncio.sleep(backoff)
                backoff = min(backoff * 2, 5.0)

    async def close(self) -> None:
        # Cancel until the task has ended: should some await on its way swallow one
        # cancellation, a single cancel() would leave it retrying for ever and the controller's
        # event queue, which waits here, stuck behind it.
        while not self.task.done():
            self.task.cancel()
            await asyncio.wait([self.task], timeout=1.0)
        if not self.task.cancelled() and self.task.exception() is not None:
            log.error("Channel to broker %d failed", self.broker_id, exc_info=self.task.exception())
        close = getattr(self.control, "close", None)  # a remote channel's connection
        if close is not None:
            await close()


class _Batch:
    """Requests accumulated while handling one event (Kafka's ControllerBrokerRequestBatch)."""

    def __init__(self, ctl: Controller) -> None:
        self.ctl = ctl
        self.leader_and_isr: dict[int, dict[TopicPartition, LeaderAndIsrPartition]] = {}
        self.stop_replica: dict[int, dict[TopicPartition, StopReplicaPartition]] = {}
        self.metadata_brokers: set[int] = set()
        self.metadata_partitions: set[TopicPartition] = set()

    def add_leader_and_isr(
        self, brokers: Iterable[int], tp: TopicPartition, is_new: bool = False
    ) -> None:
        ctx = self.ctl.ctx
        state = ctx.states[tp]
        assignment = ctx.assignments[tp[0]][tp[1]]
        item = LeaderAndIsrPartition(
            topic=tp[0],
            topic_id=ctx.topic_ids.get(tp[0]),
            partition=tp[1],
            controller_epoch=state.controller_epoch,
            leader=state.leader,
            leader_epoch=state.leader_epoch,
            isr=state.isr,
            partition_epoch=state.partition_epoch,
            replicas=assignment.replicas,
            adding_replicas=assignment.adding,
            removing_replicas=assignment.removing,
            is_new=is_new,
            leader_recovery_state=state.leader_recovery_state,
        )
        for b in brokers:
            if b in ctx.live:
                self.leader_and_isr.setdefault(b, {})[tp] = item
        self.add_update_metadata(ctx.live, [tp])

    def add_update_metadata(
        self, brokers: Iterable[int], partitions: Iterable[TopicPartition] = ()
    ) -> None:
        self.metadata_brokers.update(b for b in brokers if b in self.ctl.ctx.live)
        self.metadata_partitions.update(partitions)

    def add_stop_replica(
        self, broker: int, tp: TopicPartition, delete: bool, leader_epoch: int
    ) -> None:
        if broker in self.ctl.ctx.live:
            self.stop_replica.setdefault(broker, {})[tp] = StopReplicaPartition(
                tp[0], tp[1], leader_epoch, delete
            )

    def _metadata_partition(self, tp: TopicPartition) -> UpdateMetadataPartition | None:
        ctx = self.ctl.ctx
        replicas = ctx.replicas(tp)
        topic_id = ctx.topic_ids.get(tp[0])
        if tp[0] in ctx.deleting:
            return UpdateMetadataPartition(
                tp[0], topic_id, tp[1], self.ctl.epoch, zk.LEADER_DURING_DELETE, -1, (), 0, replicas
            )
        state = ctx.states.get(tp)
        if state is None:
            return None
        return UpdateMetadataPartition(
            topic=tp[0],
            topic_id=topic_id,
            partition=tp[1],
            controller_epoch=state.controller_epoch,
            leader=state.leader,
            leader_epoch=state.leader_epoch,
            isr=state.isr,
            zk_version=state.partition_epoch,
            replicas=replicas,
            offline_replicas=tuple(r for r in replicas if not ctx.replica_online(r, tp)),
        )

    def send(self) -> None:
        ctl, ctx = self.ctl, self.ctl.ctx
        for broker, parts in sorted(self.leader_and_isr.items()):
            leaders = {p.leader for p in parts.values()}
            ctl.send(
                broker,
                LeaderAndIsrRequest(
                    controller_id=ctl.broker_id,
                    controller_epoch=ctl.epoch,
                    broker_epoch=ctx.live[broker].epoch,
                    partitions=tuple(parts[tp] for tp in sorted(parts)),
                    live_leaders=tuple(ctx.live[b] for b in sorted(leaders) if b in ctx.live),
                ),
            )
        if self.metadata_brokers:
            parts = tuple(
                p
                for tp in sorted(self.metadata_partitions)
                if (p := self._metadata_partition(tp)) is not None
            )
            live = tuple(ctx.live[b] for b in sorted(ctx.live))
            for broker in sorted(self.metadata_brokers):
                ctl.send(
                    broker,
                    UpdateMetadataRequest(
                        controller_id=ctl.broker_id,
                        controller_epoch=ctl.epoch,
                        broker_epoch=ctx.live[broker].epoch,
                        partitions=parts,
                        live_brokers=live,
                    ),
                )
        for broker, stops in sorted(self.stop_replica.items()):
            ctl.send(
                broker,
                StopReplicaRequest(
                    controller_id=ctl.broker_id,
                    controller_epoch=ctl.epoch,
                    broker_epoch=ctx.live[broker].epoch,
                    partitions=tuple(stops[tp] for tp in sorted(stops)),
                ),
            )
