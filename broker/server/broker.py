"""The broker: wires storage, the metadata store, the controller and the network together.

It is also the local `BrokerControl`: the controller (on this broker or, in a cluster, on
another) tells it which partitions to lead or follow, which to stop, and what the cluster
looks like.
"""

from __future__ import annotations

import asyncio
import contextlib
import functools
import logging
import os
import time
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any, TypeVar

from ..cluster import zk_data as zk
from ..cluster.config_changes import ConfigChangeListener
from ..cluster.control import (
    BrokerControl,
    LeaderAndIsrRequest,
    PartitionErrors,
    StopReplicaRequest,
    UpdateMetadataRequest,
)
from ..cluster.controller import Controller
from ..cluster.embedded_store import EmbeddedStore
from ..cluster.kafka_zk import BrokerIdInUseError, KafkaZk
from ..cluster.metadata_cache import MetadataCache
from ..cluster.metadata_store import MetadataStore, run_blocking
from ..cluster.topic_admin import TopicAdmin
from ..config import BrokerConfig, Endpoint
from ..coordinator.group import OFFSETS_TOPIC, GroupCoordinator, GroupCoordinatorConfig
from ..coordinator.transaction import (
    TRANSACTION_STATE_TOPIC,
    TransactionConfig,
    TransactionCoordinator,
)
from ..protocol.errors import ErrorCode
from ..replication.producer_ids import ProducerIdManager
from ..replication.replica_manager import ReplicaManager
from ..security.service import SecurityService
from ..storage.checkpoint import META_PROPERTIES, read_properties
from ..storage.errors import LogDirError
from ..storage.log_cleaner import CleanerConfig
from ..storage.log_config import LogConfig
from ..storage.log_manager import LogManager
from .controlled_shutdown import controlled_shutdown
from .controller_channel import RemoteBroker
from .dispatcher import Dispatcher
from .fetch_session import FetchSessionCache
from .handlers.sasl import SaslAuthenticator
from .inter_broker import inter_broker_security
from .metrics import BrokerMetrics
from .network import Connection, Listener, SocketServer
from .tls import server_context
from .txn_markers import MarkerSender

log = logging.getLogger(__name__)

T = TypeVar("T")

TICK_SECONDS = 1.0
# How long client requests wait, right after start-up, for the first UpdateMetadata.
READY_TIMEOUT_S = 30.0


def _listener(config: BrokerConfig, ep: Endpoint) -> Listener:
    """A socket listener; SSL and SASL_SSL ones get their TLS context (bad files fail here)."""
    ctx = None
    if ep.security_protocol in ("SSL", "SASL_SSL"):
        ctx = server_context(config.get_raw, ep.listener, ep.security_protocol)
    return Listener(ep.listener, ep.host, ep.port, ep.security_protocol, ctx)


class Broker(BrokerControl):
    def __init__(self, config: BrokerConfig) -> None:
        self.config = config
        self.broker_id = config.broker_id
        self.cluster_id = ""
        self.store: MetadataStore | None = None
        self.zk: KafkaZk | None = None
        self.executor = ThreadPoolExecutor(1, thread_name_prefix="metadata-store")
        self.metadata_cache = MetadataCache(self.broker_id)
        self.fetch_sessions = FetchSessionCache()
        self.log_manager = LogManager(
            config.log_dirs,
            self._log_config({}),
            retention_check_interval_ms=config.get("log.retention.check.interval.ms"),
            recovery_point_checkpoint_interval_ms=config.get(
                "log.flush.offset.checkpoint.interval.ms"
            ),
            log_start_offset_checkpoint_interval_ms=config.get(
                "log.flush.start.offset.checkpoint.interval.ms"
            ),
            background_checkpoints=True,
        )
        self._topic_overrides: dict[str, dict[str, str]] = {}
        self.replica_manager = ReplicaManager(self.broker_id, self.log_manager, self.topic_config)
        self.log_manager.on_dir_failure.append(self._on_log_dir_failure)
        # Group coordinator: serves the groups of the __consumer_offsets partitions led here.
        self.group_coordinator = GroupCoordinator(
            self.replica_manager,
            GroupCoordinatorConfig.from_broker_config(config),
            partition_count=lambda: self.metadata_cache.partition_count(OFFSETS_TOPIC),
            fenced=lambda: self.zk_fenced,
        )
        # Producer ids come from blocks claimed in the metadata store (idempotent producers
        # get one from any broker, transactional ones from their coordinator).
        self.producer_ids = ProducerIdManager(self._allocate_producer_ids)
        # Transaction coordinator: serves the transactional ids of the __transaction_state
        # partitions led here; its markers go out through the marker sender.
        self.txn_markers = MarkerSender(self)
        self.txn_coordinator = TransactionCoordinator(
            self.replica_manager,
            TransactionConfig.from_broker_config(config),
            self.producer_ids,
            send_markers=self.txn_markers.send,
            leader_of=self.txn_markers.leader_of,
            partition_count=lambda: self.metadata_cache.partition_count(TRANSACTION_STATE_TOPIC),
        )
        self.server = SocketServer(
            [_listener(config, e) for e in config.listeners],
            Dispatcher(self).handle_frame,
            config.get("socket.request.max.bytes"),
            send_buffer_bytes=config.get("socket.send.buffer.bytes"),
            receive_buffer_bytes=config.get("socket.receive.buffer.bytes"),
        )
        # Security: SASL servers, SCRAM credentials, ACLs, quotas (created once the store is up).
        self.security: SecurityService | None = None
        self.server.new_authenticator = functools.partial(SaslAuthenticator, self)
        self.server.connection_throttle = self._connection_throttle
        self.metrics = BrokerMetrics(self)
        # Fails here, naming the setting, when the inter-broker login is misconfigured.
        self.inter_broker_security = inter_broker_security(config)
        self.metrics_port: int | None = None
        self.controller: Controller | None = None
        self.topic_admin: TopicAdmin | None = None
        self.config_changes: ConfigChangeListener | None = None
        self.broker_epoch = -1
        # ZooKeeper fencing of the group coordinator (`zk_fenced`): the session this broker
        # registered with, and after a re-registration the broker epoch the controller must
        # address before this broker trusts its leadership again.
        self._registered_session: int | None = None
        self._fenced_until_epoch: int | None = None
        # The highest controller epoch seen in a control request (STALE_CONTROLLER_EPOCH below).
        self.controller_epoch_seen = -1
        self._loop: asyncio.AbstractEventLoop | None = None
        self._tick_task: asyncio.Task[None] | None = None
        # Set once the controller's metadata lists this broker: client requests wait for it.
        self.ready = asyncio.Event()
        self.started = False  # start() completed (a failed start-up is not reported as a stop)

    # --- topic configuration ----------------------------------------------------------------

    def _log_config(self, overrides: dict[str, str]) -> LogConfig:
        return LogConfig.from_props(self.config.topic_config_strings(overrides))

    def topic_config(self, topic: str) -> LogConfig:
        overrides = self._topic_overrides.get(topic)
        if overrides is None:
            assert self.zk is not None
            overrides = self.zk.get_entity_config("topics", topic)
            self._topic_overrides[topic] = overrides
        return self._log_config(overrides)

    async def _on_topic_config(self, topic: str, overrides: dict[str, str]) -> None:
        self._topic_overrides[topic] = dict(overrides)
        self.log_manager.update_topic_config(topic, self._log_config(overrides))
        self.replica_manager.update_topic_config(topic)

    async def _on_broker_config(self, changed: Any) -> None:
        self.log_manager.default_config = self._log_config({})
        for topic in list(self._topic_overrides):
            await self._on_topic_config(topic, self._topic_overrides[topic])

    # --- lifecycle --------------------------------------------------------------------------

    def _connection_throttle(self, conn: Connection) -> int:
        """IP connection-rate quotas (KIP-612), on every listener as in Kafka."""
        if self.security is None:
            return 0
        return self.security.quotas.record_connection(conn.peer_host, time.monotonic() * 1000)

    async def start(self) -> None:
        config = self.config
        self._loop = asyncio.get_running_loop()
        if config.zookeeper_connect:
            # Imported here: kazoo is only needed in cluster mode.
            from ..cluster.zk_store import ZkStore

            self.store = await run_blocking(
                self.executor,
                functools.partial(
                    ZkStore.from_config,
                    config,
                    on_session_expired=self._on_zk_session_expired,
                    on_new_session=self._on_zk_new_session,
                ),
            )
        else:
            # The embedded store lives in the first log dir by default: check those first.
            self.log_manager.check_dirs()
            try:
                self.store = await run_blocking(
                    self.executor, EmbeddedStore, config.metadata_store_dir
                )
            except OSError as e:
                raise LogDirError(
                    f"cannot use metadata store directory {config.metadata_store_dir} "
                    f"(metadata.store.dir): {e.strerror or e}"
                ) from e
        self.zk = KafkaZk(self.store)
        # Leaders write their ISR changes to the partition state znodes (replication §3.4).
        self.replica_manager.attach(self.zk, self.run_io, config, self.inter_broker_security)
        await self.run_io(self.zk.create_top_level_paths)
        self.cluster_id = await self.run_io(self.zk.get_or_create_cluster_id)
        self.metadata_cache.cluster_id = self.cluster_id
        if self.broker_id < 0:
            # Like Kafka: a generated id is kept in meta.properties and reused on restart.
            self.broker_id = self._stored_broker_id()
        if self.broker_id < 0:
            self.broker_id = await self.run_io(
                self.zk.generate_broker_id, config.get("reserved.broker.max.id")
            )
        if self.broker_id != config.broker_id:
            config.assign_broker_id(self.broker_id)
            self.metadata_cache.broker_id = self.broker_id
            self.replica_manager.broker_id = self.broker_id
        topics = await self.run_io(self.zk.get_all_topics)
        overrides = {}
        for topic in topics:
            overrides[topic] = await self.run_io(self.zk.get_entity_config, "topics", topic)
        self._topic_overrides.update(overrides)
        self.log_manager.startup({t: self._log_config(o) for t, o in overrides.items()})
        self.log_manager.ensure_meta_properties(self.broker_id, self.cluster_id)
        self.log_manager.start_cleaner(CleanerConfig.from_broker_config(config), self._on_loop)
        await self.group_coordinator.start()
        await self.txn_coordinator.start()
        self.security = SecurityService(self.zk, config.get_raw, executor=self.executor)
        for ep in config.listeners:
            if ep.security_protocol in ("SASL_PLAINTEXT", "SASL_SSL"):
                self.security.warn_unsupported_sasl(ep.listener)
        await self.security.start()
        await self.server.start()
        port = config.get("prometheus.metrics.port")
        if port >= 0:
            self.metrics_port = await self.run_io(
                self.metrics.serve, config.get("prometheus.metrics.host"), port
            )
        self.broker_epoch = await self._register()
        self._registered_session = getattr(self.store, "session_id", None)
        self.topic_admin = TopicAdmin(self.zk, config, executor=self.executor)
        self.config_changes = ConfigChangeListener(
            self.zk,
            config,
            on_topic_config=self._on_topic_config,
            on_broker_config=self._on_broker_config,
            on_entity_config=self.security.on_entity_config,
            executor=self.executor,
        )
        await self.config_changes.start()
        self.controller = Controller(self.broker_id, self.zk, config, self._channel_for)
        await self.controller.startup()
        self._tick_task = asyncio.create_task(self._tick_loop())
        self.started = True
        log.info(
            "broker %d started (cluster %s) listening on %s",
            self.broker_id,
            self.cluster_id,
            ", ".join(f"{n}://{h}:{p}" for n, (h, p) in self.server.bound.items()),
        )

    def _stored_broker_id(self) -> int:
        for log_dir in self.log_manager.log_dirs:
            props = read_properties(log_dir / META_PROPERTIES)
            if props and props.get("broker.id", "").lstrip("-").isdigit():
                return int(props["broker.id"])
        return -1

    async def run_io(self, fn: Callable[..., T], *args: Any) -> T:
        """Run a blocking metadata-store call on the broker's executor."""
        return await run_blocking(self.executor, fn, *args)

    async def _allocate_producer_ids(self) -> Any:
        assert self.zk is not None
        return await self.run_io(self.zk.allocate_producer_id_block, self.broker_id)

    def _on_loop(self, fn: Any) -> Any:
        """From another thread (the log cleaner's): run `fn` on the event loop, which owns the
        logs, and return its result."""
        assert self._loop is not None

        async def call() -> Any:
            return fn()

        return asyncio.run_coroutine_threadsafe(call(), self._loop).result()

    def _channel_for(self, registration: zk.BrokerRegistration) -> BrokerControl:
        if registration.id == self.broker_id:
            return self
        return RemoteBroker(
            registration,
            self.config.inter_broker_listener,
            controller_id=self.broker_id,
            request_timeout=self.config.get("controller.socket.timeout.ms") / 1000,
            connect_timeout=self.config.get("socket.connection.setup.timeout.ms") / 1000,
            security=self.inter_broker_security,
        )

    # --- log dir failure (Kafka's LogDirFailureHandler) ---------------------------------------

    def _on_log_dir_failure(
        self, log_dir: Path, lost: list[tuple[str, int]], lost_futures: list[tuple[str, int]]
    ) -> None:
        """The replica manager has taken the dir's partitions offline; tell the controller
        (a /log_dir_event_notification znode) so leadership moves to other replicas. With
        no dir left, the broker halts, as Kafka does."""
        for topic, index in lost:
            if topic == OFFSETS_TOPIC:
                self.group_coordinator.on_resigned(index)
        if not self.log_manager.online_dirs():
            log.critical(
                "shutting down: all log dirs (%s) have failed",
                ", ".join(map(str, self.log_manager.log_dirs)),
            )
            logging.shutdown()
            os._exit(1)
        if self.zk is not None and self._loop is not None:
            self._loop.create_task(self._propagate_log_dir_event())

    async def _propagate_log_dir_event(self) -> None:
        for attempt in range(10):
            try:
                await self.run_io(self.zk.propagate_log_dir_event, self.broker_id)
                return
            except Exception:
                log.warning("cannot announce the log dir failure (attempt %d)", attempt + 1)
                await asyncio.sleep(1.0)

    # --- ZooKeeper session expiry (Kafka's Expire / RegisterBrokerAndReelect) ---------------

    def _on_zk_session_expired(self, old_session: int) -> None:
        """The store's thread: our ephemeral nodes are gone; the controller resigns."""
        log.warning("broker %d: ZooKeeper session 0x%x expired", self.broker_id, old_session)
        if self.controller is not None:
            self.controller.on_session_expired()

    def _on_zk_new_session(self, session: int) -> None:
        """The store's thread: re-register on the event loop, then re-elect and re-watch."""
        loop = self._loop
        if loop is not None and not loop.is_closed():
            loop.call_soon_threadsafe(lambda: asyncio.ensure_future(self._reregister(session)))

    async def _register(self) -> int:
        """Register this broker; when a previous process of the same id was killed, its
        registration lives on until ZooKeeper expires that session: wait for it (bounded by
        the session timeout) instead of exiting, so a restarted pod comes back at once."""
        deadline = time.monotonic() + self.config.get("zookeeper.session.timeout.ms") / 1000 + 10
        waited = False
        while True:
            try:
                return await self.run_io(self.zk.register_broker, self._registration())
            except BrokerIdInUseError as e:
                if time.monotonic() > deadline:
                    raise
                if not waited:
                    log.warning("%s; waiting for that session to expire", e)
                    waited = True
                await asyncio.sleep(0.5)

    async def _reregister(self, session: int) -> None:
        backoff = 0.2
        for _ in range(20):
            try:
                # The expired session's node is gone: no old registration to wait for.
                self.broker_epoch = await self.run_io(self.zk.register_broker, self._registration())
                break
            except Exception:
                log.warning(
                    "broker %d: re-registration failed; retrying", self.broker_id, exc_info=True
                )
                await asyncio.sleep(backoff)
                backoff = min(2 * backoff, 2.0)
        else:
            log.error("broker %d: could not re-register in ZooKeeper", self.broker_id)
            return
        # Leadership this broker held may have moved while its session was gone: fenced until
        # the controller speaks to this incarnation (its first LeaderAndIsr or UpdateMetadata).
        self._fenced_until_epoch = self.broker_epoch
        self._registered_session = session
        log.info(
            "broker %d re-registered with session 0x%x (broker epoch %d)",
            self.broker_id,
            session,
            self.broker_epoch,
        )
        if self.controller is not None:
            self.controller.on_new_session()

    @property
    def zk_fenced(self) -> bool:
        """True while this broker cannot be sure it still holds the leadership it knows of: its
        ZooKeeper connection is down (the session may expire, and the controller move its
        partitions, at any moment), its session is not the one it registered with, or the
        controller has not yet addressed it since it re-registered. A zombie leader must not
        serve as group coordinator: it would hand out committed offsets older than the ones
        its successor acknowledged."""
        store = self.store
        if store is None or not self.config.zookeeper_connect:
            return False  # the embedded store: one broker, nobody to take over
        return (
            not store.connected
            or store.session_id != self._registered_session
            or self._fenced_until_epoch is not None
        )

    def _addressed_by_controller(self, broker_epoch: int) -> None:
        if self._fenced_until_epoch is not None and broker_epoch >= self._fenced_until_epoch:
            self._fenced_until_epoch = None

    def advertised_endpoints(self) -> list[Endpoint]:
        """Advertised listeners, with port 0 replaced by the port actually bound."""
        out = []
        for ep in self.config.advertised_listeners:
            host, port = ep.host, ep.port
            if port == 0 and ep.listener in self.server.bound:
                port = self.server.bound[ep.listener][1]
            if not host:
                host = self.server.bound.get(ep.listener, ("", 0))[0] or "localhost"
            out.append(Endpoint(ep.listener, host, port, ep.security_protocol))
        return out

    def _registration(self) -> zk.BrokerRegistration:
        return zk.BrokerRegistration(
            id=self.broker_id,
            endpoints=tuple(self.advertised_endpoints()),
            rack=self.config.rack,
            timestamp=int(time.time() * 1000),
        )

    async def _tick_loop(self) -> None:
        while True:
            await asyncio.sleep(TICK_SECONDS)
            try:
                self.log_manager.tick()
                if self.security is not None:
                    self.security.quotas.expire_idle(time.monotonic() * 1000)
            except Exception:
                log.exception("periodic log maintenance failed")

    async def stop(self) -> None:
        if (
            self.config.zookeeper_connect
            and self.zk is not None
            and self.broker_epoch >= 0  # registered: there may be leadership to hand over
            and self.config.get("controlled.shutdown.enable")
        ):
            await controlled_shutdown(self)
        if self._tick_task is not None:
            self._tick_task.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await self._tick_task
        await self.replica_manager.shutdown()
        await self.server.stop()
        self.metrics.stop()
        await self.group_coordinator.shutdown()
        await self.txn_coordinator.shutdown()
        await self.txn_markers.close()
        if self.controller is not None:
            await self.controller.shutdown()
        if self.config_changes is not None:
            await self.config_changes.stop()
        if self.security is not None:
            await self.security.stop()
        await asyncio.to_thread(self.log_manager.stop_cleaner)
        self.log_manager.shutdown()
        if self.store is not None:
            await self.run_io(self.store.close)
        self.executor.shutdown(wait=True)
        if self.started:
            log.info("broker %d stopped", self.broker_id)

    # --- BrokerControl (what the controller tells this broker) -----------------------------

    def _heard_from_controller(self, controller_epoch: int) -> None:
        """Remember the newest controller epoch, also from this broker's own controller (whose
        orders arrive without the network and its STALE_CONTROLLER_EPOCH check), so a deposed
        controller, or a client posing as one, cannot overwrite what a newer one decided."""
        self.controller_epoch_seen = max(self.controller_epoch_seen, controller_epoch)

    async def leader_and_isr(self, request: LeaderAndIsrRequest) -> PartitionErrors:
        self._heard_from_controller(request.controller_epoch)
        for p in request.partitions:
            if p.topic not in self._topic_overrides:
                self._topic_overrides[p.topic] = await self.run_io(
                    self.zk.get_entity_config, "topics", p.topic
                )
        errors = self.replica_manager.leader_and_isr(request)
        self._coordinator_leadership(request, errors)
        self._addressed_by_controller(request.broker_epoch)
        return errors

    async def stop_replica(self, request: StopReplicaRequest) -> PartitionErrors:
        self._heard_from_controller(request.controller_epoch)
        errors = self.replica_manager.stop_replica(request)
        for p in request.partitions:
            coordinator = self._coordinators().get(p.topic)
            if coordinator is not None:
                coordinator.on_resigned(p.partition)
        for p in request.partitions:
            if p.delete:
                self._topic_overrides.pop(p.topic, None)
        return errors

    async def update_metadata(self, request: UpdateMetadataRequest) -> ErrorCode:
        self._heard_from_controller(request.controller_epoch)
        self.metadata_cache.update(request)
        self._addressed_by_controller(request.broker_epoch)
        if (
            self.metadata_cache.is_alive(self.broker_id)
            and self.metadata_cache.controller_id is not None
        ):
            self.ready.set()
        return ErrorCode.NONE

    async def wait_ready(self, timeout: float = READY_TIMEOUT_S) -> None:
        """Hold a client request until this broker knows the cluster (bounded)."""
        if not self.ready.is_set():
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(self.ready.wait(), timeout)

    # --- coordinators: follow the leadership of their internal topics' partitions ----------

    def _coordinators(self) -> dict[str, GroupCoordinator | TransactionCoordinator]:
        """The coordinator that serves each internal topic's partitions led here."""
        return {
            OFFSETS_TOPIC: self.group_coordinator,
            TRANSACTION_STATE_TOPIC: self.txn_coordinator,
        }

    def _coordinator_leadership(
        self, request: LeaderAndIsrRequest, errors: PartitionErrors
    ) -> None:
        coordinators = self._coordinators()
        for p in request.partitions:
            coordinator = coordinators.get(p.topic)
            if coordinator is None:
                continue
            if p.leader == self.broker_id and errors.partitions.get((p.topic, p.partition)) in (
                None,
                ErrorCode.NONE,
            ):
                coordinator.on_elected(p.partition, p.leader_epoch)
            else:
                coordinator.on_resigned(p.partition)
