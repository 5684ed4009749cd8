"""What the e2e tests drive the kind cluster with: kubectl and helm, as a user would.

scripts/e2e.sh makes the cluster and passes everything in the environment:
E2E_KUBECONFIG, E2E_KUBECTL, E2E_HELM (tool paths), E2E_IMAGE and E2E_ZOOKEEPER_IMAGE (the images
it loaded into the node). Without them the suite cannot run, and says so.
"""

from __future__ import annotations

import json
import logging
import os
import subprocess
import time
from collections.abc import Callable, Iterable
from pathlib import Path
from typing import Any

import pytest
import yaml

ROOT = Path(__file__).resolve().parents[1]
CHART = ROOT / "charts" / "odradek"
VALUES = Path(__file__).resolve().parent / "values-kind.yaml"
CLIENTS = Path(__file__).resolve().parent / "clients"

log = logging.getLogger("e2e")


def env(name: str) -> str:
    value = os.environ.get(name)
    if not value:
        pytest.exit(f"{name} is not set: run the e2e suite with `make e2e`", returncode=2)
    return value


def wait_until(
    check: Callable[[], Any], timeout: float, interval: float = 2.0, what: str = ""
) -> Any:
    """Poll `check` until it returns something truthy; fail with `what` and its last value."""
    deadline = time.monotonic() + timeout
    last: Any = None
    while True:
        last = check()
        if last:
            return last
        if time.monotonic() > deadline:
            pytest.fail(
                f"timed out after {timeout:.0f}s waiting for {what or check}; last: {last!r}"
            )
        time.sleep(interval)


class Kube:
    """kubectl and helm against the e2e cluster, in one namespace by default."""

    def __init__(self, namespace: str) -> None:
        self.kubeconfig = env("E2E_KUBECONFIG")
        self.kubectl_bin = env("E2E_KUBECTL")
        self.helm_bin = env("E2E_HELM")
        self.image = env("E2E_IMAGE")
        self.namespace = namespace

    def _run(
        self, cmd: list[str], *, input: str | None, check: bool, timeout: float
    ) -> subprocess.CompletedProcess[str]:
        log.debug("$ %s", " ".join(cmd))
        proc = subprocess.run(
            cmd,
            input=input,
            capture_output=True,
            text=True,
            timeout=timeout,
            env={**os.environ, "KUBECONFIG": self.kubeconfig},
        )
        if check and proc.returncode != 0:
            pytest.fail(
                f"`{' '.join(cmd)}` exited {proc.returncode}\n{proc.stdout[-3000:]}\n"
                f"{proc.stderr[-3000:]}",
                pytrace=False,
            )
        return proc

    def kubectl(
        self,
        *args: str,
        input: str | None = None,
        check: bool = True,
        timeout: float = 120,
        namespaced: bool = True,
    ) -> subprocess.CompletedProcess[str]:
        cmd = [self.kubectl_bin]
        if namespaced:
            cmd += ["-n", self.namespace]
        return self._run([*cmd, *args], input=input, check=check, timeout=timeout)

    def helm(
        self, *args: str, check: bool = True, timeout: float = 900
    ) -> subprocess.CompletedProcess[str]:
        cmd = [self.helm_bin, "--namespace", self.namespace, *args]
        return self._run(cmd, input=None, check=check, timeout=timeout)

    # -- objects ----------------------------------------------------------------------------

    def apply(self, *objects: dict) -> None:
        self.kubectl("apply", "-f", "-", input=yaml.safe_dump_all(objects))

    def get(self, kind: str, name: str) -> dict | None:
        proc = self.kubectl("get", kind, name, "-o", "json", check=False)
        if proc.returncode != 0:
            if "NotFound" in proc.stderr:
                return None
            pytest.fail(f"kubectl get {kind} {name}: {proc.stderr}")
        return json.loads(proc.stdout)

    def items(self, kind: str, selector: str | None = None, namespaced: bool = True) -> list[dict]:
        args = ["get", kind, "-o", "json"]
        if selector:
            args += ["-l", selector]
        return json.loads(self.kubectl(*args, namespaced=namespaced).stdout)["items"]

    def delete(self, kind: str, *names: str, wait: bool = True, timeout: float = 300) -> None:
        self.kubectl(
            "delete", kind, *names, "--ignore-not-found", f"--wait={str(wait).lower()}",
            f"--timeout={int(timeout)}s", timeout=timeout + 30,
        )  # fmt: skip

    def events(self, kind: str, name: str) -> list[dict]:
        return [
            e
            for e in self.items("events")
            if e["involvedObject"]["kind"] == kind and e["involvedObject"]["name"] == name
        ]

    def logs(self, pod: str, *args: str) -> str:
        return self.kubectl("logs", pod, *args, timeout=300).stdout

    # -- pods -------------------------------------------------------------------------------

    def pods(self, selector: str) -> list[dict]:
        return self.items("pods", selector)

    def ready(self, pod: dict) -> bool:
        if pod["metadata"].get("deletionTimestamp"):
            return False
        conditions = pod.get("status", {}).get("conditions", [])
        return any(c["type"] == "Ready" and c["status"] == "True" for c in conditions)

    def wait_pods_ready(self, selector: str, count: int, timeout: float = 600) -> list[dict]:
        def check() -> list[dict] | None:
            pods = self.pods(selector)
            ready = [p for p in pods if self.ready(p)]
            return ready if len(ready) == count == len(pods) else None

        return wait_until(check, timeout, what=f"{count} ready pods {selector}")

    def wait_pod_phase(self, name: str, phases: Iterable[str], timeout: float) -> str:
        wanted = set(phases)

        def check() -> str | None:
            pod = self.get("pod", name)
            phase = pod and pod.get("status", {}).get("phase")
            return phase if phase in wanted else None

        return wait_until(check, timeout, what=f"pod {name} in {sorted(wanted)}")

    def client_pod(
        self,
        name: str,
        args: list[str],
        *,
        env: dict[str, str] | None = None,
        env_from: list[dict] = (),
        volumes: list[tuple[dict, dict]] = (),
        command: list[str] | None = None,
    ) -> dict:
        """A pod of the Odradek image running `python <args...>` (or `command`) once
        (restartPolicy Never), with e2e/clients mounted from a ConfigMap at /clients; as non-root
        and locked down as the chart's own pods. `env_from`: env entries with valueFrom."""
        mounts = [{"name": "clients", "mountPath": "/clients", "readOnly": True}]
        pod_volumes = [{"name": "clients", "configMap": {"name": "e2e-clients"}}]
        for volume, mount in volumes:
            pod_volumes.append(volume)
            mounts.append(mount)
        pod = {
            "apiVersion": "v1",
            "kind": "Pod",
            "metadata": {"name": name, "labels": {"app.kubernetes.io/part-of": "odradek-e2e"}},
            "spec": {
                "restartPolicy": "Never",
                "terminationGracePeriodSeconds": 5,
                "automountServiceAccountToken": False,
                "securityContext": {"runAsNonRoot": True, "runAsUser": 1000, "runAsGroup": 1000},
                "containers": [
                    {
                        "name": "client",
                        "image": self.image,
                        "imagePullPolicy": "Never",
                        "command": command or ["python", "-u", *args],
                        "env": [
                            {"name": k, "value": v}
                            for k, v in {"PYTHONSAFEPATH": "1", **(env or {})}.items()
                        ]
                        + list(env_from),
                        "volumeMounts": mounts,
                        "securityContext": {
                            "allowPrivilegeEscalation": False,
                            "capabilities": {"drop": ["ALL"]},
                        },
                        "resources": {"requests": {"cpu": "20m", "memory": "64Mi"}},
                    }
                ],
                "volumes": pod_volumes,
            },
        }
        self.delete("pod", name)
        self.apply(pod)
        return pod

    def install_clients(self) -> None:
        """e2e/clients/*.py as the ConfigMap e2e-clients (mounted at /clients by client pods)."""
        data = {p.name: p.read_text() for p in sorted(CLIENTS.glob("*.py"))}
        self.apply(
            {"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "e2e-clients"}, "data": data}
        )  # fmt: skip

    def run_client(self, name: str, args: list[str], timeout: float = 300, **kw: Any) -> str:
        """Run a client pod to completion; its output (the test fails if it did not succeed)."""
        self.client_pod(name, args, **kw)
        phase = self.wait_pod_phase(name, ("Succeeded", "Failed"), timeout)
        out = self.logs(name)
        assert phase == "Succeeded", f"client pod {name} failed:\n{out[-4000:]}"
        return out
