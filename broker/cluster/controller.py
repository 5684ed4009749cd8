"""The controller: one elected broker turns znode changes into partition leadership.

Every broker runs a `Controller`; the one that wins /controller (ephemeral, with /controller_epoch
bumped in the same transaction) is active. As in Kafka, all work happens on one event queue:
metadata-store watches (which fire on the store's thread) only enqueue events, and one asyncio
task handles them in order. Every controller write is fenced by the /controller_epoch version.

This module holds the event queue, election and failover. The handlers live beside it, one
module per concern, as mixins of `Controller`: controller_brokers (arrival/departure/bounce on
/brokers/ids, ISR changes announced under /isr_change_notification, failed log dirs),
controller_topics (topic creation, partition addition, deletion), controller_leadership (the
partition state machine: offline, controlled-shutdown, preferred and unclean elections, the
auto.leader.rebalance.enable timer) and controller_reassignment (KIP-455 and the legacy
/admin/reassign_partitions znode). Brokers are told about the results through `BrokerControl`
(LeaderAndIsr, UpdateMetadata, StopReplica), batched per event and sent in order per broker by one
sender task each (controller_requests).
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Awaitable, Callable
from concurrent.futures import Executor
from typing import Any, TypeVar

from ..config import BrokerConfig
from ..protocol.errors import ErrorCode
from . import zk_data as zk
from .control import (
    BrokerControl,
    LeaderAndIsrRequest,
    PartitionErrors,
    StopReplicaRequest,
    UpdateMetadataRequest,
)
from .controller_brokers import BrokerEventsMixin
from .controller_context import _Context
from .controller_leadership import LeadershipMixin
from .controller_reassignment import ReassignmentMixin
from .controller_requests import _Batch, _BrokerChannel
from .controller_topics import TopicEventsMixin
from .kafka_zk import ControllerMovedError, KafkaZk
from .metadata_store import StoreCalls, WatchedEvent

log = logging.getLogger(__name__)

_T = TypeVar("_T")


ChannelFactory = Callable[[zk.BrokerRegistration], BrokerControl]


class Controller(LeadershipMixin, BrokerEventsMixin, TopicEventsMixin, ReassignmentMixin):
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
        self._io = StoreCalls(executor, "controller-zk")
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
        self._io.close()

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
        error = reply.error if isinstance(reply, PartitionErrors) else reply
        if error == ErrorCode.STALE_BROKER_EPOCH and isinstance(
            request, LeaderAndIsrRequest | StopReplicaRequest | UpdateMetadataRequest
        ):
            self._enqueue("stale_broker_epoch", broker, request.broker_epoch, 0)
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


__all__ = ["ChannelFactory", "Controller", "ControllerMovedError"]
