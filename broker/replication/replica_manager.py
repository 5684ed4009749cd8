"""The partitions this broker hosts, and the produce/fetch operations on them.

The controller tells the replica manager which partitions it leads or follows (LeaderAndIsr)
and which to drop (StopReplica); request handlers call append/read. Followers copy from their
leader through one `ReplicaFetcher` per source broker. Nothing here parses requests.

ISR maintenance (shrink, expand, the leader's ISR writes) is in `isr`.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import time
import uuid
from collections.abc import Awaitable, Callable, Iterable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from ..client.security import ClientSecurity
from ..cluster.control import (
    LeaderAndIsrPartition,
    LeaderAndIsrRequest,
    PartitionErrors,
    StopReplicaRequest,
)
from ..protocol.errors import ErrorCode, KafkaError
from ..records.validation import validate_for_append
from ..storage.log_config import LogConfig
from ..storage.log_manager import LogManager
from ..wait_time import waiting
from .fetcher import FetcherSettings, ReplicaFetcher
from .isr import IsrMaintenance
from .log_dir_mover import LogDirMover
from .partition import Partition, PartitionState, now_ms
from .producer_state import AppendOrigin
from .waiters import wait_for_any

log = logging.getLogger(__name__)


@dataclass
class AppendOutcome:
    error: ErrorCode = ErrorCode.NONE
    base_offset: int = -1
    log_append_time: int = -1
    log_start_offset: int = -1
    message: str | None = None
    last_offset: int = -1
    # (index in the batch, message) of each refused record (Produce v8+, KIP-467)
    record_errors: list[tuple[int, str | None]] = field(default_factory=list)


class ReplicaManager(IsrMaintenance):
    def __init__(
        self,
        broker_id: int,
        log_manager: LogManager,
        topic_config: Callable[[str], LogConfig],
    ) -> None:
        self.broker_id = broker_id
        self.log_manager = log_manager
        self.topic_config = topic_config
        self.partitions: dict[tuple[str, int], Partition] = {}
        # ISR changes this broker proposed as leader (the server's metrics read them).
        self.isr_shrinks = 0
        self.isr_expands = 0
        self.fetchers: dict[int, ReplicaFetcher] = {}
        self.zk: Any = None  # KafkaZk, for the leader's ISR writes (None: ISR changes stay local)
        self._io: Callable[..., Awaitable[Any]] | None = None
        self.config: Any = None
        self.replica_lag_time_max_ms = 30000
        self.inter_broker_listener: str | None = None
        self.security: ClientSecurity | None = None  # the fetchers' login to the leaders
        self._isr_task: asyncio.Task[None] | None = None
        self._background: set[asyncio.Task[Any]] = set()
        # Partitions whose log was in a failed log dir (Kafka's HostedPartition.Offline).
        self.offline: set[tuple[str, int]] = set()
        # Set when this broker asks the controller to move its leadership away (Kafka's
        # isInControlledShutdown): it must not rejoin an ISR it was just taken out of.
        self.in_controlled_shutdown = False
        self.mover = LogDirMover(self._swap_future)
        log_manager.on_dir_failure.append(self.handle_log_dir_failure)

    def attach(
        self,
        zk_client: Any,
        io: Callable[..., Awaitable[Any]],
        config: Any,
        security: ClientSecurity | None = None,
    ) -> None:
        """Give the replica manager the metadata store (ISR writes), the broker config
        (replica.* settings) and the inter-broker login. Without it, ISR changes are only
        applied locally."""
        self.security = security
        self.zk = zk_client
        self._io = io
        self.config = config
        if config is not None:
            self.replica_lag_time_max_ms = int(config.get("replica.lag.time.max.ms"))
            self.inter_broker_listener = getattr(config, "inter_broker_listener", None)
            rate = float(config.get("replica.alter.log.dirs.io.max.bytes.per.second"))
            self.mover.rate = rate if rate < (1 << 63) - 1 else float("inf")

    def fetcher_settings(self) -> FetcherSettings:
        s = FetcherSettings(self.broker_id, security=self.security)
        c = self.config
        if c is not None:
            s.fetch_max_bytes = int(c.get("replica.fetch.max.bytes"))
            s.fetch_min_bytes = int(c.get("replica.fetch.min.bytes"))
            s.fetch_wait_max_ms = int(c.get("replica.fetch.wait.max.ms"))
            s.fetch_response_max_bytes = int(c.get("replica.fetch.response.max.bytes"))
            s.fetch_backoff_ms = int(c.get("replica.fetch.backoff.ms"))
            s.socket_timeout_ms = int(c.get("replica.socket.timeout.ms"))
        return s

    async def shutdown(self) -> None:
        if self._isr_task is not None:
            self._isr_task.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await self._isr_task
            self._isr_task = None
        await self.mover.shutdown()
        for fetcher in list(self.fetchers.values()):
            await fetcher.stop()
        self.fetchers.clear()
        for p in self.partitions.values():
            p.hw_waiters.wake()

    # --- leadership, as the controller decides it -------------------------------------------

    def _get_or_create(
        self,
        topic: str,
        index: int,
        topic_id: uuid.UUID | None,
        state: PartitionState,
        config: LogConfig | None = None,
    ) -> tuple[Partition, bool]:
        key = (topic, index)
        partition = self.partitions.get(key)
        if partition is not None:
            return partition, False
        log_ = self.log_manager.get_or_create_log(
            topic, index, config or self.topic_config(topic), topic_id=topic_id
        )
        partition = Partition(topic, index, topic_id, log_, state, self.broker_id)
        self.partitions[key] = partition
        future = self.log_manager.get_future_log(topic, index)
        if future is not None:  # a move a restart interrupted goes on
            self._start_move(partition, future)
        return partition, True

    def become_leader_or_follower(
        self,
        topic: str,
        index: int,
        topic_id: uuid.UUID | None,
        state: PartitionState,
        leader_endpoint: tuple[str, int] | None = None,
        config: LogConfig | None = None,
    ) -> Partition:
        """`config`: the topic's log config when the caller has it already."""
        partition, created = self._get_or_create(topic, index, topic_id, state, config)
        hw = self.log_manager.checkpointed_high_watermark(topic, index)
        if state.leader == self.broker_id:
            self._remove_from_fetchers((topic, index))
            partition.make_leader(state, hw, now_ms())
            if partition.replicated:
                self._ensure_isr_task()
        else:
            was_following = not created and not partition.is_leader
            partition.make_follower(state, hw)
            # In controlled shutdown a replica outside the ISR stops fetching: were it to catch
            # up, its leader would put it back into the ISR that the controller just left.
            leaving = self.in_controlled_shutdown and self.broker_id not in state.isr
            if state.leader >= 0 and leader_endpoint is not None and not leaving:
                self._add_to_fetcher(partition, state.leader, leader_endpoint, was_following)
            else:
                self._remove_from_fetchers((topic, index))
        return partition

    def _leader_endpoint(self, request: LeaderAndIsrRequest, leader: int) -> tuple[str, int] | None:
        for reg in request.live_leaders:
            if reg.id != leader or not reg.endpoints:
                continue
            ep = None
            if self.inter_broker_listener:
                ep = reg.endpoint(self.inter_broker_listener)
            if ep is None:
                ep = next(
                    (e for e in reg.endpoints if e.security_protocol == "PLAINTEXT"),
                    reg.endpoints[0],
                )
            return ep.host, ep.port
        return None

    def _add_to_fetcher(
        self, partition: Partition, leader: int, endpoint: tuple[str, int], _was: bool
    ) -> None:
        tp = (partition.topic, partition.index)
        for source, fetcher in list(self.fetchers.items()):
            if source != leader or (fetcher.host, fetcher.port) != endpoint:
                fetcher.remove(tp)
        fetcher = self.fetchers.get(leader)
        if fetcher is not None and (fetcher.host, fetcher.port) != endpoint:
            self._spawn(fetcher.stop())
            fetcher = None
        if fetcher is None:
            fetcher = self.fetchers[leader] = ReplicaFetcher(
                leader, endpoint[0], endpoint[1], self.fetcher_settings()
            )
        fetcher.add(partition, partition.state.leader_epoch)
        self._stop_idle_fetchers()

    def _remove_from_fetchers(self, tp: tuple[str, int]) -> None:
        for fetcher in self.fetchers.values():
            fetcher.remove(tp)
        self._stop_idle_fetchers()

    def _stop_idle_fetchers(self) -> None:
        for source, fetcher in list(self.fetchers.items()):
            if not fetcher.partitions:
                del self.fetchers[source]
                self._spawn(fetcher.stop())

    def _spawn(self, coro: Awaitable[Any]) -> None:
        try:
            task = asyncio.get_running_loop().create_task(coro)  # type: ignore[arg-type]
        except RuntimeError:
            if hasattr(coro, "close"):
                coro.close()  # type: ignore[union-attr]
            return
        self._background.add(task)
        task.add_done_callback(self._background.discard)

    @staticmethod
    def _state_of(p: LeaderAndIsrPartition) -> PartitionState:
        return PartitionState(
            leader=p.leader,
            leader_epoch=p.leader_epoch,
            isr=list(p.isr),
            replicas=list(p.replicas),
            partition_epoch=p.partition_epoch,
            adding_replicas=list(p.adding_replicas),
            removing_replicas=list(p.removing_replicas),
            controller_epoch=p.controller_epoch,
        )

    def leader_and_isr(self, request: LeaderAndIsrRequest) -> PartitionErrors:
        errors = PartitionErrors()
        configs: dict[str, LogConfig] = {}  # one per topic, not one per partition

        def config_of(topic: str) -> LogConfig:
            config = configs.get(topic)
            if config is None:
                config = configs[topic] = self.topic_config(topic)
            return config

        # The logs of partitions new to this broker, created together (see create_logs).
        self.log_manager.create_logs(
            (p.topic, p.partition, config_of(p.topic), p.topic_id)
            for p in request.partitions
            if (p.topic, p.partition) not in self.partitions
            and (p.topic, p.partition) not in self.offline
        )
        for p in request.partitions:
            tp = (p.topic, p.partition)
            state = self._state_of(p)
            current = self.partitions.get(tp)
            if tp in self.offline:
                errors.partitions[tp] = ErrorCode.KAFKA_STORAGE_ERROR
                continue
            if current is not None and p.leader_epoch < current.state.leader_epoch:
                errors.partitions[tp] = ErrorCode.STALE_CONTROLLER_EPOCH
                continue
            if (
                current is not None
                and p.leader_epoch == current.state.leader_epoch
                and p.leader == current.state.leader
            ):
                # Same epoch: at most a newer ISR (partition epoch) for the same leadership.
                if p.partition_epoch > current.state.partition_epoch:
                    current.state.replicas = list(p.replicas)
                    current.state.controller_epoch = p.controller_epoch
                    current.isr_committed(list(p.isr), p.partition_epoch)
                    if current.is_leader:
                        current.make_leader(current.state, None, now_ms())
                errors.partitions[tp] = ErrorCode.NONE
                if current.is_leader or self._following(tp):
                    continue
            try:
                self.become_leader_or_follower(
                    p.topic,
                    p.partition,
                    p.topic_id,
                    state,
                    self._leader_endpoint(request, p.leader),
                    config_of(p.topic),
                )
            except (OSError, KafkaError) as e:
                log.error("cannot host %s-%d: %s", p.topic, p.partition, e)
                errors.partitions[tp] = ErrorCode.KAFKA_STORAGE_ERROR
            else:
                errors.partitions[tp] = ErrorCode.NONE
        return errors

    def _following(self, tp: tuple[str, int]) -> bool:
        return any(tp in f.partitions for f in self.fetchers.values())

    def stop_replica(self, request: StopReplicaRequest) -> PartitionErrors:
        errors = PartitionErrors()
        for p in request.partitions:
            self.stop_replicas([(p.topic, p.partition)], p.delete)
            errors.partitions[(p.topic, p.partition)] = ErrorCode.NONE
        return errors

    def stop_replicas(self, partitions: Iterable[tuple[str, int]], delete: bool) -> None:
        for topic, index in partitions:
            self._remove_from_fetchers((topic, index))
            self.mover.stop((topic, index))
            partition = self.partitions.pop((topic, index), None)
            if partition is not None:
                partition.fetch_waiters.wake()
                partition.replica_waiters.wake()
                partition.hw_waiters.wake()
            if delete:
                self.offline.discard((topic, index))
                self.log_manager.delete_log(topic, index)

    # --- log dirs: moves between them (AlterReplicaLogDirs) and their failures ----------------

    def alter_replica_log_dirs(
        self, dirs: Mapping[tuple[str, int], str]
    ) -> dict[tuple[str, int], ErrorCode]:
        """Move each replica to the log dir named for it (Kafka's ReplicaManager rules)."""
        lm = self.log_manager
        out: dict[tuple[str, int], ErrorCode] = {}
        for tp, raw in dirs.items():
            dest = Path(raw)
            if len(f"{tp[0]}-{tp[1]}.{'0' * 32}-future") > 255:
                out[tp] = ErrorCode.INVALID_TOPIC_EXCEPTION
            elif not dest.is_absolute() or dest not in lm.log_dirs:
                out[tp] = ErrorCode.LOG_DIR_NOT_FOUND
            elif not lm.is_dir_online(dest) or tp in self.offline:
                out[tp] = ErrorCode.KAFKA_STORAGE_ERROR
            elif (partition := self.partitions.get(tp)) is None:
                # Created in `dest` when the controller assigns it here (kafka-reassign-partitions
                # sends this before the reassignment reaches the broker, then retries).
                lm.set_preferred_dir(tp[0], tp[1], dest)
                out[tp] = ErrorCode.REPLICA_NOT_AVAILABLE
            else:
                try:
                    if lm.future_dir_of(*tp) not in (None, dest):
                        self.mover.stop(tp)
                        lm.remove_future_log(*tp)
                    future = lm.create_future_log(tp[0], tp[1], dest)
                except KafkaError as e:
                    out[tp] = e.code
                    continue
                if future is None:
                    self.mover.stop(tp)
                elif not self.mover.moving(tp):
                    self._start_move(partition, future)
                out[tp] = ErrorCode.NONE
        return out

    def _start_move(self, partition: Partition, future: Any) -> None:
        try:
            self.mover.start(partition, future)
        except RuntimeError:  # no running loop (unit tests without one): nothing copies
            log.warning("cannot move %s-%d: no event loop", partition.topic, partition.index)

    def _swap_future(self, partition: Partition) -> None:
        new_log = self.log_manager.replace_current_with_future(partition.topic, partition.index)
        partition.replace_log(new_log)
        log.info("%s-%d now lives in %s", partition.topic, partition.index, new_log.dir.parent)

    def handle_log_dir_failure(
        self, log_dir: Path, lost: list[tuple[str, int]], lost_futures: list[tuple[str, int]]
    ) -> None:
        """A log dir failed: moves into it stop; its partitions go offline here (fetches and
        produces get KAFKA_STORAGE_ERROR; the controller moves leadership elsewhere)."""
        for tp in lost_futures:
            self.mover.stop(tp)
        for tp in lost:
            self.mover.stop(tp)
            self._remove_from_fetchers(tp)
            partition = self.partitions.pop(tp, None)
            self.offline.add(tp)
            if partition is not None:
                partition.leadership_losses += 1
                partition.fetch_waiters.wake()
                partition.replica_waiters.wake()
                partition.hw_waiters.wake()
        if lost:
            log.error("partitions offline after the failure of %s: %s", log_dir, sorted(lost))

    def update_topic_config(self, topic: str) -> None:
        config = self.topic_config(topic)
        for (t, _), partition in self.partitions.items():
            if t == topic:
                partition.log.update_config(config)

    def get(self, topic: str, index: int) -> Partition | None:
        return self.partitions.get((topic, index))

    def leader_partition(
        self, topic: str, index: int, known: bool, current_leader_epoch: int = -1
    ) -> Partition:
        """The partition if this broker leads it; `known`: the metadata has the partition.

        A request that names the leader epoch it expects (`current_leader_epoch` >= 0) is
        fenced when that epoch is older than this leader's, and told to wait for metadata when
        it is newer (the leader has not heard of it yet)."""
        partition = self.partitions.get((topic, index))
        if partition is None:
            if (topic, index) in self.offline:
                raise KafkaError(ErrorCode.KAFKA_STORAGE_ERROR)
            code = (
                ErrorCode.NOT_LEADER_OR_FOLLOWER if known else ErrorCode.UNKNOWN_TOPIC_OR_PARTITION
            )
            raise KafkaError(code)
        if not partition.is_leader:
            raise KafkaError(ErrorCode.NOT_LEADER_OR_FOLLOWER)
        if current_leader_epoch >= 0:
            epoch = partition.state.leader_epoch
            if current_leader_epoch < epoch:
                raise KafkaError(ErrorCode.FENCED_LEADER_EPOCH)
            if current_leader_epoch > epoch:
                raise KafkaError(ErrorCode.UNKNOWN_LEADER_EPOCH)
        return partition

    # --- produce --------------------------------------------------------------------------

    def append(
        self,
        partition: Partition,
        records: memoryview | None,
        produce_version: int,
        acks: int,
        origin: AppendOrigin = AppendOrigin.CLIENT,
    ) -> AppendOutcome:
        """Append a producer's data (validated first), or a coordinator's own batches (offset
        commits, transaction state, transaction markers: taken as they are)."""
        config = partition.log.config
        if acks == -1 and len(partition.state.isr) < partition.effective_min_isr:
            return AppendOutcome(
                ErrorCode.NOT_ENOUGH_REPLICAS, log_start_offset=partition.log.log_start_offset
            )
        now = int(time.time() * 1000)
        try:
            if records is None:
                raise KafkaError(ErrorCode.INVALID_RECORD, "produce request without records")
            if origin is AppendOrigin.COORDINATOR:
                result = partition.append_as_leader(bytearray(records), origin)
                return AppendOutcome(
                    base_offset=result.first_offset,
                    log_start_offset=result.log_start_offset,
                    last_offset=result.last_offset,
                )
            data = validate_for_append(
                records,
                produce_version=produce_version,
                now_ms=now,
                compression_type=config.compression_type,
                timestamp_type=config.message_timestamp_type,
                max_message_bytes=config.max_message_bytes,
                timestamp_difference_max_ms=config.message_timestamp_difference_max_ms,
                require_keys=config.compact,
                partition_name=f"{partition.topic}-{partition.index}",
            )
            if not data:
                return AppendOutcome(
                    base_offset=partition.log.log_end_offset,
                    log_start_offset=partition.log.log_start_offset,
                )
            result = partition.append_as_leader(data)
        except KafkaError as e:
            return AppendOutcome(
                e.code,
                log_start_offset=partition.log.log_start_offset,
                message=e.message,
                record_errors=e.record_errors,
            )
        return AppendOutcome(
            base_offset=result.first_offset,
            # result.max_timestamp: the stamped append time (the original one for a retried batch)
            log_append_time=(
                result.max_timestamp if config.message_timestamp_type == "LogAppendTime" else -1
            ),
            log_start_offset=result.log_start_offset,
            last_offset=result.last_offset,
        )

    def replicated(
        self, partition: Partition, required_offset: int, losses: int | None = None
    ) -> ErrorCode | None:
        """acks=all's answer for `partition` once its HW has passed `required_offset`, None
        while it has not. A partition with no other replica in its ISR has it at once, and the
        produce handler answers without waiting."""
        # Like Kafka's DelayedProduce: fail only once this broker no longer leads (a later
        # epoch with the same leader, e.g. after an ISR change, keeps the appended records).
        if (
            self.partitions.get((partition.topic, partition.index)) is not partition
            or not partition.is_leader
            or (losses is not None and partition.leadership_losses != losses)
        ):
            return ErrorCode.NOT_LEADER_OR_FOLLOWER
        if partition.high_watermark >= required_offset:
            if len(partition.state.isr) < partition.effective_min_isr:
                return ErrorCode.NOT_ENOUGH_REPLICAS_AFTER_APPEND
            return ErrorCode.NONE
        return None

    async def wait_for_replication(
        self, partition: Partition, required_offset: int, timeout_s: float
    ) -> ErrorCode:
        """acks=all: wait until the HW passes `required_offset` (the purgatory, §3.6)."""
        loop = asyncio.get_running_loop()
        deadline = loop.time() + timeout_s
        losses = partition.leadership_losses
        while True:
            if (code := self.replicated(partition, required_offset, losses)) is not None:
                return code
            remaining = deadline - loop.time()
            if remaining <= 0:
                return ErrorCode.REQUEST_TIMED_OUT
            await wait_for_any([partition.hw_waiters], remaining)

    # --- fetch wake-ups ---------------------------------------------------------------------

    async def wait_for_data(
        self, partitions: list[Partition], timeout_s: float, follower: bool = False
    ) -> None:
        """Return when any of `partitions` gets new data (a consumer: visible below the HW; a
        follower: appended), or after `timeout_s`."""
        if timeout_s <= 0 or not partitions:
            if timeout_s > 0:
                with waiting():
                    await asyncio.sleep(timeout_s)
            return
        await wait_for_any(
            (p.replica_waiters if follower else p.fetch_waiters for p in partitions), timeout_s
        )
