"""Fixtures of the e2e suite: the release the tests share, installed once with e2e/values-kind.yaml.

Files run in name order and build on each other's state the way a user's session would: install,
resources, scaling, upgrade, uninstall. Each test still checks what it relies on.
"""

from __future__ import annotations

import os

import pytest
from harness import CHART, VALUES, Kube, log, wait_until

NAMESPACE = "kafka"
RELEASE = "odradek"
BROKERS = "app.kubernetes.io/instance=odradek,app.kubernetes.io/component=broker"
ZOOKEEPER = "app.kubernetes.io/instance=odradek,app.kubernetes.io/component=zookeeper"
OPERATOR = "app.kubernetes.io/instance=odradek,app.kubernetes.io/component=operator"


def chart_args(*extra: str) -> list[str]:
    """`helm install|upgrade` arguments for the release: the chart, the e2e values, the images
    scripts/e2e.sh loaded into the node."""
    repo, _, tag = os.environ["E2E_IMAGE"].rpartition(":")
    zk_repo, _, zk_tag = os.environ["E2E_ZOOKEEPER_IMAGE"].rpartition(":")
    return [
        RELEASE,
        str(CHART),
        "--values",
        str(VALUES),
        "--set",
        f"image.repository={repo},image.tag={tag}",
        "--set",
        f"zookeeper.image.repository={zk_repo},zookeeper.image.tag={zk_tag}",
        *extra,
    ]


@pytest.fixture(scope="session")
def kube() -> Kube:
    k = Kube(NAMESPACE)
    k.kubectl("create", "namespace", NAMESPACE, check=False, namespaced=False)
    k.install_clients()
    return k


@pytest.fixture(scope="session")
def release(kube: Kube) -> str:
    """The release, installed (or, on a cluster kept from an earlier run, upgraded) and ready."""
    status = kube.helm("status", RELEASE, check=False)
    if status.returncode == 0:
        log.info("release %s exists: helm upgrade", RELEASE)
        kube.helm("upgrade", *chart_args("--wait", "--timeout", "10m"))
    else:
        kube.helm("install", *chart_args("--wait", "--timeout", "10m"))
    kube.wait_pods_ready(BROKERS, 3)
    return RELEASE


@pytest.fixture(scope="session")
def toolbox(kube: Kube, release: str) -> str:
    """A pod of the Odradek image that stays up: admin queries run in it with kubectl exec
    (`python /clients/e2e_client.py admin ...`), as an operator of the cluster would."""
    name = "e2e-toolbox"
    kube.client_pod(name, [], command=["sleep", "infinity"])
    wait_until(lambda: kube.ready(kube.get("pod", name) or {"metadata": {}}), 180, what=name)
    return name
