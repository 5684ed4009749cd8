"""A private test network of Linux network namespaces: one per node, joined by a bridge.

The bridge lives in a hub namespace of its own, and every veth pair is created with both ends
directly inside the run's namespaces, so nothing is added to the host's root namespace. Faults
are packet filter rules applied inside the nodes' namespaces only (the host's iptables and nft
rules are never read or written):

- partitions: DROP rules in each node's INPUT chain for the addresses it must not hear from;
- a slow network: a random DROP (packet loss) and an NFQUEUE rule in each node's OUTPUT chain,
  whose queue a delayer process (nfqueue_delay.py, inside that namespace) holds back for the
  wanted delay. The kernels of these machines have no `sch_netem`, so `tc netem` is not an
  option; the queue gives the same fixed delay.

Names carry the harness's pid (`odc<pid>-<node>`), so runs side by side never collide and
`sweep()` can remove what a killed harness left behind.
"""

from __future__ import annotations

import contextlib
import ctypes
import os
import re
import subprocess
import sys
import time
from dataclasses import dataclass, field
from pathlib import Path

from odradek.broker.testing.processes import die_with_parent, terminate

NETNS_DIR = Path("/run/netns")
PREFIX = "odc"
CLONE_NEWNET = 0x40000000
DELAYER = Path(__file__).with_name("nfqueue_delay.py")
PART_CHAIN = "CHAOS-PART"
SLOW_CHAIN = "CHAOS-SLOW"


class NetworkError(RuntimeError):
    """A command that sets up or changes the test network failed."""


def sh(*cmd: str, check: bool = True, timeout: float = 30.0) -> subprocess.CompletedProcess[str]:
    proc = subprocess.run(cmd, capture_output=True, text=True, timeout=timeout)
    if check and proc.returncode != 0:
        raise NetworkError(f"{' '.join(cmd)} failed ({proc.returncode}): {proc.stderr.strip()}")
    return proc


def missing_tools() -> list[str]:
    """What the network needs and this machine lacks (root, ip, iptables)."""
    import shutil

    missing = [tool for tool in ("ip", "iptables") if shutil.which(tool) is None]
    if os.geteuid() != 0:
        missing.append("root")
    return missing


def require_tools() -> None:
    """Skip the calling test when a tool is missing; under CI (CI=true) fail instead, so a
    machine that cannot run the suite is noticed rather than passing quietly."""
    import pytest

    missing = missing_tools()
    if missing:
        message = f"the chaos suite needs {', '.join(missing)} (scripts/install-chaos-deps.sh)"
        if os.environ.get("CI", "").lower() == "true":
            pytest.fail(message, pytrace=False)
        pytest.skip(message)


@dataclass
class Node:
    name: str
    ip: str
    ns: str
    # Addresses this node drops packets from (a partition), and the delayer while slowed.
    blocked: set[str] = field(default_factory=set)
    delayer: subprocess.Popen[bytes] | None = None

    @property
    def wrapper(self) -> list[str]:
        """The command prefix that runs a program inside this node's namespace."""
        return ["ip", "netns", "exec", self.ns]

    def run(self, *cmd: str, check: bool = True) -> subprocess.CompletedProcess[str]:
        return sh(*self.wrapper, *cmd, check=check)

    def iptables(self, *args: str, check: bool = True) -> subprocess.CompletedProcess[str]:
        return self.run("iptables", "-w", "5", *args, check=check)


class Network:
    """Nodes on 10.213.0.0/24 (a range of this harness only), each in its own namespace."""

    def __init__(self, subnet: str = "10.213.0", tag: str | None = None) -> None:
        self.subnet = subnet
        self.tag = tag or f"{PREFIX}{os.getpid()}"
        self.hub = f"{self.tag}-hub"
        self.nodes: dict[str, Node] = {}
        self._created: list[str] = []

    def node(self, name: str) -> Node:
        return self.nodes[name]

    def add(self, name: str, octet: int) -> Node:
        """Create a node's namespace and plug it into the bridge."""
        if not self._created:
            self._create_hub()
        ns = f"{self.tag}-{name}"
        node = Node(name, f"{self.subnet}.{octet}", ns)
        sh("ip", "netns", "add", ns)
        self._created.append(ns)
        port = f"p{len(self.nodes)}"
        sh("ip", "link", "add", "name", port, "netns", self.hub, "type", "veth",
           "peer", "name", "eth0", "netns", ns)  # fmt: skip
        sh("ip", "-n", self.hub, "link", "set", "dev", port, "master", "br0", "up")
        sh("ip", "-n", ns, "link", "set", "dev", "lo", "up")
        sh("ip", "-n", ns, "addr", "add", f"{node.ip}/24", "dev", "eth0")
        sh("ip", "-n", ns, "link", "set", "dev", "eth0", "up")
        for chain, hook in ((PART_CHAIN, "INPUT"), (SLOW_CHAIN, "OUTPUT")):
            node.iptables("-N", chain)
            node.iptables("-A", hook, "-j", chain)
        self.nodes[name] = node
        return node

    def _create_hub(self) -> None:
        sh("ip", "netns", "add", self.hub)
        self._created.append(self.hub)
        sh("ip", "-n", self.hub, "link", "add", "br0", "type", "bridge")
        sh("ip", "-n", self.hub, "link", "set", "dev", "br0", "up")

    @contextlib.contextmanager
    def entered(self, name: str):  # -> Iterator[None]
        """Move the calling thread into a node's namespace for the block (threads it starts
        meanwhile stay there)."""
        libc = ctypes.CDLL(None, use_errno=True)
        own = os.open("/proc/thread-self/ns/net", os.O_RDONLY)
        target = os.open(NETNS_DIR / self.nodes[name].ns, os.O_RDONLY)
        try:
            if libc.setns(target, CLONE_NEWNET) != 0:
                raise NetworkError(f"setns: {os.strerror(ctypes.get_errno())}")
            try:
                yield
            finally:
                libc.setns(own, CLONE_NEWNET)
        finally:
            os.close(own)
            os.close(target)

    # -- partitions ------------------------------------------------------------------------------

    def partition(self, grudges: dict[str, set[str]]) -> None:
        """Each node of `grudges` stops hearing from the nodes listed for it (INPUT drops);
        give both directions for a symmetric cut. Replaces any earlier partition."""
        for name, node in self.nodes.items():
            wanted = {self.nodes[o].ip for o in grudges.get(name, set())}
            if wanted == node.blocked:
                continue
            node.iptables("-F", PART_CHAIN)
            for ip in sorted(wanted):
                node.iptables("-A", PART_CHAIN, "-s", ip, "-j", "DROP")
            node.blocked = wanted

    def heal(self) -> None:
        self.partition({})

    # -- slow network ----------------------------------------------------------------------------

    def slow(self, names: list[str], delay_ms: int, loss: float, log_dir: Path) -> None:
        """Delay every packet a node sends to the test network by `delay_ms` and drop `loss` of
        them at random."""
        for name in names:
            node = self.nodes[name]
            if node.delayer is None:
                with open(log_dir / f"delayer-{name}.log", "ab") as log:
                    node.delayer = subprocess.Popen(
                        [*node.wrapper, sys.executable, str(DELAYER), "--delay-ms", str(delay_ms)],
                        stdin=subprocess.DEVNULL,
                        stdout=log,
                        stderr=subprocess.STDOUT,
                        start_new_session=True,
                        preexec_fn=die_with_parent,
                    )
            dest = f"{self.subnet}.0/24"
            node.iptables("-F", SLOW_CHAIN)
            if loss > 0:
                node.iptables("-A", SLOW_CHAIN, "-d", dest, "-m", "statistic", "--mode",
                              "random", "--probability", f"{loss:.3f}", "-j", "DROP")  # fmt: skip
            node.iptables("-A", SLOW_CHAIN, "-d", dest, "-j", "NFQUEUE", "--queue-num", "0",
                          "--queue-bypass")  # fmt: skip

    def fast(self) -> None:
        """Undo `slow`: packets flow at once again (queued ones are let through first)."""
        slowed = [n for n in self.nodes.values() if n.delayer is not None]
        for node in slowed:
            node.iptables("-F", SLOW_CHAIN)
        if slowed:
            time.sleep(1.0)  # the delayers release what they hold
        for node in slowed:
            terminate(node.delayer, 5)
            node.delayer = None

    # -- teardown --------------------------------------------------------------------------------

    def teardown(self) -> None:
        """Stop the delayers and delete every namespace (their veth pairs and bridge go too)."""
        for node in self.nodes.values():
            if node.delayer is not None:
                terminate(node.delayer, 5)
                node.delayer = None
        for ns in reversed(self._created):
            sh("ip", "netns", "del", ns, check=False)
        self._created.clear()
        self.nodes.clear()


def pids_in(ns: str) -> list[int]:
    out = sh("ip", "netns", "pids", ns, check=False).stdout
    return [int(p) for p in out.split()]


def sweep() -> list[str]:
    """Delete the namespaces of harness runs whose process is gone (a harness killed before
    it could tear down); returns their names."""
    removed = []
    if not NETNS_DIR.is_dir():
        return removed
    for entry in sorted(NETNS_DIR.iterdir()):
        m = re.fullmatch(rf"{PREFIX}(\d+)-.+", entry.name)
        if m is None or Path(f"/proc/{m.group(1)}").exists():
            continue
        for pid in pids_in(entry.name):
            with contextlib.suppress(ProcessLookupError):
                os.kill(pid, 9)
        sh("ip", "netns", "del", entry.name, check=False)
        removed.append(entry.name)
    return removed
