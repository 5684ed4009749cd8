"""The Helm chart as tests use it: helm itself, rendering with values, picking documents out of
what it renders, and the operator's RBAC objects applied to the test API server."""

from __future__ import annotations

import json
import os
import re
import subprocess
from pathlib import Path

import pytest
import yaml
from kube_harness import ROOT, ControlPlane

CHART = ROOT / "charts" / "odradek"
RELEASE = "odr"
RBAC_KINDS = ("ServiceAccount", "Role", "RoleBinding", "ClusterRole", "ClusterRoleBinding")


def helm_bin() -> Path:
    """Where scripts/install-helm.sh puts helm (ODRADEK_HELM overrides)."""
    if os.environ.get("ODRADEK_HELM"):
        return Path(os.environ["ODRADEK_HELM"])
    cache = Path(os.environ.get("ODRADEK_CACHE") or Path.home() / ".cache" / "odradek")
    return cache / "tools" / "bin" / "helm"


def run_helm(
    helm: Path, *args: str, check: bool = True, home: Path | None = None
) -> subprocess.CompletedProcess[str]:
    # helm keeps caches and config under $HOME; point them at a throw-away place.
    env = {**os.environ}
    if home is not None:
        env.update(
            HELM_CACHE_HOME=str(home / "cache"),
            HELM_CONFIG_HOME=str(home / "config"),
            HELM_DATA_HOME=str(home / "data"),
        )
    result = subprocess.run(
        [str(helm), *args], capture_output=True, text=True, timeout=120, env=env
    )
    if check and result.returncode != 0:
        pytest.fail(
            f"helm {' '.join(args)} failed ({result.returncode}):\n{result.stdout}\n{result.stderr}",
            pytrace=False,
        )
    return result


def write_values(tmp_path: Path, values: dict, name: str = "values.yaml") -> Path:
    path = tmp_path / name
    path.write_text(yaml.safe_dump(values))
    return path


def render(
    helm: Path,
    tmp_path: Path,
    values: dict | None = None,
    namespace: str = "default",
    *extra: str,
) -> list[dict]:
    args = ["template", RELEASE, str(CHART), "--namespace", namespace, *extra]
    if values:
        args += ["-f", str(write_values(tmp_path, values))]
    out = run_helm(helm, *args, home=tmp_path / "helm").stdout
    return [d for d in yaml.safe_load_all(out) if d]


def find(docs: list[dict], kind: str, name: str) -> dict:
    for d in docs:
        if d["kind"] == kind and d["metadata"]["name"] == name:
            return d
    pytest.fail(f"no {kind} {name} in {[(d['kind'], d['metadata']['name']) for d in docs]}")


def container(pod_spec: dict, name: str) -> dict:
    return next(c for c in pod_spec["containers"] if c["name"] == name)


def make_namespace(kube: ControlPlane, name: str) -> str:
    if kube.kubectl("get", "namespace", name, check=False).returncode != 0:
        kube.kubectl("create", "namespace", name)
    # What the serviceaccount controller makes in a real cluster; pods are admitted against it.
    if kube.kubectl("get", "serviceaccount", "default", "-n", name, check=False).returncode != 0:
        kube.kubectl("create", "serviceaccount", "default", "-n", name)
    return name


def apply_rbac(kube: ControlPlane, docs: list[dict]) -> list[dict]:
    """Create the operator's ServiceAccount and RBAC objects of rendered `docs` for real (the
    rest of the chart needs a kubelet); returns them, for remove_rbac."""
    rbac = [d for d in docs if d["kind"] in RBAC_KINDS]
    kube.kubectl(
        "apply", "--server-side", "-f", "-", input="\n---\n".join(json.dumps(d) for d in rbac)
    )
    return rbac


def remove_rbac(kube: ControlPlane, rbac: list[dict]) -> None:
    """Delete the cluster-scoped ones (the namespaced ones go with their test's namespace)."""
    for d in rbac:
        if d["kind"].startswith("Cluster"):
            kube.kubectl(
                "delete", d["kind"], d["metadata"]["name"], "--ignore-not-found", check=False
            )


def can_i(kube: ControlPlane, user: str, verb: str, resource: str, ns: str | None) -> bool:
    args = ["auth", "can-i", verb, resource, f"--as={user}"]
    args += ["-n", ns] if ns else ["--all-namespaces"]
    return kube.kubectl(*args, check=False).stdout.strip() == "yes"


def forbidden_lines(log: str) -> list[str]:
    """Lines of an operator log telling of a request the API server forbade. Matched after each
    line's "[date time,millis]" prefix: a timestamp ending in ,403 is no 403."""
    return [
        line
        for line in log.splitlines()
        if re.search(r"forbidden|\b403\b|Not enough permissions", line.split("]", 1)[-1], re.I)
    ]
