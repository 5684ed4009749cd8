"""bench/report.py reference: the sentence under the table says how fast the machine was in
each system's turns and how much CPU time the host took from it meanwhile (steal), so a
reader can tell a run on a busy host from a slower system."""

from __future__ import annotations

import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "bench"))

import report  # noqa: E402
from run import steal_seconds  # noqa: E402


def entries(system: str, ms: list[float], steal: list[float] | None) -> list[dict]:
    out = []
    for i, value in enumerate(ms):
        entry = {"kind": "single", "repeat": i + 1, "system": system, "ms": value}
        if steal is not None:
            entry["steal_pct"] = steal[i]
        out.append(entry)
    return out


def test_reference_names_each_systems_speed_and_steal():
    results = report.Results()
    results.reference += entries("Kafka", [140, 120, 180], [0.5, 4.0, 1.0])
    results.reference += entries("Odradek", [150, 130, 160], [0.0, 0.2, 9.5])
    sentence = report.reference(results)
    assert "Kafka's turns 140 ms (120–180)" in sentence
    assert "Odradek's turns 150 ms (130–160)" in sentence
    assert "during the turns (steal): 0.8% (0.0–9.5)." in sentence


def test_reference_without_steal_says_nothing_of_it():
    results = report.Results()
    results.reference += entries("Kafka", [140], None)
    assert "steal" not in report.reference(results)


def test_steal_seconds_is_read_from_proc_stat():
    first = steal_seconds()
    assert first >= 0.0
    assert steal_seconds() >= first  # a counter since boot
