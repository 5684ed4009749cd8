"""bench/compare.py: two runs' results side by side, the throughput rows whose medians moved by
more than 10% between them, and the same count for the machine's reference work."""

from __future__ import annotations

import json
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "bench"))

import compare  # noqa: E402


def write_run(folder: Path, rows: list[dict], reference: list[dict]) -> Path:
    folder.mkdir()
    doc = {"meta": {"commit": "abc1234", "minutes": 27.5}, "rows": rows, "reference": reference}
    (folder / "results.json").write_text(json.dumps(doc))
    return folder


def row(label: str, unit: str, higher: bool, kafka: list[float], odradek: list[float]) -> dict:
    return {"scenario": "s", "label": label, "unit": unit, "higher_is_better": higher,
            "values": {"Kafka": kafka, "Odradek": odradek}}  # fmt: skip


def refs(kafka_ms: float, odradek_ms: float) -> list[dict]:
    return [{"kind": "single", "repeat": i, "system": s, "ms": ms, "steal_pct": 1.0}
            for i in (1, 2) for s, ms in (("Kafka", kafka_ms), ("Odradek", odradek_ms))]  # fmt: skip


def test_pairs_count_the_rows_and_the_reference_work_that_moved(tmp_path: Path, capsys):
    one = write_run(tmp_path / "one", [
        row("produce", "rec/s", True, [100, 100], [200, 200]),
        row("consume", "rec/s", True, [100, 100], [100, 100]),
        row("offered rate", "rec/s", True, [10, 10], [10, 10]),
        row("p99", "ms", False, [5, 5], [1, 1]),
    ], refs(100, 100))  # fmt: skip
    two = write_run(tmp_path / "two", [
        row("produce", "rec/s", True, [105, 105], [150, 150]),  # Odradek 33% lower
        row("consume", "rec/s", True, [80, 80], [95, 95]),  # Kafka 25% lower
        row("offered rate", "rec/s", True, [20, 20], [20, 20]),  # not a throughput row
        row("p99", "ms", False, [9, 9], [3, 3]),  # a latency row
    ], refs(100, 130))  # fmt: skip
    assert compare.main([str(one), str(two / "results.json")]) == 0
    out = capsys.readouterr().out
    assert "- Kafka: 1 of 2 throughput rows moved more than 10%: consume 25%" in out
    assert "- Odradek: 1 of 2 throughput rows moved more than 10%: produce 33%" in out
    assert "the reference work: 1 of 2 (kind, system) medians moved more than 10%: " \
        "single/Odradek 100/130 ms" in out  # fmt: skip
    assert "| s | produce | rec/s ↑ | 100 / 105 | 200 / 150 | 2.00 / 1.43 | 33% | 5% |" in out
    assert "| s | p99 | ms ↓ | 5.00 / 9.00 | 1.00 / 3.00 | 0.20 / 0.33 | 200% | 80% |" in out
    assert "commit abc1234, 27.5 min; reference work 100 ms (100–100); steal 1.0%" in out


def test_the_noise_section_prices_the_spread_within_the_runs(tmp_path: Path, capsys):
    """A row whose repeats agree cannot move from noise; one whose repeats swing by ±10%
    moves two medians of four by more than 10% about three times in ten (normal noise), less
    often with more repeats."""
    steady, swinging = [100.0] * 4, [90.0, 110.0, 90.0, 110.0]
    one = write_run(tmp_path / "one", [row("produce", "rec/s", True, swinging, steady)], [])
    two = write_run(tmp_path / "two", [row("produce", "rec/s", True, swinging, steady)], [])
    assert compare.main([str(one), str(two)]) == 0
    out = capsys.readouterr().out
    line = next(x for x in out.splitlines() if x.startswith("| produce | 4 |"))
    cells = [c.strip() for c in line.split("|")[3:9]]
    kafka_sd, kafka_p, kafka_resampled, odradek_sd, odradek_p, odradek_resampled = cells
    assert (odradek_sd, odradek_p, odradek_resampled) == ("0.0%", "0.00", "0.00")
    assert float(kafka_resampled) > 0.1
    # each repeat log(110/90) / 2 off its run's mean; eight of them, six degrees of freedom
    assert kafka_sd == "11.6%"
    assert 0.25 < float(kafka_p) < 0.32
    assert "- Odradek: moved in the pairs of runs: 0 of 1; from the noise alone, at the runs' " \
        "repeats: 0.0 rows expected to move, 100% chance that none does" in out  # fmt: skip
    kafka = next(x for x in out.splitlines() if x.startswith("- Kafka: moved in the pairs"))
    chances = [float(part.split(" rows expected")[0].split(": ")[-1])
               for part in kafka.split(";") if "rows expected" in part]  # fmt: skip
    assert chances == sorted(chances, reverse=True) and chances[-1] <= 0.1  # 4, then 8 and 16


def test_the_median_of_normal_draws_spreads_as_known():
    assert abs(compare.median_sd(1) - 1.0) < 0.02
    assert abs(compare.median_sd(4) - 0.546) < 0.02  # the mean of the middle two of four
    assert compare.chance_moved(0.0, 4) == 0.0


def test_resampling_keeps_the_shape_of_the_noise():
    """Noise made of an occasional slow repeat (one in four at 30% below) moves two medians of
    four, where two slow repeats already shift the median, more often than two of five; a row
    whose repeats agree never moves."""
    slow_one_in_four = [0.075, 0.075, 0.075, -0.225] * 4
    at_four = compare.chance_moved_resampled(slow_one_in_four, 4)
    at_five = compare.chance_moved_resampled(slow_one_in_four, 5)
    assert 0.1 < at_four < 0.6
    assert at_five < at_four * 0.8
    assert compare.chance_moved_resampled([0.0] * 8, 4) == 0.0
    assert compare.chance_moved_resampled(slow_one_in_four, 4) == at_four  # seeded
