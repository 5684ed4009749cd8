"""The Helm chart ships the CRDs of manifests/crds unchanged (Helm installs charts/*/crds as is)."""

from __future__ import annotations

from kube_harness import CRDS, ROOT

CHART_CRDS = ROOT / "charts" / "odradek" / "crds"


def test_chart_crds_are_identical_to_manifests() -> None:
    manifests = {p.name: p.read_bytes() for p in CRDS.glob("*.yaml")}
    chart = {p.name: p.read_bytes() for p in CHART_CRDS.glob("*.yaml")}
    assert manifests, f"no CRDs in {CRDS}"
    assert sorted(chart) == sorted(manifests), "charts/odradek/crds lists other files"
    different = [name for name in manifests if chart[name] != manifests[name]]
    assert not different, f"copy manifests/crds/{different[0]} to {CHART_CRDS}"
