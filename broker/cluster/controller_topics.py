"""Controller events about topics: creation and partition addition (/brokers/topics) and topic
deletion (/admin/delete_topics, StopReplica(delete) to every replica, then the znodes)."""

from __future__ import annotations

import logging

from ..protocol.errors import ErrorCode
from .control import (
    EPOCH_DURING_DELETE,
    PartitionErrors,
    StopReplicaRequest,
)
from .controller_requests import _Batch

log = logging.getLogger(__name__)


class TopicEventsMixin:
    """Topic creation, growth and deletion: part of `Controller` (controller.py), which holds
    the state (`ctx`, `epoch`, `zk`) and the event queue these handlers run on."""

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
