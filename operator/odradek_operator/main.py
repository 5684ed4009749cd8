"""`odradek-operator` (also `python -m odradek.operator`): run the kopf operator.

Handlers are registered into a private registry (nothing happens at import time), then kopf runs
standalone (no peering objects), cluster-wide or in the namespaces given, until SIGINT/SIGTERM.
"""

from __future__ import annotations

import logging
import sys
from collections.abc import Sequence
from typing import Any

import kopf

from . import metrics
from .broker_scaling import BrokerScalingHandlers
from .clusters import FINALIZER, GROUP, register_bootstrap_index
from .config import OperatorConfig, load_config
from .quotas import QuotaHandlers
from .topics import TopicHandlers
from .users import UserHandlers


def build_registry(cfg: OperatorConfig) -> kopf.OperatorRegistry:
    registry = kopf.OperatorRegistry()
    register_bootstrap_index(registry)
    TopicHandlers(cfg).register(registry)
    QuotaHandlers(cfg).register(registry)
    UserHandlers(cfg).register(registry)
    BrokerScalingHandlers(cfg).register(registry)

    @kopf.on.login(registry=registry)
    def login(**kwargs: Any) -> kopf.ConnectionInfo | None:
        # In-cluster service account, else $KUBECONFIG / ~/.kube/config (kubernetes client).
        return kopf.login_via_client(**kwargs)

    @kopf.on.startup(registry=registry)
    def configure(settings: kopf.OperatorSettings, **_: Any) -> None:
        # Our own finalizer and annotation names, and no status.kopf (the CRD schema prunes it).
        settings.persistence.finalizer = FINALIZER
        settings.persistence.progress_storage = kopf.AnnotationsProgressStorage(prefix=GROUP)
        settings.persistence.diffbase_storage = kopf.AnnotationsDiffBaseStorage(
            prefix=GROUP, key="last-handled-configuration"
        )
        # kopf's own log lines become events only from WARNING up; the handlers post their
        # own events for every action.
        settings.posting.level = logging.WARNING
        # A timer stopped for a deletion exits within a second (see TopicHandlers.on_timer).
        settings.background.cancellation_polling = 1
        # Namespaced: neither a namespace listing nor a CRD watch, nothing cluster-wide.
        settings.scanning.disabled = not cfg.scans_cluster
        settings.watching.server_timeout = 300
        settings.watching.client_timeout = 330

    return registry


def main(argv: Sequence[str] | None = None) -> int:
    cfg, args = load_config(argv)
    kopf.configure(verbose=args.verbose)
    logging.getLogger("odradek").setLevel(logging.DEBUG if args.verbose else logging.INFO)
    registry = build_registry(cfg)
    metrics.serve(cfg.metrics_port, cfg.metrics_address)
    liveness = f"http://0.0.0.0:{cfg.liveness_port}/healthz" if cfg.liveness_port else None
    kopf.run(
        registry=registry,
        standalone=cfg.standalone,
        clusterwide=not cfg.namespaces,
        namespaces=cfg.namespaces,
        liveness_endpoint=liveness,
    )
    return 0


if __name__ == "__main__":
    sys.exit(main())
