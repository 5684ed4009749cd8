"""Where replicas go when the broker StatefulSet is scaled: a pure planner, no I/O.

Scaling up gives the new brokers a fair share of the replicas (and of the preferred leaders) by
taking them from the most loaded brokers; scaling down moves every replica off the brokers that go
away onto the least loaded ones that stay. Nothing else moves: a layout a user chose for the
brokers that stay is left alone, as Strimzi's add-brokers and remove-brokers rebalances do.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Collection, Mapping, Sequence

TopicPartition = tuple[str, int]


def plan_scaling(
    current: Mapping[TopicPartition, Sequence[int]],
    brokers: Collection[int],
    added: Collection[int] = (),
) -> dict[TopicPartition, list[int]]:
    """New replica lists for the partitions that must change so that no replica is outside
    `brokers` and each of the `added` brokers holds a fair share. A replica keeps its position
    in the list, so a moved preferred leader is replaced by its new broker."""
    staying = sorted(set(brokers))
    if not staying:
        return {}
    layout = {tp: list(replicas) for tp, replicas in sorted(current.items())}
    load: Counter[int] = Counter({b: 0 for b in staying})
    leaders: Counter[int] = Counter({b: 0 for b in staying})
    for replicas in layout.values():
        for i, b in enumerate(replicas):
            if b in load:
                load[b] += 1
                leaders[b] += i == 0

    def move(replicas: list[int], i: int, to: int) -> None:
        old = replicas[i]
        if old in load:
            load[old] -= 1
            leaders[old] -= i == 0
        replicas[i] = to
        load[to] += 1
        leaders[to] += i == 0

    # Drain the brokers that go away.
    for replicas in layout.values():
        for i, b in enumerate(replicas):
            if b in load:
                continue
            free = [c for c in staying if c not in replicas]
            if free:  # else the replication factor exceeds the brokers left: leave it
                move(
                    replicas, i, min(free, key=lambda c: (load[c], leaders[c] if i == 0 else 0, c))
                )

    # Fill the new brokers up to a fair share, one replica at a time to the emptiest.
    total = sum(load.values())
    fair = total // len(staying)
    fair_leaders = len(layout) // len(staying)
    hungry = {b for b in added if b in load}
    while hungry:
        to = min(hungry, key=lambda b: (load[b], b))
        if load[to] >= fair:
            break
        donor_tp = _donor(layout, load, leaders, to, lead=leaders[to] < fair_leaders)
        if donor_tp is None:
            hungry.discard(to)
            continue
        tp, i = donor_tp
        move(layout[tp], i, to)

    return {tp: r for tp, r in layout.items() if r != list(current[tp])}


def _donor(
    layout: Mapping[TopicPartition, list[int]],
    load: Counter[int],
    leaders: Counter[int],
    to: int,
    lead: bool,
) -> tuple[TopicPartition, int] | None:
    """The replica `to` should take: from the most loaded broker that has two more replicas
    than `to`, a leader when `to` needs leaders (and the donor has more), else a follower."""
    best: tuple[tuple[int, int, int], TopicPartition, int] | None = None
    for tp, replicas in layout.items():
        if to in replicas:
            continue
        for i, b in enumerate(replicas):
            if b not in load or load[b] < load[to] + 2:
                continue
            is_leader = i == 0
            fits = is_leader == (lead and leaders[b] > leaders[to])
            rank = (load[b], fits, leaders[b] if is_leader else 0)
            if best is None or rank > best[0]:
                best = (rank, tp, i)
    return None if best is None else (best[1], best[2])
