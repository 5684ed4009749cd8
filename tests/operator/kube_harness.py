"""Harness for the operator tests: a real Kubernetes control plane, brokers, the operator.

etcd, kube-apiserver (and, for tests that need garbage collection, kube-controller-manager) are
the binaries `make k8s-tools` (scripts/install-k8s-tools.sh) builds from the Go module proxy. They
run on 127.0.0.1 with certificates made here: a CA, the API server's serving certificate, client
certificates (the test admin is in system:masters) and the service-account signing key. Without
the binaries the tests are skipped on a developer machine and FAIL under CI=true.

The operator runs as its own process (`python -m odradek.operator`) against that API server, with
short intervals so drift, retries and deletion bounds show up within seconds.
"""

from __future__ import annotations

import asyncio
import datetime
import ipaddress
import json
import os
import re
import socket
import ssl
import subprocess
import sys
import time
import urllib.request
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
from certs import ca_certificate, key_pem, leaf_certificate
from cryptography import x509
from cryptography.hazmat.primitives import serialization
from cryptography.hazmat.primitives.asymmetric import ec
from cryptography.x509.oid import NameOID
from odradek.broker.client import AdminClient
from odradek.broker.testing.processes import free_port, terminate
from polling import wait_until

ROOT = Path(__file__).resolve().parents[2]
CRDS = ROOT / "manifests" / "crds"
START_TIMEOUT = float(os.environ.get("ODRADEK_TEST_START_TIMEOUT", "120"))
IN_CI = os.environ.get("CI", "").lower() == "true"

# Operator settings for tests: every interval and bound in seconds, not minutes.
OPERATOR_ENV = {
    "ODRADEK_OPERATOR_ALLOW_BOOTSTRAP_ANNOTATION": "1",
    "ODRADEK_OPERATOR_RESYNC_SECONDS": "2",
    "ODRADEK_OPERATOR_DELETE_TIMEOUT_SECONDS": "15",
    "ODRADEK_OPERATOR_BACKOFF_BASE_SECONDS": "0.5",
    "ODRADEK_OPERATOR_BACKOFF_MAX_SECONDS": "3",
    "ODRADEK_OPERATOR_KAFKA_TIMEOUT_SECONDS": "5",
    "ODRADEK_OPERATOR_SCALING_INTERVAL_SECONDS": "1",
}

live_processes: list[Process] = []  # stopped at session end; logs shown on failure


# -- tools ---------------------------------------------------------------------------------


def k8s_version() -> str:
    text = (ROOT / "e2e" / "tools" / "k8s" / "go.mod").read_text()
    m = re.search(r"^\s*(?:require\s+)?k8s\.io/kubernetes (v1\.[0-9.]+)", text, re.M)
    assert m, "no k8s.io/kubernetes version in e2e/tools/k8s/go.mod"
    return m.group(1)


def k8s_bin_dir() -> Path:
    """Where scripts/install-k8s-tools.sh puts the binaries (ODRADEK_K8S_BIN overrides)."""
    if os.environ.get("ODRADEK_K8S_BIN"):
        return Path(os.environ["ODRADEK_K8S_BIN"])
    cache = Path(os.environ.get("ODRADEK_CACHE") or Path.home() / ".cache" / "odradek")
    return cache / f"k8s-{k8s_version()}" / "bin"


def require_tools(*names: str) -> Path:
    bin_dir = k8s_bin_dir()
    missing = [n for n in names if not os.access(bin_dir / n, os.X_OK)]
    if missing:
        msg = f"{', '.join(missing)} not in {bin_dir}: run `make k8s-tools` first"
        if IN_CI:
            pytest.fail(msg, pytrace=False)
        pytest.skip(msg)
    return bin_dir


# -- certificates --------------------------------------------------------------------------


BACKDATE = datetime.timedelta(minutes=5)  # clock skew between the test and the API server


class PKI:
    """A throw-away CA and the certificates and keys the control plane needs."""

    def __init__(self, directory: Path) -> None:
        self.dir = directory
        directory.mkdir(parents=True, exist_ok=True)
        self.ca_key = ec.generate_private_key(ec.SECP256R1())
        name = x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, "odradek-test-ca")])
        self.ca_cert = ca_certificate(name, self.ca_key, BACKDATE, signs_data=True)
        self.ca_path = self._write("ca.crt", self.ca_cert.public_bytes(serialization.Encoding.PEM))
        sa = ec.generate_private_key(ec.SECP256R1())
        self.sa_key_path = self._write("sa.key", key_pem(sa))
        self.sa_pub_path = self._write(
            "sa.pub",
            sa.public_key().public_bytes(
                serialization.Encoding.PEM, serialization.PublicFormat.SubjectPublicKeyInfo
            ),
        )

    def _write(self, name: str, data: bytes) -> Path:
        path = self.dir / name
        path.write_bytes(data)
        path.chmod(0o600)
        return path

    def issue(
        self,
        name: str,
        common_name: str,
        *,
        groups: tuple[str, ...] = (),
        server: bool = False,
    ) -> tuple[Path, Path]:
        """A certificate signed by the CA: a serving one for 127.0.0.1/localhost, or a client
        one whose CN and O are the Kubernetes user and groups."""
        key = ec.generate_private_key(ec.SECP256R1())
        attrs = [x509.NameAttribute(NameOID.COMMON_NAME, common_name)]
        attrs += [x509.NameAttribute(NameOID.ORGANIZATION_NAME, g) for g in groups]
        names: list[x509.GeneralName] = [
            x509.DNSName("localhost"),
            x509.DNSName("kubernetes.default.svc"),
            x509.IPAddress(ipaddress.ip_address("127.0.0.1")),
        ]
        ca = (self.ca_cert.subject, self.ca_key)
        cert = leaf_certificate(x509.Name(attrs), ca, key, BACKDATE, names if server else None)
        return (
            self._write(f"{name}.crt", cert.public_bytes(serialization.Encoding.PEM)),
            self._write(f"{name}.key", key_pem(key)),
        )


# -- processes -----------------------------------------------------------------------------


class Process:
    """A child process with its output in a log file; stopped with SIGTERM, then SIGKILL."""

    def __init__(self, name: str, cmd: list[str], log_path: Path, env: dict | None = None):
        self.name = name
        self.cmd = cmd
        self.log_path = log_path
        self.env = env
        self.proc: subprocess.Popen[bytes] | None = None

    def start(self) -> Process:
        self.log_path.parent.mkdir(parents=True, exist_ok=True)
        with open(self.log_path, "ab") as log:
            log.write(("$ " + " ".join(self.cmd) + "\n").encode())
            log.flush()
            self.proc = subprocess.Popen(
                self.cmd,
                stdout=log,
                stderr=subprocess.STDOUT,
                stdin=subprocess.DEVNULL,
                env=self.env,
                start_new_session=True,
            )
        if self not in live_processes:
            live_processes.append(self)
        return self

    @property
    def running(self) -> bool:
        return self.proc is not None and self.proc.poll() is None

    def check_alive(self) -> None:
        if self.proc is not None and self.proc.poll() is not None:
            pytest.fail(
                f"{self.name} exited with {self.proc.returncode}\n{self.tail()}", pytrace=False
            )

    def stop(self, timeout: float = 15.0) -> None:
        if self.proc is not None:
            terminate(self.proc, timeout)

    def tail(self, lines: int = 60) -> str:
        try:
            text = self.log_path.read_text(errors="replace").splitlines()
        except OSError:
            return f"(no log at {self.log_path})"
        return f"--- {self.name} ({self.log_path}) ---\n" + "\n".join(text[-lines:])


class ControlPlane:
    """etcd + kube-apiserver on loopback; kube-controller-manager on demand."""

    def __init__(self, bin_dir: Path, work: Path) -> None:
        self.bin = bin_dir
        self.work = work
        self.pki = PKI(work / "pki")
        self.port = free_port()
        self.url = f"https://127.0.0.1:{self.port}"
        self.admin_cert, self.admin_key = self.pki.issue(
            "admin", "odradek-test-admin", groups=("system:masters",)
        )
        self.serving_cert, self.serving_key = self.pki.issue(
            "apiserver", "kube-apiserver", server=True
        )
        self.kubeconfig = self.write_kubeconfig("admin", self.admin_cert, self.admin_key)
        self.etcd: Process | None = None
        self.apiserver: Process | None = None
        self.controller_manager: Process | None = None

    def write_kubeconfig(self, user: str, cert: Path, key: Path) -> Path:
        config = {
            "apiVersion": "v1",
            "kind": "Config",
            "clusters": [
                {
                    "name": "test",
                    "cluster": {"server": self.url, "certificate-authority": str(self.pki.ca_path)},
                }
            ],
            "users": [
                {"name": user, "user": {"client-certificate": str(cert), "client-key": str(key)}}
            ],
            "contexts": [{"name": user, "context": {"cluster": "test", "user": user}}],
            "current-context": user,
        }
        path = self.work / f"kubeconfig-{user}"
        path.write_text(json.dumps(config, indent=2))
        return path

    def kubeconfig_for(self, user: str, groups: tuple[str, ...] = ()) -> Path:
        """A kubeconfig for another identity (for least-privilege RBAC tests)."""
        cert, key = self.pki.issue(f"user-{user}", user, groups=groups)
        return self.write_kubeconfig(user, cert, key)

    def start(self) -> ControlPlane:
        etcd_port, peer_port = free_port(), free_port()
        etcd_url = f"http://127.0.0.1:{etcd_port}"
        self.etcd = Process(
            "etcd",
            [
                str(self.bin / "etcd"),
                "--name=test",
                f"--data-dir={self.work / 'etcd'}",
                f"--listen-client-urls={etcd_url}",
                f"--advertise-client-urls={etcd_url}",
                f"--listen-peer-urls=http://127.0.0.1:{peer_port}",
                f"--initial-advertise-peer-urls=http://127.0.0.1:{peer_port}",
                f"--initial-cluster=test=http://127.0.0.1:{peer_port}",
                "--unsafe-no-fsync",  # throw-away data: no fsync on a 2-core test machine
                "--log-level=warn",
            ],
            self.work / "logs" / "etcd.log",
        ).start()
        self._wait_http(f"{etcd_url}/health", self.etcd, "etcd", tls=False)
        self.apiserver = Process(
            "kube-apiserver",
            [
                str(self.bin / "kube-apiserver"),
                f"--etcd-servers={etcd_url}",
                "--bind-address=127.0.0.1",
                "--advertise-address=127.0.0.1",
                f"--secure-port={self.port}",
                f"--cert-dir={self.work / 'apiserver-certs'}",
                f"--tls-cert-file={self.serving_cert}",
                f"--tls-private-key-file={self.serving_key}",
                f"--client-ca-file={self.pki.ca_path}",
                f"--service-account-key-file={self.pki.sa_pub_path}",
                f"--service-account-signing-key-file={self.pki.sa_key_path}",
                "--service-account-issuer=https://kubernetes.default.svc",
                "--service-cluster-ip-range=10.96.0.0/16",
                "--authorization-mode=RBAC",
                "--enable-priority-and-fairness=false",
                "--profiling=false",
                # the "kubernetes" Service cannot point at loopback; nothing here needs it
                "--endpoint-reconciler-type=none",
            ],
            self.work / "logs" / "kube-apiserver.log",
        ).start()
        self._wait_http(f"{self.url}/readyz", self.apiserver, "kube-apiserver")
        return self

    def start_controller_manager(self) -> None:
        """Garbage collection (ownerReferences) and namespace deletion need it."""
        if self.controller_manager is not None and self.controller_manager.running:
            return
        self.controller_manager = Process(
            "kube-controller-manager",
            [
                str(self.bin / "kube-controller-manager"),
                f"--kubeconfig={self.kubeconfig}",
                f"--authentication-kubeconfig={self.kubeconfig}",
                f"--authorization-kubeconfig={self.kubeconfig}",
                "--controllers=garbagecollector,namespace,serviceaccount,serviceaccount-token",
                f"--service-account-private-key-file={self.pki.sa_key_path}",
                f"--root-ca-file={self.pki.ca_path}",
                "--bind-address=127.0.0.1",
                f"--secure-port={free_port()}",
                f"--cert-dir={self.work / 'kcm-certs'}",
                "--leader-elect=false",
                "--v=1",
            ],
            self.work / "logs" / "kube-controller-manager.log",
        ).start()

    def _ssl(self) -> ssl.SSLContext:
        ctx = ssl.create_default_context(cafile=str(self.pki.ca_path))
        ctx.load_cert_chain(str(self.admin_cert), str(self.admin_key))
        return ctx

    def _wait_http(self, url: str, proc: Process, what: str, tls: bool = True) -> None:
        ctx = self._ssl() if tls else None
        deadline = time.monotonic() + START_TIMEOUT
        last = ""
        while time.monotonic() < deadline:
            proc.check_alive()
            try:
                with urllib.request.urlopen(url, context=ctx, timeout=5) as resp:
                    if resp.status == 200:
                        return
            except OSError as e:
                last = str(e)
            time.sleep(0.3)
        pytest.fail(f"{what} not ready within {START_TIMEOUT}s ({last})\n{proc.tail()}")

    def stop(self) -> None:
        for p in (self.controller_manager, self.apiserver, self.etcd):
            if p is not None:
                p.stop()

    def tails(self) -> str:
        return "\n".join(
            p.tail() for p in (self.etcd, self.apiserver, self.controller_manager) if p
        )

    # -- kubectl ---------------------------------------------------------------------------

    def kubectl(
        self,
        *args: str,
        input: str | None = None,
        check: bool = True,
        kubeconfig: Path | None = None,
    ) -> subprocess.CompletedProcess[str]:
        cmd = [
            str(self.bin / "kubectl"),
            f"--kubeconfig={kubeconfig or self.kubeconfig}",
            f"--cache-dir={self.work / 'kubectl-cache'}",
            *args,
        ]
        result = subprocess.run(cmd, input=input, capture_output=True, text=True, timeout=120)
        if check and result.returncode != 0:
            pytest.fail(
                f"kubectl {' '.join(args)} failed ({result.returncode}):\n"
                f"{result.stdout}\n{result.stderr}",
                pytrace=False,
            )
        return result

    def apply(self, manifest: dict | str, namespace: str | None = None) -> None:
        text = manifest if isinstance(manifest, str) else json.dumps(manifest)
        ns = ["-n", namespace] if namespace else []
        self.kubectl("apply", *ns, "-f", "-", input=text)

    def install_crds(self) -> None:
        """Apply manifests/crds and wait until each is served and published in OpenAPI (what
        `kubectl explain` and client-side validation read)."""
        self.kubectl("apply", "--server-side", "-f", str(CRDS))
        self.kubectl("wait", "--for=condition=Established", "--timeout=60s", "crd", "--all")
        plurals = self.kubectl(
            "get", "crd", "-o", 'jsonpath={range .items[*]}{.metadata.name}{"\\n"}{end}'
        ).stdout.split()
        for crd in plurals:
            wait_until(
                lambda crd=crd: self.kubectl("explain", crd, check=False).returncode == 0,
                60,
                what=f"{crd} in the OpenAPI document",
            )

    def get(self, kind: str, name: str, namespace: str) -> dict | None:
        r = self.kubectl("get", kind, name, "-n", namespace, "-o", "json", check=False)
        if r.returncode != 0:
            if "NotFound" in r.stderr or "not found" in r.stderr:
                return None
            pytest.fail(f"kubectl get {kind} {name}: {r.stderr}", pytrace=False)
        return json.loads(r.stdout)


# -- broker --------------------------------------------------------------------------------


def _api_versions_ok(port: int) -> bool:
    import struct

    body = struct.pack(">hhih", 18, 0, 1, 4) + b"test"
    try:
        with socket.create_connection(("127.0.0.1", port), timeout=2) as s:
            s.sendall(struct.pack(">i", len(body)) + body)
            head = s.recv(10)
    except OSError:
        return False
    return len(head) >= 10 and struct.unpack(">ih", head[4:10]) == (1, 0)


class Broker:
    """One Odradek broker process (embedded metadata store) on 127.0.0.1.

    `secure=True` adds a SASL_PLAINTEXT listener (SCRAM-SHA-512 and -256) and the ACL
    authorizer. The PLAINTEXT listener stays what the operator and the tests' admin use: its
    principal, User:ANONYMOUS, is a super user there (the operator's SASL login through
    --client-config is covered by the client's tests in tests/integration/test_security_auth.py).
    """

    def __init__(
        self,
        work: Path,
        *,
        secure: bool = False,
        zookeeper: str | None = None,
        broker_id: int | None = None,
    ) -> None:
        self.work = work
        self.zookeeper = zookeeper  # zookeeper.connect; None: the embedded store
        self.broker_id = broker_id
        self.port = free_port()
        self.bootstrap = f"127.0.0.1:{self.port}"
        self.secure = secure
        self.sasl_port = free_port() if secure else None
        self.sasl_bootstrap = f"127.0.0.1:{self.sasl_port}" if secure else None
        self.process: Process | None = None

    def overrides(self) -> dict[str, str]:
        out = {
            "listeners": f"PLAINTEXT://127.0.0.1:{self.port}",
            "log.dirs": str(self.work / "data"),
            "offsets.topic.replication.factor": "1",
        }
        if self.zookeeper is not None:
            out["zookeeper.connect"] = self.zookeeper
            out["group.initial.rebalance.delay.ms"] = "0"
        if self.broker_id is not None:
            out["broker.id"] = str(self.broker_id)
        if self.secure:
            out["listeners"] += f",SASL_PLAINTEXT://127.0.0.1:{self.sasl_port}"
            out.update(
                {
                    "inter.broker.listener.name": "PLAINTEXT",
                    "listener.name.sasl_plaintext.sasl.enabled.mechanisms": (
                        "SCRAM-SHA-512,SCRAM-SHA-256"
                    ),
                    "authorizer.class.name": "kafka.security.authorizer.AclAuthorizer",
                    "super.users": "User:ANONYMOUS",
                }
            )
        return out

    def start(self) -> Broker:
        cmd = [sys.executable, "-m", "odradek.broker.cli", "broker"]
        for key, value in self.overrides().items():
            cmd += ["--override", f"{key}={value}"]
        env = {**os.environ, "PYTHONUNBUFFERED": "1"}
        self.process = Process(
            f"broker:{self.port}", cmd, self.work / "broker.log", env=env
        ).start()
        deadline = time.monotonic() + START_TIMEOUT
        while not _api_versions_ok(self.port):
            self.process.check_alive()
            if time.monotonic() > deadline:
                pytest.fail(f"broker did not start\n{self.process.tail()}", pytrace=False)
            time.sleep(0.1)
        return self

    def stop(self) -> None:
        if self.process is not None:
            self.process.stop()


# -- operator --------------------------------------------------------------------------------


class Operator:
    def __init__(self, kube: ControlPlane, work: Path) -> None:
        self.metrics_port = free_port()
        env = {
            **os.environ,
            **OPERATOR_ENV,
            "KUBECONFIG": str(kube.kubeconfig),
            "PYTHONUNBUFFERED": "1",
            "ODRADEK_OPERATOR_METRICS_PORT": str(self.metrics_port),
            "ODRADEK_OPERATOR_METRICS_ADDRESS": "127.0.0.1",
        }
        self.process = Process(
            "odradek-operator",
            [sys.executable, "-m", "odradek.operator", "--verbose"],
            work / "operator.log",
            env=env,
        )

    def start(self) -> None:
        self.process.start()

        def up() -> bool:
            self.process.check_alive()
            try:
                return "odradek_operator" in self.metrics()
            except OSError:
                return False

        wait_until(up, START_TIMEOUT, what="the operator's metrics endpoint")

    def stop(self) -> None:
        self.process.stop()

    def metrics(self) -> str:
        url = f"http://127.0.0.1:{self.metrics_port}/metrics"
        with urllib.request.urlopen(url, timeout=5) as resp:
            return resp.read().decode()

    def metric(self, name: str, **labels: str) -> float:
        """Sum of the samples of `name` whose labels include `labels`."""
        total = 0.0
        for line in self.metrics().splitlines():
            if not line.startswith(name + "{") and not line.startswith(name + " "):
                continue
            sample, _, value = line.rpartition(" ")
            if all(f'{k}="{v}"' in sample for k, v in labels.items()):
                total += float(value)
        return total


# -- resource helpers (every kind) -------------------------------------------------------------

ANNOTATION = "kafka.odradek.io/bootstrap-servers"


def resource(
    kind: str, name: str, *, bootstrap: str | None, cluster: str = "main", **spec: Any
) -> dict:
    """A kafka.odradek.io resource; `bootstrap` goes in the annotation the test operator honours
    (None: the operator has to find the cluster's Service)."""
    meta: dict[str, Any] = {"name": name}
    if bootstrap:
        meta["annotations"] = {ANNOTATION: bootstrap}
    return {
        "apiVersion": "kafka.odradek.io/v1alpha1",
        "kind": kind,
        "metadata": meta,
        "spec": {"cluster": cluster, **spec},
    }


def condition(obj: dict | None, type_: str = "Ready") -> dict:
    for c in ((obj or {}).get("status") or {}).get("conditions") or []:
        if c["type"] == type_:
            return c
    return {}


def wait_ready(kube: ControlPlane, kind: str, ns: str, name: str, timeout: float = 90) -> dict:
    """Wait until Ready is True for the resource's current generation; returns the object."""

    def check() -> dict | None:
        obj = kube.get(kind, name, ns)
        if obj is None:
            return None
        gen = obj["metadata"]["generation"]
        ready = condition(obj)
        if (
            ready.get("status") == "True"
            and obj["status"].get("observedGeneration") == gen
            and ready.get("observedGeneration") == gen
        ):
            return obj
        return None

    return wait_until(check, timeout, what=f"{kind} {ns}/{name} Ready")


def wait_reason(
    kube: ControlPlane, kind: str, ns: str, name: str, reason: str, timeout: float = 90
) -> dict:
    def check() -> dict | None:
        obj = kube.get(kind, name, ns)
        return obj if condition(obj).get("reason") == reason else None

    return wait_until(check, timeout, what=f"{kind} {ns}/{name} reason {reason}")


def events(kube: ControlPlane, ns: str, name: str) -> list[dict]:
    out = kube.kubectl(
        "get", "events", "-n", ns, "--field-selector", f"involvedObject.name={name}", "-o", "json"
    ).stdout
    return json.loads(out)["items"]


def event_reasons(kube: ControlPlane, ns: str, name: str) -> set[str]:
    return {e["reason"] for e in events(kube, ns, name)}


def rejected(kube: ControlPlane, ns: str, manifest: dict) -> str:
    """Apply `manifest`, expecting the API server to refuse it; returns its error text."""
    r = kube.kubectl("apply", "-n", ns, "-f", "-", input=json.dumps(manifest), check=False)
    assert r.returncode != 0, f"accepted: {manifest}"
    return r.stderr


def admin_call(bootstrap: str, fn: Callable[[AdminClient], Any]) -> Any:
    """Run `await fn(admin)` with the project's admin client on the broker at `bootstrap`."""

    async def go() -> Any:
        async with AdminClient(bootstrap) as admin:
            return await fn(admin)

    return asyncio.run(go())
