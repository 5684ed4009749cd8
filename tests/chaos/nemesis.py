"""The faults of the chaos suite. Each one starts on a cluster and is healed by `stop`.

Targets are chosen when a fault starts, from what the cluster says then (the leader of a random
partition of the workload's topic, the controller, a random broker) with the run's seeded
random generator, so a schedule replays from its seed (timing aside).
"""

from __future__ import annotations

import logging
import random
from dataclasses import dataclass, field
from typing import ClassVar

from environment import ChaosCluster, broker_node, zk_node
from shim import FAIL_FSYNC, FAIL_WRITE
from workload import TOPIC

log = logging.getLogger("chaos")


class Fault:
    name = "fault"

    def start(self, env: ChaosCluster, rng: random.Random) -> str:
        """Inflict the fault; returns what exactly was done (for the history and the table)."""
        raise NotImplementedError

    def stop(self, env: ChaosCluster) -> None:
        raise NotImplementedError


def pick_broker(env: ChaosCluster, rng: random.Random, target: str) -> int:
    """A broker id: "leader" of a random partition, the "controller", or a "random" one."""
    if target == "leader":
        leaders = [lead for lead, _ in env.leaders(TOPIC).values() if lead in env.broker_ids]
        if leaders:
            return rng.choice(sorted(leaders))
    elif target == "controller":
        try:
            cid = env.c.zk_controller()
        except Exception:  # noqa: BLE001 - ZooKeeper unreachable: fall back to chance
            cid = None
        if cid in env.broker_ids:
            return cid
    return rng.choice(env.broker_ids)


def symmetric(groups: list[set[str]], all_nodes: list[str]) -> dict[str, set[str]]:
    """Grudges for a partition into components: a node hears only nodes of its own groups
    (a node may belong to several, as the bridge does)."""
    grudges: dict[str, set[str]] = {}
    for node in all_nodes:
        mine = [g for g in groups if node in g]
        if not mine:
            continue
        reachable = set().union(*mine)
        grudges[node] = {other for other in all_nodes if other not in reachable}
    return grudges


def cut(a: set[str], b: set[str]) -> dict[str, set[str]]:
    """Grudges that cut every link between `a` and `b` (both ways), nothing else."""
    grudges: dict[str, set[str]] = {}
    for x in a:
        grudges.setdefault(x, set()).update(b)
    for y in b:
        grudges.setdefault(y, set()).update(a)
    return grudges


@dataclass
class Partition(Fault):
    """kind: halves, leader-zk, leader-isolated, controller-zk, follower, bridge, ring."""

    kind: str
    name: str = field(init=False)

    def __post_init__(self) -> None:
        self.name = f"partition:{self.kind}"

    def start(self, env: ChaosCluster, rng: random.Random) -> str:
        nodes = env.node_names
        zks = {zk_node(i) for i in env.zk_ids}
        brokers = {broker_node(i) for i in env.broker_ids}
        if self.kind == "halves":
            shuffled = rng.sample(nodes, len(nodes))
            half = len(shuffled) // 2
            a, b = set(shuffled[:half]), set(shuffled[half:])
            grudges = cut(a, b)
            detail = f"{sorted(a)} | {sorted(b)}"
        elif self.kind in ("leader-zk", "controller-zk", "leader-isolated"):
            target = "controller" if self.kind == "controller-zk" else "leader"
            victim = broker_node(pick_broker(env, rng, target))
            others = zks | (brokers - {victim} if self.kind == "leader-isolated" else set())
            grudges = cut({victim}, others)
            detail = f"{victim} cut from {sorted(others)}"
        elif self.kind == "follower":
            states = env.leaders(TOPIC)
            p = rng.choice(sorted(states)) if states else 0
            leader = states.get(p, (rng.choice(env.broker_ids), 0))[0]
            if leader not in env.broker_ids:
                leader = rng.choice(env.broker_ids)
            follower = rng.choice([b for b in env.broker_ids if b != leader])
            grudges = cut({broker_node(leader)}, {broker_node(follower)})
            detail = f"leader b{leader} of partition {p} cut from follower b{follower}"
        elif self.kind == "bridge":
            shuffled = rng.sample(nodes, len(nodes))
            k = len(shuffled) // 2 - 1
            left, bridge, right = set(shuffled[:k]), shuffled[k], set(shuffled[k + 1 :])
            grudges = symmetric([left | {bridge}, right | {bridge}], nodes)
            detail = f"{sorted(left)} | {bridge} | {sorted(right)}"
        elif self.kind == "ring":
            ring = rng.sample(nodes, len(nodes))
            groups = [{ring[i], ring[(i + 1) % len(ring)]} for i in range(len(ring))]
            grudges = symmetric(groups, nodes)
            detail = "ring " + " - ".join(ring)
        else:
            raise ValueError(f"unknown partition kind {self.kind}")
        env.network.partition(grudges)
        return detail

    def stop(self, env: ChaosCluster) -> None:
        env.network.heal()


@dataclass
class Aimed(Fault):
    """A fault aimed at `target` (which broker or server it picks when it starts); its name is
    PREFIX:target."""

    PREFIX: ClassVar[str]
    target: str
    name: str = field(init=False)

    def __post_init__(self) -> None:
        self.name = f"{self.PREFIX}:{self.target}"


@dataclass
class Kill(Aimed):
    """kill -9 of brokers ("leader", "controller", "random" or "all"); restarted on stop."""

    PREFIX = "kill"
    victims: list[int] = field(default_factory=list)

    def start(self, env: ChaosCluster, rng: random.Random) -> str:
        if self.target == "all":
            self.victims = list(env.broker_ids)
        else:
            self.victims = [pick_broker(env, rng, self.target)]
        for b in self.victims:
            env.kill_broker(b)
        return "kill -9 " + ", ".join(f"b{b}" for b in self.victims)

    def stop(self, env: ChaosCluster) -> None:
        for b in self.victims:
            env.start_broker(b)


@dataclass
class KillZk(Aimed):
    """kill -9 of a ZooKeeper server ("leader" of the ensemble or "random"); restarted on stop."""

    PREFIX = "kill-zk"
    victim: int = 0

    def start(self, env: ChaosCluster, rng: random.Random) -> str:
        self.victim = rng.choice(env.zk_ids)
        if self.target == "leader":
            for s in env.zk.servers:
                if s.mode() == "leader":
                    self.victim = s.myid
        env.zk_server(self.victim).kill()
        return f"kill -9 z{self.victim}"

    def stop(self, env: ChaosCluster) -> None:
        env.start_zk(self.victim)


@dataclass
class Pause(Aimed):
    """SIGSTOP of a broker for the fault's length (past its ZooKeeper session), then SIGCONT."""

    PREFIX = "pause"
    victim: int = 0

    def start(self, env: ChaosCluster, rng: random.Random) -> str:
        self.victim = pick_broker(env, rng, self.target)
        env.pause_broker(self.victim)
        return f"SIGSTOP b{self.victim}"

    def stop(self, env: ChaosCluster) -> None:
        env.resume_broker(self.victim)


@dataclass
class Slow(Fault):
    """Every broker and ZooKeeper server sends with a delay and random loss."""

    delay_ms: int = 200
    loss: float = 0.10
    name: str = "slow-network"

    def start(self, env: ChaosCluster, rng: random.Random) -> str:
        env.network.slow(env.node_names, self.delay_ms, self.loss, env.base)
        return f"delay {self.delay_ms} ms, loss {self.loss:.0%} on every node"

    def stop(self, env: ChaosCluster) -> None:
        env.network.fast()


@dataclass
class DiskFull(Fault):
    """One broker's log directory has no free byte left."""

    target: str = "leader"
    name: str = "disk-full"
    victim: int = 0

    def start(self, env: ChaosCluster, rng: random.Random) -> str:
        self.victim = pick_broker(env, rng, self.target)
        taken = env.disks[self.victim].fill()
        return f"b{self.victim} log dir full ({taken >> 20} MiB of ballast)"

    def stop(self, env: ChaosCluster) -> None:
        env.disks[self.victim].release()


@dataclass
class IoErrors(Fault):
    """Writes and fsyncs under one broker's log directory fail with EIO (the fault shim)."""

    target: str = "leader"
    name: str = "io-errors"
    victim: int = 0

    def start(self, env: ChaosCluster, rng: random.Random) -> str:
        self.victim = pick_broker(env, rng, self.target)
        env.controls[self.victim].set_io_faults(FAIL_WRITE | FAIL_FSYNC)
        return f"b{self.victim} write/fsync EIO"

    def stop(self, env: ChaosCluster) -> None:
        env.controls[self.victim].set_io_faults(0)


@dataclass
class ClockJump(Fault):
    """One broker's wall clock steps by `seconds` (and back on stop)."""

    seconds: float
    target: str = "leader"
    name: str = field(init=False)
    victim: int = 0

    def __post_init__(self) -> None:
        sign = "+" if self.seconds >= 0 else "-"
        self.name = f"clock:{sign}{abs(self.seconds):g}s"

    def start(self, env: ChaosCluster, rng: random.Random) -> str:
        self.victim = pick_broker(env, rng, self.target)
        env.controls[self.victim].set_clock_offset(self.seconds)
        return f"b{self.victim} wall clock {self.seconds:+g} s"

    def stop(self, env: ChaosCluster) -> None:
        env.controls[self.victim].set_clock_offset(0)
