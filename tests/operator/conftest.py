"""Fixtures for the operator tests: see kube_harness for what runs and how.

These tests are collected only with ODRADEK_OPERATOR_TESTS=1 (`make test-operator` sets it): they
need the Kubernetes binaries that `make k8s-tools` builds. With the variable set and the binaries
missing they are skipped on a developer machine and FAIL under CI=true.
"""

from __future__ import annotations

import json
import os
import uuid
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest
import yaml
from chart_harness import CHART, RELEASE, helm_bin, run_helm
from kube_harness import (
    IN_CI,
    Broker,
    ControlPlane,
    Operator,
    live_processes,
    require_tools,
)

if os.environ.get("ODRADEK_OPERATOR_TESTS", "") not in ("1", "true"):
    collect_ignore_glob = ["test_*.py"]

# -- fixtures ------------------------------------------------------------------------------


@pytest.fixture(scope="session")
def k8s_bin() -> Path:
    return require_tools("etcd", "kube-apiserver", "kubectl")


@pytest.fixture(scope="session")
def kube(k8s_bin: Path, tmp_path_factory: pytest.TempPathFactory) -> Iterator[ControlPlane]:
    """A running API server with the project's CRDs installed."""
    plane = ControlPlane(k8s_bin, tmp_path_factory.mktemp("kube"))
    try:
        plane.start()
        plane.install_crds()
        yield plane
    finally:
        plane.stop()


@pytest.fixture(scope="session")
def kube_gc(kube: ControlPlane, k8s_bin: Path) -> ControlPlane:
    """The control plane with kube-controller-manager (garbage collector) running."""
    require_tools("kube-controller-manager")
    kube.start_controller_manager()
    return kube


@pytest.fixture(scope="session")
def broker(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Broker]:
    b = Broker(tmp_path_factory.mktemp("broker")).start()
    try:
        yield b
    finally:
        b.stop()


@pytest.fixture(scope="session")
def secure_broker(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Broker]:
    """A broker with SASL SCRAM and ACLs (for User resources)."""
    b = Broker(tmp_path_factory.mktemp("secure-broker"), secure=True).start()
    try:
        yield b
    finally:
        b.stop()


@pytest.fixture
def broker_factory(tmp_path: Path) -> Iterator[Callable[[], Broker]]:
    """Extra brokers owned by one test (for tests that stop them)."""
    made: list[Broker] = []

    def make() -> Broker:
        b = Broker(tmp_path / f"broker-{len(made)}").start()
        made.append(b)
        return b

    yield make
    for b in made:
        b.stop()


@pytest.fixture(scope="session")
def operator(kube: ControlPlane, tmp_path_factory: pytest.TempPathFactory) -> Iterator[Operator]:
    op = Operator(kube, tmp_path_factory.mktemp("operator"))
    op.start()
    try:
        yield op
    finally:
        op.stop()


@pytest.fixture
def sole_operator() -> Iterator[None]:
    """For a test that runs an operator of its own: the session's test operator (which manages
    every namespace and cluster) is stopped meanwhile, so it cannot do that operator's work,
    and started again after."""
    paused = [p for p in live_processes if p.name == "odradek-operator" and p.running]
    for p in paused:
        p.stop()
    yield
    for p in paused:
        p.start()


@pytest.fixture(scope="session")
def helm() -> Path:
    path = helm_bin()
    if not os.access(path, os.X_OK):
        msg = f"helm not at {path}: run `make helm` (scripts/install-helm.sh) first"
        if IN_CI:
            pytest.fail(msg, pytrace=False)
        pytest.skip(msg)
    return path


@pytest.fixture(scope="session")
def chart_crds(kube: ControlPlane, helm: Path, tmp_path_factory: pytest.TempPathFactory) -> None:
    """The chart's CRDs (crds/, what `helm install` installs) applied for real."""
    tmp = tmp_path_factory.mktemp("crds")
    out = run_helm(
        helm, "template", RELEASE, str(CHART), "--include-crds", home=tmp / "helm"
    ).stdout
    crds = [d for d in yaml.safe_load_all(out) if d and d["kind"] == "CustomResourceDefinition"]
    if crds:
        kube.kubectl(
            "apply",
            "--server-side",
            "--force-conflicts",
            "-f",
            "-",
            input="\n---\n".join(json.dumps(c) for c in crds),
        )
        kube.kubectl("wait", "--for=condition=Established", "--timeout=60s", "crd", "--all")


@pytest.fixture
def namespace(kube: ControlPlane) -> str:
    name = f"t-{uuid.uuid4().hex[:10]}"
    kube.kubectl("create", "namespace", name)
    return name


@pytest.hookimpl(hookwrapper=True)
def pytest_runtest_makereport(item: pytest.Item, call: pytest.CallInfo[None]) -> Iterator[None]:
    """Attach the tails of the control plane, broker and operator logs to a failure."""
    outcome = yield
    report = outcome.get_result()
    if report.failed and live_processes:
        seen = set()
        for p in live_processes:
            if p.log_path in seen:
                continue
            seen.add(p.log_path)
            report.sections.append((f"log {p.name}", p.tail(80)))


def pytest_sessionfinish(session: pytest.Session, exitstatus: int) -> None:
    for p in reversed(live_processes):
        p.stop()
    live_processes.clear()
