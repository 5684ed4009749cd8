"""Where a topic's replicas go: Kafka's (rack-aware) round-robin placement, and the checks
an explicit assignment must pass."""

from __future__ import annotations

import random
from collections.abc import Mapping, Sequence

from ..protocol.errors import ErrorCode, KafkaError


def rack_alternated(racks: Mapping[int, str]) -> list[int]:
    """Brokers taken one rack at a time, racks and brokers in sorted order: a rack-aware
    round-robin over this list places consecutive leaders in different racks."""
    by_rack: dict[str, list[int]] = {}
    for broker, rack in racks.items():
        by_rack.setdefault(rack, []).append(broker)
    queues = [sorted(by_rack[r]) for r in sorted(by_rack)]
    out: list[int] = []
    depth = 0
    while len(out) < len(racks):
        out.extend(q[depth] for q in queues if depth < len(q))
        depth += 1
    return out


def assign_replicas(
    broker_ids: Sequence[int],
    num_partitions: int,
    replication_factor: int,
    *,
    racks: Mapping[int, str | None] | None = None,
    start_index: int = -1,
    start_partition: int = 0,
    rng: random.Random | None = None,
) -> dict[int, tuple[int, ...]]:
    """Kafka's placement: partition leaders round-robin over the brokers from a (random)
    start, followers at a shift that grows every full round, so leaders and followers both
    spread evenly. When the brokers have racks (`broker.rack`), the brokers are ordered rack by
    rack and a follower is skipped while its rack, or the broker itself, already holds a
    replica and another rack, or broker, holds none (Kafka's rack-aware assignment)."""
    if num_partitions <= 0:
        raise KafkaError(
            ErrorCode.INVALID_PARTITIONS, "Number of partitions must be larger than 0."
        )
    if replication_factor <= 0:
        raise KafkaError(
            ErrorCode.INVALID_REPLICATION_FACTOR, "Replication factor must be larger than 0."
        )
    if replication_factor > len(broker_ids):
        raise KafkaError(
            ErrorCode.INVALID_REPLICATION_FACTOR,
            f"Replication factor: {replication_factor} larger than available brokers: "
            f"{len(broker_ids)}.",
        )
    rack_of = {b: (racks or {}).get(b) for b in broker_ids}
    if all(r is None for r in rack_of.values()):
        brokers = sorted(broker_ids)
        rack_of = {}
    elif any(r is None for r in rack_of.values()):
        # Kafka's AdminOperationException (answered as UNKNOWN_SERVER_ERROR).
        raise KafkaError(
            ErrorCode.UNKNOWN_SERVER_ERROR,
            "Not all brokers have rack information for replica rack aware assignment.",
        )
    else:
        brokers = rack_alternated({b: r for b, r in rack_of.items() if r is not None})
    n = len(brokers)
    num_racks = len(set(rack_of.values()))
    rand = rng or random
    first_start = start_index if start_index >= 0 else rand.randrange(n)
    shift = start_index if start_index >= 0 else rand.randrange(n)
    partition = max(0, start_partition)
    out: dict[int, tuple[int, ...]] = {}
    for _ in range(num_partitions):
        if partition > 0 and partition % n == 0:
            shift += 1
        first = (partition + first_start) % n
        replicas = [brokers[first]]
        if not rack_of:
            for j in range(replication_factor - 1):
                replicas.append(brokers[(first + 1 + (shift + j) % (n - 1)) % n])
        else:
            with_replicas = {brokers[first]}
            racks_used = {rack_of[brokers[first]]}
            k = 0
            while len(replicas) < replication_factor:
                broker = brokers[(first + 1 + (shift * num_racks + k) % (n - 1)) % n]
                k += 1
                rack = rack_of[broker]
                if (rack not in racks_used or len(racks_used) == num_racks) and (
                    broker not in with_replicas or len(with_replicas) == n
                ):
                    replicas.append(broker)
                    racks_used.add(rack)
                    with_replicas.add(broker)
        out[partition] = tuple(replicas)
        partition += 1
    return out


def check_assignment(assignment: Mapping[int, Sequence[int]]) -> None:
    sizes = {len(r) for r in assignment.values()}
    if len(sizes) > 1:
        raise KafkaError(
            ErrorCode.INVALID_REPLICA_ASSIGNMENT,
            "All partitions should have the same number of replicas",
        )
    for replicas in assignment.values():
        if len(set(replicas)) != len(replicas):
            text = ", ".join(f"{p} -> {list(r)}" for p, r in sorted(assignment.items()))
            raise KafkaError(
                ErrorCode.INVALID_REPLICA_ASSIGNMENT,
                f"Duplicate replica assignment found: {{{text}}}",
            )
    if sorted(assignment) != list(range(len(assignment))):
        raise KafkaError(
            ErrorCode.INVALID_REPLICA_ASSIGNMENT,
            "partitions should be a consecutive 0-based integer sequence",
        )
    if sizes == {0}:
        raise KafkaError(
            ErrorCode.INVALID_REPLICATION_FACTOR, "Replication factor must be larger than 0."
        )
