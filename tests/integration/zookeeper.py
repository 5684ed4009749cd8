"""The session's ZooKeeper ensemble for integration tests: three servers on loopback
(odradek.broker.testing.zookeeper), the jars from scripts/install-zookeeper.sh (Maven Central,
cached; a second run is instant).

`zk_ensemble` (session scope) is shared by every test that needs ZooKeeper; a test that stops a
server must start it again (`ensemble.restart(server)`, or `with ensemble.server_down(i):`) and
should work under its own chroot (`ensemble.connect_string("/some-test")`).

Without ZooKeeper (no JDK, no Maven, no network on the first run) the fixture skips, except under
CI=true where a missing ensemble is a failure.
"""

from __future__ import annotations

import os
import subprocess
from collections.abc import Iterator
from pathlib import Path

import pytest
from odradek.broker.testing.zookeeper import ZkEnsemble

REPO = Path(__file__).resolve().parents[2]
INSTALL_SCRIPT = REPO / "scripts" / "install-zookeeper.sh"

_libs_cache: list[str] = []


def zookeeper_libs() -> str:
    """The directory of ZooKeeper's jars, installing them on first use."""
    if _libs_cache:
        return _libs_cache[0]
    try:
        out = subprocess.run(
            ["bash", str(INSTALL_SCRIPT)], check=True, capture_output=True, text=True, timeout=900
        )
    except (OSError, subprocess.SubprocessError) as e:
        stderr = getattr(e, "stderr", "") or ""
        message = f"ZooKeeper could not be installed: {e}\n{stderr[-2000:]}"
        if os.environ.get("CI", "").lower() == "true":
            pytest.fail(message)
        pytest.skip(message)
    libs = out.stdout.strip().splitlines()[-1]
    _libs_cache.append(libs)
    return libs


@pytest.fixture(scope="session")
def zk_ensemble(tmp_path_factory: pytest.TempPathFactory) -> Iterator[ZkEnsemble]:
    """A running three-server ensemble shared by the whole test session."""
    libs = zookeeper_libs()
    ensemble = ZkEnsemble(tmp_path_factory.mktemp("zookeeper"), libs)
    try:
        ensemble.start()
        yield ensemble
    finally:
        ensemble.stop()
