"""A real ZooKeeper ensemble (or a single server) on loopback, for tests and benchmarks.

Each server gets free ports, its own data directory with a `myid` file, a small heap, and a log
file; the ensemble is ready when every running server answers the `srvr` four-letter word with a
mode and exactly one of them leads. `libs` is the directory of ZooKeeper's jars
(scripts/install-zookeeper.sh fetches them from Maven Central).
"""

from __future__ import annotations

import contextlib
import os
import signal
import socket
import subprocess
import threading
import time
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path

from odradek.broker.testing.processes import die_with_parent, free_port

START_TIMEOUT = float(os.environ.get("ODRADEK_ZK_START_TIMEOUT", "90"))
JVM_OPTS = [
    "-Xmx128m",
    "-Xms32m",
    "-XX:+UseSerialGC",
    "-XX:TieredStopAtLevel=1",
    "-Djava.awt.headless=true",
    "-Dzookeeper.admin.enableServer=false",
]
_LOG4J = """\
log4j.rootLogger=INFO, CONSOLE
log4j.appender.CONSOLE=org.apache.log4j.ConsoleAppender
log4j.appender.CONSOLE.layout=org.apache.log4j.PatternLayout
log4j.appender.CONSOLE.layout.ConversionPattern=%d{ISO8601} %-5p [%t] %c{1}: %m%n
"""


def free_ports(n: int) -> list[int]:
    return [free_port() for _ in range(n)]


def four_letter_word(
    port: int, word: str, timeout: float = 2.0, host: str = "127.0.0.1"
) -> str | None:
    """A ZooKeeper four-letter-word answer, or None when the server does not answer."""
    try:
        with socket.create_connection((host, port), timeout=timeout) as s:
            s.sendall(word.encode())
            chunks = []
            while chunk := s.recv(4096):
                chunks.append(chunk)
        return b"".join(chunks).decode(errors="replace")
    except OSError:
        return None


@dataclass
class Placement:
    """Where a server runs: its address and a wrapper command (e.g. `ip netns exec NS`)."""

    host: str
    wrapper: list[str] = field(default_factory=list)


class ZkServer:
    """One server of the ensemble; can be stopped, killed and started again (same ports, data)."""

    def __init__(
        self,
        myid: int,
        base: Path,
        ports: tuple[int, int, int],
        placement: Placement | None = None,
    ) -> None:
        self.myid = myid
        self.client_port, self.peer_port, self.election_port = ports
        self.placement = placement or Placement("127.0.0.1")
        self.host = self.placement.host
        self.dir = base / f"zk{myid}"
        self.data_dir = self.dir / "data"
        self.cfg_path = self.dir / "zoo.cfg"
        self.log_path = self.dir / "server.log"
        self.proc: subprocess.Popen[bytes] | None = None

    @property
    def address(self) -> str:
        return f"{self.host}:{self.client_port}"

    @property
    def alive(self) -> bool:
        return self.proc is not None and self.proc.poll() is None

    def start(self, libs: str, log4j: Path) -> None:
        assert not self.alive, f"zookeeper {self.myid} is already running"
        with open(self.log_path, "ab") as log:
            self.proc = subprocess.Popen(
                [*self.placement.wrapper, "java", *JVM_OPTS,
                 f"-Dlog4j.configuration=file:{log4j}", "-cp", f"{libs}/*",
                 "org.apache.zookeeper.server.quorum.QuorumPeerMain", str(self.cfg_path)],
                stdout=log, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL,
                preexec_fn=die_with_parent if self.placement.wrapper else None,
            )  # fmt: skip

    def stop(self, sig: int = signal.SIGTERM) -> None:
        if self.proc is None:
            return
        if self.proc.poll() is None:
            self.proc.send_signal(sig)
            try:
                self.proc.wait(timeout=30)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait()
        self.proc = None

    def kill(self) -> None:
        self.stop(signal.SIGKILL)

    def mode(self) -> str | None:
        """The server's role (leader, follower); None when it does not serve."""
        if not self.alive:
            return None
        answer = four_letter_word(self.client_port, "srvr", host=self.host)
        if not answer:
            return None
        for line in answer.splitlines():
            if line.startswith("Mode:"):
                return line.split(":", 1)[1].strip()
        return None

    def log_tail(self, lines: int = 60) -> str:
        try:
            return "\n".join(self.log_path.read_text(errors="replace").splitlines()[-lines:])
        except OSError:
            return ""


class ZkEnsemble:
    """`size` ZooKeeper servers forming one quorum on 127.0.0.1 (free ports), or one server per
    placement, each on its own address with ZooKeeper's standard ports."""

    def __init__(
        self,
        base: Path,
        libs: str,
        size: int = 3,
        tick_ms: int = 500,
        placements: list[Placement] | None = None,
    ) -> None:
        self.base = base
        self.libs = libs
        self.tick_ms = tick_ms
        self.log4j = base / "log4j.properties"
        if placements:
            self.servers = [
                ZkServer(i + 1, base, (2181, 2888, 3888), placement)
                for i, placement in enumerate(placements)
            ]
        else:
            ports = free_ports(3 * size)
            self.servers = [
                ZkServer(i + 1, base, (ports[3 * i], ports[3 * i + 1], ports[3 * i + 2]))
                for i in range(size)
            ]

    @property
    def hosts(self) -> str:
        return ",".join(s.address for s in self.servers)

    def connect_string(self, chroot: str = "") -> str:
        """`zookeeper.connect` for this ensemble, optionally with a chroot ("/name")."""
        return self.hosts + chroot

    def _write_config(self) -> None:
        self.base.mkdir(parents=True, exist_ok=True)
        self.log4j.write_text(_LOG4J)
        peers = "\n".join(
            f"server.{s.myid}={s.host}:{s.peer_port}:{s.election_port}" for s in self.servers
        )
        for s in self.servers:
            s.data_dir.mkdir(parents=True, exist_ok=True)
            (s.data_dir / "myid").write_text(f"{s.myid}\n")
            s.cfg_path.write_text(
                f"tickTime={self.tick_ms}\n"
                "initLimit=20\nsyncLimit=10\n"
                f"dataDir={s.data_dir}\n"
                f"clientPort={s.client_port}\nclientPortAddress={s.host}\n"
                "maxClientCnxns=0\n"
                # Short sessions for expiry tests, Kafka's 18 s default still accepted.
                f"minSessionTimeout={2 * self.tick_ms}\nmaxSessionTimeout=60000\n"
                "admin.enableServer=false\n"
                "4lw.commands.whitelist=srvr,stat,ruok,mntr,cons\n"
                "forceSync=no\npreAllocSize=4096\n"
                "reconfigEnabled=false\nstandaloneEnabled=false\n"
                f"{peers}\n"
            )

    def start(self) -> None:
        self._write_config()
        for s in self.servers:
            s.start(self.libs, self.log4j)
        self.wait_ready()

    def restart(self, server: ZkServer | int) -> None:
        """Start a stopped server again and wait until it has joined the quorum."""
        s = self.server(server)
        if not s.alive:
            s.start(self.libs, self.log4j)
        self.wait_ready()

    def server(self, server: ZkServer | int) -> ZkServer:
        return server if isinstance(server, ZkServer) else self.servers[server]

    def leader(self) -> ZkServer:
        for s in self.servers:
            if s.mode() == "leader":
                return s
        raise AssertionError("the ensemble has no leader")

    @contextlib.contextmanager
    def server_down(self, server: ZkServer | int, *, kill: bool = True) -> Iterator[ZkServer]:
        """Stop (kill -9 by default) one server for the block, then bring it back."""
        s = self.server(server)
        s.kill() if kill else s.stop()
        try:
            yield s
        finally:
            self.restart(s)

    def wait_ready(self, timeout: float = START_TIMEOUT) -> None:
        """Every running server serves, and exactly one of them is the leader."""
        deadline = time.monotonic() + timeout
        while True:
            running = [s for s in self.servers if s.alive]
            modes = [s.mode() for s in running]
            if running and None not in modes and modes.count("leader") == 1:
                return
            dead = [s for s in self.servers if s.proc is not None and not s.alive]
            if dead or time.monotonic() > deadline:
                logs = "\n".join(f"--- zookeeper {s.myid}\n{s.log_tail()}" for s in self.servers)
                what = f"zookeeper {dead[0].myid} exited" if dead else "ensemble not ready"
                raise AssertionError(f"{what} (modes {modes})\n{logs}")
            time.sleep(0.2)

    def expire_session(self, session_id: int, password: bytes, timeout: float = 30.0) -> None:
        """End a client's session from outside: join it with its id and password, then close it
        (ZooKeeper's own way to do it; the client learns of it as an expiry on its next
        reconnect)."""
        from kazoo.client import KazooClient

        intruder = KazooClient(hosts=self.hosts, client_id=(session_id, password))
        intruder.start(timeout=timeout)
        try:
            got = intruder.client_id
            assert got is not None and got[0] == session_id, "joined another session"
        finally:
            intruder.stop()
            intruder.close()

    def stop(self) -> None:
        threads = [threading.Thread(target=s.stop) for s in self.servers]
        for t in threads:
            t.start()
        for t in threads:
            t.join()

    def log_tails(self) -> str:
        return "\n".join(f"--- zookeeper {s.myid}\n{s.log_tail()}" for s in self.servers)
