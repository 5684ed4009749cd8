"""The cluster of one chaos run: three ZooKeeper servers and three brokers, each process in a
network namespace of its own, plus a client namespace where the harness and its clients run.

Processes are the integration tests' own (zookeeper.ZkEnsemble, cluster.Cluster and its
ClusterBroker), placed on the run's network with a wrapper command (`ip netns exec`). Each broker
keeps its log directory on a small tmpfs (disks.Tmpfs) and runs with the fault shim preloaded
(shim.py), so every fault of the suite can reach it. `close()` takes everything down again.
"""

from __future__ import annotations

import contextlib
import logging
import time
from pathlib import Path
from typing import Any

from cluster import Cluster, ClusterBroker, summarize
from disks import Tmpfs
from netns import Network, Node
from odradek.broker.testing.zookeeper import Placement, ZkEnsemble, ZkServer
from shim import Control, build
from zookeeper import zookeeper_libs

log = logging.getLogger("chaos")

BROKER_PORT = 9092
ZK_OCTETS = {1: 11, 2: 12, 3: 13}
BROKER_OCTETS = {1: 21, 2: 22, 3: 23}
CLIENT_OCTET = 100
DISK_MB = 192

# Kafka's durability settings (RF=3, min.insync.replicas=2, no unclean election) and timeouts
# short enough for faults to show within a one-minute schedule, on top of the integration
# cluster's own (cluster.CLUSTER_OVERRIDES: the short ZooKeeper session, internal topics' RF 3).
BROKER_SETTINGS = {
    "default.replication.factor": "3",
    "min.insync.replicas": "2",
    "unclean.leader.election.enable": "false",
    "replica.lag.time.max.ms": "10000",
    "offsets.topic.num.partitions": "3",
    "transaction.state.log.num.partitions": "3",
    "auto.create.topics.enable": "false",
    "log.segment.bytes": str(1 << 20),
}


def zk_node(myid: int) -> str:
    return f"z{myid}"


def broker_node(broker_id: int) -> str:
    return f"b{broker_id}"


class ChaosCluster:
    def __init__(self, base: Path, brokers: int = 3, zookeepers: int = 3) -> None:
        self.base = base
        self.network = Network()
        self.shim_lib = build()
        self.disks: dict[int, Tmpfs] = {}
        self.controls: dict[int, Control] = {}
        self.broker_ids = list(range(1, brokers + 1))
        self.zk_ids = list(range(1, zookeepers + 1))
        self.ensemble: ZkEnsemble | None = None
        self.cluster: Cluster | None = None
        self._client: contextlib.ExitStack | None = None
        # Brokers the nemesis killed or paused (any other stopped broker has crashed).
        self.killed: set[int] = set()
        self.paused: set[int] = set()

    # -- set-up and teardown -----------------------------------------------------------------

    def start(self) -> None:
        self.base.mkdir(parents=True, exist_ok=True)
        net = self.network
        for i in self.zk_ids:
            net.add(zk_node(i), ZK_OCTETS[i])
        for i in self.broker_ids:
            net.add(broker_node(i), BROKER_OCTETS[i])
        net.add("client", CLIENT_OCTET)
        # The harness itself (its ZooKeeper and Kafka clients) talks from the client namespace.
        self._client = contextlib.ExitStack()
        self._client.enter_context(net.entered("client"))
        placements = [Placement(net.node(zk_node(i)).ip, net.node(zk_node(i)).wrapper)
                      for i in self.zk_ids]  # fmt: skip
        (self.base / "zk").mkdir(exist_ok=True)
        self.ensemble = ZkEnsemble(self.base / "zk", zookeeper_libs(), placements=placements)
        self.ensemble.start()
        for i in self.broker_ids:
            disk = self.disks[i] = Tmpfs(self.base / f"broker{i}" / "disk", DISK_MB)
            disk.mount()
            self.controls[i] = Control(self.base / f"broker{i}" / "control", disk.path)
        self.cluster = Cluster(
            self.ensemble,
            self.base,
            len(self.broker_ids),
            BROKER_SETTINGS,
            broker_options=self._broker_options,
        )
        self.cluster.start()

    def _broker_options(self, broker_id: int) -> dict[str, Any]:
        node = self.network.node(broker_node(broker_id))
        return {
            "host": node.ip,
            "port": BROKER_PORT,
            "wrapper": node.wrapper,
            "env": self.controls[broker_id].env(self.shim_lib),
            "pdeathsig": True,
            "data_dir": self.disks[broker_id].path / "logs",
        }

    def keep_data(self) -> None:
        """Copy every broker's log directory off its tmpfs (before close), for a post-mortem."""
        import shutil

        for i, disk in self.disks.items():
            if disk.mounted:
                shutil.copytree(disk.path / "logs", self.base / f"broker{i}" / "data-copy",
                                dirs_exist_ok=True)  # fmt: skip

    def close(self) -> None:
        """Stop every process, unmount the disks, delete the namespaces; never raises."""
        steps = [
            lambda: self.network.fast(),
            lambda: self.cluster.stop() if self.cluster else None,
            lambda: self.ensemble.stop() if self.ensemble else None,
            lambda: self._client.close() if self._client else None,
            *[disk.umount for disk in self.disks.values()],
            lambda: self.network.teardown(),
        ]
        for step in steps:
            try:
                step()
            except Exception:  # noqa: BLE001 - teardown goes on whatever failed
                log.exception("teardown step failed")

    # -- handles ---------------------------------------------------------------------------------

    @property
    def c(self) -> Cluster:
        assert self.cluster is not None
        return self.cluster

    @property
    def zk(self) -> ZkEnsemble:
        assert self.ensemble is not None
        return self.ensemble

    def broker(self, broker_id: int) -> ClusterBroker:
        return self.c[broker_id]

    def zk_server(self, myid: int) -> ZkServer:
        return self.zk.servers[myid - 1]

    def node(self, name: str) -> Node:
        return self.network.node(name)

    @property
    def bootstrap(self) -> str:
        return ",".join(self.broker(i).bootstrap for i in self.broker_ids)

    @property
    def node_names(self) -> list[str]:
        return [zk_node(i) for i in self.zk_ids] + [broker_node(i) for i in self.broker_ids]

    # -- processes -------------------------------------------------------------------------------

    def start_zk(self, myid: int) -> None:
        s = self.zk_server(myid)
        if not s.alive:
            s.start(self.zk.libs, self.zk.log4j)

    def start_broker(self, broker_id: int) -> None:
        """Start a stopped broker without waiting (it may not reach ZooKeeper yet)."""
        self.killed.discard(broker_id)
        b = self.broker(broker_id)
        if not b.running:
            b.launch()

    def kill_broker(self, broker_id: int) -> None:
        self.killed.add(broker_id)
        self.paused.discard(broker_id)
        self.broker(broker_id).kill()

    def pause_broker(self, broker_id: int) -> None:
        self.paused.add(broker_id)
        self.broker(broker_id).pause()

    def resume_broker(self, broker_id: int) -> None:
        self.paused.discard(broker_id)
        self.broker(broker_id).resume()

    def crashed(self) -> dict[int, int | None]:
        """Brokers that exited on their own: id -> exit status."""
        out = {}
        for i in self.broker_ids:
            b = self.broker(i)
            if i not in self.killed and b.proc is not None and b.proc.poll() is not None:
                out[i] = b.proc.returncode
        return out

    def heal_all(self) -> None:
        """Undo every fault: network whole and fast, clocks and disks sane, every process up."""
        self.network.heal()
        self.network.fast()
        for i in list(self.paused):
            self.resume_broker(i)
        for control in self.controls.values():
            control.reset()
        for disk in self.disks.values():
            disk.release()
        for i in self.zk_ids:
            self.start_zk(i)
        for i in self.broker_ids:
            self.start_broker(i)

    # -- views -----------------------------------------------------------------------------------

    def metadata(self, topics: list[str]) -> dict | None:
        """Metadata from the first running broker that answers."""
        for i in self.broker_ids:
            b = self.broker(i)
            if not b.running:
                continue
            try:
                return b.metadata(topics)
            except Exception:  # noqa: BLE001 - unreachable or paused
                continue
        return None

    def leaders(self, topic: str) -> dict[int, tuple[int, int]]:
        """partition -> (leader, leader epoch) as some broker sees it (empty: none answers)."""
        view = self.metadata([topic])
        if view is None:
            return {}
        return {p: (leader, epoch) for p, (leader, epoch, _, _) in
                summarize(view)["topics"].get(topic, {}).items()}  # fmt: skip

    def zk_partition_states(self, topic: str) -> dict[int, dict[str, Any]]:
        """The partition state znodes (leader, leader_epoch, isr) as ZooKeeper holds them."""
        import json

        zk = self.c.zk
        out = {}
        base = f"/brokers/topics/{topic}/partitions"
        for p in zk.get_children(base):
            data, _ = zk.get(f"{base}/{p}/state")
            out[int(p)] = json.loads(data)
        return out

    def log_tails(self) -> str:
        parts = [self.c.log_tails() if self.cluster else "", self.zk.log_tails()]
        return "\n".join(parts)


def wait_for(check: Any, timeout: float, interval: float = 0.5) -> Any:
    """Poll `check` until it returns a truthy value or `timeout` passes (then None)."""
    deadline = time.monotonic() + timeout
    while True:
        try:
            value = check()
            if value:
                return value
        except Exception:  # noqa: BLE001 - a cluster in transition
            pass
        if time.monotonic() > deadline:
            return None
        time.sleep(interval)
