"""The operator's RBAC as the chart renders it, created for real on the test API server:
`kubectl auth can-i` for what it needs and nothing more, and the operator itself running as the
chart's ServiceAccount.

Namespaced (`operator.watchNamespaces`, `--namespace`): a Role in each watched namespace and
nothing cluster-wide, so any request the operator made for a namespace listing, a CRD watch or
another namespace would be forbidden, and forbidden requests show in its log.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from chart_harness import (
    apply_rbac,
    can_i,
    container,
    find,
    forbidden_lines,
    make_namespace,
    remove_rbac,
    render,
)
from kube_harness import ANNOTATION, Broker, ControlPlane, Operator, admin_call, wait_until
from odradek.operator.broker_scaling import BALANCED_ANNOTATION, COMPONENT_LABEL
from odradek.operator.clusters import CLUSTER_LABEL

pytestmark = pytest.mark.timeout(600)

CRDS = "customresourcedefinitions.apiextensions.k8s.io"


@pytest.fixture
def installed(
    kube: ControlPlane, chart_crds: None, helm: Path, tmp_path: Path, namespace: str
) -> Iterator[tuple[str, list[dict]]]:
    """The chart's ServiceAccount and RBAC objects, the operator namespaced to the test's
    namespace (the rest of the chart needs a kubelet; test_helm_chart dry-runs it)."""
    make_namespace(kube, namespace)
    values = {"operator": {"watchNamespaces": [namespace]}, "fullnameOverride": namespace}
    docs = render(helm, tmp_path, values, namespace)
    rbac = apply_rbac(kube, docs)
    yield namespace, docs
    remove_rbac(kube, rbac)


def test_operator_rbac_least_privilege(
    kube: ControlPlane, installed: tuple[str, list[dict]]
) -> None:
    ns, docs = installed
    sa = f"system:serviceaccount:{ns}:{ns}-operator"
    allowed = [
        ("watch", "topics.kafka.odradek.io"),
        ("patch", "topics.kafka.odradek.io"),
        ("patch", "topics.kafka.odradek.io/status"),
        ("list", "quotas.kafka.odradek.io"),
        ("list", "users.kafka.odradek.io"),
        ("list", "services"),
        ("watch", "services"),
        ("create", "events"),
        ("create", "secrets"),
        ("get", "secrets"),
        ("patch", "secrets"),
        ("watch", "statefulsets.apps"),
        ("patch", "statefulsets.apps"),
    ]
    for verb, res in allowed:
        assert can_i(kube, sa, verb, res, ns), f"operator cannot {verb} {res} in {ns}"
    denied = [
        ("list", "secrets"),
        ("watch", "secrets"),
        ("delete", "secrets"),
        ("create", "topics.kafka.odradek.io"),
        ("delete", "topics.kafka.odradek.io"),
        ("create", "pods"),
        ("delete", "services"),
        ("update", "configmaps"),
        ("create", "roles.rbac.authorization.k8s.io"),
        ("update", "statefulsets.apps/scale"),
        ("delete", "statefulsets.apps"),
    ]
    for verb, res in denied:
        assert not can_i(kube, sa, verb, res, ns), f"operator may {verb} {res} in {ns}"
    # nothing in another namespace, nothing cluster-wide
    assert not [d for d in docs if d["kind"].startswith("Cluster")]
    other = make_namespace(kube, f"{ns}-other")
    assert not can_i(kube, sa, "list", "topics.kafka.odradek.io", other)
    for verb, res in [
        ("list", "topics.kafka.odradek.io"),
        ("list", "namespaces"),
        ("watch", "namespaces"),
        ("list", CRDS),
        ("watch", CRDS),
        ("watch", "statefulsets.apps"),
    ]:
        assert not can_i(kube, sa, verb, res, None), f"operator may {verb} {res} cluster-wide"


def statefulset(name: str, cluster: str) -> dict:
    """A broker StatefulSet as the scaling handler selects them (only an object: no kubelet)."""
    selector = {"app.kubernetes.io/name": "odradek", COMPONENT_LABEL: "broker"}
    return {
        "apiVersion": "apps/v1",
        "kind": "StatefulSet",
        "metadata": {"name": name, "labels": {**selector, CLUSTER_LABEL: cluster}},
        "spec": {
            "replicas": 1,
            "serviceName": f"{name}-headless",
            "selector": {"matchLabels": selector},
            "template": {
                "metadata": {"labels": selector},
                "spec": {"containers": [{"name": "broker", "image": "odradek:dev"}]},
            },
        },
    }


def declare(kube: ControlPlane, ns: str, cluster: str, bootstrap: str, tag: str) -> dict:
    """A Topic, a Quota, a User (password generated) and a broker StatefulSet in `ns`; their
    Kafka names carry `tag`. Returns kind -> name."""
    names = {"topic": f"topic-{tag}", "quota": f"quota-{tag}", "user": f"user-{tag}"}
    specs: dict[str, dict[str, Any]] = {
        "topic": {"partitions": 2},
        "quota": {"user": {"name": names["user"]}, "producerByteRate": 1048576},
        "user": {
            "authentication": {"type": "scram-sha-512"},
            "authorization": {
                "acls": [
                    {"resource": {"type": "topic", "name": names["topic"]}, "operations": ["Read"]}
                ],
            },
        },
    }
    for kind, spec in specs.items():
        kube.apply(
            {
                "apiVersion": "kafka.odradek.io/v1alpha1",
                "kind": kind.capitalize(),
                "metadata": {"name": names[kind], "annotations": {ANNOTATION: bootstrap}},
                "spec": {"cluster": cluster, **spec},
            },
            namespace=ns,
        )
    names["statefulset"] = f"broker-{tag}"
    kube.apply(statefulset(names["statefulset"], cluster), namespace=ns)
    return names


def ready(kube: ControlPlane, kind: str, name: str, ns: str) -> bool:
    obj = kube.get(kind, name, ns) or {}
    return any(
        c["type"] == "Ready" and c["status"] == "True"
        for c in (obj.get("status") or {}).get("conditions") or []
    )


def balanced(kube: ControlPlane, name: str, ns: str) -> str | None:
    obj = kube.get("statefulset", name, ns) or {}
    return (obj["metadata"].get("annotations") or {}).get(BALANCED_ANNOTATION)


def test_namespaced_operator_runs_with_chart_rbac(
    kube: ControlPlane,
    installed: tuple[str, list[dict]],
    secure_broker: Broker,
    sole_operator: None,
    tmp_path: Path,
) -> None:
    """The operator, authenticated as the chart's ServiceAccount with its --namespace flag,
    reconciles a Topic, a Quota, a User (its password Secret generated) and a broker
    StatefulSet in its namespace and finalizes their deletion; the same resources of the same
    cluster in another namespace are left alone; and no request of the operator is forbidden
    (none for namespaces, CRDs or the other namespace)."""
    ns, docs = installed
    deploy = find(docs, "Deployment", f"{ns}-operator")
    args = container(deploy["spec"]["template"]["spec"], "operator").get("args", [])
    assert f"--namespace={ns}" in args
    kubeconfig = kube.kubeconfig_for(
        f"system:serviceaccount:{ns}:{ns}-operator",
        groups=("system:serviceaccounts", f"system:serviceaccounts:{ns}", "system:authenticated"),
    )
    # $KUBECONFIG is a colon-separated list: the file's name must not contain the user's colons
    sa_kubeconfig = tmp_path / "kubeconfig-operator-sa"
    sa_kubeconfig.write_text(kubeconfig.read_text())
    op = Operator(kube, tmp_path / "operator")
    op.process.env["KUBECONFIG"] = str(sa_kubeconfig)
    cluster = f"c-{ns}"
    op.process.cmd = [*op.process.cmd, *args, f"--cluster={cluster}"]
    b = secure_broker.bootstrap
    other = make_namespace(kube, f"{ns}-other")
    op.start()
    try:
        # the other namespace's first, so the operator had every chance to see them
        left = declare(kube, other, cluster, b, f"other-{ns}")
        mine = declare(kube, ns, cluster, b, f"mine-{ns}")
        for kind in ("topic", "quota", "user"):
            wait_until(
                lambda kind=kind: ready(kube, kind, mine[kind], ns),
                90,
                what=f"{kind} Ready (operator as the chart's SA)",
            )
        wait_until(
            lambda: balanced(kube, mine["statefulset"], ns) == "0", 60, what="StatefulSet adopted"
        )
        assert kube.get("secret", mine["user"], ns) is not None  # generated by the operator
        events = json.loads(
            kube.kubectl(
                "get",
                "events",
                "-n",
                ns,
                "--field-selector",
                f"involvedObject.name={mine['topic']}",
                "-o",
                "json",
            ).stdout  # fmt: skip
        )["items"]
        assert events, "no event posted for the Topic"

        # the other namespace: untouched in Kubernetes and on the brokers
        for kind in ("topic", "quota", "user"):
            obj = kube.get(kind, left[kind], other)
            assert not obj.get("status"), obj
            assert not obj["metadata"].get("finalizers"), obj
        assert balanced(kube, left["statefulset"], other) is None
        assert kube.get("secret", left["user"], other) is None
        topics = admin_call(b, lambda a: a.list_topics())
        assert mine["topic"] in topics and left["topic"] not in topics

        for kind in ("topic", "quota", "user"):
            kube.kubectl("delete", kind, mine[kind], "-n", ns, "--wait=false")
        for kind in ("topic", "quota", "user"):
            wait_until(
                lambda kind=kind: kube.get(kind, mine[kind], ns) is None,
                60,
                what=f"{kind} finalized",
            )
    finally:
        op.stop()
    forbidden = forbidden_lines(op.process.log_path.read_text(errors="replace"))
    assert not forbidden, "\n".join(forbidden)


def test_operator_rbac_cluster_wide(
    kube: ControlPlane, chart_crds: None, helm: Path, tmp_path: Path, namespace: str
) -> None:
    """Default values: the operator watches every namespace through a ClusterRole holding the
    same rules and reading CRDs, and nothing more."""
    make_namespace(kube, namespace)
    docs = render(helm, tmp_path, {"fullnameOverride": namespace}, namespace)
    assert not [d for d in docs if d["kind"] in ("Role", "RoleBinding")]
    rbac = apply_rbac(kube, docs)
    try:
        sa = f"system:serviceaccount:{namespace}:{namespace}-operator"
        for verb, res in [
            ("watch", "topics.kafka.odradek.io"),
            ("patch", "users.kafka.odradek.io/status"),
            ("list", "services"),
            ("create", "secrets"),
            ("patch", "secrets"),
            ("create", "events"),
            ("watch", CRDS),
        ]:
            assert can_i(kube, sa, verb, res, None), f"operator cannot {verb} {res} cluster-wide"
        for verb, res in [
            ("list", "secrets"),
            ("list", "namespaces"),
            ("delete", "topics.kafka.odradek.io"),
            ("create", "pods"),
        ]:
            assert not can_i(kube, sa, verb, res, None), f"operator may {verb} {res}"
    finally:
        remove_rbac(kube, rbac)
    # rbac.watchCRDs: false leaves CRDs out of the ClusterRole and tells the operator so
    values = {"fullnameOverride": namespace, "operator": {"rbac": {"watchCRDs": False}}}
    docs = render(helm, tmp_path, values, namespace)
    rules = find(docs, "ClusterRole", f"{namespace}-{namespace}-operator")["rules"]
    assert not [r for r in rules if "apiextensions.k8s.io" in r["apiGroups"]]
    deploy = find(docs, "Deployment", f"{namespace}-operator")
    assert "--no-watch-crds" in container(deploy["spec"]["template"]["spec"], "operator")["args"]
