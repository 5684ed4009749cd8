"""The scaling planner: fair shares for new brokers, drained brokers, nothing else moved."""

from __future__ import annotations

from collections import Counter

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from odradek.operator.replica_plan import plan_scaling


def layout(partitions: int, rf: int, brokers: int) -> dict[tuple[str, int], list[int]]:
    """Round-robin placement, as the controller makes it."""
    return {("t", p): [(p + k) % brokers for k in range(rf)] for p in range(partitions)}


def applied(current: dict, moves: dict) -> dict:
    return {tp: moves.get(tp, r) for tp, r in current.items()}


def loads(assignment: dict) -> tuple[Counter, Counter]:
    replicas = Counter(b for r in assignment.values() for b in r)
    leaders = Counter(r[0] for r in assignment.values())
    return replicas, leaders


def test_scale_up_gives_the_new_broker_a_fair_share() -> None:
    current = layout(12, 2, 3)
    moves = plan_scaling(current, range(4), added=[3])
    after = applied(current, moves)
    replicas, leaders = loads(after)
    assert [replicas[b] for b in range(4)] == [6, 6, 6, 6]
    assert leaders[3] == 3
    # Every move puts broker 3 in place of one old replica; nothing else changes.
    for tp, new in moves.items():
        old = current[tp]
        changed = [i for i in range(len(old)) if old[i] != new[i]]
        assert len(changed) == 1 and new[changed[0]] == 3
    assert all(len(set(r)) == 2 for r in after.values())


def test_scale_down_drains_the_brokers_that_go_away() -> None:
    current = layout(12, 2, 4)
    moves = plan_scaling(current, range(3))
    after = applied(current, moves)
    replicas, _ = loads(after)
    assert 3 not in replicas
    assert max(replicas.values()) - min(replicas.values()) <= 1
    assert all(len(set(r)) == 2 for r in after.values())
    assert all(3 in current[tp] for tp in moves)


def test_a_balanced_layout_needs_no_moves() -> None:
    current = layout(8, 3, 4)
    assert plan_scaling(current, range(4)) == {}
    assert plan_scaling(applied(current, plan_scaling(current, range(5), [4])), range(5), [4]) == {}


def test_replication_factor_above_the_brokers_left_is_left_alone() -> None:
    current = {("t", 0): [0, 1, 2]}
    assert plan_scaling(current, [0, 1]) == {}


@settings(max_examples=200, deadline=None)
@given(
    partitions=st.integers(1, 40),
    rf=st.integers(1, 3),
    before=st.integers(3, 6),
    after=st.integers(3, 6),
)
def test_any_scaling_keeps_replicas_distinct_and_inside_the_cluster(
    partitions: int, rf: int, before: int, after: int
) -> None:
    current = layout(partitions, rf, before)
    added = range(before, after)
    result = applied(current, plan_scaling(current, range(after), added))
    assert all(len(set(r)) == rf and set(r) <= set(range(after)) for r in result.values())
    replicas, _ = loads(result)
    fair = partitions * rf // after
    assert all(replicas[b] >= fair for b in added)


@pytest.mark.parametrize("rf", [1, 2, 3])
def test_scaling_up_by_several_brokers_shares_between_them(rf: int) -> None:
    current = layout(30, rf, 3)
    result = applied(current, plan_scaling(current, range(5), [3, 4]))
    replicas, _ = loads(result)
    assert max(replicas.values()) - min(replicas.values()) <= 1
