"""The named fault schedules of `make chaos`: which faults a run inflicts, how long each lasts
and how long the cluster is left alone between them.

A run repeats cycles of quiet, fault, heal until its duration is used up; `in_order` schedules
take their faults in turn, the others pick one at random each cycle.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

from nemesis import (
    ClockJump,
    DiskFull,
    Fault,
    IoErrors,
    Kill,
    KillZk,
    Partition,
    Pause,
    Slow,
)

HOUR = 3600.0


@dataclass
class Schedule:
    name: str
    faults: list[Callable[[], Fault]]
    fault_s: tuple[float, float] = (10.0, 18.0)
    quiet_s: tuple[float, float] = (4.0, 8.0)
    in_order: bool = False
    description: str = ""


def _one(name: str, make: Callable[[], Fault], description: str, **kw: object) -> Schedule:
    return Schedule(name, [make], description=description, **kw)  # type: ignore[arg-type]


# SIGSTOP must outlast the 6 s ZooKeeper session of the chaos brokers.
PAUSE = (12.0, 20.0)

SCHEDULES: dict[str, Schedule] = {
    s.name: s
    for s in [
        _one("partition-halves", lambda: Partition("halves"),
             "random halves of the six nodes"),
        _one("partition-leader-zk", lambda: Partition("leader-zk"),
             "a partition leader cut from ZooKeeper, still reachable by brokers and clients"),
        _one("partition-leader-isolated", lambda: Partition("leader-isolated"),
             "a partition leader cut from ZooKeeper and the other brokers, clients still reach it"),
        _one("partition-controller-zk", lambda: Partition("controller-zk"),
             "the controller cut from ZooKeeper"),
        _one("partition-follower", lambda: Partition("follower"),
             "a follower cut from its leader only"),
        _one("partition-bridge", lambda: Partition("bridge"),
             "two sides joined by one node that sees both"),
        _one("partition-ring", lambda: Partition("ring"),
             "each node sees its two ring neighbours only"),
        _one("kill-leader", lambda: Kill("leader"), "kill -9 of a partition leader"),
        _one("kill-controller", lambda: Kill("controller"), "kill -9 of the controller"),
        _one("kill-random", lambda: Kill("random"), "kill -9 of a random broker",
             fault_s=(3.0, 10.0)),
        _one("kill-all", lambda: Kill("all"), "kill -9 of every broker at once",
             fault_s=(3.0, 8.0)),
        Schedule("kill-zk", [lambda: KillZk("leader"), lambda: KillZk("random")],
                 description="kill -9 of the ZooKeeper leader or a random server"),
        _one("pause-leader", lambda: Pause("leader"),
             "SIGSTOP of a partition leader past its ZooKeeper session", fault_s=PAUSE),
        _one("pause-controller", lambda: Pause("controller"),
             "SIGSTOP of the controller past its ZooKeeper session", fault_s=PAUSE),
        _one("slow-network", Slow, "200 ms delay and 10% loss on every node",
             fault_s=(15.0, 25.0)),
        _one("disk-full", DiskFull, "a leader's log directory full to the last byte"),
        _one("io-errors", IoErrors, "EIO on every write and fsync of a leader's log directory"),
        _one("clock-forward", lambda: ClockJump(HOUR), "a leader's wall clock one hour ahead"),
        _one("clock-backward", lambda: ClockJump(-HOUR),
             "a leader's wall clock one hour behind"),
        Schedule("partition-kill", [lambda: Partition("leader-isolated"), lambda: Kill("leader")],
                 in_order=True, fault_s=(8.0, 10.0), quiet_s=(3.0, 4.0),
                 description="an isolated leader, then kill -9 of a leader (the make test run)"),
        Schedule("pause-partition", [lambda: Pause("random"), lambda: Partition("halves")],
                 fault_s=PAUSE,
                 description="SIGSTOP of a random broker or random halves, in random turns"),
        Schedule("mixed", [lambda: Partition("halves"), lambda: Partition("leader-isolated"),
                           lambda: Kill("random"), lambda: Pause("leader"), Slow, DiskFull,
                           IoErrors, lambda: ClockJump(HOUR), lambda: KillZk("random")],
                 description="one fault of any kind per cycle"),
    ]
}  # fmt: skip

SHORT = "partition-kill"
