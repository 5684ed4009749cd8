"""High-level, blocking operations on Kafka's znodes (Kafka's KafkaZkClient/AdminZkClient).

Everything here runs on any `MetadataStore` backend. Controller writes pass `fence` (the ZK
version of /controller_epoch that the controller won with): the write is then sent as
`multi[check(/controller_epoch, fence), op...]`, and a failed check raises ControllerMovedError.
Async callers run these methods through `metadata_store.run_blocking`.
"""

from __future__ import annotations

import logging
import time
import uuid
from collections.abc import Mapping, Sequence

from . import zk_data as zk
from .metadata_store import (
    BadVersionError,
    CheckOp,
    CreateOp,
    DeleteOp,
    MetadataStore,
    NodeExistsError,
    NoNodeError,
    Op,
    OpResult,
    SetOp,
    Stat,
    WatchCallback,
)

log = logging.getLogger(__name__)

PRODUCER_ID_BLOCK_SIZE = 1000


class ControllerMovedError(Exception):
    """A fenced write failed: another controller has been elected since."""


class BrokerIdInUseError(Exception):
    """/brokers/ids/<id> exists and belongs to another live session."""


class KafkaZk:
    def __init__(self, store: MetadataStore) -> None:
        self.store = store

    # -- generic

    def _multi(self, ops: Sequence[Op], fence: int | None) -> list[OpResult]:
        """Run ops, prefixed by the controller-epoch check when fenced."""
        if fence is None:
            return self.store.multi(ops)
        try:
            return self.store.multi([CheckOp(zk.CONTROLLER_EPOCH, fence), *ops])[1:]
        except (BadVersionError, NoNodeError) as e:
            if e.op_index == 0:
                raise ControllerMovedError(
                    f"controller epoch zk version {fence} is stale"
                ) from None
            raise

    def get_data(self, path: str, watch: WatchCallback | None = None) -> tuple[bytes, Stat] | None:
        try:
            return self.store.get(path, watch=watch)
        except NoNodeError:
            return None

    def children(self, path: str, watch: WatchCallback | None = None) -> list[str]:
        try:
            return self.store.get_children(path, watch=watch)
        except NoNodeError:
            return []

    def create_recursive(self, path: str, data: bytes = b"", fence: int | None = None) -> None:
        """Create `path` (and empty parents); NodeExistsError if `path` already exists."""
        missing = []
        parent = path.rsplit("/", 1)[0]
        while parent and self.store.exists(parent) is None:
            missing.append(parent)
            parent = parent.rsplit("/", 1)[0]
        ops: list[Op] = [CreateOp(p) for p in reversed(missing)]
        ops.append(CreateOp(path, data))
        try:
            self._multi(ops, fence)
        except NodeExistsError as e:
            if e.path != path:  # a parent appeared concurrently: retry once
                self.create_recursive(path, data, fence)
                return
            raise

    def delete_recursive(self, path: str, fence: int | None = None) -> None:
        """Delete a subtree (no error if absent). Fenced deletes run as one multi."""
        if fence is None:
            try:
                self.store.delete(path, recursive=True)
            except NoNodeError:
                pass
            return
        order: list[str] = []

        def walk(p: str) -> None:
            for child in self.children(p):
                walk(f"{p}/{child}")
            order.append(p)

        if self.store.exists(path) is None:
            return
        walk(path)
        self._multi([DeleteOp(p) for p in order], fence)

    # -- startup

    def create_top_level_paths(self) -> None:
        for path in zk.PERSISTENT_PATHS:
            self.store.ensure_path(path)

    def get_or_create_cluster_id(self, proposed: str | None = None) -> str:
        found = self.get_data(zk.CLUSTER_ID)
        if found is not None:
            return zk.decode_cluster_id(found[0])
        cluster_id = proposed or zk.new_cluster_id()
        try:
            self.store.create(zk.CLUSTER_ID, zk.encode_cluster_id(cluster_id), makepath=True)
            return cluster_id
        except NodeExistsError:
            return zk.decode_cluster_id(self.store.get(zk.CLUSTER_ID)[0])

    def generate_broker_id(self, reserved_max_id: int) -> int:
        """Kafka's scheme: bump /brokers/seqid's version; id = version + reserved.broker.max.id."""
        self.store.ensure_path(zk.BROKER_SEQID)
        stat = self.store.set(zk.BROKER_SEQID, b"")
        return stat.version + reserved_max_id

    def register_broker(self, info: zk.BrokerRegistration) -> int:
        """Create the ephemeral /brokers/ids/<id>; return the broker epoch (its czxid)."""
        path = zk.broker_path(info.id)
        self.store.ensure_path(zk.BROKER_IDS)
        data = zk.encode_broker(info)
        try:
            self.store.create(path, data, ephemeral=True)
        except NodeExistsError:
            stat = self.store.exists(path)
            if stat is None or stat.ephemeral_owner != self.store.session_id:
                raise BrokerIdInUseError(
                    f"Error while creating ephemeral at {path}, node already exists and owner "
                    f"'{stat.ephemeral_owner if stat else 0}' does not match current session "
                    f"'{self.store.session_id}'"
                ) from None
            self.store.set(path, data)
        stat = self.store.exists(path)
        assert stat is not None
        return stat.czxid

    # -- brokers

    def get_broker_ids(self, watch: WatchCallback | None = None) -> list[int]:
        return sorted(int(c) for c in self.children(zk.BROKER_IDS, watch))

    def get_broker(self, broker_id: int) -> zk.BrokerRegistration | None:
        found = self.get_data(zk.broker_path(broker_id))
        if found is None:
            return None
        return zk.decode_broker(broker_id, found[0], epoch=found[1].czxid)

    def get_all_brokers(self) -> dict[int, zk.BrokerRegistration]:
        out = {}
        for bid in self.get_broker_ids():
            reg = self.get_broker(bid)
            if reg is not None:
                out[bid] = reg
        return out

    # -- controller

    def get_controller_id(self, watch: WatchCallback | None = None) -> int | None:
        """Reads /controller; with `watch`, watches its creation/change/deletion."""
        if watch is not None:
            stat = self.store.exists(zk.CONTROLLER, watch=watch)
            if stat is None:
                return None
        found = self.get_data(zk.CONTROLLER)
        return zk.decode_controller(found[0]) if found else None

    def get_controller_epoch(self) -> tuple[int, int] | None:
        """(epoch, zk version of /controller_epoch) or None."""
        found = self.get_data(zk.CONTROLLER_EPOCH)
        return (zk.decode_controller_epoch(found[0]), found[1].version) if found else None

    def try_become_controller(self, broker_id: int) -> tuple[int, int] | None:
        """Kafka's election: create ephemeral /controller and bump /controller_epoch atomically.

        Returns (controller epoch, epoch zk version) when this broker won, None when another
        broker is controller.
        """
        if self.get_controller_id() is not None:
            return None
        current = self.get_controller_epoch()
        if current is None:
            try:
                self.store.create(zk.CONTROLLER_EPOCH, zk.encode_controller_epoch(0))
            except NodeExistsError:
                pass
            current = self.get_controller_epoch()
            assert current is not None
        epoch, version = current
        try:
            results = self.store.multi(
                [
                    CreateOp(
                        zk.CONTROLLER,
                        zk.encode_controller(broker_id, int(time.time() * 1000)),
                        ephemeral=True,
                    ),
                    SetOp(zk.CONTROLLER_EPOCH, zk.encode_controller_epoch(epoch + 1), version),
                ]
            )
        except (NodeExistsError, BadVersionError):
            again = self.get_controller_epoch()
            if self.get_controller_id() == broker_id and again and again[0] == epoch + 1:
                return again
            return None
        stat = results[1]
        assert isinstance(stat, Stat)
        return epoch + 1, stat.version

    def delete_controller(self, fence: int | None = None) -> None:
        try:
            self._multi([DeleteOp(zk.CONTROLLER)], fence)
        except NoNodeError:
            pass

    # -- topics

    def get_all_topics(self, watch: WatchCallback | None = None) -> list[str]:
        return self.children(zk.BROKER_TOPICS, watch)

    def topic_exists(self, topic: str) -> bool:
        return self.store.exists(zk.topic_path(topic)) is not None

    def get_topic_assignment(
        self, topic: str, watch: WatchCallback | None = None
    ) -> tuple[zk.TopicAssignment, int] | None:
        """(assignment, znode version) or None; `watch` is a data watch on the topic node."""
        if watch is not None:
            if self.store.exists(zk.topic_path(topic), watch=watch) is None:
                return None
        found = self.get_data(zk.topic_path(topic))
        if found is None:
            return None
        return zk.decode_topic(found[0]), found[1].version

    def create_topic_assignment(
        self,
        topic: str,
        topic_id: uuid.UUID | None,
        partitions: Mapping[int, Sequence[int] | zk.ReplicaAssignment],
    ) -> None:
        self.store.ensure_path(zk.BROKER_TOPICS)
        self.store.create(zk.topic_path(topic), zk.encode_topic(topic_id, partitions))

    def set_topic_assignment(
        self,
        topic: str,
        topic_id: uuid.UUID | None,
        partitions: Mapping[int, Sequence[int] | zk.ReplicaAssignment],
        expected_version: int = -1,
        fence: int | None = None,
    ) -> Stat:
        result = self._multi(
            [SetOp(zk.topic_path(topic), zk.encode_topic(topic_id, partitions), expected_version)],
            fence,
        )
        assert isinstance(result[0], Stat)
        return result[0]

    def get_partition_state(self, topic: str, partition: int) -> zk.PartitionState | None:
        found = self.get_data(zk.partition_state_path(topic, partition))
        if found is None:
            return None
        return zk.decode_partition_state(found[0], found[1].version)

    def create_partition_state(
        self, topic: str, partition: int, state: zk.PartitionState, fence: int | None
    ) -> zk.PartitionState:
        """Create the state znode (and its empty parents); returns the state with its epoch."""
        for parent in (zk.topic_partitions_path(topic), zk.partition_path(topic, partition)):
            if self.store.exists(parent) is None:
                try:
                    self._multi([CreateOp(parent)], fence)
                except NodeExistsError:
                    pass
        self._multi(
            [CreateOp(zk.partition_state_path(topic, partition), zk.encode_partition_state(state))],
            fence,
        )
        return _with_epoch(state, 0)

    def create_partition_states(
        self, topic: str, states: Mapping[int, zk.PartitionState], fence: int | None
    ) -> dict[int, zk.PartitionState]:
        """Create many state znodes in one transaction. Where a state already exists (a
        previous controller got that far), the existing state is returned instead."""
        ops: list[Op] = []
        if self.store.exists(zk.topic_partitions_path(topic)) is None:
            ops.append(CreateOp(zk.topic_partitions_path(topic)))
        for p, state in sorted(states.items()):
            if self.store.exists(zk.partition_path(topic, p)) is None:
                ops.append(CreateOp(zk.partition_path(topic, p)))
            ops.append(
                CreateOp(zk.partition_state_path(topic, p), zk.encode_partition_state(state))
            )
        try:
            self._multi(ops, fence)
            return {p: _with_epoch(s, 0) for p, s in states.items()}
        except NodeExistsError:
            pass
        out = {}
        for p, state in states.items():
            try:
                out[p] = self.create_partition_state(topic, p, state, fence)
            except NodeExistsError:
                existing = self.get_partition_state(topic, p)
                if existing is not None:
                    out[p] = existing
        return out

    def update_partition_state(
        self, topic: str, partition: int, state: zk.PartitionState, fence: int | None
    ) -> zk.PartitionState:
        """Conditional on `state.partition_epoch` (the version read before); returns the new
        state with the bumped partition epoch. BadVersionError if someone else wrote it."""
        result = self._multi(
            [
                SetOp(
                    zk.partition_state_path(topic, partition),
                    zk.encode_partition_state(state),
                    state.partition_epoch,
                )
            ],
            fence,
        )
        stat = result[0]
        assert isinstance(stat, Stat)
        return _with_epoch(state, stat.version)

    # -- deletion

    def get_topics_marked_for_deletion(self, watch: WatchCallback | None = None) -> list[str]:
        return self.children(zk.DELETE_TOPICS, watch)

    def is_topic_marked_for_deletion(self, topic: str) -> bool:
        return self.store.exists(zk.delete_topic_path(topic)) is not None

    def mark_topic_for_deletion(self, topic: str) -> bool:
        """Create /admin/delete_topics/<t>; False if it was already there."""
        self.store.ensure_path(zk.DELETE_TOPICS)
        try:
            self.store.create(zk.delete_topic_path(topic))
            return True
        except NodeExistsError:
            return False

    def delete_topic_deletion_marker(self, topic: str, fence: int | None = None) -> None:
        try:
            self._multi([DeleteOp(zk.delete_topic_path(topic))], fence)
        except NoNodeError:
            pass

    def delete_topic_znodes(self, topic: str, fence: int | None = None) -> None:
        """Final step of a deletion: the topic subtree, its config, then the marker."""
        self.delete_recursive(zk.topic_path(topic), fence)
        try:
            self._multi([DeleteOp(zk.entity_config_path(zk.TOPICS, topic))], fence)
        except NoNodeError:
            pass
        self.delete_topic_deletion_marker(topic, fence)

    # -- ISR change notifications (leaders that write ISR changes to ZooKeeper themselves)

    def _notifications(self, root: str, prefix: str, watch: WatchCallback | None) -> list[str]:
        """Names of the pending sequential notifications under `root`, oldest first."""
        return sorted(n for n in self.children(root, watch) if n.startswith(prefix))

    def _delete_notifications(self, root: str, names: Sequence[str], fence: int | None) -> None:
        for name in names:
            try:
                self._multi([DeleteOp(f"{root}/{name}")], fence)
            except NoNodeError:
                pass

    def get_isr_change_notifications(self, watch: WatchCallback | None = None) -> list[str]:
        """Names of the pending /isr_change_notification children, oldest first."""
        return self._notifications(zk.ISR_CHANGE_NOTIFICATION, zk.ISR_CHANGE_PREFIX, watch)

    def get_isr_change_partitions(self, names: Sequence[str]) -> list[tuple[str, int]]:
        """The partitions listed by these notifications (a vanished one lists nothing)."""
        out: list[tuple[str, int]] = []
        for name in names:
            found = self.get_data(f"{zk.ISR_CHANGE_NOTIFICATION}/{name}")
            if found is not None:
                out.extend(zk.decode_partition_list(found[0]))
        return out

    def delete_isr_change_notifications(self, names: Sequence[str], fence: int | None) -> None:
        self._delete_notifications(zk.ISR_CHANGE_NOTIFICATION, names, fence)

    # -- log dir failures (a broker whose log dir failed asks the controller to look at it)

    def propagate_log_dir_event(self, broker_id: int) -> None:
        """`/log_dir_event_notification/log_dir_event_<seq>` naming this broker."""
        self.store.create(
            f"{zk.LOG_DIR_EVENT_NOTIFICATION}/{zk.LOG_DIR_EVENT_PREFIX}",
            zk.encode_log_dir_event(broker_id),
            sequential=True,
            makepath=True,
        )

    def get_log_dir_event_notifications(self, watch: WatchCallback | None = None) -> list[str]:
        return self._notifications(zk.LOG_DIR_EVENT_NOTIFICATION, zk.LOG_DIR_EVENT_PREFIX, watch)

    def get_log_dir_event_brokers(self, names: Sequence[str]) -> list[int]:
        """The brokers of these log dir failure notifications (a vanished one names none)."""
        out = []
        for name in names:
            found = self.get_data(f"{zk.LOG_DIR_EVENT_NOTIFICATION}/{name}")
            if found is not None:
                broker, event = zk.decode_log_dir_event(found[0])
                if event == zk.LOG_DIR_FAILURE:
                    out.append(broker)
        return out

    def delete_log_dir_event_notifications(self, names: Sequence[str], fence: int | None) -> None:
        self._delete_notifications(zk.LOG_DIR_EVENT_NOTIFICATION, names, fence)

    # -- entity configs

    def get_entity_config(self, entity_type: str, entity_name: str) -> dict[str, str]:
        found = self.get_data(zk.entity_config_path(entity_type, entity_name))
        return zk.decode_entity_config(found[0]) if found else {}

    def set_entity_config(
        self, entity_type: str, entity_name: str, config: Mapping[str, str]
    ) -> None:
        """Write /config/<type>/<name> without a change notification (topic creation)."""
        path = zk.entity_config_path(entity_type, entity_name)
        data = zk.encode_entity_config(config)
        try:
            self.store.set(path, data)
        except NoNodeError:
            try:
                self.create_recursive(path, data)
            except NodeExistsError:
                self.store.set(path, data)

    def change_entity_config(
        self, entity_type: str, entity_name: str, config: Mapping[str, str]
    ) -> None:
        """Write the config, then announce it with a sequential /config/changes notification."""
        self.set_entity_config(entity_type, entity_name, config)
        self.store.ensure_path(zk.CONFIG_CHANGES)
        self.store.create(
            f"{zk.CONFIG_CHANGES}/{zk.CONFIG_CHANGE_PREFIX}",
            zk.encode_config_change(f"{entity_type}/{entity_name}"),
            sequential=True,
        )

    # -- producer ids

    def allocate_producer_id_block(
        self, broker_id: int, size: int = PRODUCER_ID_BLOCK_SIZE
    ) -> zk.ProducerIdBlock:
        """Claim the next block of producer ids (conditional write, retried on conflicts)."""
        self.store.ensure_path(zk.LATEST_PRODUCER_ID_BLOCK)
        while True:
            data, stat = self.store.get(zk.LATEST_PRODUCER_ID_BLOCK)
            current = zk.decode_producer_id_block(data)
            start = 0 if current is None else current.block_end + 1
            block = zk.ProducerIdBlock(broker_id, start, start + size - 1)
            try:
                self.store.set(
                    zk.LATEST_PRODUCER_ID_BLOCK, zk.encode_producer_id_block(block), stat.version
                )
                return block
            except BadVersionError:
                continue


def _with_epoch(state: zk.PartitionState, epoch: int) -> zk.PartitionState:
    return zk.PartitionState(
        leader=state.leader,
        leader_epoch=state.leader_epoch,
        isr=state.isr,
        controller_epoch=state.controller_epoch,
        leader_recovery_state=state.leader_recovery_state,
        partition_epoch=epoch,
    )
