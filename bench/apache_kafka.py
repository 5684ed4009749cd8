"""Start and stop a single-node Apache Kafka 3.9 (KRaft, combined roles) for side-by-side runs.

The jars come from scripts/install-kafka.sh (Maven Central). Everything lives in a temporary
directory and listens on 127.0.0.1 only, so a run leaves nothing behind and touches no network.

Run it by hand with ``.venv/bin/python bench/apache_kafka.py``: it prints the bootstrap address and
serves until Ctrl-C or SIGTERM.
"""

from __future__ import annotations

import base64
import os
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import time
import uuid
from pathlib import Path

from odradek.broker.client.blocking import api_versions_probe

REPO = Path(__file__).resolve().parent.parent
INSTALL_SCRIPT = REPO / "scripts" / "install-kafka.sh"

LOG4J = """\
log4j.rootLogger=INFO, file
log4j.appender.file=org.apache.log4j.FileAppender
log4j.appender.file.File={log}
log4j.appender.file.layout=org.apache.log4j.PatternLayout
log4j.appender.file.layout.ConversionPattern=[%d] %p %m (%c)%n
log4j.logger.kafka.request.logger=WARN
log4j.logger.state.change.logger=WARN
log4j.logger.org.apache.kafka.controller=WARN
"""


def install_kafka() -> Path:
    """Run the installer (a no-op once cached) and return the libs directory."""
    out = subprocess.run(
        ["bash", str(INSTALL_SCRIPT)], check=True, stdout=subprocess.PIPE, text=True
    ).stdout
    return Path(out.strip().splitlines()[-1])


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


class ApacheKafka:
    """One Kafka 3.9 process in KRaft combined mode (broker and controller in the same JVM)."""

    def __init__(
        self,
        libs: Path | None = None,
        *,
        workdir: Path | None = None,
        heap: str = "1g",
        extra_props: dict[str, str] | None = None,
    ) -> None:
        self.libs = libs or install_kafka()
        self._own_workdir = workdir is None
        self.workdir = Path(workdir or tempfile.mkdtemp(prefix="odradek-kafka-"))
        self.heap = heap
        self.extra_props = extra_props or {}
        self.port = free_port()
        self.controller_port = free_port()
        self.proc: subprocess.Popen[bytes] | None = None
        self.log_path = self.workdir / "kafka.log"

    @property
    def bootstrap(self) -> str:
        return f"127.0.0.1:{self.port}"

    def _java(self, main: str, *args: str, heap: str = "256m") -> list[str]:
        return [
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

    def _write_config(self) -> Path:
        data = self.workdir / "data"
        data.mkdir(parents=True, exist_ok=True)
        props = {
            "process.roles": "broker,controller",
            "node.id": "1",
            "controller.quorum.voters": f"1@127.0.0.1:{self.controller_port}",
            "listeners": (
                f"PLAINTEXT://127.0.0.1:{self.port},CONTROLLER://127.0.0.1:{self.controller_port}"
            ),
            "advertised.listeners": f"PLAINTEXT://127.0.0.1:{self.port}",
            "controller.listener.names": "CONTROLLER",
            "inter.broker.listener.name": "PLAINTEXT",
            "listener.security.protocol.map": "PLAINTEXT:PLAINTEXT,CONTROLLER:PLAINTEXT",
            "log.dirs": str(data),
            "num.partitions": "1",
            "offsets.topic.replication.factor": "1",
            "offsets.topic.num.partitions": "1",
            "transaction.state.log.replication.factor": "1",
            "transaction.state.log.min.isr": "1",
            "share.coordinator.state.topic.replication.factor": "1",
            "share.coordinator.state.topic.min.isr": "1",
            "group.initial.rebalance.delay.ms": "0",
            "auto.create.topics.enable": "true",
            **self.extra_props,
        }
        path = self.workdir / "server.properties"
        path.write_text("".join(f"{k}={v}\n" for k, v in props.items()))
        (self.workdir / "log4j.properties").write_text(LOG4J.format(log=self.log_path))
        return path

    def start(self, timeout: float = 120.0) -> str:
        """Format storage, start the JVM, wait until the broker answers; return the bootstrap."""
        config = self._write_config()
        cluster_id = base64.urlsafe_b64encode(uuid.uuid4().bytes).rstrip(b"=").decode()
        subprocess.run(
            self._java("kafka.tools.StorageTool", "format", "-t", cluster_id, "-c", str(config)),
            check=True,
            stdout=subprocess.DEVNULL,
            stderr=subprocess.PIPE,
        )
        out = open(self.workdir / "kafka.stdout", "wb")  # noqa: SIM115 - owned by the process
        self.proc = subprocess.Popen(
            self._java("kafka.Kafka", str(config), heap=self.heap),
            stdout=out,
            stderr=subprocess.STDOUT,
            start_new_session=True,
        )
        out.close()
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            if self.proc.poll() is not None:
                raise RuntimeError(f"Kafka exited with {self.proc.returncode}\n{self.tail_log()}")
            if api_versions_probe("127.0.0.1", self.port):
                return self.bootstrap
            time.sleep(0.5)
        self.stop()
        raise TimeoutError(f"Kafka did not start within {timeout}s\n{self.tail_log()}")

    def tail_log(self, lines: int = 40) -> str:
        parts = []
        for name in ("kafka.stdout", "kafka.log"):
            p = self.workdir / name
            if p.exists():
                parts.append("\n".join(p.read_text(errors="replace").splitlines()[-lines:]))
        return "\n".join(parts)

    def stop(self, timeout: float = 30.0) -> None:
        """SIGTERM (controlled shutdown), then SIGKILL; remove the temporary directory."""
        if self.proc is not None and self.proc.poll() is None:
            self.proc.send_signal(signal.SIGTERM)
            try:
                self.proc.wait(timeout)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait()
        self.proc = None
        if self._own_workdir:
            shutil.rmtree(self.workdir, ignore_errors=True)

    def __enter__(self) -> ApacheKafka:
        self.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self.stop()


def _interrupt(signum: int, _frame: object) -> None:
    raise KeyboardInterrupt


def main() -> int:
    # Also when started in the background, where SIGINT is ignored: both signals stop Kafka.
    signal.signal(signal.SIGINT, _interrupt)
    signal.signal(signal.SIGTERM, _interrupt)
    kafka = ApacheKafka(heap=os.environ.get("KAFKA_HEAP", "1g"))
    try:
        print(kafka.start(), flush=True)
        print(f"workdir {kafka.workdir}; Ctrl-C stops it", file=sys.stderr, flush=True)
        while kafka.proc is not None and kafka.proc.poll() is None:
            time.sleep(1)
    except KeyboardInterrupt:
        pass
    finally:
        kafka.stop()
    return 0


if __name__ == "__main__":
    sys.exit(main())
