"""The group coordinator's state machine and offsets, on a real log (replica manager + log
manager in a temporary directory), driven through its public calls on an asyncio loop.

Timeouts here are short so that sessions expire quickly; every wait is bounded generously
and nothing asserts how long anything took.
"""

from __future__ import annotations

import asyncio
import struct
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import Any

import pytest
from odradek.broker.coordinator.group import GroupCoordinator, GroupCoordinatorConfig
from odradek.broker.coordinator.group import formats as fmt
from odradek.broker.coordinator.group.metadata import JoinRequest, OffsetAndMetadata
from odradek.broker.protocol.errors import ErrorCode as E
from odradek.broker.records.record import ControlType, build_control_batch, decode_all
from odradek.broker.replication.partition import PartitionState
from odradek.broker.replication.producer_state import AppendOrigin
from odradek.broker.replication.replica_manager import ReplicaManager
from odradek.broker.storage import LogConfig, LogManager

TOPIC = fmt.OFFSETS_TOPIC
WAIT_S = 20.0
RANGE = [("range", b"\x00\x00\x00\x00\x00\x01\x00\x01t\xff\xff\xff\xff")]
ROUNDROBIN = [("roundrobin", b"rr")]


def config(**overrides: Any) -> GroupCoordinatorConfig:
    base = {
        "min_session_timeout_ms": 10,
        "max_session_timeout_ms": 60_000,
        "initial_rebalance_delay_ms": 0,
        "offsets_topic_num_partitions": 2,
    }
    return GroupCoordinatorConfig(**{**base, **overrides})


class Harness:
    """A coordinator leading both partitions of a 2-partition __consumer_offsets."""

    def __init__(self, tmp: Path, cfg: GroupCoordinatorConfig) -> None:
        self.tmp = tmp
        self.cfg = cfg
        self.logs = LogManager([tmp / "logs"], LogConfig.from_props({}))
        self.logs.startup()
        compact = LogConfig.from_props({"cleanup.policy": "compact"})
        self.replicas = ReplicaManager(1, self.logs, lambda topic: compact)
        self.coordinator = self.new_coordinator()

    def new_coordinator(self) -> GroupCoordinator:
        return GroupCoordinator(self.replicas, self.cfg, partition_count=lambda: 2)

    async def start(self, partitions: tuple[int, ...] = (0, 1), epoch: int = 0) -> None:
        await self.coordinator.start()
        for p in partitions:
            self.replicas.become_leader_or_follower(
                TOPIC, p, None, PartitionState(leader=1, leader_epoch=epoch, isr=[1], replicas=[1])
            )
            self.coordinator.on_elected(p, epoch)
        await until(lambda: all(self.coordinator.is_loaded(p) for p in partitions))

    async def restart_coordinator(self) -> None:
        """A new coordinator (as after a broker restart) loads the same log."""
        await self.coordinator.shutdown()
        self.coordinator = self.new_coordinator()
        await self.start(epoch=1)

    def records(self, partition: int) -> list[tuple[bytes, bytes | None]]:
        log = self.replicas.get(TOPIC, partition).log
        chunk = log.read(0, 10_000_000)
        if chunk is None:
            return []
        return [(r.key, r.value) for _, rs in decode_all(chunk.read()) for r in rs]

    def close(self) -> None:
        self.logs.shutdown()


async def until(predicate: Callable[[], bool], timeout: float = WAIT_S) -> None:
    deadline = asyncio.get_running_loop().time() + timeout
    while not predicate():
        assert asyncio.get_running_loop().time() < deadline, "condition not reached in time"
        await asyncio.sleep(0.005)


def run(tmp_path: Path, body: Callable[[Harness], Awaitable[None]], **cfg: Any) -> None:
    async def main() -> None:
        h = Harness(tmp_path, config(**cfg))
        try:
            await h.start()
            await body(h)
        finally:
            await h.coordinator.shutdown()
            h.close()

    asyncio.run(main())


def group_on(partition: int, prefix: str = "group") -> str:
    return next(
        f"{prefix}-{i}" for i in range(1000) if fmt.partition_for(f"{prefix}-{i}", 2) == partition
    )


async def join(
    c: GroupCoordinator,
    group: str,
    member_id: str = "",
    *,
    instance: str | None = None,
    session: int = 10_000,
    rebalance: int = 10_000,
    protocols: list[tuple[str, bytes]] = RANGE,
    protocol_type: str = "consumer",
    require_known: bool = False,
    skip: bool = False,
):
    return await c.join_group(
        JoinRequest(
            group, member_id, instance, "client", "/127.0.0.1", rebalance, session, protocol_type,
            protocols, require_known_member_id=require_known, supports_skip_assignment=skip,
        )
    )  # fmt: skip


async def join_known(c: GroupCoordinator, group: str, **kw: Any):
    """JoinGroup v4+: MEMBER_ID_REQUIRED first, then the real join."""
    first = await join(c, group, require_known=True, **kw)
    assert first.error == E.MEMBER_ID_REQUIRED and first.member_id
    return await join(c, group, first.member_id, require_known=True, **kw)


async def stable_group(c: GroupCoordinator, group: str, n: int, **kw: Any) -> list[Any]:
    """n members joined at once and synced; returns their join results (leader first)."""
    results = list(await asyncio.gather(*(join(c, group, **kw) for _ in range(n))))
    generations = {r.generation_id for r in results}
    if len(generations) > 1 or any(r.error for r in results):
        # Joins may straddle a rebalance: let everyone rejoin with its id.
        results = list(await asyncio.gather(*(join(c, group, r.member_id, **kw) for r in results)))
    assert {r.error for r in results} == {E.NONE}
    leader = next(r for r in results if r.leader_id == r.member_id)
    gen = leader.generation_id
    assignment = {m: f"assign-{m}".encode() for m, _, _ in leader.members}
    syncs = await asyncio.gather(
        *(
            c.sync_group(
                group,
                gen,
                r.member_id,
                kw.get("instance"),
                "consumer",
                "range",
                assignment if r is leader else {},
            )  # fmt: skip
            for r in results
        )
    )
    for r, s in zip(results, syncs, strict=True):
        assert s.error == E.NONE
        assert s.assignment == f"assign-{r.member_id}".encode()
    return [leader] + [r for r in results if r is not leader]


def state(c: GroupCoordinator, group: str) -> str:
    return c.describe_group(group)[1].state


# --- membership ---------------------------------------------------------------------------


def test_member_id_required_then_stable(tmp_path: Path) -> None:
    async def body(h: Harness) -> None:
        c = h.coordinator
        g = group_on(0)
        result = await join_known(c, g)
        assert result.error == E.NONE
        assert result.generation_id == 1
        assert result.leader_id == result.member_id
        assert result.member_id.startswith("client-")
        assert [m for m, _, _ in result.members] == [result.member_id]
        assert result.protocol_name == "range"
        assert state(c, g) == "CompletingRebalance"
        sync = await c.sync_group(g, 1, result.member_id, None, "consumer", "range", {})
        assert sync.error == E.NONE and sync.assignment == b""
        assert state(c, g) == "Stable"
        assert c.heartbeat(g, result.member_id, None, 1) == E.NONE
        summary = c.describe_group(g)[1]
        assert summary.protocol_type == "consumer" and summary.protocol == "range"
        assert [m.member_id for m in summary.members] == [result.member_id]
        assert summary.members[0].metadata == RANGE[0][1]

    run(tmp_path, body)


def test_second_member_triggers_rebalance(tmp_path: Path) -> None:
    async def body(h: Harness) -> None:
        c = h.coordinator
        g = group_on(1)
        (a,) = await stable_group(c, g, 1)
        b_join = asyncio.ensure_future(join(c, g))
        await until(lambda: state(c, g) == "PreparingRebalance")
        # The existing member learns about the rebalance from its heartbeat and rejoins.
        assert c.heartbeat(g, a.member_id, None, 1) == E.REBALANCE_IN_PROGRESS
        a2 = await join(c, g, a.member_id)
        b = await b_join
        assert a2.generation_id == b.generation_id == 2
        assert a2.leader_id == a.member_id == b.leader_id
        assert {m for m, _, _ in a2.members} == {a.member_id, b.member_id}
        assert b.members == []
        follower_sync = asyncio.ensure_future(c.sync_group(g, 2, b.member_id, None, None, None, {}))
        await asyncio.sleep(0.01)
        assert not follower_sync.done()  # parked until the leader's assignment is stored
        leader_sync = await c.sync_group(
            g, 2, a.member_id, None, None, None, {a.member_id: b"A", b.member_id: b"B"}
        )
        assert leader_sync.assignment == b"A"
        assert (await follower_sync).assignment == b"B"
        assert state(c, g) == "Stable"

    run(tmp_path, body)


def test_protocol_selection_and_inconsistent_protocol(tmp_path: Path) -> None:
    async def body(h: Harness) -> None:
        c = h.coordinator
        g = group_on(0)
        both = [("roundrobin", b"r"), ("range", b"x")]
        results = await asyncio.gather(join(c, g, protocols=both), join(c, g, protocols=both))
        assert {r.protocol_name for r in results} == {"roundrobin"}
        other = await join(c, g, protocols=[("sticky", b"")])
        assert other.error == E.INCONSISTENT_GROUP_PROTOCOL
        wrong_type = await join(c, g, protocol_type="connect", protocols=both)
        assert wrong_type.error == E.INCONSISTENT_GROUP_PROTOCOL
        empty = await join(c, group_on(0, "fresh"), protocols=[])
        assert empty.error == E.INCONSISTENT_GROUP_PROTOCOL

    run(tmp_path, body)


def test_invalid_session_timeout_and_group_id(tmp_path: Path) -> None:
    async def body(h: Harness) -> None:
        c = h.coordinator
        g = group_on(0)
        assert (await join(c, g, session=5)).error == E.INVALID_SESSION_TIMEOUT
        assert (await join(c, g, session=60_001)).error == E.INVALID_SESSION_TIMEOUT
        assert (await join(c, "")).error == E.INVALID_GROUP_ID
        # The refused joins created nothing that blocks a valid one.
        assert (await join(c, g)).error == E.NONE

    run(tmp_path, body)


def test_errors_leave_the_group_alone(tmp_path: Path) -> None:
    async def body(h: Harness) -> None:
        c = h.coordinator
        g = group_on(1)
        a, b = await stable_group(c, g, 2)
        gen = a.generation_id
        assert c.heartbeat(g, "nobody", None, gen) == E.UNKNOWN_MEMBER_ID
        assert c.heartbeat(g, a.member_id, None, gen + 5) == E.ILLEGAL_GENERATION
        assert (
            await c.sync_group(g, gen, "nobody", None, None, None, {})
        ).error == E.UNKNOWN_MEMBER_ID
        assert (
            await c.sync_group(g, gen + 1, a.member_id, None, None, None, {})
        ).error == E.ILLEGAL_GENERATION
        assert (
            await c.sync_group(g, gen, a.member_id, None, "consumer", "roundrobin", {})
        ).error == E.INCONSISTENT_GROUP_PROTOCOL
        tp = ("t", 0)
        offset = OffsetAndMetadata(5)
        # A commit from a non-member, from an old generation, and a "simple" commit while
        # the group has members.
        assert await c.commit_offsets(g, "nobody", None, gen, {tp: offset}) == {
            tp: E.UNKNOWN_MEMBER_ID
        }
        assert await c.commit_offsets(g, a.member_id, None, gen - 1, {tp: offset}) == {
            tp: E.ILLEGAL_GENERATION
        }
        assert await c.commit_offsets(g, "", None, -1, {tp: offset}) == {tp: E.UNKNOWN_MEMBER_ID}
        big = OffsetAndMetadata(5, metadata="x" * 4097)
        ok = OffsetAndMetadata(6, metadata="y" * 4096)
        assert await c.commit_offsets(g, a.member_id, None, gen, {tp: big, ("t", 1): ok}) == {
            tp: E.OFFSET_METADATA_TOO_LARGE,
            ("t", 1): E.NONE,
        }
        # Nothing of it disturbed the group.
        assert state(c, g) == "Stable"
        assert c.heartbeat(g, a.member_id, None, gen) == E.NONE
        assert c.heartbeat(g, b.member_id, None, gen) == E.NONE
        error, offsets = c.fetch_offsets(g, [tp, ("t", 1)])
        assert error == E.NONE
        assert offsets[tp] == (-1, -1, "", E.NONE)
        assert offsets[("t", 1)] == (6, -1, "y" * 4096, E.NONE)

    run(tmp_path, body)


def test_session_expiry_removes_a_silent_member(tmp_path: Path) -> None:
    async def body(h: Harness) -> None:
        c = h.coordinator
        g = group_on(0)
        a, b = await stable_group(c, g, 2, session=1000)
        rebalancing = False
        # Only `a` keeps its session alive; `b` has gone silent.
        while not rebalancing:
            error = c.heartbeat(g, a.member_id, None, a.generation_id)
            rebalancing = error == E.REBALANCE_IN_PROGRESS
            assert error in (E.NONE, E.REBALANCE_IN_PROGRESS)
            await asyncio.sleep(0.02)
        again = await join(c, g, a.member_id, session=1000)
        assert again.generation_id == a.generation_id + 1
        assert [m for m, _, _ in again.members] == [a.member_id]
        assert c.heartbeat(g, b.member_id, None, a.generation_id) == E.UNKNOWN_MEMBER_ID

    run(tmp_path, body)


def test_member_that_does_not_rejoin_is_dropped_after_rebalance_timeout(tmp_path: Path) -> None:
    async def body(h: Harness) -> None:
        c = h.coordinator
        g = group_on(1)
        a, b = await stable_group(c, g, 2, session=30_000, rebalance=200)
        # `a` rejoins (e.g. its subscription changed); `b` never does but keeps heartbeating.
        rejoin = asyncio.ensure_future(join(c, g, a.member_id, rebalance=200, session=30_000))
        while not rejoin.done():
            assert c.heartbeat(g, b.member_id, None, a.generation_id) in (
                E.NONE,
                E.REBALANCE_IN_PROGRESS,
                E.UNKNOWN_MEMBER_ID,
            )
            await asyncio.sleep(0.02)
        result = rejoin.result()
        assert [m for m, _, _ in result.members] == [a.member_id]
        assert c.heartbeat(g, b.member_id, None, result.generation_id) == E.UNKNOWN_MEMBER_ID

    run(tmp_path, body)


def test_leave_group_and_batch_leave_by_instance_id(tmp_path: Path) -> None:
    async def body(h: Harness) -> None:
        c = h.coordinator
        g = group_on(0)
        a, b = await stable_group(c, g, 2)
        assert c.leave_group(g, [(b.member_id, None)]) == (E.NONE, [E.NONE])
        assert state(c, g) == "PreparingRebalance"
        assert c.leave_group(g, [("ghost", None)]) == (E.NONE, [E.UNKNOWN_MEMBER_ID])
        again = await join(c, g, a.member_id)
        assert [m for m, _, _ in again.members] == [a.member_id]
        await c.sync_group(g, again.generation_id, a.member_id, None, None, None, {})
        # Static members are removed by instance id alone (LeaveGroup v3+).
        s = group_on(0, "static")
        one = await join(c, s, instance="i-1")
        await c.sync_group(s, one.generation_id, one.member_id, "i-1", None, None, {})
        assert c.leave_group(s, [("", "i-1"), ("", "i-2")]) == (
            E.NONE,
            [E.NONE, E.UNKNOWN_MEMBER_ID],
        )
        await until(lambda: state(c, s) == "Empty")

    run(tmp_path, body)


def test_static_member_rejoins_without_rebalance(tmp_path: Path) -> None:
    async def body(h: Harness) -> None:
        c = h.coordinator
        g = group_on(1)
        joins = await asyncio.gather(join(c, g, instance="a"), join(c, g, instance="b"))
        joins = [r if r.error == E.NONE else await join(c, g, r.member_id) for r in joins]
        leader = next(r for r in joins if r.leader_id == r.member_id)
        follower = next(r for r in joins if r is not leader)
        gen = leader.generation_id
        instance = {leader.member_id: "a" if joins[0] is leader else "b"}
        instance[follower.member_id] = "b" if instance[leader.member_id] == "a" else "a"
        assignment = {leader.member_id: b"L", follower.member_id: b"F"}
        await asyncio.gather(
            c.sync_group(g, gen, leader.member_id, instance[leader.member_id], None, None,
                         assignment),
            c.sync_group(g, gen, follower.member_id, instance[follower.member_id], None, None,
                         {}),
        )  # fmt: skip
        # The follower restarts: same instance id, no member id.
        fi = instance[follower.member_id]
        back = await join(c, g, instance=fi)
        assert back.error == E.NONE
        assert back.member_id != follower.member_id
        assert back.generation_id == gen
        assert state(c, g) == "Stable"
        sync = await c.sync_group(g, gen, back.member_id, fi, None, None, {})
        assert sync.assignment == b"F"
        # Nobody else noticed; the old member id is fenced.
        assert c.heartbeat(g, leader.member_id, instance[leader.member_id], gen) == E.NONE
        assert c.heartbeat(g, follower.member_id, fi, gen) == E.FENCED_INSTANCE_ID
        # A restarted leader on JoinGroup v9+ learns it leads but must not reassign.
        li = instance[leader.member_id]
        lead_back = await join(c, g, instance=li, skip=True)
        assert lead_back.skip_assignment and lead_back.leader_id == lead_back.member_id
        assert lead_back.generation_id == gen
        assert len(lead_back.members) == 2

    run(tmp_path, body)


def test_group_max_size(tmp_path: Path) -> None:
    async def body(h: Harness) -> None:
        c = h.coordinator
        g = group_on(0)
        await stable_group(c, g, 2)
        third = await join(c, g)
        assert third.error == E.GROUP_MAX_SIZE_REACHED
        assert state(c, g) == "Stable"

    run(tmp_path, body, max_size=2)


def test_not_coordinator_and_loading(tmp_path: Path) -> None:
    async def main() -> None:
        h = Harness(tmp_path, config())
        try:
            await h.start(partitions=(0,))
            c = h.coordinator
            elsewhere = group_on(1)
            assert (await join(c, elsewhere)).error == E.NOT_COORDINATOR
            assert c.fetch_offsets(elsewhere, None)[0] == E.NOT_COORDINATOR
            h.coordinator.manager.loading[1] = 0  # as while a load is under way
            assert (await join(c, elsewhere)).error == E.COORDINATOR_LOAD_IN_PROGRESS
            assert c.heartbeat(elsewhere, "m", None, 1) == E.NONE  # answered blindly
            sync = await c.sync_group(elsewhere, 1, "m", None, None, None, {})
            assert sync.error == E.REBALANCE_IN_PROGRESS
        finally:
            await h.coordinator.shutdown()
            h.close()

    asyncio.run(main())


def test_resigning_fences_waiting_members(tmp_path: Path) -> None:
    async def body(h: Harness) -> None:
        c = h.coordinator
        g = group_on(0)
        (a,) = await stable_group(c, g, 1)
        waiting = asyncio.ensure_future(join(c, g))
        await until(lambda: state(c, g) == "PreparingRebalance")
        c.on_resigned(0)
        assert (await waiting).error == E.NOT_COORDINATOR
        assert c.heartbeat(g, a.member_id, None, 1) == E.NOT_COORDINATOR

    run(tmp_path, body)


# --- offsets and persistence --------------------------------------------------------------


def test_simple_commits_fetch_all_and_v1_expiry(tmp_path: Path) -> None:
    async def body(h: Harness) -> None:
        c = h.coordinator
        g = group_on(1)
        offsets = {("a", 0): OffsetAndMetadata(10, 3, "m", 1000), ("b", 2): OffsetAndMetadata(7)}
        assert await c.commit_offsets(g, "", None, -1, offsets) == dict.fromkeys(offsets, E.NONE)
        error, got = c.fetch_offsets(g, None)
        assert error == E.NONE
        assert got == {("a", 0): (10, 3, "m", E.NONE), ("b", 2): (7, -1, "", E.NONE)}
        assert c.fetch_offsets(g, [("zz", 0)])[1] == {("zz", 0): (-1, -1, "", E.NONE)}
        assert c.fetch_offsets("unknown-group", [("a", 0)])[1] == {("a", 0): (-1, -1, "", E.NONE)}
        # A commit for an unknown generation without a group is refused.
        assert await c.commit_offsets("no-such-group", "m", None, 3, offsets) == dict.fromkeys(
            offsets, E.ILLEGAL_GENERATION
        )
        (key, value), *_ = h.records(c.partition_for(g))
        assert fmt.parse_key(key) == fmt.OffsetKey(g, "a", 0)
        assert struct.unpack(">h", value[:2])[0] == 3

    run(tmp_path, body)


def test_groups_and_offsets_survive_a_reload(tmp_path: Path) -> None:
    async def body(h: Harness) -> None:
        g = group_on(0)
        simple = group_on(1, "simple")
        a, b = await stable_group(h.coordinator, g, 2)
        gen = a.generation_id
        tp = ("orders", 3)
        o = OffsetAndMetadata(41, 2, "meta")
        assert await h.coordinator.commit_offsets(g, b.member_id, None, gen, {tp: o}) == {
            tp: E.NONE
        }
        o.offset = 42
        await h.coordinator.commit_offsets(g, b.member_id, None, gen, {tp: o})
        await h.coordinator.commit_offsets(simple, "", None, -1, {tp: OffsetAndMetadata(9)})
        await h.restart_coordinator()
        c = h.coordinator
        assert c.fetch_offsets(g, [tp])[1] == {tp: (42, 2, "meta", E.NONE)}
        assert c.fetch_offsets(simple, None)[1] == {tp: (9, -1, "", E.NONE)}
        summary = c.describe_group(g)[1]
        assert summary.state == "Stable"
        assert {m.member_id: m.assignment for m in summary.members} == {
            a.member_id: f"assign-{a.member_id}".encode(),
            b.member_id: f"assign-{b.member_id}".encode(),
        }
        # Members that were alive carry on with their generation.
        assert c.heartbeat(g, a.member_id, None, gen) == E.NONE
        assert c.list_groups()[1] and {gid for gid, _, _ in c.list_groups()[1]} == {g, simple}
        assert c.list_groups({"Empty"})[1] == [(simple, "", "Empty")]

    run(tmp_path, body)


def test_a_newer_leader_epoch_keeps_the_live_groups(tmp_path: Path) -> None:
    """Chaos history partition-leader-zk (seed 2026): the controller bumped the leader epoch of a
    __consumer_offsets partition that stayed here; the coordinator reloaded it, replaced the
    live group, and a member assigned a partition next got no committed offset (and started
    over from offset 0) although commits had been acknowledged."""

    async def body(h: Harness) -> None:
        c = h.coordinator
        g = group_on(0)
        a, b = await stable_group(c, g, 2)
        gen = a.generation_id
        tp = ("orders", 0)
        assert await c.commit_offsets(g, a.member_id, None, gen, {tp: OffsetAndMetadata(5)}) == {
            tp: E.NONE
        }
        group = c.manager.get_group(g)
        h.replicas.become_leader_or_follower(
            TOPIC, 0, None, PartitionState(leader=1, leader_epoch=1, isr=[1], replicas=[1])
        )
        c.on_elected(0, 1)
        assert c.is_loaded(0)
        assert await c.commit_offsets(g, b.member_id, None, gen, {tp: OffsetAndMetadata(9)}) == {
            tp: E.NONE
        }
        assert c.manager.get_group(g) is group
        assert c.fetch_offsets(g, [tp])[1] == {tp: (9, -1, "", E.NONE)}
        assert c.heartbeat(g, a.member_id, None, gen) == E.NONE

    run(tmp_path, body)


def test_delete_groups_and_offsets(tmp_path: Path) -> None:
    async def body(h: Harness) -> None:
        c = h.coordinator
        g = group_on(0)
        empty = group_on(1, "empty")
        (a,) = await stable_group(c, g, 1)
        await c.commit_offsets(
            g, a.member_id, None, a.generation_id, {("t", 0): OffsetAndMetadata(1)}
        )
        await c.commit_offsets(empty, "", None, -1, {("t", 0): OffsetAndMetadata(1), ("u", 0): OffsetAndMetadata(2)})  # fmt: skip
        assert await c.delete_groups([g, empty, "missing"]) == {
            g: E.NON_EMPTY_GROUP,
            empty: E.NONE,
            "missing": E.GROUP_ID_NOT_FOUND,
        }
        assert state(c, empty) == "Dead"
        # OffsetDelete: an active consumer group keeps offsets of topics it subscribes to
        # ("t", from RANGE's subscription), others go.
        await c.commit_offsets(g, a.member_id, None, a.generation_id, {("x", 0): OffsetAndMetadata(3)})  # fmt: skip
        error, errors = await c.delete_offsets(g, [("t", 0), ("x", 0)])
        assert error == E.NONE
        assert errors == {("t", 0): E.GROUP_SUBSCRIBED_TO_TOPIC, ("x", 0): E.NONE}
        assert (await c.delete_offsets(empty, [("t", 0)]))[0] == E.GROUP_ID_NOT_FOUND
        await h.restart_coordinator()
        c = h.coordinator
        assert c.describe_group(empty)[1].state == "Dead"
        assert c.fetch_offsets(empty, None)[1] == {}
        assert c.fetch_offsets(g, None)[1] == {("t", 0): (1, -1, "", E.NONE)}

    run(tmp_path, body)


def test_offset_expiry(tmp_path: Path) -> None:
    async def body(h: Harness) -> None:
        c = h.coordinator
        g = group_on(0)
        now = 1_000_000
        await c.commit_offsets(g, "", None, -1, {("t", 0): OffsetAndMetadata(5, commit_timestamp=now)})  # fmt: skip
        # Commits that carried a retention time expire at their own expire timestamp.
        await c.commit_offsets(g, "", None, -1, {("t", 1): OffsetAndMetadata(6, commit_timestamp=now, expire_timestamp=now + 10)})  # fmt: skip
        retention = h.cfg.retention_ms
        assert await c.expire_offsets(now + 5) == 0
        assert await c.expire_offsets(now + 10) == 1
        assert list(c.fetch_offsets(g, None)[1]) == [("t", 0)]
        assert await c.expire_offsets(now + retention) == 1
        assert state(c, g) == "Dead"
        await h.restart_coordinator()
        assert h.coordinator.fetch_offsets(g, None)[1] == {}

    run(tmp_path, body)


@pytest.mark.parametrize("members", [0, 1])
def test_empty_consumer_group_expires_after_retention_since_empty(
    tmp_path: Path, members: int
) -> None:
    async def body(h: Harness) -> None:
        c = h.coordinator
        g = group_on(1)
        (a,) = await stable_group(c, g, 1)
        await c.commit_offsets(g, a.member_id, None, a.generation_id, {("t", 0): OffsetAndMetadata(5, commit_timestamp=0)})  # fmt: skip
        if members == 0:
            c.leave_group(g, [(a.member_id, None)])
            await until(lambda: state(c, g) == "Empty")
            # Offsets count from when the group became Empty, not from the (old) commit.
            assert await c.expire_offsets(h.cfg.retention_ms) == 0
            assert await c.expire_offsets(2**62) == 1
        else:
            # A Stable group keeps the offsets of topics it subscribes to.
            assert await c.expire_offsets(2**62) == 0

    run(tmp_path, body)


def test_initial_rebalance_delay_gathers_members_into_one_generation(tmp_path: Path) -> None:
    async def body(h: Harness) -> None:
        c = h.coordinator
        g = group_on(0)

        async def late(delay: float):
            await asyncio.sleep(delay)
            return await join(c, g)

        # Each newcomer during the delay extends it (up to the rebalance timeout).
        results = await asyncio.gather(late(0), late(0.05), late(0.1))
        assert {r.error for r in results} == {E.NONE}
        assert {r.generation_id for r in results} == {1}
        leader = next(r for r in results if r.leader_id == r.member_id)
        assert len(leader.members) == 3

    run(tmp_path, body, initial_rebalance_delay_ms=1000)


def test_transactional_offsets_wait_for_the_marker(tmp_path: Path) -> None:
    """TxnOffsetCommit: pending (UNSTABLE_OFFSET_COMMIT for require_stable) until the producer's
    COMMIT marker is written; dropped on ABORT; still pending after a reload of the log."""

    def end(h: Harness, pid: int, commit: bool, epoch: int = 0) -> None:
        marker = build_control_batch(
            ControlType.COMMIT if commit else ControlType.ABORT,
            producer_id=pid, producer_epoch=epoch, coordinator_epoch=0, timestamp=1,
        )  # fmt: skip
        h.replicas.get(TOPIC, 0).append_as_leader(bytearray(marker), AppendOrigin.COORDINATOR)
        h.coordinator.on_transaction_completed(pid, [0], commit)

    async def body(h: Harness) -> None:
        c = h.coordinator
        g, tp = group_on(0), ("orders", 0)
        commit = c.commit_transactional_offsets
        assert await commit(g, 77, 0, "", None, -1, {tp: OffsetAndMetadata(10)}) == {tp: E.NONE}
        assert c.fetch_offsets(g, [tp])[1] == {tp: (-1, -1, "", E.NONE)}
        assert c.fetch_offsets(g, [tp], True)[1] == {tp: (-1, -1, "", E.UNSTABLE_OFFSET_COMMIT)}
        end(h, 77, commit=True)
        assert c.fetch_offsets(g, [tp], True)[1] == {tp: (10, -1, "", E.NONE)}
        await commit(g, 77, 0, "", None, -1, {tp: OffsetAndMetadata(20)})
        end(h, 77, commit=False)
        assert c.fetch_offsets(g, [tp], True)[1] == {tp: (10, -1, "", E.NONE)}
        # A producer fenced by the coordinator's marker (epoch 1) commits nothing more.
        end(h, 77, commit=False, epoch=1)
        fenced = await commit(g, 77, 0, "", None, -1, {tp: OffsetAndMetadata(99)})
        assert fenced == {tp: E.INVALID_PRODUCER_EPOCH}
        # Members of a live group must give their generation (KIP-447).
        a, _ = await stable_group(c, g, 2)
        stale = await commit(
            g, 78, 0, a.member_id, None, a.generation_id - 1, {tp: OffsetAndMetadata(5)}
        )
        assert stale == {tp: E.ILLEGAL_GENERATION}
        ok = await commit(g, 78, 0, a.member_id, None, a.generation_id, {tp: OffsetAndMetadata(30)})
        assert ok == {tp: E.NONE}
        await h.restart_coordinator()
        c = h.coordinator
        assert c.fetch_offsets(g, [tp], True)[1] == {tp: (-1, -1, "", E.UNSTABLE_OFFSET_COMMIT)}
        assert c.fetch_offsets(g, [tp])[1] == {tp: (10, -1, "", E.NONE)}
        end(h, 78, commit=True)
        assert c.fetch_offsets(g, [tp], True)[1] == {tp: (30, -1, "", E.NONE)}

    run(tmp_path, body)
