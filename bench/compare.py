"""Two or more bench runs side by side: ``python bench/compare.py RUN RUN [RUN...]``, where a
RUN is a results folder (bench/results/<timestamp>) or its results.json.

Prints a Markdown table of every row's medians per run, each system's spread between runs and
the ratio per run, then for every pair of runs the throughput rows whose median moved by more
than 10%, and the same count for the machine's reference work (its median over a kind's
turns, per system): a fixed slice of work that involves neither system. When the reference
work moves as often as the rows do, the machine moved, not the systems.

Last, the noise within the runs: for every throughput row and system, how far a row's repeats
spread within one run (pooled over all the runs given), and the chance that this spread alone,
with no drift of the machine between runs, moves two runs' medians by more than 10%, at the
runs' number of repeats and at more: once for normal noise of that spread, once drawing the
repeats from the row's own (an occasional slow repeat is not normal noise). Rows moved beyond
that expectation moved with the machine between the runs.
"""

from __future__ import annotations

import argparse
import functools
import itertools
import json
import math
import random
import statistics
import sys
from dataclasses import dataclass
from pathlib import Path

from report import Row, fmt
from systems import SYSTEMS

MOVED = 0.10  # the issue's bound for two runs' medians


@dataclass
class Run:
    name: str
    meta: dict
    rows: dict[tuple[str, str], Row]
    reference: list[dict]

    @classmethod
    def load(cls, path: Path) -> Run:
        file = path / "results.json" if path.is_dir() else path
        doc = json.loads(file.read_text())
        rows = {}
        for item in doc["rows"]:
            row = Row(item["scenario"], item["label"], item["unit"], item["higher_is_better"],
                      item.get("values", {}), item.get("errors", {}), item.get("note", ""))  # fmt: skip
            rows[(row.scenario, row.label)] = row
        return cls(file.parent.name, doc.get("meta", {}), rows, doc.get("reference", []))

    def median(self, key: tuple[str, str], system: str) -> float | None:
        row = self.rows.get(key)
        summary = row.summary(system) if row else None
        return summary[0] if summary else None

    def reference_groups(self) -> dict[tuple[str, str], float]:
        """The reference work's median per (kind, system): what a row's four turns met."""
        groups: dict[tuple[str, str], list[float]] = {}
        for entry in self.reference:
            groups.setdefault((entry["kind"], entry["system"]), []).append(entry["ms"])
        return {k: statistics.median(v) for k, v in groups.items()}


def is_throughput(row: Row) -> bool:
    """The rows the issue's spread bound is about: rates, not the offered one."""
    return row.higher_is_better and row.unit in ("rec/s", "MB/s") and "offered" not in row.label


def moved(a: float | None, b: float | None) -> float | None:
    if not a or not b:
        return None
    return abs(a - b) / min(a, b)


def spread(values: list[float | None]) -> str:
    present = [v for v in values if v]
    if len(present) < 2:
        return "–"
    return f"{(max(present) - min(present)) / min(present) * 100:.0f}%"


def table(runs: list[Run]) -> str:
    keys: list[tuple[str, str]] = []
    for run in runs:
        keys += [k for k in run.rows if k not in keys]
    each = " / ".join(f"run {i + 1}" for i in range(len(runs)))
    lines = [
        f"| scenario | measurement | unit | Kafka {each} | Odradek {each} | Odradek/Kafka {each} "
        "| Odradek spread | Kafka spread |",
        "|---|---|---|---:|---:|---:|---:|---:|",
    ]
    for key in keys:
        row = next(run.rows[key] for run in runs if key in run.rows)
        medians = {s: [run.median(key, s) for run in runs] for s in SYSTEMS}
        ratios = []
        for run in runs:
            r = run.rows.get(key)
            x = r.ratio() if r else None
            ratios.append(
                "–" if x is None else (f"**{x:.2f}**" if r.odradek_behind() else f"{x:.2f}")
            )
        cells = {s: " / ".join("–" if v is None else fmt(v) for v in medians[s]) for s in SYSTEMS}
        unit = f"{row.unit} {'↑' if row.higher_is_better else '↓'}"
        lines.append(
            f"| {key[0]} | {key[1]} | {unit} | {cells['Kafka']} | {cells['Odradek']} "
            f"| {' / '.join(ratios)} | {spread(medians['Odradek'])} | {spread(medians['Kafka'])} |"
        )
    return "\n".join(lines) + "\n"


def moved_rows(a: Run, b: Run, system: str) -> list[tuple[tuple[str, str], float]]:
    """The throughput rows of both runs whose `system` medians moved by more than MOVED."""
    out = []
    for key, row in a.rows.items():
        d = moved(a.median(key, system), b.median(key, system))
        if key in b.rows and is_throughput(row) and d is not None and d > MOVED:
            out.append((key, d))
    return out


def pairs(runs: list[Run]) -> str:
    out = []
    for (i, a), (j, b) in itertools.combinations(enumerate(runs), 2):
        out.append(f"Runs {i + 1} and {j + 1}:")
        for system in SYSTEMS:
            rows = [f"{key[1]} {d * 100:.0f}%" for key, d in moved_rows(a, b, system)]
            total = sum(1 for k, r in a.rows.items() if is_throughput(r) and k in b.rows)
            listed = f": {'; '.join(rows)}" if rows else ""
            out.append(f"- {system}: {len(rows)} of {total} throughput rows moved more than "
                       f"{MOVED:.0%}{listed}")  # fmt: skip
        ra, rb = a.reference_groups(), b.reference_groups()
        common = sorted(set(ra) & set(rb))
        ref = [f"{k}/{s} {ra[(k, s)]:.0f}/{rb[(k, s)]:.0f} ms" for k, s in common
               if (d := moved(ra[(k, s)], rb[(k, s)])) is not None and d > MOVED]  # fmt: skip
        listed = f": {'; '.join(ref)}" if ref else ""
        out.append(f"- the reference work: {len(ref)} of {len(common)} (kind, system) medians "
                   f"moved more than {MOVED:.0%}{listed}")  # fmt: skip
    return "\n".join(out) + "\n"


MORE_REPEATS = (8, 16)  # what the noise section also prices (normal noise)
RESAMPLED_AT = (4, 5, 8)  # and resampled


def within_run(runs: list[Run], key: tuple[str, str], system: str) -> tuple[list[float], int]:
    """Each repeat's log(value) less its run's mean, scaled by sqrt(n / (n - 1)) so that the
    pooled list spreads as single repeats do, over the runs with two repeats or more; and the
    repeats per run (the most common)."""
    residuals, sizes = [], []
    for run in runs:
        row = run.rows.get(key)
        logs = [math.log(v) for v in (row.values.get(system, []) if row else []) if v > 0]
        if len(logs) < 2:
            continue
        mean = statistics.fmean(logs)
        scale = math.sqrt(len(logs) / (len(logs) - 1))
        residuals += [(x - mean) * scale for x in logs]
        sizes.append(len(logs))
    return residuals, statistics.mode(sizes) if sizes else 0


RESAMPLES = 4000


def chance_moved_resampled(residuals: list[float], repeats: int) -> float:
    """The chance that two runs' medians of `repeats` repeats differ by more than MOVED, each
    repeat drawn from the repeats' own residuals (seeded). Unlike the normal model this keeps
    their shape: a row whose noise is an occasional slow repeat moves the median of four (two
    slow ones already shift it) far more often than the median of five."""
    if not residuals or max(residuals) == min(residuals):
        return 0.0
    rng = random.Random(repeats * 7919 + len(residuals))
    bound = math.log1p(MOVED)
    hits = sum(
        abs(statistics.median(rng.choices(residuals, k=repeats))
            - statistics.median(rng.choices(residuals, k=repeats))) > bound
        for _ in range(RESAMPLES)
    )  # fmt: skip
    return hits / RESAMPLES


@functools.cache
def median_sd(repeats: int) -> float:
    """The standard deviation of the median of `repeats` draws from a standard normal
    distribution (by simulation, seeded: the same figure every time)."""
    rng = random.Random(repeats)
    medians = [statistics.median(rng.gauss(0, 1) for _ in range(repeats)) for _ in range(20_000)]
    return statistics.pstdev(medians)


def chance_moved(sd: float, repeats: int) -> float:
    """The chance that two runs' medians of `repeats` repeats, each repeat off by normal noise
    of `sd` (log scale), differ by more than MOVED."""
    spread_of_difference = math.sqrt(2) * median_sd(repeats) * sd
    if spread_of_difference == 0:
        return 0.0
    bound = math.log1p(MOVED) / spread_of_difference
    return 2 * (1 - statistics.NormalDist().cdf(bound))


def noise(runs: list[Run]) -> str:
    keys = [k for k, row in runs[0].rows.items() if is_throughput(row)]
    head = " | ".join(f"{s} within a run | {s} P(moved) | {s} resampled" for s in SYSTEMS)
    lines = [
        "The noise within the runs (the repeats' spread around each run's mean, pooled over the "
        f"runs) and the chance it alone moves two runs' medians by more than {MOVED:.0%}, "
        "for normal noise and resampled from the repeats themselves:",
        "",
        f"| measurement | repeats | {head} |",
        "|---|---:|" + "---:|---:|---:|" * len(SYSTEMS),
    ]
    # per system and model: each row's chance at the runs' repeats (key 0) and at more
    expected: dict[tuple[str, str], dict[int, list[float]]] = {}
    for key in keys:
        cells, repeats = [], 0
        for system in SYSTEMS:
            residuals, repeats_here = within_run(runs, key, system)
            if not residuals:
                cells += ["–", "–", "–"]
                continue
            # the pooled standard deviation of log(value) around each run's mean
            sd, repeats = math.sqrt(sum(r * r for r in residuals) / len(residuals)), repeats_here
            normal = expected.setdefault((system, "normal"), {})
            for k, at in ((0, repeats), *((k, k) for k in MORE_REPEATS)):
                normal.setdefault(k, []).append(chance_moved(sd, at))
            resampled = expected.setdefault((system, "resampled"), {})
            for k, at in ((0, repeats), *((k, k) for k in RESAMPLED_AT)):
                resampled.setdefault(k, []).append(chance_moved_resampled(residuals, at))
            cells += [f"{sd * 100:.1f}%", f"{chance_moved(sd, repeats):.2f}",
                      f"{resampled[0][-1]:.2f}"]  # fmt: skip
        lines.append(f"| {key[1]} | {repeats or '–'} | {' | '.join(cells)} |")
    lines.append("")
    for system in SYSTEMS:
        if (system, "normal") not in expected:
            continue
        observed = [len(moved_rows(a, b, system)) for a, b in itertools.combinations(runs, 2)]
        for model, said in (("normal", "from the noise alone"),
                            ("resampled", "resampled from the repeats")):  # fmt: skip
            by_repeats = []
            for k, chances in sorted(expected[(system, model)].items()):
                none_moved = math.prod(1 - c for c in chances)
                at = "the runs' repeats" if k == 0 else f"{k} repeats each"
                by_repeats.append(f"at {at}: {sum(chances):.1f} rows expected to move, "
                                  f"{none_moved:.0%} chance that none does")  # fmt: skip
            start = f"moved in the pairs of runs: {', '.join(map(str, observed))} of " \
                f"{len(keys)}; " if model == "normal" else ""  # fmt: skip
            lines.append(f"- {system}: {start}{said}, {'; '.join(by_repeats)}")
    return "\n".join(lines) + "\n"


def header(runs: list[Run]) -> str:
    out = []
    for i, run in enumerate(runs):
        m = run.meta
        ms = [e["ms"] for e in run.reference]
        steal = [e["steal_pct"] for e in run.reference if "steal_pct" in e]
        speed = (
            f"; reference work {statistics.median(ms):.0f} ms ({min(ms):.0f}–{max(ms):.0f})"
            if ms
            else ""
        )
        stolen = (
            f"; steal {statistics.median(steal):.1f}% ({min(steal):.1f}–{max(steal):.1f})"
            if steal
            else ""
        )
        out.append(f"- run {i + 1}: {run.name}, commit {m.get('commit', '?')}, "
                   f"{m.get('minutes', '?')} min{speed}{stolen}")  # fmt: skip
    return "\n".join(out) + "\n"


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description="bench runs side by side")
    parser.add_argument("runs", nargs="+", type=Path, help="results folders or results.json")
    args = parser.parse_args(argv)
    if len(args.runs) < 2:
        parser.error("give two runs or more")
    runs = [Run.load(p) for p in args.runs]
    print(header(runs))
    print(table(runs))
    print(pairs(runs), end="")
    print()
    print(noise(runs), end="")
    return 0


if __name__ == "__main__":
    sys.exit(main())
