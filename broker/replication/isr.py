"""ISR maintenance on the leader: shrinking the ISR of lagging followers, expanding it when
they catch up, and writing each change to the metadata store.

ISR changes (choice, reference §3.4): the leader writes the partition state znode itself,
conditional on the partition epoch (its zkVersion), and publishes an
`/isr_change_notification/isr_change_<seq>` node for the controller to propagate, as ZK-mode
Kafka does before AlterPartition. It needs no controller round trip and no new RPC.

A mixin of `ReplicaManager`, which owns the state declared below.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import logging
from collections.abc import Awaitable, Callable
from typing import TYPE_CHECKING, Any

from ..cluster import zk_data as zk
from ..cluster.metadata_store import BadVersionError
from .partition import Partition, now_ms

log = logging.getLogger(__name__)


class IsrMaintenance:
    """The ISR side of the replica manager."""

    broker_id: int
    partitions: dict[tuple[str, int], Partition]
    isr_shrinks: int
    isr_expands: int
    zk: Any
    _io: Callable[..., Awaitable[Any]] | None
    replica_lag_time_max_ms: int
    _isr_task: asyncio.Task[None] | None

    if TYPE_CHECKING:

        def _spawn(self, coro: Awaitable[Any]) -> None: ...

    def _ensure_isr_task(self) -> None:
        if self._isr_task is not None and not self._isr_task.done():
            return
        try:
            loop = asyncio.get_running_loop()
        except RuntimeError:
            return
        self._isr_task = loop.create_task(self._isr_shrink_loop(), name="isr-shrink")

    async def _isr_shrink_loop(self) -> None:
        while True:
            await asyncio.sleep(self.replica_lag_time_max_ms / 2000)
            try:
                self.maybe_shrink_isr(now_ms())
            except Exception:
                log.exception("ISR shrink check failed")

    def maybe_shrink_isr(self, now: int) -> None:
        for partition in list(self.partitions.values()):
            if not partition.is_leader or not partition.replicated:
                continue
            new_isr = partition.isr_shrink(now, self.replica_lag_time_max_ms)
            if new_isr is not None:
                self.isr_shrinks += 1
                self._change_isr(partition, new_isr, "shrinking")

    def record_follower_fetch(
        self, partition: Partition, replica_id: int, fetch_offset: int, log_start: int
    ) -> None:
        new_isr = partition.update_follower_fetch(
            replica_id, fetch_offset, log_start, now_ms(), self.replica_lag_time_max_ms
        )
        if new_isr is not None:
            self.isr_expands += 1
            self._change_isr(partition, new_isr, "expanding")

    def _change_isr(self, partition: Partition, new_isr: list[int], how: str) -> None:
        log.info(
            "%s-%d: %s ISR %s -> %s",
            partition.topic,
            partition.index,
            how,
            partition.state.isr,
            new_isr,
        )
        self.propose_isr(partition, new_isr)

    def propose_isr(self, partition: Partition, new_isr: list[int]) -> None:
        proposal = list(new_isr)
        partition.pending_isr = proposal
        if self.zk is None or self._io is None:
            # No metadata store attached (unit tests): the change is only local.
            partition.isr_committed(proposal, partition.state.partition_epoch)
            return
        self._spawn(self._write_isr(partition, proposal))

    async def _write_isr(self, partition: Partition, proposal: list[int]) -> None:
        assert self._io is not None
        st = partition.state
        epoch = st.leader_epoch
        new = zk.PartitionState(
            leader=self.broker_id,
            leader_epoch=epoch,
            isr=tuple(proposal),
            controller_epoch=st.controller_epoch,
            partition_epoch=st.partition_epoch,
        )

        def still_ours() -> bool:
            return (
                partition.pending_isr is proposal
                and partition.is_leader
                and partition.state.leader_epoch == epoch
                and self.partitions.get((partition.topic, partition.index)) is partition
            )

        try:
            written = await self._io(
                self.zk.update_partition_state, partition.topic, partition.index, new, None
            )
        except BadVersionError:
            # Someone (the controller) changed the state: adopt it when it is still ours.
            current = await self._io(self.zk.get_partition_state, partition.topic, partition.index)
            if still_ours():
                partition.pending_isr = None
                if (
                    current is not None
                    and current.leader == self.broker_id
                    and current.leader_epoch == epoch
                ):
                    partition.isr_committed(list(current.isr), current.partition_epoch)
            return
        except Exception as e:
            log.warning("%s-%d: ISR write failed: %s", partition.topic, partition.index, e)
            if still_ours():
                partition.pending_isr = None
            return
        if still_ours():
            partition.isr_committed(list(written.isr), written.partition_epoch)
        with contextlib.suppress(Exception):
            await self._io(self._notify_isr_change, partition.topic, partition.index)

    def _notify_isr_change(self, topic: str, index: int) -> None:
        data = json.dumps(
            {"version": 1, "partitions": [{"topic": topic, "partition": index}]},
            separators=(",", ":"),
        ).encode()
        self.zk.store.create(
            f"{zk.ISR_CHANGE_NOTIFICATION}/{zk.ISR_CHANGE_PREFIX}",
            data,
            sequential=True,
            makepath=True,
        )
