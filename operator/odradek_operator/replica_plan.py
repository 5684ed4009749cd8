"""Where replicas go when the broker StatefulSet is scaled: a pure planner, no I/O.

Scaling up gives the new brokers a fair share of the replicas (and of the preferred leaders) by
taking them from the most loaded brokers; scaling down moves every replica off the brokers that go
away onto the least loaded ones that stay. Nothing else moves: a layout a user chose for the
brokers that stay is left alone, as Strimzi's add-brokers and remove-brokers rebalances do.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Collection, Mapping, Sequence

from odradek.broker.client import TopicPartition


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
    # Each staying broker's replicas as (partition, position), insertion-ordered.
    held: dict[int, dict[tuple[TopicPartition, int], None]] = {b: {} for b in staying}
    for tp, replicas in layout.items():
        for i, b in enumerate(replicas):
            if b in load:
                load[b] += 1
                leaders[b] += i == 0
                held[b][(tp, i)] = None

    def move(tp: TopicPartition, i: int, to: int) -> None:
        replicas = layout[tp]
        old = replicas[i]
        if old in load:
            load[old] -= 1
            leaders[old] -= i == 0
            del held[old][(tp, i)]
        replicas[i] = to
        load[to] += 1
        leaders[to] += i == 0
        held[to][(tp, i)] = None

    def donor(to: int, lead: bool) -> tuple[TopicPartition, int] | None:
        """The replica `to` takes: from the most loaded broker holding two more than `to`, a
        leader when `to` needs leaders (and the donor has more), else a follower."""
        for b in sorted(load, key=lambda c: (-load[c], c)):
            if load[b] < load[to] + 2:
                return None
            want_leader = lead and leaders[b] > leaders[to]
            fallback = None
            for tp, i in held[b]:
                if to in layout[tp]:
                    continue
                if (i == 0) == want_leader:
                    return tp, i
                fallback = fallback or (tp, i)
            if fallback is not None:
                return fallback
        return None

    # Drain the brokers that go away.
    for tp, replicas in layout.items():
        for i, b in enumerate(replicas):
            if b in load:
                continue
            free = [c for c in staying if c not in replicas]
            if free:  # else the replication factor exceeds the brokers left: leave it
                move(tp, i, min(free, key=lambda c: (load[c], leaders[c] if i == 0 else 0, c)))

    # Fill the new brokers up to a fair share, one replica at a time to the emptiest.
    total = sum(load.values())
    fair = total // len(staying)
    fair_leaders = len(layout) // len(staying)
    hungry = {b for b in added if b in load}
    while hungry:
        to = min(hungry, key=lambda b: (load[b], b))
        if load[to] >= fair:
            break
        taken = donor(to, lead=leaders[to] < fair_leaders)
        if taken is None:
            hungry.discard(to)
            continue
        move(*taken, to)

    return {tp: r for tp, r in layout.items() if r != list(current[tp])}
