"""The controller: one elected broker turns znode changes into partition leadership.

Every broker runs a `Controller`; the one that wins /controller (ephemeral, with /controller_epoch
bumped in the same transaction) is active. As in Kafka, all work happens on one event queue:
metadata-store watches (which fire on the store's thread) only enqueue events, and one asyncio
task handles them in order. Every controller write is fenced by the /controller_epoch version.

Handled here: election and failover, broker arrival/departure (/brokers/ids), topic creation and
partition addition (/brokers/topics and each topic's node), topic deletion (/admin/delete_topics),
and ISR changes that partition leaders wrote to the state znodes themselves and announced under
/isr_change_notification, preferred-leader election (ElectLeaders and the
auto.leader.rebalance.enable timer) and partition reassignment as in KIP-455
(AlterPartitionReassignments and the legacy /admin/reassign_partitions znode: RS = TRS + ORS with
adding/removing in the topic znode until every target replica is in the ISR). Brokers are told
about the results through `BrokerControl` (LeaderAndIsr, UpdateMetadata, StopReplica), batched per
event and sent in order per broker by one sender task each.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Awaitable, Callable, Iterable
from concurrent.futures import Executor, ThreadPoolExecutor
from dataclasses import dataclass, field
from typing import Any, TypeVar

from ..config import BrokerConfig
from ..protocol.errors import ErrorCode
from . import zk_data as zk
from .control import (
    EPOCH_DURING_DELETE,
    BrokerControl,
    LeaderAndIsrPartition,
    LeaderAndIsrRequest,
    PartitionErrors,
    StopReplicaPartition,
    StopReplicaRequest,
    TopicPartition,
    UpdateMetadataPartition,
    UpdateMetadataRequest,
)
from .kafka_zk import ControllerMovedError, KafkaZk
from .metadata_store import BadVersionError, WatchedEvent, run_blocking

log = logging.getLogger(__name__)

_T = TypeVar("_T")


class NotControllerError(Exception):
    """An admin operation reached a broker that is not (or no longer) the controller."""


def raise_not_controller() -> None:
    raise NotControllerError


ChannelFactory = Callable[[zk.BrokerRegistration], BrokerControl]
_Decision = tuple[int, tuple[int, ...], int]  # leader, ISR, leader recovery state


@dataclass
class _Context:
    """The active controller's in-memory picture (Kafka's ControllerContext)."""

    live: dict[int, zk.BrokerRegistration] = field(default_factory=dict)
    topic_ids: dict[str, Any] = field(default_factory=dict)
    assignments: dict[str, dict[int, zk.ReplicaAssignment]] = field(default_factory=dict)
    states: dict[TopicPartition, zk.PartitionState] = field(default_factory=dict)
    to_delete: set[str] = field(default_factory=set)
    # topic -> replicas (partition, broker) whose StopReplica(delete) has not succeeded yet
    deleting: dict[str, set[tuple[int, int]]] = field(default_factory=dict)
    # brokers in controlled shutdown: never elected leader nor kept in an ISR
    shutting_down: set[int] = field(default_factory=set)
    # replicas in a failed log dir of a live broker (Kafka's replicasOnOfflineDirs)
    offline_replicas: dict[int, set[TopicPartition]] = field(default_factory=dict)

    def replica_online(self, broker: int, tp: TopicPartition) -> bool:
        """The broker is alive and its replica of `tp` is not in a failed log dir."""
        return broker in self.live and tp not in self.offline_replicas.get(broker, ())

    def remove_topic(self, topic: str) -> None:
        for p in self.assignments.pop(topic, {}):
            self.states.pop((topic, p), None)
        self.topic_ids.pop(topic, None)
        self.to_delete.discard(topic)
        self.deleting.pop(topic, None)

    def replicas(self, tp: TopicPartition) -> tuple[int, ...]:
        a = self.assignments.get(tp[0], {}).get(tp[1])
        return a.replicas if a else ()

    def all_partitions(self) -> list[TopicPartition]:
        return sorted((t, p) for t, parts in self.assignments.items() for p in parts)


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
        self.task.cancel()
        try:
            await self.task
        except asyncio.CancelledError:
            pass
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


class Controller:
    """Runs on every broker; active only while this broker holds /controller."""

    def __init__(
        self,
        broker_id: int,
        zk_client: KafkaZk,
        config: BrokerConfig,
        channel_factory: ChannelFactory,
        *,
        executor: Executor | None = None,
        deletion_retry_seconds: float = 1.0,
    ) -> None:
        self.broker_id = broker_id
        self.zk = zk_client
        self.config = config
        self.channel_factory = channel_factory
        self._own_executor = executor is None
        self._executor = executor or ThreadPoolExecutor(1, thread_name_prefix="controller-zk")
        self.deletion_retry_seconds = deletion_retry_seconds
        self.active = False
        self.epoch = 0
        self.epoch_zk_version = -1
        self.active_controller_id: int | None = None
        self.ctx = _Context()
        self._channels: dict[int, _BrokerChannel] = {}
        self._queue: asyncio.Queue[tuple[str, tuple[Any, ...]]] = asyncio.Queue()
        self._loop: asyncio.AbstractEventLoop | None = None
        self._task: asyncio.Task[None] | None = None
        # Watch callbacks are created once so the store sees the same watcher each time.
        self._watch_controller = self._watcher("controller_change")
        self._watch_brokers = self._watcher("broker_change")
        self._watch_topics = self._watcher("topic_change")
        self._watch_deletions = self._watcher("topic_deletion")
        self._watch_isr_changes = self._watcher("isr_change")
        self._watch_log_dir_events = self._watcher("log_dir_event")
        self._watch_reassign = self._watcher("legacy_reassignment")
        self._rebalance_timer: asyncio.TimerHandle | None = None
        self._watch_topic: dict[str, Callable[[WatchedEvent], None]] = {}

    # -- lifecycle

    async def startup(self) -> None:
        """Start the event loop and try to become controller (after the broker registered)."""
        self._loop = asyncio.get_running_loop()
        self._task = asyncio.create_task(self._run(), name=f"controller-{self.broker_id}")
        self._enqueue("startup")

    async def shutdown(self) -> None:
        if self._task is not None:
            self._enqueue("stop")
            try:
                await self._task
            finally:
                self._task = None
        await self._resign()
        if self._own_executor and isinstance(self._executor, ThreadPoolExecutor):
            self._executor.shutdown(wait=True)

    async def wait_idle(self) -> None:
        """Wait until no event is queued and every control request has been delivered."""
        while True:
            await self._queue.join()
            for channel in list(self._channels.values()):
                await channel.queue.join()
            if self._queue.empty() and all(c.queue.empty() for c in self._channels.values()):
                return

    async def call(self, fn: Callable[[], Awaitable[_T]]) -> _T:
        """Run `fn` on the controller's event queue (for controller-only admin operations)."""
        assert self._loop is not None
        fut: asyncio.Future[_T] = self._loop.create_future()
        self._enqueue("call", fn, fut)
        return await fut

    # -- event plumbing

    def _watcher(self, name: str, *args: Any) -> Callable[[WatchedEvent], None]:
        def callback(_event: WatchedEvent) -> None:
            loop = self._loop
            if loop is not None and not loop.is_closed():
                try:
                    loop.call_soon_threadsafe(self._enqueue, name, *args)
                except RuntimeError:  # loop closed meanwhile
                    pass

        return callback

    def _topic_watcher(self, topic: str) -> Callable[[WatchedEvent], None]:
        cb = self._watch_topic.get(topic)
        if cb is None:
            cb = self._watch_topic[topic] = self._watcher("partition_modifications", topic)
        return cb

    def _enqueue(self, name: str, *args: Any) -> None:
        self._queue.put_nowait((name, args))

    async def _io(self, fn: Callable[..., _T], *args: Any) -> _T:
        return await run_blocking(self._executor, fn, *args)

    async def _run(self) -> None:
        while True:
            name, args = await self._queue.get()
            try:
                if name == "stop":
                    return
                if name == "call":
                    fn, fut = args
                    try:
                        result = await fn()
                        if not fut.done():
                            fut.set_result(result)
                    except Exception as e:  # noqa: BLE001 - handed to the caller
                        if not fut.done():
                            fut.set_exception(e)
                    continue
                if name not in ("startup", "controller_change", "expire") and not self.active:
                    continue
                await getattr(self, f"_on_{name}")(*args)
            except ControllerMovedError:
                log.info("Controller %d: another controller was elected; resigning", self.broker_id)
                await self._resign()
            except Exception:
                log.exception("Controller %d: error handling %s", self.broker_id, name)
            finally:
                self._queue.task_done()

    def send(self, broker: int, request: object) -> None:
        channel = self._channels.get(broker)
        if channel is not None:
            channel.send(request)

    def _on_reply(self, broker: int, request: object, reply: object) -> None:
        if isinstance(request, StopReplicaRequest) and isinstance(reply, PartitionErrors):
            if any(p.delete for p in request.partitions):
                self._enqueue("stop_replica_reply", broker, request, reply)
        elif isinstance(request, LeaderAndIsrRequest) and isinstance(reply, PartitionErrors):
            bad = {tp: e for tp, e in reply.partitions.items() if e != ErrorCode.NONE}
            if reply.error != ErrorCode.NONE or bad:
                log.warning("LeaderAndIsr to broker %d: %s %s", broker, reply.error.name, bad)
            offline = sorted(tp for tp, e in bad.items() if e == ErrorCode.KAFKA_STORAGE_ERROR)
            if offline:
                self._enqueue("replicas_offline", broker, offline)

    async def _open_channel(self, reg: zk.BrokerRegistration) -> None:
        if reg.id in self._channels:
            await self._channels.pop(reg.id).close()
        self._channels[reg.id] = _BrokerChannel(reg.id, self.channel_factory(reg), self._on_reply)

    async def _close_channel(self, broker: int) -> None:
        channel = self._channels.pop(broker, None)
        if channel is not None:
            await channel.close()

    # -- election

    async def _on_startup(self) -> None:
        await self._io(self.zk.get_controller_id, self._watch_controller)
        await self._elect()

    async def _elect(self) -> None:
        won = await self._io(self.zk.try_become_controller, self.broker_id)
        if won is None:
            self.active_controller_id = await self._io(self.zk.get_controller_id)
            if self.active_controller_id is None:
                self._enqueue("controller_change")  # it vanished meanwhile: try again
            return
        self.epoch, self.epoch_zk_version = won
        self.active = True
        self.active_controller_id = self.broker_id
        log.info("Broker %d is the controller (epoch %d)", self.broker_id, self.epoch)
        try:
            await self._on_become_controller()
        except ControllerMovedError:
            raise
        except Exception:
            log.exception("Controller failover failed; giving up the controller role")
            fence = self.epoch_zk_version
            await self._resign()
            await self._io(self.zk.delete_controller, fence)

    async def _on_controller_change(self) -> None:
        current = await self._io(self.zk.get_controller_id, self._watch_controller)
        if current is None:
            if self.active:
                await self._resign()
            await self._elect()
            return
        self.active_controller_id = current
        if self.active and current != self.broker_id:
            await self._resign()

    async def _resign(self) -> None:
        if self.active:
            log.info("Broker %d resigns as controller", self.broker_id)
        self.active = False
        if self._rebalance_timer is not None:
            self._rebalance_timer.cancel()
            self._rebalance_timer = None
        for broker in list(self._channels):
            await self._close_channel(broker)
        self.ctx = _Context()

    async def _on_expire(self) -> None:
        """Our ZooKeeper session expired: resign (the broker re-registers, then "startup"
        runs the election again, as Kafka's Expire and RegisterBrokerAndReelect events)."""
        await self._resign()

    def on_session_expired(self) -> None:
        """Thread-safe: queue the resignation after a ZooKeeper session expiry."""
        self._threadsafe("expire")

    def on_new_session(self) -> None:
        """Thread-safe: after re-registration, watch /controller and elect again."""
        self._threadsafe("startup")

    def _threadsafe(self, name: str) -> None:
        loop = self._loop
        if loop is not None and not loop.is_closed():
            try:
                loop.call_soon_threadsafe(self._enqueue, name)
            except RuntimeError:  # loop closed meanwhile
                pass

    # -- failover

    def _read_topic(
        self, topic: str
    ) -> tuple[zk.TopicAssignment, dict[int, zk.PartitionState]] | None:
        """Blocking: a topic's assignment (watching its node) and partition states; writes a
        topic id when the topic has none (created by an old tool)."""
        found = self.zk.get_topic_assignment(topic, self._topic_watcher(topic))
        if found is None:
            return None
        assignment, version = found
        if assignment.topic_id is None:
            assignment = zk.TopicAssignment(zk.new_uuid(), assignment.partitions)
            self.zk.set_topic_assignment(
                topic, assignment.topic_id, assignment.partitions, version, self.epoch_zk_version
            )
        states = {}
        for p in assignment.partitions:
            state = self.zk.get_partition_state(topic, p)
            if state is not None:
                states[p] = state
        return assignment, states

    def _load_topic(
        self, topic: str, found: tuple[zk.TopicAssignment, dict[int, zk.PartitionState]]
    ) -> None:
        assignment, states = found
        self.ctx.topic_ids[topic] = assignment.topic_id
        self.ctx.assignments[topic] = dict(assignment.partitions)
        for p, state in states.items():
            self.ctx.states[(topic, p)] = state

    async def _on_become_controller(self) -> None:
        self.ctx = ctx = _Context()
        await self._io(self.zk.get_broker_ids, self._watch_brokers)
        ctx.live = await self._io(self.zk.get_all_brokers)
        # Pending ISR notifications are obsolete: every state znode is read just below.
        pending = await self._io(self.zk.get_isr_change_notifications, self._watch_isr_changes)
        await self._io(self.zk.delete_isr_change_notifications, pending, self.epoch_zk_version)
        # Failed log dirs show in the LeaderAndIsr answers below (KAFKA_STORAGE_ERROR).
        events = await self._io(self.zk.get_log_dir_event_notifications, self._watch_log_dir_events)
        await self._io(self.zk.delete_log_dir_event_notifications, events, self.epoch_zk_version)
        for topic in await self._io(self.zk.get_all_topics, self._watch_topics):
            found = await self._io(self._read_topic, topic)
            if found is not None:
                self._load_topic(topic, found)
        if self.config.delete_topic_enable:
            marked = await self._io(self.zk.get_topics_marked_for_deletion)
            ctx.to_delete.update(t for t in marked if t in ctx.assignments)
        for reg in ctx.live.values():
            await self._open_channel(reg)
        # Brokers learn the live-broker list before any LeaderAndIsr.
        first = _Batch(self)
        first.add_update_metadata(ctx.live)
        first.send()
        batch = _Batch(self)
        for tp in ctx.all_partitions():
            if tp in ctx.states:
                batch.add_leader_and_isr(ctx.replicas(tp), tp)
        # Brokers that died while no controller was active are still in ISRs: drop them where
        # the leader lives (Kafka's replica state machine startup moves their replicas offline);
        # partitions whose leader died get an offline election, which does the same.
        for tp in ctx.all_partitions():
            st = ctx.states.get(tp)
            if (
                st is not None
                and tp[0] not in ctx.to_delete
                and st.leader in ctx.live
                and any(not ctx.replica_online(r, tp) for r in st.isr)
            ):
                await self._shrink_isr(batch, tp)
        await self._elect_leaders(batch, self._needing_leader())
        batch.send()
        await self._on_topic_deletion()
        # Reassignments a previous controller started continue (KIP-455), then the legacy znode.
        for tp in ctx.all_partitions():
            if ctx.assignments[tp[0]][tp[1]].being_reassigned:
                await self._maybe_complete_reassignment(tp)
        await self._on_legacy_reassignment()
        self._schedule_rebalance()

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

    # -- topics

    async def _on_topic_change(self) -> None:
        ctx = self.ctx
        topics = set(await self._io(self.zk.get_all_topics, self._watch_topics))
        for gone in set(ctx.assignments) - topics:
            ctx.remove_topic(gone)
            self._watch_topic.pop(gone, None)
        added = sorted(topics - set(ctx.assignments))
        if not added:
            return
        batch = _Batch(self)
        for topic in added:
            found = await self._io(self._read_topic, topic)
            if found is None:
                continue
            self._load_topic(topic, found)
            log.info("New topic %s with %d partitions", topic, len(found[0].partitions))
            for p in sorted(found[0].partitions):
                if (topic, p) in ctx.states:  # created by a previous controller
                    batch.add_leader_and_isr(ctx.replicas((topic, p)), (topic, p))
            await self._elect_leaders(
                batch,
                [(topic, p) for p in sorted(found[0].partitions) if (topic, p) not in ctx.states],
            )
        batch.send()

    async def _on_partition_modifications(self, topic: str) -> None:
        ctx = self.ctx
        if topic not in ctx.assignments:
            return
        found = await self._io(self.zk.get_topic_assignment, topic, self._topic_watcher(topic))
        if found is None:
            return
        assignment, _version = found
        if topic in ctx.to_delete:
            log.info("Ignoring partition change of %s: it is being deleted", topic)
            return
        old = ctx.assignments[topic]
        added = sorted(set(assignment.partitions) - set(old))
        ctx.assignments[topic] = {**old, **{p: assignment.partitions[p] for p in added}}
        if added:
            log.info("Topic %s: new partitions %s", topic, added)
            batch = _Batch(self)
            await self._elect_leaders(batch, [(topic, p) for p in added])
            batch.send()

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

    # -- deletion

    async def _on_topic_deletion(self) -> None:
        ctx = self.ctx
        marked = await self._io(self.zk.get_topics_marked_for_deletion, self._watch_deletions)
        for topic in marked:
            if not self.config.delete_topic_enable or topic not in ctx.assignments:
                await self._io(self.zk.delete_topic_deletion_marker, topic, self.epoch_zk_version)
            else:
                ctx.to_delete.add(topic)
        await self._resume_deletions()

    async def _on_retry_deletion(self) -> None:
        await self._resume_deletions()

    async def _resume_deletions(self) -> None:
        ctx = self.ctx
        batch = _Batch(self)
        started = []
        for topic in sorted(ctx.to_delete - set(ctx.deleting)):
            replicas = {
                (p, r) for p, a in ctx.assignments.get(topic, {}).items() for r in a.replicas
            }
            if any(r not in ctx.live for _, r in replicas):
                log.info("Deletion of %s waits: a replica is on a dead broker", topic)
                continue
            ctx.deleting[topic] = replicas
            started.append(topic)
            parts = [(topic, p) for p in sorted(ctx.assignments.get(topic, {}))]
            batch.add_update_metadata(ctx.live, parts)
            for p, r in sorted(replicas):
                batch.add_stop_replica(r, (topic, p), True, EPOCH_DURING_DELETE)
        batch.send()
        for topic in started:
            if not ctx.deleting[topic]:  # a topic without replicas
                await self._complete_deletion(topic)

    async def _on_stop_replica_reply(
        self, broker: int, request: StopReplicaRequest, reply: PartitionErrors
    ) -> None:
        ctx = self.ctx
        failed: set[str] = set()
        touched: set[str] = set()
        for part in request.partitions:
            pending = ctx.deleting.get(part.topic)
            if pending is None or not part.delete:
                continue
            touched.add(part.topic)
            error = reply.error_for((part.topic, part.partition))
            if error == ErrorCode.NONE:
                pending.discard((part.partition, broker))
            else:
                log.warning(
                    "Deleting %s-%d on broker %d failed: %s",
                    part.topic,
                    part.partition,
                    broker,
                    error.name,
                )
                failed.add(part.topic)
        for topic in sorted(touched):
            if topic in failed:
                ctx.deleting.pop(topic, None)  # restarted from scratch by the retry
                assert self._loop is not None
                self._loop.call_later(self.deletion_retry_seconds, self._enqueue, "retry_deletion")
            elif topic in ctx.deleting and not ctx.deleting[topic]:
                await self._complete_deletion(topic)

    async def _complete_deletion(self, topic: str) -> None:
        await self._io(self.zk.delete_topic_znodes, topic, self.epoch_zk_version)
        self.ctx.remove_topic(topic)
        self._watch_topic.pop(topic, None)
        log.info("Deletion of topic %s completed", topic)


__all__ = ["ChannelFactory", "Controller", "ControllerMovedError", "NotControllerError"]
