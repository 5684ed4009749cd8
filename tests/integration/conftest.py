"""Fixtures that run a real Odradek broker process for integration tests.

Every broker runs as ``python -m odradek.broker.cli broker`` on 127.0.0.1 with a free port and its
data under the test's tmp_path. Its output goes to a log file; when a test fails, the tail of each
broker log is attached to the failure report.

Set ODRADEK_TEST_BOOTSTRAP=host:port to run the client tests against a broker that is already
running (for example Apache Kafka started with ``bench/apache_kafka.py``); this is how the tests
themselves are checked against the reference implementation. Tests that need to stop or restart
the broker cannot run in that mode.
"""

from __future__ import annotations

import os
import re
import shutil
import signal
import socket
import struct
import subprocess
import sys
import time
import uuid
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest
from zookeeper import zk_ensemble  # noqa: F401  (real ZooKeeper ensemble fixture)

EXTERNAL_BOOTSTRAP = os.environ.get("ODRADEK_TEST_BOOTSTRAP", "").strip()
START_TIMEOUT = float(os.environ.get("ODRADEK_TEST_START_TIMEOUT", "60"))
LOG_TAIL_LINES = 200

# What a Kafka user sets for a one-broker cluster: internal topics with one replica, and no
# artificial delay before the first consumer group rebalance.
SINGLE_NODE_OVERRIDES = {
    "offsets.topic.replication.factor": "1",
    "transaction.state.log.replication.factor": "1",
    "transaction.state.log.min.isr": "1",
    "group.initial.rebalance.delay.ms": "0",
}

_live_brokers: list[OdradekBroker] = []


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def api_versions_probe(host: str, port: int, timeout: float = 2.0) -> bool:
    """True when host:port answers an ApiVersions v0 request with error code 0."""
    client_id = b"odradek-tests"
    body = struct.pack(">hhih", 18, 0, 7, len(client_id)) + client_id
    try:
        with socket.create_connection((host, port), timeout=timeout) as s:
            s.sendall(struct.pack(">i", len(body)) + body)
            size = struct.unpack(">i", _recv_exact(s, 4))[0]
            resp = _recv_exact(s, size)
    except (OSError, struct.error):
        return False
    if len(resp) < 6:
        return False
    correlation_id, error_code = struct.unpack_from(">ih", resp)
    return correlation_id == 7 and error_code == 0


def _recv_exact(s: socket.socket, n: int) -> bytes:
    buf = bytearray()
    while len(buf) < n:
        chunk = s.recv(n - len(buf))
        if not chunk:
            raise ConnectionError("connection closed by broker")
        buf += chunk
    return bytes(buf)


class OdradekBroker:
    """One broker process; can be stopped, killed and started again on the same port and dirs."""

    def __init__(
        self,
        data_dir: Path,
        log_dir: Path,
        *,
        port: int | None = None,
        overrides: dict[str, str] | None = None,
    ) -> None:
        self.data_dir = data_dir
        self.log_dir = log_dir
        self.port = port or free_port()
        self.overrides = {**SINGLE_NODE_OVERRIDES, **(overrides or {})}
        self.proc: subprocess.Popen[bytes] | None = None
        self.starts = 0
        self.log_path = log_dir / "broker-0.log"

    @property
    def host(self) -> str:
        return "127.0.0.1"

    @property
    def bootstrap(self) -> str:
        return f"127.0.0.1:{self.port}"

    def command(self) -> list[str]:
        cmd = [
            sys.executable,
            "-m",
            "odradek.broker.cli",
            "broker",
            "--override",
            f"listeners=PLAINTEXT://127.0.0.1:{self.port}",
            "--override",
            f"log.dirs={self.data_dir}",
        ]
        for key, value in self.overrides.items():
            cmd += ["--override", f"{key}={value}"]
        return cmd

    def start(self, timeout: float = START_TIMEOUT) -> OdradekBroker:
        """Start the process and wait until it answers ApiVersions; fail with its log if not."""
        assert self.proc is None or self.proc.poll() is not None, "broker already running"
        self.data_dir.mkdir(parents=True, exist_ok=True)
        self.log_dir.mkdir(parents=True, exist_ok=True)
        self.log_path = self.log_dir / f"broker-{self.starts}.log"
        self.starts += 1
        env = {**os.environ, "PYTHONUNBUFFERED": "1"}
        with open(self.log_path, "wb") as log:
            log.write(("$ " + " ".join(self.command()) + "\n").encode())
            log.flush()
            self.proc = subprocess.Popen(
                self.command(),
                stdout=log,
                stderr=subprocess.STDOUT,
                stdin=subprocess.DEVNULL,
                env=env,
                start_new_session=True,
            )
        if self not in _live_brokers:
            _live_brokers.append(self)
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            code = self.proc.poll()
            if code is not None:
                pytest.fail(
                    f"odradek broker exited with {code} before accepting requests\n"
                    f"{self.log_tail()}",
                    pytrace=False,
                )
            if api_versions_probe(self.host, self.port):
                return self
            time.sleep(0.1)
        self.kill()
        pytest.fail(
            f"odradek broker did not answer ApiVersions within {timeout}s\n{self.log_tail()}",
            pytrace=False,
        )

    @property
    def running(self) -> bool:
        return self.proc is not None and self.proc.poll() is None

    def stop(self, timeout: float = 30.0) -> int | None:
        """SIGTERM (clean shutdown); SIGKILL if it has not exited after ``timeout`` seconds."""
        if self.proc is None:
            return None
        if self.proc.poll() is None:
            self.proc.send_signal(signal.SIGTERM)
            try:
                self.proc.wait(timeout)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait()
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

    def restart(self, *, kill: bool = False, timeout: float = START_TIMEOUT) -> OdradekBroker:
        """Stop (or kill -9) and start again with the same port, data and overrides."""
        if kill:
            self.kill()
        else:
            self.stop()
        return self.start(timeout)

    def log_text(self) -> str:
        parts = []
        for i in range(self.starts):
            path = self.log_dir / f"broker-{i}.log"
            if path.exists():
                parts.append(f"--- {path} ---\n" + path.read_text(errors="replace"))
        return "\n".join(parts)

    def log_tail(self, lines: int = LOG_TAIL_LINES) -> str:
        return "\n".join(self.log_text().splitlines()[-lines:])


class ExternalBroker:
    """A broker given by ODRADEK_TEST_BOOTSTRAP; these tests neither start nor stop it."""

    def __init__(self, bootstrap: str) -> None:
        host, _, port = bootstrap.rpartition(":")
        self.host = host or "127.0.0.1"
        self.port = int(port)
        self.bootstrap = bootstrap

    def log_tail(self, lines: int = LOG_TAIL_LINES) -> str:
        return f"(external broker at {self.bootstrap}; its log is not captured)"


def pytest_configure(config: pytest.Config) -> None:
    # kafka-python loads its protocol schemas with deprecated importlib.resources calls.
    config.addinivalue_line(
        "filterwarnings", "ignore:(read_text|open_text) is deprecated:DeprecationWarning"
    )


@pytest.hookimpl(wrapper=True)
def pytest_runtest_makereport(item: pytest.Item, call: pytest.CallInfo[None]):
    """Attach the tail of every live broker log to a failed test's report."""
    report = yield
    if report.failed:
        for i, broker in enumerate(_live_brokers):
            report.sections.append(
                (f"odradek broker {i} log ({broker.bootstrap})", broker.log_tail())
            )
    return report


@pytest.fixture
def broker_factory(tmp_path: Path) -> Iterator[Callable[..., OdradekBroker]]:
    """Start brokers owned by one test: ``factory(overrides={...}, data_dir=..., port=...)``.

    The returned broker can be stopped, killed and restarted on the same directories; every broker
    the factory made is stopped when the test ends.
    """
    if EXTERNAL_BOOTSTRAP:
        pytest.skip("needs its own broker process; ODRADEK_TEST_BOOTSTRAP points elsewhere")
    made: list[OdradekBroker] = []

    def factory(
        *,
        overrides: dict[str, str] | None = None,
        data_dir: Path | None = None,
        port: int | None = None,
        start: bool = True,
    ) -> OdradekBroker:
        n = len(made)
        broker = OdradekBroker(
            data_dir or tmp_path / f"broker{n}" / "data",
            tmp_path / f"broker{n}" / "logs",
            port=port,
            overrides=overrides,
        )
        made.append(broker)
        return broker.start() if start else broker

    yield factory
    for broker in made:
        broker.stop()
        if broker in _live_brokers:
            _live_brokers.remove(broker)


@pytest.fixture(scope="module")
def broker(tmp_path_factory: pytest.TempPathFactory) -> Iterator[OdradekBroker | ExternalBroker]:
    """One broker shared by the tests of a module (each test uses its own topics)."""
    if EXTERNAL_BOOTSTRAP:
        yield ExternalBroker(EXTERNAL_BOOTSTRAP)
        return
    base = tmp_path_factory.mktemp("broker")
    proc = OdradekBroker(base / "data", base / "logs")
    try:
        yield proc.start()
    finally:
        proc.stop()
        if proc in _live_brokers:
            _live_brokers.remove(proc)


@pytest.fixture
def bootstrap(broker: OdradekBroker | ExternalBroker) -> str:
    return broker.bootstrap


@pytest.fixture
def topic_name(request: pytest.FixtureRequest) -> str:
    """A legal topic name unique to this test (and this run)."""
    base = re.sub(r"[^a-zA-Z0-9._-]+", "-", request.node.name).strip("-")[:180]
    return f"{base}-{uuid.uuid4().hex[:8]}"


@pytest.fixture
def new_topic(bootstrap: str, topic_name: str) -> Callable[..., str]:
    """Create a topic through the admin API and wait for its partition leaders.

    ``new_topic(partitions=1, config={...}, suffix="")`` returns the topic name.
    """
    from confluent_kafka.admin import AdminClient, NewTopic

    def create(partitions: int = 1, config: dict[str, str] | None = None, suffix: str = "") -> str:
        name = topic_name + suffix
        admin = AdminClient({"bootstrap.servers": bootstrap})
        futures = admin.create_topics(
            [NewTopic(name, partitions, 1, config=config or {})], operation_timeout=30
        )
        futures[name].result(60)
        deadline = time.monotonic() + 60
        while True:
            meta = admin.list_topics(name, timeout=10).topics.get(name)
            if (
                meta is not None
                and meta.error is None
                and len(meta.partitions) == partitions
                and all(p.leader >= 0 for p in meta.partitions.values())
            ):
                return name
            if time.monotonic() > deadline:
                pytest.fail(f"topic {name} has no leaders after 60s: {meta}")
            time.sleep(0.1)

    return create


@pytest.fixture(scope="session")
def kcat() -> str:
    """Path of the kcat binary. Missing kcat fails under CI=true (it is a required test tool)."""
    path = shutil.which("kcat") or shutil.which("kafkacat")
    if path is None:
        message = "kcat is not installed (Debian: apt-get install kcat)"
        if os.environ.get("CI", "").lower() == "true":
            pytest.fail(message, pytrace=False)
        pytest.skip(message)
    return path
