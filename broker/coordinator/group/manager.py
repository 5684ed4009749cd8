"""Groups and offsets kept in `__consumer_offsets`: which partitions this broker coordinates,
loading them when it becomes their leader, and writing group metadata and offsets.

The coordinator (protocol logic) sits on top; this module owns the cache of groups and every
read and write of the internal topic. Writes go through the replica manager like a produce
with acks=all and complete once the records are committed (reach the high watermark).
"""

from __future__ import annotations

import logging
import time
from collections.abc import Awaitable, Callable, Iterable
from concurrent.futures import Executor
from dataclasses import dataclass, field
from typing import Any

from ...protocol.errors import ErrorCode
from ...records.compression import Codec
from ...records.record import ControlType, Record, build_batch, control_type, decode_all
from ...replication.replica_manager import ReplicaManager
from ..log_append import append_committed
from ..partitions import CoordinatorPartitions, append_error
from . import formats as fmt
from .metadata import GroupMetadata, GroupState, OffsetAndMetadata, TopicPartition

log = logging.getLogger(__name__)


def now_ms() -> int:
    return int(time.time() * 1000)


@dataclass(frozen=True)
class GroupCoordinatorConfig:
    """The group.* and offsets.* broker settings the coordinator uses (Kafka's defaults)."""

    min_session_timeout_ms: int = 6000
    max_session_timeout_ms: int = 1800000
    initial_rebalance_delay_ms: int = 3000
    max_size: int = 2**31 - 1
    offsets_topic_num_partitions: int = 50
    offsets_topic_replication_factor: int = 3
    offsets_topic_segment_bytes: int = 100 * 1024 * 1024
    offsets_topic_compression: int = 0
    load_buffer_size: int = 5 * 1024 * 1024
    retention_ms: int = 10080 * 60 * 1000
    retention_check_interval_ms: int = 600000
    commit_timeout_ms: int = 5000
    metadata_max_bytes: int = 4096

    @classmethod
    def from_broker_config(cls, config: object) -> GroupCoordinatorConfig:
        get = config.get  # type: ignore[attr-defined]
        return cls(
            min_session_timeout_ms=get("group.min.session.timeout.ms"),
            max_session_timeout_ms=get("group.max.session.timeout.ms"),
            initial_rebalance_delay_ms=get("group.initial.rebalance.delay.ms"),
            max_size=get("group.max.size"),
            offsets_topic_num_partitions=get("offsets.topic.num.partitions"),
            offsets_topic_replication_factor=get("offsets.topic.replication.factor"),
            offsets_topic_segment_bytes=get("offsets.topic.segment.bytes"),
            offsets_topic_compression=get("offsets.topic.compression.codec"),
            load_buffer_size=get("offsets.load.buffer.size"),
            retention_ms=get("offsets.retention.minutes") * 60 * 1000,
            retention_check_interval_ms=get("offsets.retention.check.interval.ms"),
            commit_timeout_ms=get("offsets.commit.timeout.ms"),
            metadata_max_bytes=get("offset.metadata.max.bytes"),
        )

    def offsets_topic_configs(self) -> dict[str, str]:
        """Topic configs __consumer_offsets is created with (as Kafka's coordinator does)."""
        return {
            "cleanup.policy": "compact",
            "compression.type": "producer",
            "segment.bytes": str(self.offsets_topic_segment_bytes),
        }


# What a commit's client sees for an append error, and what members see when the group
# metadata could not be written, beyond the mapping every coordinator shares (Kafka's).
_OFFSET_COMMIT_ERRORS = {
    ErrorCode.MESSAGE_TOO_LARGE: ErrorCode.INVALID_COMMIT_OFFSET_SIZE,
    ErrorCode.RECORD_LIST_TOO_LARGE: ErrorCode.INVALID_COMMIT_OFFSET_SIZE,
    ErrorCode.INVALID_FETCH_SIZE: ErrorCode.INVALID_COMMIT_OFFSET_SIZE,
}
_GROUP_STORE_ERRORS = {
    ErrorCode.REQUEST_TIMED_OUT: ErrorCode.REBALANCE_IN_PROGRESS,
    ErrorCode.MESSAGE_TOO_LARGE: ErrorCode.UNKNOWN_SERVER_ERROR,
    ErrorCode.RECORD_LIST_TOO_LARGE: ErrorCode.UNKNOWN_SERVER_ERROR,
    ErrorCode.INVALID_FETCH_SIZE: ErrorCode.UNKNOWN_SERVER_ERROR,
}


def java_length(s: str) -> int:
    """String.length() in Java: UTF-16 code units (what offset.metadata.max.bytes limits)."""
    return len(s.encode("utf-16-le")) // 2


# --- loading -------------------------------------------------------------------------------


@dataclass
class _Loaded:
    """What a partition's records add up to, the last value per key winning."""

    offsets: dict[str, dict[TopicPartition, OffsetAndMetadata]] = field(default_factory=dict)
    groups: dict[str, fmt.GroupValue | None] = field(default_factory=dict)
    # Transactional offset commits wait for their producer's COMMIT marker.
    pending: dict[int, dict[tuple[str, TopicPartition], OffsetAndMetadata | None]] = field(
        default_factory=dict
    )

    def put_offset(self, group: str, tp: TopicPartition, value: OffsetAndMetadata | None) -> None:
        if value is None:
            per_group = self.offsets.get(group)
            if per_group is not None:
                per_group.pop(tp, None)
        else:
            self.offsets.setdefault(group, {})[tp] = value

    def put_committed_txn_offset(
        self, group: str, tp: TopicPartition, value: OffsetAndMetadata
    ) -> None:
        """A transactional offset whose COMMIT marker was read: it wins unless a later record
        (a plain commit written after it) already holds the partition."""
        current = self.offsets.get(group, {}).get(tp)
        if current is None or current.record_offset < value.record_offset:
            self.offsets.setdefault(group, {})[tp] = value


# One decoded batch: (last offset, producer id, is transactional, entries). An entry is
# ("control", type) or ("offset"/"group", key, value-or-None, record offset).
_Batch = tuple[int, int, bool, list[tuple]]


def _decode_chunk(data: bytes) -> list[_Batch]:
    """Parse whole batches of __consumer_offsets (runs in a worker thread)."""
    out: list[_Batch] = []
    for header, records in decode_all(data, allow_partial_tail=True):
        entries: list[tuple] = []
        if header.is_control:
            for r in records:
                entries.append(("control", control_type(r)))
        else:
            for r in records:
                if r.key is None:
                    continue
                try:
                    key = fmt.parse_key(r.key)
                    if isinstance(key, fmt.OffsetKey):
                        value = None if r.value is None else fmt.parse_offset_value(r.value)
                        entries.append(("offset", key, value, r.offset))
                    elif isinstance(key, fmt.GroupKey):
                        value = None if r.value is None else fmt.parse_group_value(r.value)
                        entries.append(("group", key, value, r.offset))
                except fmt.FormatError as e:
                    log.warning("skipping unreadable __consumer_offsets record %d: %s", r.offset, e)
        out.append((header.last_offset, header.producer_id, header.is_transactional, entries))
    return out


class GroupMetadataManager(CoordinatorPartitions):
    def __init__(
        self,
        replica_manager: ReplicaManager,
        config: GroupCoordinatorConfig,
        *,
        partition_count: Callable[[], int | None] | None = None,
        executor: Executor | None = None,
    ) -> None:
        super().__init__(
            replica_manager,
            fmt.OFFSETS_TOPIC,
            fmt.partition_for,
            default_partitions=config.offsets_topic_num_partitions,
            load_buffer_size=config.load_buffer_size,
            partition_count=partition_count,
            executor=executor,
        )
        self.config = config
        self.groups: dict[str, GroupMetadata] = {}
        self.owned: dict[int, int] = {}  # partition -> leader epoch, loaded
        # Groups with transactional offsets of each producer id awaiting its marker.
        self.open_groups_for_producer: dict[int, set[str]] = {}

    # -- partitions ---------------------------------------------------------------------

    def is_loading(self, group_id: str) -> bool:
        return self.partition_for(group_id) in self.loading

    def is_local(self, group_id: str) -> bool:
        return self.partition_for(group_id) in self.owned

    @property
    def any_loading(self) -> bool:
        return bool(self.loading)

    def group_not_exists(self, group_id: str) -> bool:
        group = self.groups.get(group_id)
        return self.is_local(group_id) and (group is None or group.is_(GroupState.DEAD))

    def get_group(self, group_id: str) -> GroupMetadata | None:
        return self.groups.get(group_id)

    def add_group(self, group: GroupMetadata) -> GroupMetadata:
        return self.groups.setdefault(group.group_id, group)

    def schedule_load(
        self, partition: int, epoch: int, on_loaded: Callable[[GroupMetadata], None]
    ) -> None:
        """Become the coordinator of `partition`: load it unless already loaded at `epoch`."""
        if self.owned.get(partition, -1) >= epoch or self.loading.get(partition, -1) >= epoch:
            return
        if partition in self.owned:
            # Still the leader, under a newer leader epoch (the controller changed the ISR): the
            # groups in memory are the current ones. Loading again would replace live groups,
            # whose members and timers carry on, with what the log held when the load began,
            # losing the commits made meanwhile (Kafka keeps a cached group over a loaded one).
            self.owned[partition] = epoch
            return
        self.owned.pop(partition, None)
        self.start_load(partition, epoch, lambda: self._load(partition, epoch, on_loaded))

    def unload_partition(
        self, partition: int, on_unloaded: Callable[[GroupMetadata], None]
    ) -> None:
        """No longer coordinator of `partition`: drop (and fence) its groups."""
        self.owned.pop(partition, None)
        self.stop_load(partition)
        n = self.num_partitions()
        for group_id, group in list(self.groups.items()):
            if fmt.partition_for(group_id, n) == partition:
                del self.groups[group_id]
                on_unloaded(group)
        for producer_id, groups in list(self.open_groups_for_producer.items()):
            groups -= {g for g in groups if fmt.partition_for(g, n) == partition}
            if not groups:
                del self.open_groups_for_producer[producer_id]

    def shutdown(self, on_unloaded: Callable[[GroupMetadata], None]) -> None:
        for partition in set(self.owned) | set(self.loading):
            self.unload_partition(partition, on_unloaded)
        self.stop_all_loads()

    async def _load(
        self, partition: int, epoch: int, on_loaded: Callable[[GroupMetadata], None]
    ) -> None:
        started = time.monotonic()
        loaded = _Loaded()
        async for _, producer_id, transactional, entries in self.read_batches(
            partition, epoch, _decode_chunk
        ):
            self._apply(loaded, producer_id, transactional, entries)
        if not self.is_current_load(partition, epoch):
            return
        now = now_ms()
        count = 0
        for group_id, value in loaded.groups.items():
            if value is None:
                continue
            group = GroupMetadata.from_value(group_id, value, now)
            group.offsets = loaded.offsets.pop(group_id, {})
            self.groups[group_id] = group
            on_loaded(group)
            count += 1
        for group_id, offsets in loaded.offsets.items():
            if not offsets:
                continue
            # Offsets without (live) group metadata: a group that only commits.
            group = GroupMetadata(group_id, GroupState.EMPTY, now)
            group.offsets = offsets
            self.groups[group_id] = group
            on_loaded(group)
            count += 1
        # Transactions still open in the log: their offsets wait for the producer's marker.
        for producer_id, pending in loaded.pending.items():
            for (group_id, tp), value in pending.items():
                if value is None:
                    continue
                group = self.groups.get(group_id)
                if group is None:
                    group = self.groups[group_id] = GroupMetadata(group_id, GroupState.EMPTY, now)
                    on_loaded(group)
                    count += 1
                group.prepare_txn_offset_commit(producer_id, {tp: value})
                self.open_groups_for_producer.setdefault(producer_id, set()).add(group_id)
        del self.loading[partition]
        self.owned[partition] = epoch
        log.info(
            "loaded %d groups of __consumer_offsets-%d in %.0f ms",
            count,
            partition,
            (time.monotonic() - started) * 1000,
        )

    @staticmethod
    def _apply(loaded: _Loaded, producer_id: int, transactional: bool, entries: list) -> None:
        for entry in entries:
            kind = entry[0]
            if kind == "control":
                pending = loaded.pending.pop(producer_id, None)
                if pending and entry[1] == ControlType.COMMIT:
                    for (group, tp), value in pending.items():
                        if value is None:
                            loaded.put_offset(group, tp, None)
                        else:
                            loaded.put_committed_txn_offset(group, tp, value)
                continue
            _, key, value, record_offset = entry
            if kind == "offset":
                tp = (key.topic, key.partition)
                offset = None
                if value is not None:
                    offset = OffsetAndMetadata(
                        value.offset, value.leader_epoch, value.metadata,
                        value.commit_timestamp, value.expire_timestamp, record_offset,
                    )  # fmt: skip
                if transactional:
                    loaded.pending.setdefault(producer_id, {})[(key.group, tp)] = offset
                else:
                    loaded.put_offset(key.group, tp, offset)
            else:
                loaded.groups[key.group] = value

    # -- writes -------------------------------------------------------------------------

    async def _append(
        self, partition: int, records: list[Record], **batch_args: Any
    ) -> tuple[ErrorCode, int]:
        """Append to our __consumer_offsets partition with acks=all; (error, base offset).
        `batch_args`: producer fields of a transactional batch."""
        batch = build_batch(
            records, compression=Codec(self.config.offsets_topic_compression), **batch_args
        )
        return await append_committed(
            self.replica_manager,
            fmt.OFFSETS_TOPIC,
            partition,
            batch,
            self.config.commit_timeout_ms / 1000,
            records=len(records),
        )

    def _check_offsets(
        self, offsets: dict[TopicPartition, OffsetAndMetadata]
    ) -> tuple[dict[TopicPartition, ErrorCode], dict[TopicPartition, OffsetAndMetadata]]:
        """(errors, offsets to write): offset.metadata.max.bytes is checked per partition."""
        errors: dict[TopicPartition, ErrorCode] = {}
        valid: dict[TopicPartition, OffsetAndMetadata] = {}
        for tp, o in offsets.items():
            if java_length(o.metadata) > self.config.metadata_max_bytes:
                errors[tp] = ErrorCode.OFFSET_METADATA_TOO_LARGE
            else:
                valid[tp] = o
        return errors, valid

    @staticmethod
    def _offset_records(
        group_id: str, offsets: dict[TopicPartition, OffsetAndMetadata], *, transactional: bool
    ) -> list[Record]:
        """One record per offset; transactional offsets carry no expire timestamp."""
        now = now_ms()
        return [
            Record(
                offset=i,
                timestamp=now,
                key=fmt.offset_key(group_id, tp[0], tp[1]),
                value=fmt.offset_value(
                    fmt.OffsetValue(
                        o.offset,
                        o.leader_epoch,
                        o.metadata,
                        o.commit_timestamp,
                        -1 if transactional else o.expire_timestamp,
                    )
                ),
            )  # fmt: skip
            for i, (tp, o) in enumerate(offsets.items())
        ]

    def store_group(
        self, group: GroupMetadata, assignment: dict[str, bytes]
    ) -> Awaitable[ErrorCode]:
        """Write the group's current generation (with `assignment`); the record is built now,
        the returned awaitable completes when it is committed."""
        record = Record(
            timestamp=now_ms(),
            key=fmt.group_key(group.group_id),
            value=fmt.group_value(group.to_value(assignment)),
        )
        partition = self.partition_for(group.group_id)

        async def write() -> ErrorCode:
            code, _ = await self._append(partition, [record])
            if code != ErrorCode.NONE:
                log.warning(
                    "storing metadata of group %s (generation %d) failed: %s",
                    group.group_id, group.generation_id, code.name,
                )  # fmt: skip
            return append_error(code, _GROUP_STORE_ERRORS)

        return write()

    async def store_offsets(
        self, group: GroupMetadata, offsets: dict[TopicPartition, OffsetAndMetadata]
    ) -> dict[TopicPartition, ErrorCode]:
        """Commit offsets of a group (offset.metadata.max.bytes checked per partition)."""
        errors, valid = self._check_offsets(offsets)
        if not valid:
            return errors
        records = self._offset_records(group.group_id, valid, transactional=False)
        group.pending_offset_commits.update(valid.keys())
        try:
            code, base = await self._append(self.partition_for(group.group_id), records)
        finally:
            group.pending_offset_commits.subtract(valid.keys())
            group.pending_offset_commits = +group.pending_offset_commits
        if code == ErrorCode.NONE and not group.is_(GroupState.DEAD):
            for i, (tp, o) in enumerate(valid.items()):
                o.record_offset = base + i
                group.on_offset_commit_append(tp, o)
        if code != ErrorCode.NONE:
            log.warning("committing offsets of group %s failed: %s", group.group_id, code.name)
        errors.update(dict.fromkeys(valid, append_error(code, _OFFSET_COMMIT_ERRORS)))
        return errors

    async def store_txn_offsets(
        self,
        group: GroupMetadata,
        producer_id: int,
        producer_epoch: int,
        offsets: dict[TopicPartition, OffsetAndMetadata],
    ) -> dict[TopicPartition, ErrorCode]:
        """TxnOffsetCommit: write the offsets in a transactional batch of the producer; they
        stay pending until its COMMIT marker reaches this partition."""
        errors, valid = self._check_offsets(offsets)
        if not valid:
            return errors
        records = self._offset_records(group.group_id, valid, transactional=True)
        self.open_groups_for_producer.setdefault(producer_id, set()).add(group.group_id)
        group.prepare_txn_offset_commit(producer_id, valid)
        code, base = await self._append(
            self.partition_for(group.group_id),
            records,
            producer_id=producer_id,
            producer_epoch=producer_epoch,
            base_sequence=0,
            transactional=True,
        )
        for i, (tp, o) in enumerate(valid.items()):
            if code == ErrorCode.NONE:
                o.record_offset = base + i
            else:
                group.fail_pending_txn_offset_commit(producer_id, tp, o)
        if code != ErrorCode.NONE:
            log.warning("transactional offset commit of group %s failed: %s",
                        group.group_id, code.name)  # fmt: skip
        errors.update(dict.fromkeys(valid, append_error(code, _OFFSET_COMMIT_ERRORS)))
        return errors

    def complete_txn_offsets(self, producer_id: int, partitions: set[int], committed: bool) -> None:
        """The producer's marker is written to these __consumer_offsets partitions."""
        groups = self.open_groups_for_producer.get(producer_id)
        if not groups:
            return
        for group_id in [g for g in groups if self.partition_for(g) in partitions]:
            groups.discard(group_id)
            group = self.groups.get(group_id)
            if group is not None and not group.is_(GroupState.DEAD):
                group.complete_pending_txn_offset_commit(producer_id, committed)
        if not groups:
            del self.open_groups_for_producer[producer_id]

    async def cleanup_group_metadata(
        self,
        groups: Iterable[GroupMetadata],
        selector: Callable[[GroupMetadata], dict[TopicPartition, object]],
    ) -> int:
        """Remove offsets chosen by `selector` (writing tombstones); groups left Empty without
        offsets die and get a metadata tombstone too. Returns the number of offsets removed."""
        removed_total = 0
        writes = []
        now = now_ms()
        for group in list(groups):
            removed = selector(group)
            if group.is_(GroupState.EMPTY) and not group.has_offsets():
                log.info("group %s is now dead (empty, without offsets)", group.group_id)
                group.transition_to(GroupState.DEAD, now)
            tombstones = [
                Record(offset=i, timestamp=now, key=fmt.offset_key(group.group_id, t, p))
                for i, (t, p) in enumerate(removed)
            ]
            if group.is_(GroupState.DEAD):
                if self.groups.get(group.group_id) is group:
                    del self.groups[group.group_id]
                tombstones.append(
                    Record(offset=len(tombstones), timestamp=now, key=fmt.group_key(group.group_id))
                )
            removed_total += len(removed)
            if tombstones:
                writes.append((group.group_id, self.partition_for(group.group_id), tombstones))
        for group_id, partition, tombstones in writes:
            code, _ = await self._append(partition, tombstones)
            if code != ErrorCode.NONE:
                log.warning("writing tombstones for group %s failed: %s", group_id, code.name)
        return removed_total
