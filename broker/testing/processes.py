"""Start, wait for, stop, kill and observe one server process: an Odradek broker or an Apache
Kafka 3.9 node (KRaft).

Every process runs in its own session (a signal to the harness's process group does not reach
it), writes one log file per start (``<stem>-<n>.log``), can be stopped with SIGTERM (a
controlled shutdown), killed with SIGKILL, paused (SIGSTOP), resumed and started again on the
same port and directories. A process may run under a wrapper command (``ip netns exec NS``);
``pdeathsig`` makes it die with the harness, even when the harness is killed.

Failures raise :class:`StartError` with the tail of the process's log; pytest shows it as is.
"""

from __future__ import annotations

import ctypes
import os
import random
import signal
import socket
import subprocess
import sys
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Self

from odradek.broker.client.blocking import api_versions_probe
from odradek.broker.cluster.zk_data import new_cluster_id

START_TIMEOUT = float(os.environ.get("ODRADEK_TEST_START_TIMEOUT", "60"))
STOP_TIMEOUT = 60.0  # a controlled shutdown moves leadership first; SIGKILL after this
LOG_TAIL_LINES = 200


class StartError(RuntimeError):
    """The process exited before serving, or did not serve in time (its log tail included)."""


def _ephemeral_low() -> int:
    try:
        return int(Path("/proc/sys/net/ipv4/ip_local_port_range").read_text().split()[0])
    except (OSError, ValueError, IndexError):
        return 32768


_EPHEMERAL_LOW = _ephemeral_low()
_handed_out: set[int] = set()


def die_with_parent(sig: int = signal.SIGKILL) -> None:
    """preexec_fn: the child gets `sig` when the harness dies, even by SIGKILL (the signal is
    kept across exec, so it reaches the process a wrapper such as `ip netns exec` runs)."""
    pr_set_pdeathsig = 1
    ctypes.CDLL(None, use_errno=True).prctl(pr_set_pdeathsig, sig, 0, 0, 0)


def free_port() -> int:
    """A free port below the kernel's ephemeral range, never handed out twice in this process.

    A port the kernel picked (bind to 0) is in the ephemeral range, so after the process
    listening there is killed, any outgoing connection on the machine may take it as its local
    port and the restarted server then fails with "Address already in use".
    """
    low = max(1024, _EPHEMERAL_LOW - 20000)
    for _ in range(1000):
        port = random.randrange(low, _EPHEMERAL_LOW)
        if port in _handed_out:
            continue
        with socket.socket() as s:
            try:
                s.bind(("127.0.0.1", port))
            except OSError:
                continue
        _handed_out.add(port)
        return port
    raise RuntimeError(f"no free port in {low}-{_EPHEMERAL_LOW - 1}")


def terminate(proc: subprocess.Popen, timeout: float) -> None:
    """SIGTERM a running process and wait for its exit; SIGKILL it after `timeout` seconds."""
    if proc.poll() is not None:
        return
    proc.send_signal(signal.SIGTERM)
    try:
        proc.wait(timeout)
    except subprocess.TimeoutExpired:
        proc.kill()
        proc.wait()


@dataclass(frozen=True)
class Usage:
    """Resources of a process and its descendants: CPU seconds (user + system, children that
    were waited for included) and the peak resident set (VmHWM) of the largest one."""

    cpu_seconds: float
    peak_rss_bytes: int


_CLOCK_TICKS = os.sysconf("SC_CLK_TCK") if hasattr(os, "sysconf") else 100


def _stat(path: str) -> tuple[str, list[str]] | None:
    """A /proc stat file's command name and the fields after it (None when it is gone)."""
    try:
        raw = Path(path).read_text()
    except OSError:
        return None
    # The command name (field 2) may hold spaces and parentheses: split after its last ')'.
    end = raw.rindex(")")
    return raw[raw.index("(") + 1 : end], raw[end + 2 :].split()


def _stat_fields(pid: int) -> list[str] | None:
    stat = _stat(f"/proc/{pid}/stat")
    return None if stat is None else stat[1]


def thread_cpu(pid: int, prefixes: tuple[str, ...]) -> dict[int, float]:
    """CPU seconds (user + system) of the threads of `pid` whose names start with one of
    `prefixes`, by thread id; empty when `pid` is gone. Each thread's own stat is under
    /proc/<pid>/task: /proc/<tid>/stat would give the whole process's."""
    try:
        tasks = os.listdir(f"/proc/{pid}/task")
    except OSError:
        return {}
    out = {}
    for tid in tasks:
        stat = _stat(f"/proc/{pid}/task/{tid}/stat")  # None: the thread ended meanwhile
        if stat is not None and stat[0].startswith(prefixes):
            out[int(tid)] = (int(stat[1][11]) + int(stat[1][12])) / _CLOCK_TICKS
    return out


def descendants(pid: int) -> list[int]:
    """`pid` and every process below it (from /proc)."""
    children: dict[int, list[int]] = {}
    for entry in os.listdir("/proc"):
        if entry.isdigit() and (fields := _stat_fields(int(entry))) is not None:
            children.setdefault(int(fields[1]), []).append(int(entry))
    out, todo = [], [pid]
    while todo:
        p = todo.pop()
        out.append(p)
        todo += children.get(p, [])
    return out


def process_usage(pid: int) -> Usage:
    """CPU seconds and peak RSS of `pid` and its descendants, from /proc (stat, status)."""
    cpu = 0.0
    peak = 0
    for p in descendants(pid):
        fields = _stat_fields(p)
        if fields is None:
            continue
        # stat fields 14-17 (utime, stime, cutime, cstime); index 0 here is field 3 (state).
        cpu += sum(int(v) for v in fields[11:15]) / _CLOCK_TICKS
        try:
            for line in Path(f"/proc/{p}/status").read_text().splitlines():
                if line.startswith("VmHWM:"):
                    peak = max(peak, int(line.split()[1]) * 1024)
        except OSError:
            pass
    return Usage(cpu, peak)


class ServerProcess:
    """One server process, restartable on the same port and directories. Subclasses give the
    command line (`command`) and may prepare files before each start (`prepare`)."""

    log_stem = "server"

    def __init__(
        self,
        log_dir: Path,
        *,
        port: int | None = None,
        name: str = "server",
        host: str = "127.0.0.1",
        wrapper: list[str] | None = None,
        env: dict[str, str] | None = None,
        pdeathsig: bool = False,
    ) -> None:
        self.log_dir = log_dir
        self.host = host
        self.port = port or free_port()
        self.name = name
        self.wrapper = wrapper or []
        # Extra environment of the next start (e.g. ODRADEK_CRASH_AT for crash tests).
        self.env: dict[str, str] = dict(env or {})
        self.pdeathsig = pdeathsig
        self.proc: subprocess.Popen[bytes] | None = None
        self.starts = 0
        self.launched_at = 0.0

    @property
    def bootstrap(self) -> str:
        return f"{self.host}:{self.port}"

    def command(self) -> list[str]:
        raise NotImplementedError

    def prepare(self) -> None:
        """Files the process needs before it starts (directories, configuration)."""
        self.log_dir.mkdir(parents=True, exist_ok=True)

    def log_path(self, start: int) -> Path:
        return self.log_dir / f"{self.log_stem}-{start}.log"

    def launch(self) -> None:
        """Start the process without waiting for it to serve."""
        assert not self.running, f"{self.name} already running"
        self.prepare()
        path = self.log_path(self.starts)
        self.starts += 1
        cmd = self.command()
        with open(path, "wb") as log:
            log.write(("$ " + " ".join(cmd) + "\n").encode())
            log.flush()
            self.launched_at = time.monotonic()
            self.proc = subprocess.Popen(
                cmd,
                stdout=log,
                stderr=subprocess.STDOUT,
                stdin=subprocess.DEVNULL,
                env={**os.environ, "PYTHONUNBUFFERED": "1", **self.env},
                start_new_session=True,
                preexec_fn=die_with_parent if self.pdeathsig else None,
            )

    def serving(self) -> bool:
        return api_versions_probe(self.host, self.port)

    def wait_serving(self, timeout: float = START_TIMEOUT) -> float:
        """Wait until it answers ApiVersions; return the seconds since the launch. Raises
        StartError (with the log tail) when it exits first or does not answer in time."""
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            assert self.proc is not None
            code = self.proc.poll()
            if code is not None:
                raise StartError(
                    f"{self.name} exited with {code} before accepting requests\n{self.log_tail()}"
                )
            if self.serving():
                return time.monotonic() - self.launched_at
            time.sleep(0.1)
        self.kill()
        raise StartError(
            f"{self.name} did not answer ApiVersions within {timeout}s\n{self.log_tail()}"
        )

    def start(self, timeout: float = START_TIMEOUT) -> Self:
        self.launch()
        self.wait_serving(timeout)
        return self

    @property
    def running(self) -> bool:
        return self.proc is not None and self.proc.poll() is None

    @property
    def pid(self) -> int | None:
        return self.proc.pid if self.running and self.proc is not None else None

    def usage(self) -> Usage:
        """CPU seconds and peak RSS so far (zero when not running)."""
        return process_usage(self.proc.pid) if self.running and self.proc else Usage(0.0, 0)

    def stop(self, timeout: float = STOP_TIMEOUT) -> int | None:
        """SIGTERM and wait for the exit (a controlled shutdown); SIGKILL after `timeout`."""
        if self.proc is None:
            return None
        if self.proc.poll() is None:
            self.proc.send_signal(signal.SIGCONT)  # a paused process would not see SIGTERM
            terminate(self.proc, timeout)
        return self.proc.returncode

    def kill(self) -> None:
        """SIGKILL: a crash, no shutdown work at all."""
        if self.proc is not None and self.proc.poll() is None:
            self.proc.kill()
            self.proc.wait()

    def pause(self) -> None:
        assert self.proc is not None
        self.proc.send_signal(signal.SIGSTOP)

    def resume(self) -> None:
        assert self.proc is not None
        self.proc.send_signal(signal.SIGCONT)

    def restart(self, *, kill: bool = False, timeout: float = START_TIMEOUT) -> Self:
        """Stop (or kill -9) and start again with the same port, data and settings."""
        if kill:
            self.kill()
        else:
            self.stop()
        return self.start(timeout)

    def log_text(self) -> str:
        parts = []
        for i in range(self.starts):
            path = self.log_path(i)
            if path.exists():
                parts.append(f"--- {path} ---\n" + path.read_text(errors="replace"))
        return "\n".join(parts)

    def log_tail(self, lines: int = LOG_TAIL_LINES) -> str:
        return "\n".join(self.log_text().splitlines()[-lines:])


class OdradekProcess(ServerProcess):
    """``python -m odradek.broker.cli broker``. `settings` become --override arguments after
    the listener and log directory, so they may replace those too (e.g. a SASL listener)."""

    log_stem = "broker"

    def __init__(
        self,
        data_dir: Path,
        log_dir: Path,
        settings: dict[str, str],
        *,
        name: str = "odradek broker",
        **process: object,
    ) -> None:
        """`process`: ServerProcess options (port, host, wrapper, env, pdeathsig)."""
        super().__init__(log_dir, name=name, **process)  # type: ignore[arg-type]
        self.data_dir = data_dir
        self.settings = settings

    def command(self) -> list[str]:
        settings = {
            "listeners": f"PLAINTEXT://{self.host}:{self.port}",
            "log.dirs": str(self.data_dir),
            **self.settings,
        }
        cmd = [*self.wrapper, sys.executable, "-m", "odradek.broker.cli", "broker"]
        for key, value in settings.items():
            cmd += ["--override", f"{key}={value}"]
        return cmd

    def prepare(self) -> None:
        super().prepare()
        self.data_dir.mkdir(parents=True, exist_ok=True)


KAFKA_LOG4J = """\
log4j.rootLogger=INFO, file
log4j.appender.file=org.apache.log4j.FileAppender
log4j.appender.file.File={log}
log4j.appender.file.layout=org.apache.log4j.PatternLayout
log4j.appender.file.layout.ConversionPattern=[%d] %p %m (%c)%n
log4j.logger.kafka.request.logger=WARN
log4j.logger.state.change.logger=WARN
log4j.logger.org.apache.kafka.controller=WARN
"""

# What a single-node Kafka needs (internal topics with one replica) and what tests and
# benchmarks want of any size (no delay before the first rebalance).
KAFKA_SINGLE_NODE = {
    "offsets.topic.replication.factor": "1",
    "offsets.topic.num.partitions": "1",
    "transaction.state.log.replication.factor": "1",
    "transaction.state.log.min.isr": "1",
    "share.coordinator.state.topic.replication.factor": "1",
    "share.coordinator.state.topic.min.isr": "1",
}


class KafkaProcess(ServerProcess):
    """One Apache Kafka node in KRaft mode (``kafka.Kafka``), a plain JVM on Maven Central's
    jars (`libs`, as scripts/install-kafka.sh or odradek.broker.kafka_tools fetch them).

    `voters` maps node ids to controller ports of the quorum; a node whose id is among them
    runs as broker and controller (combined mode). The first start formats its storage with
    `cluster_id` (shared by every node of a cluster); the log is ``server.log`` in `log_dir`.
    """

    log_stem = "kafka-stdout"

    def __init__(
        self,
        libs: Path,
        workdir: Path,
        *,
        node_id: int = 1,
        voters: dict[int, int] | None = None,
        cluster_id: str | None = None,
        heap: str = "1g",
        settings: dict[str, str] | None = None,
        **process: object,
    ) -> None:
        super().__init__(workdir, name=f"kafka {node_id}", **process)  # type: ignore[arg-type]
        self.libs = libs
        self.workdir = workdir
        self.node_id = node_id
        self.controller_port = free_port()
        self.voters = voters if voters is not None else {node_id: self.controller_port}
        if node_id in self.voters:
            self.controller_port = self.voters[node_id]
        self.cluster_id = cluster_id or new_cluster_id()
        self.heap = heap
        self.settings = settings or {}
        self.data_dir = workdir / "data"
        self.server_log = workdir / "server.log"
        self.config_path = workdir / "server.properties"

    def java(self, main: str, *args: str, heap: str = "256m") -> list[str]:
        return [
            *self.wrapper,
            "java",
            f"-Xms{heap}",
            f"-Xmx{heap}",
            "-XX:+UseG1GC",
            "-XX:MaxGCPauseMillis=20",
            "-Djava.awt.headless=true",
            f"-Dlog4j.configuration=file:{self.workdir / 'log4j.properties'}",
            "-cp",
            f"{self.libs}/*",
            main,
            *args,
        ]

    def properties(self) -> dict[str, str]:
        controller = self.node_id in self.voters
        listeners = f"PLAINTEXT://{self.host}:{self.port}"
        if controller:
            listeners += f",CONTROLLER://{self.host}:{self.controller_port}"
        return {
            "process.roles": "broker,controller" if controller else "broker",
            "node.id": str(self.node_id),
            "controller.quorum.voters": ",".join(
                f"{i}@{self.host}:{p}" for i, p in sorted(self.voters.items())
            ),
            "listeners": listeners,
            "advertised.listeners": f"PLAINTEXT://{self.host}:{self.port}",
            "controller.listener.names": "CONTROLLER",
            "inter.broker.listener.name": "PLAINTEXT",
            "listener.security.protocol.map": "PLAINTEXT:PLAINTEXT,CONTROLLER:PLAINTEXT",
            "log.dirs": str(self.data_dir),
            "num.partitions": "1",
            "group.initial.rebalance.delay.ms": "0",
            "auto.create.topics.enable": "true",
            **(KAFKA_SINGLE_NODE if self.voters.keys() == {self.node_id} else {}),
            **self.settings,
        }

    def prepare(self) -> None:
        super().prepare()
        (self.workdir / "log4j.properties").write_text(KAFKA_LOG4J.format(log=self.server_log))
        self.config_path.write_text("".join(f"{k}={v}\n" for k, v in self.properties().items()))
        if not (self.data_dir / "meta.properties").exists():
            self.data_dir.mkdir(parents=True, exist_ok=True)
            fmt = self.java(
                "kafka.tools.StorageTool", "format", "-t", self.cluster_id,
                "-c", str(self.config_path), "--ignore-formatted",
            )  # fmt: skip
            out = subprocess.run(fmt, capture_output=True, text=True, check=False)
            if out.returncode != 0:
                raise StartError(f"{self.name}: storage format failed\n{out.stderr[-3000:]}")

    def command(self) -> list[str]:
        return self.java("kafka.Kafka", str(self.config_path), heap=self.heap)

    def log_text(self) -> str:
        text = super().log_text()
        if self.server_log.exists():
            text += f"\n--- {self.server_log} ---\n" + self.server_log.read_text(errors="replace")
        return text
