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

import asyncio
import os
import re
import shutil
import subprocess
import sys
import uuid
from collections.abc import Awaitable, Callable, Iterator
from pathlib import Path
from typing import Any, TypeVar

import pytest
from odradek.broker.testing.processes import LOG_TAIL_LINES, OdradekProcess, free_port
from topic_ready import wait_for_topic
from zookeeper import zk_ensemble  # noqa: F401  (real ZooKeeper ensemble fixture)

T = TypeVar("T")

EXTERNAL_BOOTSTRAP = os.environ.get("ODRADEK_TEST_BOOTSTRAP", "").strip()

# What a Kafka user sets for a one-broker cluster: internal topics with one replica, and no
# artificial delay before the first consumer group rebalance.
SINGLE_NODE_OVERRIDES = {
    "offsets.topic.replication.factor": "1",
    "transaction.state.log.replication.factor": "1",
    "transaction.state.log.min.isr": "1",
    "group.initial.rebalance.delay.ms": "0",
}

_live_brokers: list[OdradekBroker] = []


class OdradekBroker(OdradekProcess):
    """A one-broker cluster on the embedded metadata store (what `make run` starts)."""

    def __init__(
        self,
        data_dir: Path,
        log_dir: Path,
        *,
        port: int | None = None,
        overrides: dict[str, str] | None = None,
    ) -> None:
        super().__init__(
            data_dir, log_dir, {**SINGLE_NODE_OVERRIDES, **(overrides or {})}, port=port
        )

    def launch(self) -> None:
        super().launch()
        if self not in _live_brokers:
            _live_brokers.append(self)


class ExternalBroker:
    """A broker given by ODRADEK_TEST_BOOTSTRAP; these tests neither start nor stop it."""

    def __init__(self, bootstrap: str) -> None:
        host, _, port = bootstrap.rpartition(":")
        self.host = host or "127.0.0.1"
        self.port = int(port)
        self.bootstrap = bootstrap

    def log_tail(self, lines: int = LOG_TAIL_LINES) -> str:
        return f"(external broker at {self.bootstrap}; its log is not captured)"


def sasl_broker(base: Path, overrides: dict[str, str]) -> tuple[OdradekBroker, int]:
    """An unstarted broker under `base` with a PLAINTEXT listener on its `port` (the
    administrators' channel) and a SASL_PLAINTEXT one, whose port comes with it."""
    if EXTERNAL_BOOTSTRAP:
        pytest.skip("needs its own broker process")
    plain, sasl = free_port(), free_port()
    listeners = f"PLAINTEXT://127.0.0.1:{plain},SASL_PLAINTEXT://127.0.0.1:{sasl}"
    broker = OdradekBroker(
        base / "data", base / "logs", port=plain, overrides={"listeners": listeners, **overrides}
    )
    return broker, sasl


def run(coro_fn: Callable[[], Awaitable[T]], timeout: float = 120) -> T:
    """Run an async test body on its own event loop; it fails after `timeout` seconds."""

    async def main() -> T:
        return await asyncio.wait_for(coro_fn(), timeout)

    return asyncio.run(main())


def retire(broker: OdradekBroker) -> None:
    """Stop a broker its fixture is done with and leave it out of later failure reports."""
    broker.stop()
    if broker in _live_brokers:
        _live_brokers.remove(broker)


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
        retire(broker)


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
        retire(proc)


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
        wait_for_topic(admin, name, partitions)
        return name

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


@pytest.fixture(scope="session")
def kafka_libs() -> Path:
    """Apache Kafka's jars as `odradek kafka-tool` fetches them (cached). No Java (or no way to
    fetch the jars) skips the test, and fails it under CI=true."""
    from odradek.broker import kafka_tools

    try:
        kafka_tools.find_java()
        return kafka_tools.fetch(progress=sys.stderr)
    except kafka_tools.KafkaToolsError as e:
        if os.environ.get("CI", "").lower() == "true":
            pytest.fail(str(e), pytrace=False)
        pytest.skip(str(e))


def run_kafka_tool(
    tool: str, *args: str, check: bool = True, timeout: float = 120
) -> subprocess.CompletedProcess[str]:
    """One of Kafka's tools by its bin/ name (use with the kafka_libs fixture); a failure
    fails the test with the tool's stderr when `check`."""
    from odradek.broker import kafka_tools

    return run_checked(kafka_tools.command(tool, list(args)), check=check, timeout=timeout)


def run_checked(
    cmd: list[str], *, check: bool = True, timeout: float = 120, **run: Any
) -> subprocess.CompletedProcess[str]:
    """Run a command for its text output; with `check`, a non-zero exit fails the test with the
    command's stderr. `run`: more subprocess.run arguments (input, env)."""
    proc = subprocess.run(cmd, capture_output=True, text=True, timeout=timeout, check=False, **run)
    if check and proc.returncode != 0:
        pytest.fail(f"{' '.join(cmd)} exited {proc.returncode}\n{proc.stderr[-3000:]}")
    return proc
