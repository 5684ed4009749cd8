"""Operator settings: command-line flags over ODRADEK_OPERATOR_* environment variables.

Every bound the operator keeps (retry back-off, how long a deletion waits for an unreachable
cluster, how often drift is checked) is a setting, so tests can shrink them and users can tune them.
"""

from __future__ import annotations

import argparse
import os
import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field

from odradek.broker.client import ClientConfigError, ClientSecurity

ENV_PREFIX = "ODRADEK_OPERATOR_"


@dataclass(slots=True)
class OperatorConfig:
    # Empty: every namespace. Else exactly these, and nothing is asked of the API server
    # cluster-wide (no namespace listing, no CRD watch): a Role in each is all the RBAC needed.
    namespaces: list[str] = field(default_factory=list)
    clusters: list[str] = field(default_factory=list)  # empty: resources of every cluster
    # Let a resource's kafka.odradek.io/bootstrap-servers annotation name its brokers. Off by
    # default: whoever may create a Topic could otherwise point the operator at any address.
    allow_bootstrap_annotation: bool = False
    resync_seconds: float = 30.0  # drift check and re-reconcile interval
    delete_timeout_seconds: float = 300.0  # give up deleting a topic on an unreachable cluster
    backoff_base_seconds: float = 2.0
    backoff_max_seconds: float = 120.0
    kafka_timeout_seconds: float = 15.0  # one admin operation, including its own retries
    scaling_interval_seconds: float = 3.0  # how often broker StatefulSets' replicas are checked
    metrics_port: int = 8080  # Prometheus /metrics; 0 disables
    metrics_address: str = "0.0.0.0"
    liveness_port: int = 0  # kopf's /healthz; 0 disables
    standalone: bool = True  # no kopf peering objects (one operator replica)
    # Watching every namespace: also watch CRDs (cluster-wide read), so Topic, Quota and User
    # CRDs installed after the operator started are served without a restart.
    watch_crds: bool = True
    # Kafka client properties (security.protocol, sasl.*, ssl.*) for reaching the brokers;
    # read at every connection, so a rotated Secret takes effect without a restart.
    client_config: str = ""

    @property
    def scans_cluster(self) -> bool:
        """Whether kopf observes cluster-wide objects (CRDs) at run time; never in namespaced
        mode, where the operator has no cluster-wide permission."""
        return not self.namespaces and self.watch_crds

    def selects(self, cluster: str | None) -> bool:
        """Whether this operator manages resources naming `cluster`."""
        return not self.clusters or cluster in self.clusters

    def client_security(self) -> ClientSecurity | None:
        return ClientSecurity.from_file(self.client_config) if self.client_config else None

    def backoff(self, attempt: int) -> float:
        """Delay before retry number `attempt` (0-based): doubling, capped."""
        return min(self.backoff_base_seconds * (2 ** min(attempt, 30)), self.backoff_max_seconds)


def _split(value: str) -> list[str]:
    return [v.strip() for v in value.split(",") if v.strip()]


def _bool(value: str) -> bool:
    return value.strip().lower() in ("1", "true", "yes", "on")


_ENV_FIELDS = {
    "NAMESPACES": ("namespaces", _split),
    "CLUSTERS": ("clusters", _split),
    "ALLOW_BOOTSTRAP_ANNOTATION": ("allow_bootstrap_annotation", _bool),
    "RESYNC_SECONDS": ("resync_seconds", float),
    "DELETE_TIMEOUT_SECONDS": ("delete_timeout_seconds", float),
    "BACKOFF_BASE_SECONDS": ("backoff_base_seconds", float),
    "BACKOFF_MAX_SECONDS": ("backoff_max_seconds", float),
    "KAFKA_TIMEOUT_SECONDS": ("kafka_timeout_seconds", float),
    "SCALING_INTERVAL_SECONDS": ("scaling_interval_seconds", float),
    "METRICS_PORT": ("metrics_port", int),
    "METRICS_ADDRESS": ("metrics_address", str),
    "LIVENESS_PORT": ("liveness_port", int),
    "CLIENT_CONFIG": ("client_config", str),
    "WATCH_CRDS": ("watch_crds", _bool),
}
# A namespace's name (a DNS label): --namespace takes names, not kopf's glob patterns, which
# would need the namespaces listed cluster-wide.
_NAMESPACE = re.compile(r"[a-z0-9]([-a-z0-9]{0,61}[a-z0-9])?")


def build_parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(
        prog="odradek-operator",
        description="Kubernetes operator for Odradek Topic, Quota and User resources and broker "
        "scaling. Every "
        f"flag can also be given as an environment variable {ENV_PREFIX}<FLAG> (for example "
        f"{ENV_PREFIX}RESYNC_SECONDS=10).",
    )
    p.add_argument(
        "--namespace",
        action="append",
        dest="namespaces",
        metavar="NS",
        help="watch only this namespace (repeatable); needs no cluster-wide permission. "
        "Default: every namespace",
    )
    p.add_argument(
        "--cluster",
        action="append",
        dest="clusters",
        metavar="NAME",
        help="manage only resources whose spec.cluster is NAME (repeatable)",
    )
    p.add_argument(
        "--allow-bootstrap-annotation",
        action="store_true",
        default=None,
        help="honour the kafka.odradek.io/bootstrap-servers annotation",
    )
    p.add_argument("--resync-seconds", type=float, help="drift check interval")
    p.add_argument(
        "--delete-timeout-seconds",
        type=float,
        help="how long a deletion retries an unreachable cluster before giving up",
    )
    p.add_argument("--backoff-base-seconds", type=float)
    p.add_argument("--backoff-max-seconds", type=float)
    p.add_argument("--kafka-timeout-seconds", type=float)
    p.add_argument(
        "--scaling-interval-seconds",
        type=float,
        help="how often broker StatefulSets are checked for a changed number of brokers",
    )
    p.add_argument("--metrics-port", type=int, help="Prometheus metrics port (0: off)")
    p.add_argument("--metrics-address")
    p.add_argument("--liveness-port", type=int, help="kopf liveness probe port (0: off)")
    p.add_argument(
        "--client-config",
        metavar="FILE",
        help="Kafka client properties for the brokers' listener (security.protocol, "
        "sasl.mechanism, sasl.username, sasl.password, ssl.ca.location, ...)",
    )
    p.add_argument(
        "--no-watch-crds",
        action="store_const",
        const=False,
        dest="watch_crds",
        help="when watching every namespace, do not watch CRDs (no cluster-wide CRD read); "
        "CRDs installed later are then served after a restart",
    )
    p.add_argument("--verbose", "-v", action="store_true", help="debug logging")
    return p


def load_config(
    argv: Sequence[str] | None = None, env: Mapping[str, str] | None = None
) -> tuple[OperatorConfig, argparse.Namespace]:
    """Defaults, then environment, then flags."""
    env = os.environ if env is None else env
    cfg = OperatorConfig()
    for suffix, (name, conv) in _ENV_FIELDS.items():
        raw = env.get(ENV_PREFIX + suffix)
        if raw is not None and raw.strip() != "":
            try:
                setattr(cfg, name, conv(raw))
            except ValueError as e:
                raise SystemExit(f"{ENV_PREFIX}{suffix}={raw!r}: {e}") from None
    args = build_parser().parse_args(argv)
    for name in OperatorConfig.__slots__:
        value = getattr(args, name, None)
        if value is not None:
            setattr(cfg, name, value)
    bad = [ns for ns in cfg.namespaces if not _NAMESPACE.fullmatch(ns)]
    if bad:
        raise SystemExit(f"--namespace {bad[0]!r}: not a namespace name (no patterns)")
    try:
        cfg.client_security()  # a broken client config fails at start, not at first use
    except ClientConfigError as e:
        raise SystemExit(f"client config: {e}") from None
    return cfg, args
