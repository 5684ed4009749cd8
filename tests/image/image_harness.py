"""Helpers of the image tests: the docker CLI, containers, waiting.

Without a working docker the tests are skipped on a developer machine (`make docker` starts one)
and FAIL under CI=true.
"""

from __future__ import annotations

import os
import shutil
import subprocess
from collections.abc import Callable
from pathlib import Path

import pytest
from confluent_kafka.admin import AdminClient
from odradek.broker.testing.processes import free_port
from polling import wait_until

ROOT = Path(__file__).resolve().parents[2]
IN_CI = os.environ.get("CI", "").lower() == "true"
BUILD_TIMEOUT = float(os.environ.get("ODRADEK_IMAGE_BUILD_TIMEOUT", "1500"))
START_TIMEOUT = float(os.environ.get("ODRADEK_TEST_START_TIMEOUT", "90"))


def docker(*args: str, timeout: float = 120, check: bool = True) -> subprocess.CompletedProcess:
    """Run the docker CLI; on failure the error shows the command and its stderr."""
    proc = subprocess.run(
        ["docker", *args], capture_output=True, text=True, timeout=timeout, check=False
    )
    if check and proc.returncode != 0:
        pytest.fail(
            f"docker {' '.join(args)} exited {proc.returncode}:\n{proc.stdout}\n{proc.stderr}",
            pytrace=False,
        )
    return proc


def require_docker() -> None:
    problem = None
    if shutil.which("docker") is None:
        problem = "no docker client on PATH"
    else:
        info = subprocess.run(["docker", "info"], capture_output=True, text=True, check=False)
        if info.returncode != 0:
            problem = f"docker does not answer: {info.stderr.strip()[:300]}"
    if problem:
        msg = f"{problem}: run `make docker` (scripts/install-docker.sh) first"
        if IN_CI:
            pytest.fail(msg, pytrace=False)
        pytest.skip(msg)


class Container:
    """A detached container started by a test; removed (with -f) at the end of the test."""

    def __init__(self, name: str) -> None:
        self.name = name

    def inspect(self, template: str) -> str:
        return docker("inspect", "-f", template, self.name).stdout.strip()

    def logs(self) -> str:
        proc = docker("logs", self.name, check=False)
        return proc.stdout + proc.stderr

    def exec(self, *argv: str, timeout: float = 60) -> subprocess.CompletedProcess:
        return docker("exec", self.name, *argv, timeout=timeout, check=False)

    def running(self) -> bool:
        return self.inspect("{{.State.Running}}") == "true"

    def wait_for_log(self, text: str, timeout: float = START_TIMEOUT) -> None:
        def seen() -> bool:
            if not self.running():
                pytest.fail(
                    f"container {self.name} exited "
                    f"{self.inspect('{{.State.ExitCode}}')}:\n{self.logs()}",
                    pytrace=False,
                )
            return text in self.logs()

        wait_until(seen, timeout, what=f"{text!r} in the logs of {self.name}")


DATA_DIR = "/var/lib/odradek"

# What a Kafka user sets for a one-broker cluster (internal topics with one replica).
SINGLE_NODE = {
    "broker.id": "0",
    "log.dirs": f"{DATA_DIR}/kafka-logs",
    "offsets.topic.replication.factor": "1",
    "transaction.state.log.replication.factor": "1",
    "transaction.state.log.min.isr": "1",
    "group.initial.rebalance.delay.ms": "0",
}


# As the Helm chart runs the containers: no capabilities, no privilege escalation.
RESTRICTED = ("--cap-drop", "ALL", "--security-opt", "no-new-privileges")


def overrides(settings: dict[str, str]) -> list[str]:
    args: list[str] = []
    for key, value in settings.items():
        args += ["--override", f"{key}={value}"]
    return args


def start_published_broker(
    run_container: Callable[..., Container],
    image: str,
    extra: dict[str, str] | None = None,
    docker_args: tuple[str, ...] = (),
) -> tuple[Container, str]:
    """A broker listening on 9092 in the container, published on a free host port of 127.0.0.1
    and advertised there, as a client outside the container must see it."""
    port = free_port()
    container = run_container(
        image,
        "broker",
        *overrides(
            {
                **SINGLE_NODE,
                "listeners": "PLAINTEXT://:9092",
                "advertised.listeners": f"PLAINTEXT://127.0.0.1:{port}",
                **(extra or {}),
            }
        ),
        docker_args=("-p", f"127.0.0.1:{port}:9092", *RESTRICTED, *docker_args),
    )
    container.wait_for_log("broker 0 started")
    bootstrap = f"127.0.0.1:{port}"

    def metadata() -> bool:
        try:
            md = AdminClient({"bootstrap.servers": bootstrap}).list_topics(timeout=5)
        except Exception:
            return False
        return 0 in md.brokers

    wait_until(metadata, START_TIMEOUT, what=f"Metadata from the broker at {bootstrap}")
    return container, bootstrap
