"""The Helm chart charts/odradek: lint, schema, what it renders, and whether that runs.

helm is the binary scripts/install-helm.sh builds (`make helm`) into ~/.cache/odradek/tools/bin;
without it these tests are skipped on a developer machine and FAIL under CI=true (likewise Docker
for the tests that run the images). What is checked:
- `helm lint` (also --strict) and values.schema.json rejecting bad values;
- the rendered manifests, default and non-default values, accepted by the `kube` fixture's real
  kube-apiserver (`kubectl apply --server-side --dry-run=server`, the chart's CRDs applied first);
- the properties users rely on (advertised DNS names, broker.id from the ordinal, a PVC per
  broker, PDBs, anti-affinity, readiness, the bootstrap Service the operator finds);
- the RBAC objects it renders (test_operator_rbac.py runs the operator with them);
- kube-controller-manager's StatefulSet controller making the broker pods (ordinal labels,
  subdomain, PVCs) and `kubectl scale`;
- the rendered configuration running real processes: ZooKeeper and a broker on loopback, then the
  whole default topology and the operator Deployment in the project's images under Docker.
"""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from chart_harness import (
    CHART,
    RELEASE,
    apply_rbac,
    container,
    find,
    forbidden_lines,
    make_namespace,
    remove_rbac,
    render,
    run_helm,
    write_values,
)
from kube_harness import IN_CI, ROOT, Broker, ControlPlane, wait_until

pytestmark = pytest.mark.timeout(600)


def env_of(c: dict) -> dict[str, Any]:
    return {e["name"]: e.get("value", e.get("valueFrom")) for e in c.get("env", [])}


def properties(text: str) -> dict[str, str]:
    props = {}
    for line in text.splitlines():
        line = line.strip()
        if line and not line.startswith("#"):
            k, _, v = line.partition("=")
            props[k.strip()] = v.strip()
    return props


def configmap_properties(docs: list[dict], configmap: str, key: str) -> dict[str, str]:
    """The key=value lines of the file `key` in the rendered ConfigMap named `configmap`."""
    return properties(find(docs, "ConfigMap", configmap)["data"][key])


# -- lint and schema (no API server needed) ------------------------------------------------


# Value sets beside the defaults: what a user changes most (sizes, storage off, a namespaced
# operator, an external ZooKeeper, extra broker config).
SMALL = {
    "broker": {
        "replicas": 1,
        "config": {
            "num.partitions": 3,
            "log.retention.ms": 604800000,
            "auto.create.topics.enable": False,
        },
        "persistence": {"enabled": False},
        "antiAffinity": "none",
        "podDisruptionBudget": {"enabled": False},
    },
    "zookeeper": {"replicas": 1, "persistence": {"enabled": False}, "heapMB": 256},
    "operator": {"verbose": True, "resyncSeconds": 10},
}
LARGE = {
    "clusterName": "prod",
    "broker": {
        "replicas": 5,
        "antiAffinity": "hard",
        "persistence": {
            "size": "100Gi",
            "storageClass": "fast",
            "retentionPolicy": {"whenDeleted": "Delete", "whenScaled": "Retain"},
        },
        "resources": {"requests": {"cpu": "2", "memory": "4Gi"}, "limits": {"memory": "4Gi"}},
        "config": {
            "min.insync.replicas": 2,
            "log.cleaner.min.cleanable.ratio": 0.3,
            "authorizer.class.name": "kafka.security.authorizer.AclAuthorizer",
            "super.users": "User:ANONYMOUS",
        },
        "service": {"type": "LoadBalancer"},
        "sasl": {"enabled": True, "port": 9094, "mechanisms": ["SCRAM-SHA-256"]},
    },
    "zookeeper": {
        "enabled": False,
        "external": {"connect": "zk-a:2181,zk-b:2181"},
        "chroot": "/kafka/prod",
    },
    "operator": {
        "clusters": ["prod"],
        "allowBootstrapAnnotation": True,
        "clientConfig": {"secretName": "kafka-admin", "key": "admin.properties"},
    },
}


def test_lint(helm: Path, tmp_path: Path) -> None:
    for values in (None, SMALL, LARGE):
        extra = ["-f", str(write_values(tmp_path, values))] if values else []
        for strict in ([], ["--strict"]):
            r = run_helm(helm, "lint", str(CHART), *strict, *extra, home=tmp_path / "helm")
            assert "0 chart(s) failed" in r.stdout, r.stdout


@pytest.mark.parametrize(
    ("values", "path"),
    [
        ({"broker": {"replicas": "three"}}, "/broker/replicas"),
        ({"broker": {"replicas": 0}}, "/broker/replicas"),
        ({"broker": {"replicaz": 3}}, "replicaz"),
        ({"broker": {"antiAffinity": "sometimes"}}, "/broker/antiAffinity"),
        ({"broker": {"config": {"bad key": "x"}}}, "bad key"),
        ({"image": {"pullPolicy": "Sometimes"}}, "/image/pullPolicy"),
        ({"zookeeper": {"enabled": False}}, "/zookeeper/external/connect"),
        ({"operator": {"watchNamespaces": ["Not_A_Namespace"]}}, "/operator/watchNamespaces/0"),
        ({"broker": {"sasl": {"mechanisms": ["PLAIN"]}}}, "/broker/sasl/mechanisms/0"),
    ],
)
def test_schema_rejects(helm: Path, tmp_path: Path, values: dict, path: str) -> None:
    f = write_values(tmp_path, values)
    r = run_helm(
        helm, "template", RELEASE, str(CHART), "-f", str(f), check=False, home=tmp_path / "helm"
    )
    assert r.returncode != 0, f"rendered with {values}:\n{r.stdout[:2000]}"
    assert path in r.stderr, r.stderr
    # lint reports the same values as errors
    r = run_helm(helm, "lint", str(CHART), "-f", str(f), check=False, home=tmp_path / "helm")
    assert r.returncode != 0 and path in r.stdout, r.stdout


def test_chart_set_keys_cannot_be_overridden(helm: Path, tmp_path: Path) -> None:
    f = write_values(tmp_path, {"broker": {"config": {"broker.id": 7}}})
    r = run_helm(helm, "template", RELEASE, str(CHART), "-f", str(f), check=False)
    assert r.returncode != 0 and "broker.config.broker.id is set by the chart" in r.stderr


def test_broker_statefulset(helm: Path, tmp_path: Path) -> None:
    """What users rely on: stable DNS names, broker.id = ordinal, a PVC each, a PDB, soft
    anti-affinity, readiness on Metadata, time for the controlled shutdown."""
    ns = "kafka"
    docs = render(helm, tmp_path, None, ns)
    sts_name = f"{RELEASE}-broker"
    sts = find(docs, "StatefulSet", sts_name)
    headless = find(docs, "Service", f"{RELEASE}-broker-headless")
    spec = sts["spec"]
    pod = spec["template"]["spec"]
    broker = container(pod, "broker")

    assert spec["replicas"] == 3
    assert spec["serviceName"] == headless["metadata"]["name"]
    assert headless["spec"]["clusterIP"] == "None"
    assert headless["spec"]["publishNotReadyAddresses"] is True
    assert headless["spec"]["selector"].items() <= spec["template"]["metadata"]["labels"].items()

    # broker.id and the advertised listener come from the pod, expanded by the kubelet
    env = env_of(broker)
    assert env["BROKER_ID"] == {
        "fieldRef": {"fieldPath": "metadata.labels['apps.kubernetes.io/pod-index']"}
    }
    assert env["POD_NAME"] == {"fieldRef": {"fieldPath": "metadata.name"}}
    assert env["POD_NAMESPACE"] == {"fieldRef": {"fieldPath": "metadata.namespace"}}
    args = broker["args"]
    assert broker["command"] == ["odradek"] and args[0] == "broker"
    overrides = [args[i + 1] for i, a in enumerate(args) if a == "--override"]
    assert "broker.id=$(BROKER_ID)" in overrides
    assert (
        f"advertised.listeners=PLAINTEXT://$(POD_NAME).{RELEASE}-broker-headless."
        "$(POD_NAMESPACE).svc.cluster.local:9092"
    ) in overrides
    # so pod odr-broker-1 in namespace kafka advertises:
    expanded = [
        o.replace("$(POD_NAME)", f"{RELEASE}-broker-1").replace("$(POD_NAMESPACE)", ns)
        for o in overrides
    ]
    assert (
        f"advertised.listeners=PLAINTEXT://{RELEASE}-broker-1.{RELEASE}-broker-headless.{ns}"
        ".svc.cluster.local:9092"
    ) in expanded

    # server.properties: log dirs on the PVC, ZooKeeper ensemble with a chroot
    config_path = args[args.index("--config") + 1]
    cm = find(docs, "ConfigMap", f"{RELEASE}-broker")
    props = properties(cm["data"][Path(config_path).name])
    mounts = {m["name"]: m["mountPath"] for m in broker["volumeMounts"]}
    assert Path(config_path).parent == Path(mounts["config"])
    assert props["log.dirs"].startswith(mounts["data"] + "/")
    assert props["listeners"] == "PLAINTEXT://:9092"
    assert props["controlled.shutdown.enable"] == "true"
    assert props["offsets.topic.replication.factor"] == "3"
    hosts, _, chroot = props["zookeeper.connect"].partition("/")
    assert chroot == f"odradek/{ns}/{RELEASE}"
    assert hosts.split(",") == [
        f"{RELEASE}-zookeeper-{i}.{RELEASE}-zookeeper-headless.{ns}.svc.cluster.local:2181"
        for i in range(3)
    ]

    # Prometheus scrapes every broker's /metrics
    ports = {p["name"]: p["containerPort"] for p in broker["ports"]}
    assert props["prometheus.metrics.port"] == str(ports["metrics"]) == "9404"
    annotations = spec["template"]["metadata"]["annotations"]
    assert annotations["prometheus.io/port"] == "9404"

    # a PVC per broker
    (claim,) = spec["volumeClaimTemplates"]
    assert claim["metadata"]["name"] == "data"
    assert claim["spec"]["resources"]["requests"]["storage"] == "10Gi"
    assert "data" not in {v["name"] for v in pod.get("volumes", [])}

    # at most one broker voluntarily down
    pdb = find(docs, "PodDisruptionBudget", f"{RELEASE}-broker")
    assert pdb["spec"]["maxUnavailable"] == 1
    assert pdb["spec"]["selector"]["matchLabels"] == spec["selector"]["matchLabels"]

    # soft anti-affinity between brokers
    (term,) = pod["affinity"]["podAntiAffinity"]["preferredDuringSchedulingIgnoredDuringExecution"]
    assert (
        term["podAffinityTerm"]["labelSelector"]["matchLabels"] == spec["selector"]["matchLabels"]
    )

    # ready when it serves the cluster; SIGTERM gets time for the controlled shutdown
    probe = broker["readinessProbe"]["exec"]["command"]
    assert probe[:2] == ["odradek", "ready"]
    assert probe[probe.index("--bootstrap-server") + 1] == "127.0.0.1:9092"
    assert pod["terminationGracePeriodSeconds"] >= 60
    assert broker["resources"]["requests"]

    # scale-down: the preStop hook waits while the operator drains the broker (BROKER_ID from
    # env), within the grace period, leaving time for the controlled shutdown
    hook = broker["lifecycle"]["preStop"]["exec"]["command"]
    assert hook[:2] == ["odradek", "wait-drained"] and "--broker-id" not in hook
    assert hook[hook.index("--bootstrap-server") + 1] == "127.0.0.1:9092"
    assert int(hook[hook.index("--timeout") + 1]) <= pod["terminationGracePeriodSeconds"] - 30
    # a drain starts within one scaling check of the operator
    operator = container(
        find(docs, "Deployment", f"{RELEASE}-operator")["spec"]["template"]["spec"], "operator"
    )
    interval = env_of(operator)["ODRADEK_OPERATOR_SCALING_INTERVAL_SECONDS"]
    assert int(hook[hook.index("--settle") + 1]) > float(interval)
    without_operator = render(helm, tmp_path, {"operator": {"enabled": False}}, ns)
    sts = find(without_operator, "StatefulSet", f"{RELEASE}-broker")
    assert "lifecycle" not in container(sts["spec"]["template"]["spec"], "broker")
    own = {"preStop": {"exec": {"command": ["sleep", "5"]}}}
    sts = find(render(helm, tmp_path, {"broker": {"lifecycle": own}}, ns), "StatefulSet", sts_name)
    assert container(sts["spec"]["template"]["spec"], "broker")["lifecycle"] == own


def test_broker_config_values(helm: Path, tmp_path: Path) -> None:
    # numbers keep their digits (no float exponent), the user's values win over the chart's
    cases = [
        (
            LARGE,
            "prod",
            {
                "min.insync.replicas": "2",
                "log.cleaner.min.cleanable.ratio": "0.3",
                "offsets.topic.replication.factor": "3",
                "zookeeper.connect": "zk-a:2181,zk-b:2181/kafka/prod",
            },
        ),
        (
            SMALL,
            "dev",
            {
                "log.retention.ms": "604800000",
                "auto.create.topics.enable": "false",
                "offsets.topic.replication.factor": "1",
                "transaction.state.log.min.isr": "1",
            },
        ),
    ]
    rendered = {}
    for values, namespace, want in cases:
        rendered[namespace] = render(helm, tmp_path, values, namespace)
        props = configmap_properties(rendered[namespace], f"{RELEASE}-broker", "server.properties")
        assert {k: props.get(k) for k in want} == want
    assert not [d for d in rendered["prod"] if "zookeeper" in d["metadata"]["name"]]
    zk = find(rendered["dev"], "ConfigMap", f"{RELEASE}-zookeeper")
    assert "server.1=" not in zk["data"]["zoo.cfg"]


def test_sasl_listener(helm: Path, tmp_path: Path) -> None:
    """broker.sasl: a SASL_PLAINTEXT listener each broker advertises under its stable name, on
    both Services; brokers keep replicating over PLAINTEXT."""
    docs = render(helm, tmp_path, LARGE, "prod")
    props = configmap_properties(docs, f"{RELEASE}-broker", "server.properties")
    assert props["listeners"] == "PLAINTEXT://:9092,SASL_PLAINTEXT://:9094"
    assert props["inter.broker.listener.name"] == "PLAINTEXT"
    assert props["listener.name.sasl_plaintext.sasl.enabled.mechanisms"] == "SCRAM-SHA-256"
    assert props["authorizer.class.name"] == "kafka.security.authorizer.AclAuthorizer"
    sts = find(docs, "StatefulSet", f"{RELEASE}-broker")
    broker = container(sts["spec"]["template"]["spec"], "broker")
    args = broker["args"]
    overrides = [args[i + 1] for i, a in enumerate(args) if a == "--override"]
    host = f"$(POD_NAME).{RELEASE}-broker-headless.$(POD_NAMESPACE).svc.cluster.local"
    assert f"advertised.listeners=PLAINTEXT://{host}:9092,SASL_PLAINTEXT://{host}:9094" in overrides
    assert {"name": "kafka-sasl", "containerPort": 9094} in broker["ports"]
    for service in (f"{RELEASE}-broker-headless", f"{RELEASE}-bootstrap"):
        ports = find(docs, "Service", service)["spec"]["ports"]
        assert {"name": "kafka-sasl", "port": 9094, "targetPort": "kafka-sasl"} in ports
    # Off by default: one PLAINTEXT listener, one port.
    props = configmap_properties(render(helm, tmp_path), f"{RELEASE}-broker", "server.properties")
    assert props["listeners"] == "PLAINTEXT://:9092" and "inter.broker.listener.name" not in props
    clash = write_values(tmp_path, {"broker": {"sasl": {"enabled": True, "port": 9092}}})
    r = run_helm(helm, "template", RELEASE, str(CHART), "-f", str(clash), check=False)
    assert r.returncode != 0 and "broker.sasl.port must differ" in r.stderr


def test_zookeeper_ensemble(helm: Path, tmp_path: Path) -> None:
    docs = render(helm, tmp_path, None, "kafka")
    sts = find(docs, "StatefulSet", f"{RELEASE}-zookeeper")
    pod = sts["spec"]["template"]["spec"]
    zk = container(pod, "zookeeper")
    env = env_of(zk)
    mounts = {m["name"]: m["mountPath"] for m in zk["volumeMounts"]}
    # the config directory for the images' entry points (ZOO_CONF_DIR) and zkServer.sh (ZOOCFGDIR)
    assert env["ZOO_CONF_DIR"] == env["ZOOCFGDIR"] == mounts["config"] == "/conf"
    assert env["ZOO_DATA_DIR"] == mounts["data"] == "/data"
    assert "-Xmx512m" in env["JVMFLAGS"]
    zoo = configmap_properties(docs, f"{RELEASE}-zookeeper", "zoo.cfg")
    servers = {k: v for k, v in zoo.items() if k.startswith("server.")}
    assert servers == {
        f"server.{i + 1}": f"{RELEASE}-zookeeper-{i}.{RELEASE}-zookeeper-headless.kafka.svc"
        f".cluster.local:2888:3888;2181"
        for i in range(3)
    }
    assert zoo["dataDir"] == mounts["data"]
    assert "srvr" in zoo["4lw.commands.whitelist"].split(",")  # what zk-ready asks
    # myid = ordinal + 1, written into dataDir before the server starts
    (init,) = pod["initContainers"]
    assert env_of(init)["POD_INDEX"] == {
        "fieldRef": {"fieldPath": "metadata.labels['apps.kubernetes.io/pod-index']"}
    }
    assert f"> {zoo['dataDir']}/myid" in init["command"][-1]
    assert "$((POD_INDEX + 1))" in init["command"][-1]
    # the image's entry point by default; a plain distribution's script on request
    assert "command" not in zk
    assert zk["readinessProbe"]["exec"]["command"] == ["zk-ready"]
    plain = render(
        helm,
        tmp_path,
        {"zookeeper": {"command": ["zkServer.sh", "start-foreground"], "readinessCommand": []}},
        "kafka",
    )
    zk = container(
        find(plain, "StatefulSet", f"{RELEASE}-zookeeper")["spec"]["template"]["spec"], "zookeeper"
    )
    assert zk["command"] == ["zkServer.sh", "start-foreground"]
    assert zk["readinessProbe"]["tcpSocket"] == {"port": "client"}
    assert find(docs, "PodDisruptionBudget", f"{RELEASE}-zookeeper")["spec"]["maxUnavailable"] == 1


def test_bootstrap_service_found_by_operator(helm: Path, tmp_path: Path) -> None:
    """The operator's own Service index maps the chart's bootstrap Service to the cluster."""
    from odradek.operator import clusters

    docs = render(helm, tmp_path, LARGE, "prod")
    services = [
        d
        for d in docs
        if d["kind"] == "Service"
        and d["metadata"]["labels"].get(clusters.CLUSTER_LABEL)
        and d["metadata"]["labels"].get(clusters.BOOTSTRAP_LABEL) == "true"
    ]
    assert [s["metadata"]["name"] for s in services] == [f"{RELEASE}-bootstrap"]
    svc = services[0]
    index = clusters.bootstrap_services(
        namespace="prod",
        name=svc["metadata"]["name"],
        labels=svc["metadata"]["labels"],
        spec=svc["spec"],
    )
    assert index == {("prod", "prod"): f"{RELEASE}-bootstrap.prod.svc:9092"}
    # the default cluster name is the release name
    docs = render(helm, tmp_path, None, "default")
    labels = find(docs, "Service", f"{RELEASE}-bootstrap")["metadata"]["labels"]
    assert labels[clusters.CLUSTER_LABEL] == RELEASE


def test_operator_client_config(helm: Path, tmp_path: Path) -> None:
    """A secured cluster: the operator's client properties come from a Secret."""
    docs = render(helm, tmp_path, LARGE, "prod")
    pod = find(docs, "Deployment", f"{RELEASE}-operator")["spec"]["template"]["spec"]
    c = container(pod, "operator")
    arg = next(a for a in c["args"] if a.startswith("--client-config="))
    path = Path(arg.split("=", 1)[1])
    (mount,) = [m for m in c["volumeMounts"] if m["name"] == "client-config"]
    assert Path(mount["mountPath"]) / "admin.properties" == path and mount["readOnly"]
    (vol,) = [v for v in pod["volumes"] if v["name"] == "client-config"]
    assert vol["secret"]["secretName"] == "kafka-admin"
    assert "--cluster=prod" in c["args"] and "--allow-bootstrap-annotation" in c["args"]
    default = render(helm, tmp_path, None, "prod")
    c = container(
        find(default, "Deployment", f"{RELEASE}-operator")["spec"]["template"]["spec"], "operator"
    )
    assert not [a for a in c.get("args", []) if a.startswith("--client-config")]


def test_helm_test_pod(helm: Path, tmp_path: Path) -> None:
    docs = render(helm, tmp_path, None, "kafka")
    (pod,) = [d for d in docs if d["kind"] == "Pod"]
    assert pod["metadata"]["annotations"]["helm.sh/hook"] == "test"
    c = pod["spec"]["containers"][0]
    script = c["args"][0]
    for step in ("odradek topics create", "odradek produce", "odradek consume"):
        assert step in script
    assert env_of(c)["BOOTSTRAP"] == f"{RELEASE}-bootstrap.kafka.svc.cluster.local:9092"
    # no render leaves it out
    docs = render(helm, tmp_path, None, "kafka", "--skip-tests")
    assert not [d for d in docs if d["kind"] == "Pod"]


# -- against the API server ----------------------------------------------------------------


def dry_run_apply(kube: ControlPlane, docs: list[dict]) -> str:
    text = "\n---\n".join(json.dumps(d) for d in docs)
    r = kube.kubectl(
        "apply",
        "--server-side",
        "--dry-run=server",
        "--field-manager=helm-test",
        "-f",
        "-",
        input=text,
        check=False,
    )
    assert r.returncode == 0, f"API server rejected the rendered chart:\n{r.stdout}\n{r.stderr}"
    return r.stdout


@pytest.mark.parametrize("values_name", ["default", "small", "large", "namespaced"])
def test_rendered_manifests_accepted(
    kube: ControlPlane,
    chart_crds: None,
    helm: Path,
    tmp_path: Path,
    namespace: str,
    values_name: str,
) -> None:
    make_namespace(kube, namespace)
    values = {
        "default": None,
        "small": SMALL,
        "large": LARGE,
        "namespaced": {
            "operator": {"watchNamespaces": [namespace, make_namespace(kube, f"{namespace}-b")]}
        },
    }[values_name]
    docs = render(helm, tmp_path, values, namespace)
    kinds = {d["kind"] for d in docs}
    assert {"StatefulSet", "Service", "Deployment", "ServiceAccount", "Pod"} <= kinds
    out = dry_run_apply(kube, docs)
    for d in docs:
        assert re.search(rf"\b{d['metadata']['name']}\b.*serverside-applied", out, re.I) or (
            d["metadata"]["name"] in out
        ), f"{d['kind']} {d['metadata']['name']} not applied:\n{out}"
    if values_name == "namespaced":
        roles = [d for d in docs if d["kind"] == "Role"]
        assert sorted(r["metadata"]["namespace"] for r in roles) == sorted(
            [namespace, f"{namespace}-b"]
        )
        # nothing cluster-wide: the operator lists no namespaces and watches no CRDs
        assert not [d for d in docs if d["kind"].startswith("Cluster")]


def test_notes(kube: ControlPlane, helm: Path, tmp_path: Path) -> None:
    """NOTES.txt: how to reach the bootstrap Service and apply a Topic."""
    r = run_helm(
        helm,
        "install",
        RELEASE,
        str(CHART),
        "--dry-run=client",
        "--namespace",
        "kafka",
        "--kubeconfig",
        str(kube.kubeconfig),
        home=tmp_path / "helm",
    )
    notes = r.stdout.split("NOTES:", 1)[1]
    assert f"{RELEASE}-bootstrap.kafka.svc.cluster.local:9092" in notes
    assert "kind: Topic" in notes and f"cluster: {RELEASE}" in notes
    assert f"helm test {RELEASE}" in notes
    assert f"scale statefulset/{RELEASE}-broker --replicas=4" in notes


# -- the rendered configuration runs real processes -------------------------------------------


def zookeeper_libs() -> Path:
    """ZooKeeper 3.8.4's jars (scripts/install-zookeeper.sh, cached)."""
    try:
        out = subprocess.run(
            ["bash", str(ROOT / "scripts" / "install-zookeeper.sh")],
            check=True,
            capture_output=True,
            text=True,
            timeout=900,
        )
    except (OSError, subprocess.SubprocessError) as e:
        msg = f"ZooKeeper could not be installed: {e}\n{getattr(e, 'stderr', '') or ''}"
        if IN_CI:
            pytest.fail(msg, pytrace=False)
        pytest.skip(msg)
    return Path(out.stdout.strip().splitlines()[-1])


def kubelet_expand(arg: str, env: dict[str, str]) -> str:
    """$(VAR) references in command/args, as the kubelet expands them."""
    return re.sub(r"\$\(([A-Za-z_][A-Za-z0-9_]*)\)", lambda m: env.get(m.group(1), m.group(0)), arg)


def test_rendered_config_runs(helm: Path, tmp_path: Path) -> None:
    """One ZooKeeper server and one broker started from the rendered zoo.cfg, myid command,
    server.properties and broker args (addresses moved to loopback): the broker registers
    under the chroot with its ordinal as broker.id, the readiness probe turns ready, the helm
    test script produces and consumes, and SIGTERM ends the broker cleanly."""
    import signal

    from kazoo.client import KazooClient
    from kube_harness import Process, free_port

    libs = zookeeper_libs()
    ns = "kafka"
    values = {
        "broker": {"replicas": 1, "config": {"num.partitions": 2, "log.retention.ms": 604800000}},
        "zookeeper": {"replicas": 1, "config": {"maxClientCnxns": 0}},
    }
    docs = render(helm, tmp_path, values, ns)

    # ZooKeeper: zoo.cfg as rendered, data directory and client port moved here
    zk_sts = find(docs, "StatefulSet", f"{RELEASE}-zookeeper")
    zk_pod = zk_sts["spec"]["template"]["spec"]
    zoo_text = find(docs, "ConfigMap", f"{RELEASE}-zookeeper")["data"]["zoo.cfg"]
    data_dir = properties(zoo_text)["dataDir"]
    local_data = tmp_path / "zk" / "data"
    zk_port = free_port()
    zoo_text = zoo_text.replace(f"dataDir={data_dir}", f"dataDir={local_data}")
    zoo_text = zoo_text.replace("clientPort=2181", f"clientPort={zk_port}")
    zoo_text += "clientPortAddress=127.0.0.1\n"
    cfg = tmp_path / "zk" / "zoo.cfg"
    cfg.parent.mkdir()
    cfg.write_text(zoo_text)
    # the init container's command writes myid = ordinal + 1
    (init,) = zk_pod["initContainers"]
    script = init["command"][-1].replace(data_dir, str(local_data))
    local_data.mkdir(parents=True)
    subprocess.run([*init["command"][:-1], script], env={"POD_INDEX": "0"}, check=True)
    assert (local_data / "myid").read_text().strip() == "1"
    zk_c = container(zk_pod, "zookeeper")
    zk_env = {e["name"]: e["value"] for e in zk_c["env"]}
    image_dir = ROOT / "scripts" / "zookeeper-image"
    if not zk_c.get("command") and (image_dir / "entrypoint.sh").exists():
        # the odradek-zookeeper image's entry point, with the chart's environment (directories
        # moved here) and the image's layout (ZOO_HOME with conf/ and libs/)
        home = tmp_path / "zk" / "home"
        (home / "conf").mkdir(parents=True)
        (home / "libs").symlink_to(libs)
        (home / "conf" / "log4j.properties").write_text(
            (image_dir / "log4j.properties").read_text()
        )
        zk_env.update(
            ZOO_CONF_DIR=str(cfg.parent),
            ZOOCFGDIR=str(cfg.parent),
            ZOO_DATA_DIR=str(local_data),
            ZOO_DATA_LOG_DIR=str(tmp_path / "zk" / "datalog"),
            ZOO_LOG_DIR=str(tmp_path / "zk" / "logs"),
            ZOO_HOME=str(home),
            JVMFLAGS="-Xmx128m -XX:+UseSerialGC",  # the chart's heap is for a pod, not this test
        )
        zk_cmd = ["bash", str(image_dir / "entrypoint.sh")]
        zk_ready = ["bash", str(image_dir / "ready.sh"), str(zk_port)]
    else:
        log4j = tmp_path / "zk" / "log4j.properties"
        log4j.write_text(
            find(docs, "ConfigMap", f"{RELEASE}-zookeeper")["data"]["log4j.properties"]
        )
        zk_cmd = [
            "java",
            "-Xmx128m",
            "-XX:+UseSerialGC",
            f"-Dlog4j.configuration=file:{log4j}",
            "-cp",
            f"{libs}/*",
            "org.apache.zookeeper.server.quorum.QuorumPeerMain",
            str(cfg),
        ]
        zk_ready = None
    zk = Process(
        "zookeeper", zk_cmd, tmp_path / "zk" / "server.log", env={**os.environ, **zk_env}
    ).start()
    if zk_ready is not None:
        wait_until(
            lambda: (
                zk.check_alive(),
                subprocess.run(zk_ready, capture_output=True).returncode == 0,
            )[-1],
            90,
            what="zk-ready",
        )

    # broker: the StatefulSet's command and args, $(VARS) expanded as for pod <release>-broker-0,
    # then loopback addresses (the pod's DNS names do not resolve here)
    sts = find(docs, "StatefulSet", f"{RELEASE}-broker")
    broker_c = container(sts["spec"]["template"]["spec"], "broker")
    props_text = find(docs, "ConfigMap", f"{RELEASE}-broker")["data"]["server.properties"]
    props = properties(props_text)
    chroot = "/" + props["zookeeper.connect"].split("/", 1)[1]
    config_file = tmp_path / "server.properties"
    config_file.write_text(props_text)
    pod_env = {"BROKER_ID": "0", "POD_NAME": f"{RELEASE}-broker-0", "POD_NAMESPACE": ns}
    args = [kubelet_expand(a, pod_env) for a in broker_c["args"]]
    args[args.index("--config") + 1] = str(config_file)
    port = free_port()
    args += [
        "--override",
        f"listeners=PLAINTEXT://127.0.0.1:{port}",
        "--override",
        f"advertised.listeners=PLAINTEXT://127.0.0.1:{port}",
        "--override",
        f"zookeeper.connect=127.0.0.1:{zk_port}{chroot}",
        "--override",
        f"log.dirs={tmp_path / 'broker-data' / 'logs'}",
        # the chart's fixed metrics port may be taken by another process on this machine
        "--override",
        f"prometheus.metrics.port={free_port()}",
    ]
    bin_dir = Path(sys.executable).parent
    path_env = {**os.environ, "PATH": f"{bin_dir}:{os.environ.get('PATH', '')}"}
    probe = [
        a.replace(f"127.0.0.1:{props['listeners'].rsplit(':', 1)[1]}", f"127.0.0.1:{port}")
        for a in broker_c["readinessProbe"]["exec"]["command"]
    ]

    def probe_ok() -> bool:
        r = subprocess.run(probe, env=path_env, capture_output=True, timeout=60)
        return r.returncode == 0

    assert not probe_ok(), "readiness probe passes with no broker running"
    broker = Process(
        "broker(chart)",
        [str(bin_dir / broker_c["command"][0]), *args],
        tmp_path / "broker.log",
        env={**path_env, "PYTHONUNBUFFERED": "1"},
    ).start()
    try:
        wait_until(
            lambda: (broker.check_alive(), zk.check_alive(), probe_ok())[-1],
            120,
            what="the readiness probe to pass",
        )
        # registered under the chroot with broker.id = ordinal
        client = KazooClient(hosts=f"127.0.0.1:{zk_port}")
        client.start(timeout=30)
        try:
            assert client.get_children(f"{chroot}/brokers/ids") == ["0"]
        finally:
            client.stop()
            client.close()

        # the helm test pod's script, against this broker
        (test_pod,) = [d for d in docs if d["kind"] == "Pod"]
        tc = test_pod["spec"]["containers"][0]
        test_env = {**path_env, **{e["name"]: e["value"] for e in tc["env"]}}
        test_env.update(BOOTSTRAP=f"127.0.0.1:{port}", TIMEOUT="60")
        r = subprocess.run(
            [*tc["command"], *tc["args"]], env=test_env, capture_output=True, text=True, timeout=300
        )
        assert r.returncode == 0, f"helm test script failed:\n{r.stdout}\n{r.stderr}"
        assert "produced and consumed" in r.stdout

        # SIGTERM: controlled shutdown within the grace period, exit 0
        grace = sts["spec"]["template"]["spec"]["terminationGracePeriodSeconds"]
        assert broker.proc is not None
        broker.proc.send_signal(signal.SIGTERM)
        assert broker.proc.wait(grace) == 0
    finally:
        broker.stop()
        zk.stop()


# -- the StatefulSet controller makes the pods the chart describes ----------------------------


@pytest.fixture(scope="module")
def statefulset_controller(
    kube: ControlPlane, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[None]:
    """kube-controller-manager running only the StatefulSet and disruption (PDB) controllers:
    pods and PVCs are created as in a real cluster (no kubelet runs them)."""
    from kube_harness import Process, free_port, require_tools

    require_tools("kube-controller-manager")
    work = tmp_path_factory.mktemp("kcm-workloads")
    kcm = Process(
        "kube-controller-manager(statefulset)",
        [
            str(kube.bin / "kube-controller-manager"),
            f"--kubeconfig={kube.kubeconfig}",
            f"--authentication-kubeconfig={kube.kubeconfig}",
            f"--authorization-kubeconfig={kube.kubeconfig}",
            "--controllers=statefulset,disruption",
            "--bind-address=127.0.0.1",
            f"--secure-port={free_port()}",
            f"--cert-dir={work / 'certs'}",
            "--leader-elect=false",
            "--v=1",
        ],
        work / "kube-controller-manager.log",
    ).start()
    try:
        yield
    finally:
        kcm.stop()


def test_statefulset_pods(
    kube: ControlPlane,
    chart_crds: None,
    statefulset_controller: None,
    helm: Path,
    tmp_path: Path,
    namespace: str,
) -> None:
    """The chart applied for real: each broker pod carries the ordinal label broker.id is read
    from, sits under the headless Service's subdomain (its advertised DNS name), and gets its own
    PVC; `kubectl scale` adds broker N with ordinal N."""
    make_namespace(kube, namespace)
    docs = render(helm, tmp_path, None, namespace, "--skip-tests")
    kube.kubectl(
        "apply", "--server-side", "-f", "-", input="\n---\n".join(json.dumps(d) for d in docs)
    )

    def pods(component: str) -> dict[str, dict]:
        out = kube.kubectl(
            "get",
            "pods",
            "-n",
            namespace,
            "-l",
            f"app.kubernetes.io/component={component}",
            "-o",
            "json",
        ).stdout
        return {p["metadata"]["name"]: p for p in json.loads(out)["items"]}

    def brokers(n: int) -> dict[str, dict] | None:
        found = pods("broker")
        return found if len(found) == n else None

    found = wait_until(lambda: brokers(3), 60, what="3 broker pods")
    for i in range(3):
        pod = found[f"{RELEASE}-broker-{i}"]
        assert pod["metadata"]["labels"]["apps.kubernetes.io/pod-index"] == str(i)
        assert pod["spec"]["hostname"] == f"{RELEASE}-broker-{i}"
        assert pod["spec"]["subdomain"] == f"{RELEASE}-broker-headless"
        env = env_of(container(pod["spec"], "broker"))
        assert env["BROKER_ID"]["fieldRef"]["fieldPath"] == (
            "metadata.labels['apps.kubernetes.io/pod-index']"
        )
        (claim,) = [v for v in pod["spec"]["volumes"] if v["name"] == "data"]
        assert claim["persistentVolumeClaim"]["claimName"] == f"data-{RELEASE}-broker-{i}"
    pvcs = json.loads(kube.kubectl("get", "pvc", "-n", namespace, "-o", "json").stdout)["items"]
    sizes = {p["metadata"]["name"]: p["spec"]["resources"]["requests"]["storage"] for p in pvcs}
    for i in range(3):
        assert sizes[f"data-{RELEASE}-broker-{i}"] == "10Gi"
        assert sizes[f"data-{RELEASE}-zookeeper-{i}"] == "5Gi"
    zk = wait_until(lambda: len(pods("zookeeper")) == 3 and pods("zookeeper"), 60, what="ZK pods")
    for i in range(3):
        labels = zk[f"{RELEASE}-zookeeper-{i}"]["metadata"]["labels"]
        assert labels["apps.kubernetes.io/pod-index"] == str(i)

    # the PDBs select the pods (the disruption controller counts them; none is ready here)
    def pdb_expected(name: str) -> int | None:
        obj = json.loads(kube.kubectl("get", "pdb", name, "-n", namespace, "-o", "json").stdout)
        return (obj.get("status") or {}).get("expectedPods")

    wait_until(lambda: pdb_expected(f"{RELEASE}-broker") == 3, 60, what="broker PDB status")
    wait_until(lambda: pdb_expected(f"{RELEASE}-zookeeper") == 3, 60, what="ZK PDB status")

    kube.kubectl("scale", "statefulset", f"{RELEASE}-broker", "-n", namespace, "--replicas=4")
    found = wait_until(lambda: brokers(4), 60, what="a 4th broker pod")
    assert found[f"{RELEASE}-broker-3"]["metadata"]["labels"]["apps.kubernetes.io/pod-index"] == "3"
    kube.kubectl("delete", "namespace", namespace, "--wait=false")
    remove_rbac(kube, docs)


# -- the rendered pods run in the project's images (Docker stands in for the kubelet) ---------


@pytest.fixture(scope="module")
def images() -> tuple[str, str]:
    """(odradek image, ZooKeeper image) from scripts/build-image.sh (cached after the first
    build). Without a working Docker: skipped on a developer machine, FAIL under CI=true."""
    ok = subprocess.run(["docker", "info"], capture_output=True, check=False, timeout=60)
    if ok.returncode != 0:
        msg = "docker does not work here: run `make docker` first"
        if IN_CI:
            pytest.fail(msg, pytrace=False)
        pytest.skip(msg)
    r = subprocess.run(
        ["bash", str(ROOT / "scripts" / "build-image.sh")],
        capture_output=True,
        text=True,
        timeout=3600,
        check=False,
    )
    if r.returncode != 0:
        pytest.fail(f"scripts/build-image.sh failed:\n{r.stderr[-4000:]}", pytrace=False)
    odradek, zookeeper = r.stdout.split()
    return odradek, zookeeper


class DockerPods:
    """Runs the pods of a rendered StatefulSet or a bare Pod as Docker containers the way the
    kubelet would: env with the downward API values, $(VAR) expansion, ConfigMap and emptyDir
    volumes, a named volume per claim (group-owned as fsGroup makes it), the pod's user, a
    read-only root when asked, and the pod's DNS name as a network alias."""

    def __init__(self, tmp: Path, docs: list[dict], namespace: str, domain: str) -> None:
        self.tmp = tmp
        self.docs = docs
        self.namespace = namespace
        self.domain = domain
        self.prefix = f"odrchart-{os.getpid()}-{tmp.name[-8:]}".replace("_", "-").lower()
        self.network = self.prefix
        self.containers: list[str] = []
        self.volumes: list[str] = []
        docker("network", "create", self.network)

    def close(self) -> None:
        for c in self.containers:
            docker("rm", "-f", c, check=False)
        for v in self.volumes:
            docker("volume", "rm", "-f", v, check=False)
        docker("network", "rm", self.network, check=False)

    def _configmap_dir(self, name: str) -> Path:
        cm = find(self.docs, "ConfigMap", name)
        d = self.tmp / "configmaps" / name
        d.mkdir(parents=True, exist_ok=True)
        for key, text in cm["data"].items():
            (d / key).write_text(text)
            (d / key).chmod(0o644)
        d.chmod(0o755)
        return d

    def _volume(self, name: str, image: str, fs_group: int | None) -> str:
        vol = f"{self.prefix}-{name}"
        if vol not in self.volumes:
            docker("volume", "create", vol)
            self.volumes.append(vol)
            if fs_group is not None:
                docker(
                    "run", "--rm", "--user", "0", "-v", f"{vol}:/v", "--entrypoint", "sh", image,
                    "-c", f"chgrp {fs_group} /v && chmod 2775 /v",
                )  # fmt: skip
        return vol

    def run(
        self,
        pod_spec: dict,
        c: dict,
        pod_name: str,
        labels: dict[str, str],
        *,
        claims: dict[str, str] | None = None,
        aliases: tuple[str, ...] = (),
        detach: bool = True,
        subdomain: str | None = None,
        host_network: bool = False,
        extra: tuple[str, ...] = (),
    ) -> subprocess.CompletedProcess[str]:
        fields = {"metadata.name": pod_name, "metadata.namespace": self.namespace}
        fields.update({f"metadata.labels['{k}']": v for k, v in labels.items()})
        env: dict[str, str] = {}
        for e in c.get("env", []):
            if "value" in e:
                env[e["name"]] = kubelet_expand(str(e["value"]), env)
            else:
                env[e["name"]] = fields[e["valueFrom"]["fieldRef"]["fieldPath"]]
        psc = pod_spec.get("securityContext") or {}
        csc = c.get("securityContext") or {}
        user = csc.get("runAsUser", psc.get("runAsUser"))
        group = csc.get("runAsGroup", psc.get("runAsGroup", user))
        image = c["image"]
        name = f"{self.prefix}-{pod_name}-{c['name']}"
        args = ["run", "--name", name, *extra]
        if host_network:
            args += ["--network", "host"]
        else:
            args += ["--network", self.network, "--hostname", pod_name]
        args += ["--detach"] if detach else []
        if subdomain:
            fqdn = f"{pod_name}.{subdomain}.{self.namespace}.svc.{self.domain}"
            args += ["--network-alias", fqdn]
        for a in aliases:
            args += ["--network-alias", a]
        if user is not None:
            args += ["--user", f"{user}:{group}"]
        if csc.get("readOnlyRootFilesystem"):
            args += ["--read-only"]
        for k, v in env.items():
            args += ["-e", f"{k}={v}"]
        volumes = {v["name"]: v for v in pod_spec.get("volumes", [])}
        for m in c.get("volumeMounts", []):
            v = volumes.get(m["name"])
            if v is not None and "configMap" in v:
                src = self._configmap_dir(v["configMap"]["name"])
                args += ["-v", f"{src}:{m['mountPath']}:ro"]
            elif v is not None and "emptyDir" in v:
                args += ["--tmpfs", f"{m['mountPath']}:mode=1777"]
            else:
                claim = (claims or {})[m["name"]]
                vol = self._volume(claim, image, psc.get("fsGroup"))
                args += ["-v", f"{vol}:{m['mountPath']}"]
        command = [kubelet_expand(a, env) for a in c.get("command", [])]
        cargs = [kubelet_expand(a, env) for a in c.get("args", [])]
        if command:
            args += ["--entrypoint", command[0], image, *command[1:], *cargs]
        else:
            args += [image, *cargs]
        self.containers.append(name)
        return docker(*args, check=detach)

    def statefulset(self, name: str, aliases: tuple[str, ...] = ()) -> list[tuple[str, dict]]:
        """Start every pod of the StatefulSet (init containers first); returns (container, spec)
        of each main container."""
        sts = find(self.docs, "StatefulSet", name)
        spec = sts["spec"]
        pod_spec = spec["template"]["spec"]
        started = []
        for i in range(spec["replicas"]):
            pod = f"{name}-{i}"
            labels = {
                **spec["template"]["metadata"]["labels"],
                "apps.kubernetes.io/pod-index": str(i),
            }
            claims = {
                t["metadata"]["name"]: f"{t['metadata']['name']}-{pod}"
                for t in spec.get("volumeClaimTemplates", [])
            }
            for init in pod_spec.get("initContainers", []):
                r = self.run(pod_spec, init, pod, labels, claims=claims, detach=False)
                assert r.returncode == 0, f"init container {init['name']} of {pod}: {r.stderr}"
            (main,) = pod_spec["containers"]
            self.run(
                pod_spec, main, pod, labels, claims=claims, aliases=aliases,
                subdomain=spec["serviceName"],
            )  # fmt: skip
            started.append((f"{self.prefix}-{pod}-{main['name']}", main))
        return started

    def wait_ready(self, started: list[tuple[str, dict]], timeout: float = 180) -> None:
        for cname, c in started:
            probe = c["readinessProbe"]["exec"]["command"]

            def ready(cname: str = cname, probe: list[str] = probe) -> bool:
                state = docker("inspect", "-f", "{{.State.Running}}", cname).stdout.strip()
                if state != "true":
                    pytest.fail(
                        f"{cname} exited:\n{docker('logs', cname, check=False).stderr[-3000:]}"
                    )
                return docker("exec", cname, *probe, check=False).returncode == 0

            wait_until(ready, timeout, interval=2, what=f"{cname} readiness probe")


def docker(*args: str, check: bool = True) -> subprocess.CompletedProcess[str]:
    r = subprocess.run(["docker", *args], capture_output=True, text=True, timeout=300)
    if check and r.returncode != 0:
        pytest.fail(f"docker {' '.join(args[:3])}... failed: {r.stderr[-2000:]}", pytrace=False)
    return r


def test_chart_runs_in_the_images(images: tuple[str, str], helm: Path, tmp_path: Path) -> None:
    """The default three-server ensemble and three brokers as rendered, in the project's images
    with each pod's DNS name: ZooKeeper forms its quorum from zoo.cfg, every broker turns ready
    through its probe, the helm test pod produces and consumes through the bootstrap Service,
    and a broker stopped with SIGTERM (controlled shutdown) exits 0 within its grace period."""
    odradek, zookeeper = images
    repo, _, tag = odradek.rpartition(":")
    zrepo, _, ztag = zookeeper.rpartition(":")
    ns, domain = "kafka", "cluster.local"
    values = {
        "image": {"repository": repo, "tag": tag},
        "zookeeper": {"image": {"repository": zrepo, "tag": ztag}, "heapMB": 128},
        "tests": {"timeoutSeconds": 60},
        "broker": {"drainOnScaleDown": {"settleSeconds": 2}},
    }
    docs = render(helm, tmp_path, values, ns)
    pods = DockerPods(tmp_path, docs, ns, domain)
    try:
        zk = pods.statefulset(f"{RELEASE}-zookeeper")
        pods.wait_ready(zk)
        bootstrap = f"{RELEASE}-bootstrap.{ns}.svc.{domain}"
        brokers = pods.statefulset(f"{RELEASE}-broker", aliases=(bootstrap,))
        pods.wait_ready(brokers)
        (test_pod,) = [d for d in docs if d["kind"] == "Pod"]
        r = pods.run(
            test_pod["spec"], test_pod["spec"]["containers"][0], test_pod["metadata"]["name"],
            test_pod["metadata"]["labels"], detach=False,
        )  # fmt: skip
        assert r.returncode == 0, f"helm test pod failed:\n{r.stdout}\n{r.stderr}"
        assert "produced and consumed" in r.stdout
        # every broker registered under the chroot with its ordinal as broker.id (kazoo is in
        # the image: the broker's own ZooKeeper client)
        connect = configmap_properties(docs, f"{RELEASE}-broker", "server.properties")[
            "zookeeper.connect"
        ]
        hosts, _, chroot = connect.partition("/")
        script = (
            "import sys; from kazoo.client import KazooClient; "
            "c = KazooClient(hosts=sys.argv[1]); c.start(timeout=30); "
            "print(sorted(c.get_children(sys.argv[2]))); c.stop()"
        )
        (b0, _) = brokers[0]
        ids = docker("exec", b0, "python", "-c", script, hosts, f"/{chroot}/brokers/ids").stdout
        assert ids.strip() == "['0', '1', '2']", ids
        # SIGTERM: controlled shutdown, exit 0 within the grace period
        grace = find(docs, "StatefulSet", f"{RELEASE}-broker")["spec"]["template"]["spec"][
            "terminationGracePeriodSeconds"
        ]
        (b2, c2) = brokers[2]
        # the preStop hook, as the kubelet runs it first: nothing drains broker 2 (no operator)
        hook = docker("exec", b2, *c2["lifecycle"]["preStop"]["exec"]["command"])
        assert hook.stdout == "broker 2: no drain started\n", hook
        docker("stop", "-t", str(grace), b2)
        assert docker("inspect", "-f", "{{.State.ExitCode}}", b2).stdout.strip() == "0"
        assert "stopped" in docker("logs", b2).stderr
    finally:
        pods.close()


def test_operator_deployment_runs_in_the_image(
    images: tuple[str, str],
    kube: ControlPlane,
    chart_crds: None,
    helm: Path,
    tmp_path: Path,
    namespace: str,
    broker: Broker,
    sole_operator: None,
) -> None:
    """The operator Deployment's container, in the image, authenticating in-cluster with a token
    of the chart's ServiceAccount (mounted where the kubelet puts it): liveness and metrics
    endpoints answer, and a Topic becomes Ready."""
    import urllib.request

    from kube_harness import free_port

    odradek, _ = images
    repo, _, tag = odradek.rpartition(":")
    make_namespace(kube, namespace)
    metrics_port, health_port = free_port(), free_port()
    values = {
        "fullnameOverride": namespace,
        "image": {"repository": repo, "tag": tag},
        "operator": {
            "watchNamespaces": [namespace],
            "allowBootstrapAnnotation": True,
            "clusters": [f"c-{namespace}"],
            "metrics": {"port": metrics_port},
            "healthPort": health_port,
        },
    }
    docs = render(helm, tmp_path, values, namespace)
    rbac = apply_rbac(kube, docs)
    deploy = find(docs, "Deployment", f"{namespace}-operator")
    pod_spec = deploy["spec"]["template"]["spec"]
    sa = pod_spec["serviceAccountName"]
    token = kube.kubectl("create", "token", sa, "-n", namespace, "--duration=1h").stdout.strip()
    sa_dir = tmp_path / "serviceaccount"
    sa_dir.mkdir()
    (sa_dir / "token").write_text(token)
    (sa_dir / "ca.crt").write_text(kube.pki.ca_path.read_text())
    (sa_dir / "namespace").write_text(namespace)
    for f in sa_dir.iterdir():
        f.chmod(0o644)
    pods = DockerPods(tmp_path, docs, namespace, "cluster.local")
    (c,) = pod_spec["containers"]
    name = f"{pods.prefix}-operator-operator"
    try:
        pods.run(
            pod_spec,
            c,
            "operator",
            deploy["spec"]["template"]["metadata"]["labels"],
            host_network=True,
            extra=(
                "-v",
                f"{sa_dir}:/var/run/secrets/kubernetes.io/serviceaccount:ro",
                "-e",
                "KUBERNETES_SERVICE_HOST=127.0.0.1",
                "-e",
                f"KUBERNETES_SERVICE_PORT={kube.port}",
            ),
        )

        def get(port: int, path: str) -> str:
            state = docker("inspect", "-f", "{{.State.Running}}", name).stdout.strip()
            if state != "true":
                pytest.fail(f"operator exited:\n{docker('logs', name, check=False).stderr[-3000:]}")
            try:
                with urllib.request.urlopen(f"http://127.0.0.1:{port}{path}", timeout=5) as r:
                    return r.read().decode()
            except OSError:
                return ""

        health = c["livenessProbe"]["httpGet"]
        assert health["port"] == "health"
        wait_until(lambda: get(health_port, health["path"]), 120, what="the operator's /healthz")
        wait_until(lambda: "odradek_operator" in get(metrics_port, "/metrics"), 60, what="metrics")
        kube.apply(
            {
                "apiVersion": "kafka.odradek.io/v1alpha1",
                "kind": "Topic",
                "metadata": {
                    "name": "in-image",
                    "annotations": {"kafka.odradek.io/bootstrap-servers": broker.bootstrap},
                },
                "spec": {"cluster": f"c-{namespace}", "partitions": 1},
            },
            namespace=namespace,
        )

        def ready() -> bool:
            get(health_port, health["path"])  # fails the test if the operator died
            obj = kube.get("topic", "in-image", namespace) or {}
            return any(
                x["type"] == "Ready" and x["status"] == "True"
                for x in (obj.get("status") or {}).get("conditions") or []
            )

        wait_until(ready, 90, what="Topic Ready through the operator in the image")
        kube.kubectl("delete", "topic", "in-image", "-n", namespace, "--wait=false")
        wait_until(lambda: kube.get("topic", "in-image", namespace) is None, 60, what="finalized")
        docker("stop", "-t", "30", name)
        logs = docker("logs", name).stderr + docker("logs", name).stdout
        assert not forbidden_lines(logs), logs[-3000:]
    finally:
        pods.close()
        remove_rbac(kube, rbac)
