"""Finding a cluster's brokers, and deciding which resource owns a contested Kafka object.

Every kind names its cluster in spec.cluster; the brokers are found through the cluster's
bootstrap Service (labels kafka.odradek.io/cluster=<name>, kafka.odradek.io/bootstrap=true) in the
resource's namespace, kept in a kopf index so no handler lists Services.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

import kopf

GROUP = "kafka.odradek.io"
VERSION = "v1alpha1"
BOOTSTRAP_ANNOTATION = f"{GROUP}/bootstrap-servers"
CLUSTER_LABEL = f"{GROUP}/cluster"
BOOTSTRAP_LABEL = f"{GROUP}/bootstrap"
BOOTSTRAP_INDEX = "bootstrap_services"
# kopf's finalizer on Topic, Quota and User resources (settings.persistence.finalizer).
FINALIZER = f"{GROUP}/finalizer"


def bootstrap_services(
    namespace: str,
    name: str,
    labels: Mapping[str, str],
    spec: Mapping[str, Any],
    **_: Any,
) -> dict | None:
    """(namespace, cluster) -> host:port of the cluster's bootstrap Service."""
    ports = list(spec.get("ports") or [])
    named = [p for p in ports if p.get("name") in ("kafka", "tcp-kafka", "client")]
    port = (named or ports or [None])[0]
    if port is None:
        return None
    return {(namespace, labels[CLUSTER_LABEL]): f"{name}.{namespace}.svc:{port['port']}"}


def register_bootstrap_index(registry: kopf.OperatorRegistry) -> None:
    """One Service index for all kinds; handlers get it as the `bootstrap_services` kwarg."""
    kopf.index(
        "v1",
        "services",
        id=BOOTSTRAP_INDEX,
        registry=registry,
        labels={CLUSTER_LABEL: kopf.PRESENT, BOOTSTRAP_LABEL: "true"},
    )(bootstrap_services)


def resolve_bootstrap(
    body: Mapping[str, Any], services: Any, allow_annotation: bool, cluster: str | None = None
) -> tuple[str | None, str]:
    """(bootstrap address, "") or (None, why the cluster was not found). The cluster is
    spec.cluster unless given (objects that name it in a label)."""
    meta = body["metadata"]
    namespace = meta["namespace"]
    cluster = body["spec"]["cluster"] if cluster is None else cluster
    override = (meta.get("annotations") or {}).get(BOOTSTRAP_ANNOTATION)
    if override and allow_annotation:
        return override, ""
    for address in services.get((namespace, cluster), ()):
        return address, ""
    why = (
        f"cluster {cluster!r} not found: no Service in namespace {namespace!r} labelled "
        f"{CLUSTER_LABEL}={cluster},{BOOTSTRAP_LABEL}=true"
    )
    if override:
        why += f" (annotation {BOOTSTRAP_ANNOTATION} is ignored: the operator does not allow it)"
    return None, why


@dataclass(slots=True, order=True)
class OwnerKey:
    """Orders resources claiming one Kafka object: the oldest wins. creationTimestamp has
    one-second resolution, so within a second the one already managing it wins, then the
    lowest uid."""

    created: str
    unmanaged: bool
    uid: str
    namespace: str = field(compare=False)
    name: str = field(compare=False)


def conflict_winner(claims: Sequence[OwnerKey]) -> OwnerKey | None:
    return min(claims) if claims else None


def winner_of(index: Any, key: tuple) -> OwnerKey | None:
    try:
        found = list(index.get(key, ()))
    except AttributeError:
        return None
    return conflict_winner(found)
