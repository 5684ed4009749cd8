"""Results of a bench run: rows of repeated measurements per system, their median, min and max,
the Markdown table, the JSON file and the PNG chart."""

from __future__ import annotations

import json
import statistics
import textwrap
from dataclasses import asdict, dataclass, field
from pathlib import Path

from systems import SYSTEMS


@dataclass
class Row:
    """One line of the table: a quantity measured `repeats` times on each system."""

    scenario: str
    label: str
    unit: str
    higher_is_better: bool
    values: dict[str, list[float]] = field(default_factory=dict)
    errors: dict[str, str] = field(default_factory=dict)
    note: str = ""

    def summary(self, system: str) -> tuple[float, float, float] | None:
        vals = self.values.get(system)
        if not vals:
            return None
        return statistics.median(vals), min(vals), max(vals)

    def ratio(self) -> float | None:
        """Odradek's median over Kafka's."""
        k, o = self.summary("Kafka"), self.summary("Odradek")
        if k is None or o is None or k[0] == 0:
            return None
        return o[0] / k[0]

    def paired_ratio(self) -> float | None:
        """The median of each repeat's Odradek/Kafka: a repeat's two values were measured
        seconds apart (bench/baton.py), so the machine's slow and fast stretches, which move
        both systems' medians from one run to the next, mostly cancel. None unless both
        systems have every repeat (a failed one would pair the wrong values)."""
        k, o = self.values.get("Kafka"), self.values.get("Odradek")
        if not k or not o or len(k) != len(o) or 0 in k:
            return None
        return statistics.median(b / a for a, b in zip(k, o, strict=True))

    def odradek_behind(self) -> bool:
        r = self.ratio()
        if r is None:
            return False
        return r < 1 if self.higher_is_better else r > 1


class Results:
    def __init__(self) -> None:
        self.rows: dict[tuple[str, str], Row] = {}
        # the machine's speed before every turn of a system (bench/run.py reference)
        self.reference: list[dict] = []

    def row(self, scenario: str, label: str, unit: str, higher: bool, note: str = "") -> Row:
        key = (scenario, label)
        if key not in self.rows:
            self.rows[key] = Row(scenario, label, unit, higher, note=note)
        return self.rows[key]

    def add(
        self, scenario: str, label: str, unit: str, higher: bool, system: str, value: float
    ) -> None:
        self.row(scenario, label, unit, higher).values.setdefault(system, []).append(value)

    def error(
        self, scenario: str, label: str, unit: str, higher: bool, system: str, message: str
    ) -> None:
        row = self.row(scenario, label, unit, higher)
        row.errors.setdefault(system, " ".join(message.split())[:300])

    def to_json(self) -> list[dict]:
        out = []
        for row in self.rows.values():
            item = asdict(row)
            for system in SYSTEMS:
                s = row.summary(system)
                item[system] = (
                    None if s is None else dict(zip(("median", "min", "max"), s, strict=True))
                )
            item["ratio"] = row.ratio()
            item["paired_ratio"] = row.paired_ratio()
            out.append(item)
        return out


def fmt(value: float) -> str:
    if value >= 1000:
        return f"{value:,.0f}"
    if value >= 100:
        return f"{value:.0f}"
    if value >= 10:
        return f"{value:.1f}"
    return f"{value:.2f}"


def cell(row: Row, system: str) -> str:
    s = row.summary(system)
    if s is None:
        return "error" if system in row.errors else "–"
    median, low, high = s
    if len(row.values[system]) == 1:
        return fmt(median)
    return f"{fmt(median)} ({fmt(low)}–{fmt(high)})"


def table(results: Results) -> str:
    lines = [
        "| scenario | measurement | unit | Kafka | Odradek | Odradek/Kafka | paired |",
        "|---|---|---|---:|---:|---:|---:|",
    ]
    for row in results.rows.values():
        r = row.ratio()
        ratio = "–" if r is None else f"{r:.2f}"
        if r is not None and row.odradek_behind():
            ratio = f"**{ratio}**"
        p = row.paired_ratio()
        paired = "–" if p is None or len(row.values["Kafka"]) < 2 else f"{p:.2f}"
        better = "↑" if row.higher_is_better else "↓"
        lines.append(
            f"| {row.scenario} | {row.label} | {row.unit} {better} | {cell(row, 'Kafka')} "
            f"| {cell(row, 'Odradek')} | {ratio} | {paired} |"
        )
    notes = []
    for row in results.rows.values():
        for system, message in row.errors.items():
            notes.append(f"- {system}, {row.scenario} / {row.label}: {message}")
        if row.note:
            notes.append(f"- {row.scenario} / {row.label}: {row.note}")
    if notes:
        lines += ["", *notes]
    return "\n".join(lines) + "\n"


def chart(results: Results, path: Path, title: str) -> bool:
    """A horizontal bar per row: Odradek's median over Kafka's, on a log scale, green where
    Odradek is ahead and red where it is behind. False when matplotlib is not installed."""
    try:
        import matplotlib

        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
    except ImportError:
        return False
    rows = [r for r in results.rows.values() if r.ratio()]
    if not rows:
        return False
    labels = [textwrap.shorten(f"{r.scenario}: {r.label}", 70, placeholder="…") for r in rows]
    ratios = [r.ratio() or 1.0 for r in rows]
    colors = ["#c0392b" if r.odradek_behind() else "#27ae60" for r in rows]
    fig, ax = plt.subplots(figsize=(11, 0.32 * len(rows) + 1.5))
    y = list(range(len(rows)))[::-1]
    ax.barh(y, ratios, color=colors, left=0)
    ax.set_xscale("log")
    ax.axvline(1.0, color="black", linewidth=0.8)
    ax.set_yticks(y, labels, fontsize=7)
    ax.set_xlabel("Odradek / Kafka (median; red: Odradek behind, green: ahead or equal)")
    ax.set_title(title, fontsize=9)
    for yi, ratio in zip(y, ratios, strict=True):
        ax.text(ratio, yi, f" {ratio:.2f}", va="center", fontsize=6)
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    plt.close(fig)
    return True


def reference(results: Results) -> str:
    """One sentence on how fast the machine was during each system's turns."""
    parts = []
    for system in SYSTEMS:
        ms = [r["ms"] for r in results.reference if r["system"] == system]
        if ms:
            parts.append(f"{system}'s turns {statistics.median(ms):.0f} ms "
                         f"({min(ms):.0f}–{max(ms):.0f})")  # fmt: skip
    if not parts:
        return ""
    # Both systems' turns of a repeat span the same stretch (they take turns phase by phase):
    # one figure for the two.
    pct = [r["steal_pct"] for r in results.reference if "steal_pct" in r]
    stolen = (f" CPU time the host gave to other guests during the turns (steal): "
              f"{statistics.median(pct):.1f}% ({min(pct):.1f}–{max(pct):.1f})."
              if pct else "")  # fmt: skip
    return ("The machine's reference work (the same slice of work timed before every turn): "
            f"{', '.join(parts)}.{stolen}\n")  # fmt: skip


def write(results: Results, folder: Path, meta: dict, header: str) -> list[Path]:
    folder.mkdir(parents=True, exist_ok=True)
    md = folder / "results.md"
    md.write_text(header + reference(results) + "\n" + table(results))
    js = folder / "results.json"
    doc = {"meta": meta, "rows": results.to_json(), "reference": results.reference}
    js.write_text(json.dumps(doc, indent=2) + "\n")
    written = [md, js]
    png = folder / "results.png"
    if chart(results, png, f"Odradek vs Apache Kafka 3.9 — {meta['date']}"):
        written.append(png)
    return written
