"""Fixtures for the image tests: the Odradek image built by scripts/build-image.sh, and containers.

The image is built once per session, offline from a locally made Debian base (no image can be
pulled on these machines); a warm build only checks caches.
"""

from __future__ import annotations

import itertools
import os
import subprocess
from collections.abc import Callable, Iterator
from typing import Any

import pytest
from image_harness import BUILD_TIMEOUT, ROOT, Container, docker, require_docker

_names = itertools.count()


@pytest.fixture(scope="session")
def built_images() -> list[str]:
    """Tags printed by scripts/build-image.sh: the Odradek image, then the ZooKeeper image."""
    require_docker()
    proc = subprocess.run(
        ["bash", str(ROOT / "scripts" / "build-image.sh")],
        capture_output=True,
        text=True,
        timeout=BUILD_TIMEOUT,
        check=False,
    )
    if proc.returncode != 0:
        pytest.fail(
            f"scripts/build-image.sh exited {proc.returncode}:\n{proc.stderr[-4000:]}",
            pytrace=False,
        )
    tags = proc.stdout.split()
    assert len(tags) == 2, f"expected two image tags from scripts/build-image.sh: {proc.stdout!r}"
    return tags


@pytest.fixture(scope="session")
def odradek_image(built_images: list[str]) -> str:
    """The broker and operator image (odradek:dev unless ODRADEK_IMAGE)."""
    return built_images[0]


@pytest.fixture(scope="session")
def zookeeper_image(built_images: list[str]) -> str:
    """The local ZooKeeper image (odradek-zookeeper:3.8.4)."""
    return built_images[1]


@pytest.fixture
def docker_network() -> Iterator[str]:
    """A user-defined network: containers on it find each other by name."""
    name = f"odradek-test-{os.getpid()}-{next(_names)}"
    docker("network", "create", name)
    yield name
    # Containers on it go first (this fixture may be torn down before run_container's).
    attached = docker(
        "network", "inspect", "-f", "{{range .Containers}}{{.Name}} {{end}}", name, check=False
    ).stdout.split()
    if attached:
        docker("rm", "-f", "-v", *attached, check=False)
    docker("network", "rm", name, check=False)


@pytest.fixture
def run_container(request: pytest.FixtureRequest) -> Iterator[Callable[..., Container]]:
    """Start a detached container: ``run_container(image, *args, docker_args=[...])``."""
    started: list[Container] = []

    def start(image: str, *args: str, docker_args: tuple[str, ...] = ()) -> Container:
        name = f"odradek-test-{os.getpid()}-{next(_names)}"
        container = Container(name)
        started.append(container)  # before the run: a failed start may still leave it created
        docker("run", "-d", "--name", name, *docker_args, image, *args)
        return container

    yield start
    failed = getattr(request.node, "rep_call", None)
    for container in started:
        if failed is not None and failed.failed:
            print(f"--- logs of {container.name} ---\n{container.logs()}")
        docker("rm", "-f", "-v", container.name, check=False)


@pytest.hookimpl(wrapper=True, tryfirst=True)
def pytest_runtest_makereport(item: pytest.Item, call: pytest.CallInfo) -> Any:
    report = yield
    setattr(item, f"rep_{report.when}", report)
    return report
