"""Plot end-to-end proving latency against constraint count, beside the published anchors (issue #6).

Reads one or more ``pipelines/bench_e2e.py`` result files (default: every ``bench/results/*e2e*.json``)
and writes two PNGs with matplotlib's Agg backend:

* ``--out`` (default ``docs/e2e_latency.png``): median latency (ms, log y) against constraints (log x),
  one line per circuit shape (key prefix ``chain_`` / ``bits_``) and input file, labelled by the file's
  date, commit and device; the anchors (ICICLE-Snark, rapidsnark, snarkjs) as labelled points and the
  one-H200 targets as stars.
* ``--stages-out`` (default ``docs/e2e_stages.png``): for each ``chain_`` key size, from the newest
  file that measured it, a 100% bar of each stage's share (``profiled_stages_ms``, one MSM at a
  time, where the file has it; otherwise ``stages_ms``, whose MSM stages overlap in newer builds)
  with the total above it.

matplotlib is a dev tool only (``pip install distprove[bench]``)::

    python pipelines/plot_e2e.py bench/results/<date>_e2e_<host>_run1.json
"""

from __future__ import annotations

import argparse
import json
import sys
from dataclasses import dataclass
from pathlib import Path

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))

from distprove.errors import DistproveError, FormatError  # noqa: E402

DPI = 100
ANCHORS = [
    # (label, constraints, latency ms)
    ("ICICLE-Snark (RTX 4090)", 1_600_000, 190.0),
    ("ICICLE-Snark (RTX 4090)", 3_200_000, 350.0),
    ("rapidsnark (CPU)", 1_600_000, 3_700.0),
    ("snarkjs (CPU)", 1_600_000, 19_000.0),
]
"""Published latencies that issue #6 compares against."""
ANCHOR_MARKERS = ["D", "v", "P"]
"""Marker of each anchor label, in ANCHORS order."""
TARGETS = [(1_600_000, 120.0), (3_200_000, 220.0)]
"""distprove's latency targets on one H200 (constraints, ms)."""
SHAPE_STYLE = {"chain": ("-", "o"), "bits": ("--", "s")}
"""Line style and marker per circuit shape (key prefix); other shapes get a dotted line."""


@dataclass
class Run:
    """One bench_e2e result file: its label and its synthetic-key rows."""

    path: Path
    date: str
    label: str
    rows: list[dict]


def load_run(path: Path) -> Run:
    """Read one bench_e2e JSON file; FormatError if it is not one or has no usable synthetic rows."""
    try:
        data = json.loads(path.read_text())
    except (OSError, ValueError) as err:
        raise FormatError(path, f"cannot read bench_e2e JSON ({err})") from err
    if not isinstance(data, dict) or not isinstance(data.get("synthetic"), list):
        raise FormatError(path, "no 'synthetic' list: not a bench_e2e result")
    rows = [r for r in data["synthetic"]
            if isinstance(r, dict) and r.get("constraints") and "median_total_ms" in r and "key" in r]
    if not rows:
        raise FormatError(path, "no synthetic row with key, constraints and median_total_ms")
    date = str(data.get("date", ""))
    commit = str(data.get("commit") or path.stem)
    if len(commit) == 40 and all(ch in "0123456789abcdef" for ch in commit):
        commit = commit[:7]  # a full hash (DISTPROVE_GIT_COMMIT) labels like git's short form
    parts = [date[:10], commit, data.get("device", "")]
    return Run(path, date, " ".join(p for p in parts if p), rows)


def _by_label(anchors: list[tuple[str, int, float]]) -> dict[str, list[tuple[int, float]]]:
    """Anchor points grouped by label, in first-seen order."""
    groups: dict[str, list[tuple[int, float]]] = {}
    for label, n, ms in anchors:
        groups.setdefault(label, []).append((n, ms))
    return groups


def shape(key: str) -> str:
    """The circuit shape of a key folder name: its prefix before the first underscore."""
    return key.split("_", 1)[0]


def fmt_constraints(n: float) -> str:
    """1600000 -> '1.6 M', 65534 -> '66 k'."""
    return f"{n / 1e6:.3g} M" if n >= 1e6 else f"{n / 1e3:.0f} k"


def plot_latency(runs: list[Run], out: Path) -> None:
    """Median latency against constraints per shape and run, with the anchors and targets; write ``out``."""
    fig, ax = plt.subplots(figsize=(12, 6))
    ax.set_xscale("log")
    ax.set_yscale("log")
    colors = plt.rcParams["axes.prop_cycle"].by_key()["color"]
    for i, run in enumerate(runs):
        for sh in sorted({shape(r["key"]) for r in run.rows}):
            rows = sorted((r for r in run.rows if shape(r["key"]) == sh), key=lambda r: r["constraints"])
            ls, marker = SHAPE_STYLE.get(sh, (":", "^"))
            ax.plot([r["constraints"] for r in rows], [r["median_total_ms"] for r in rows],
                    linestyle=ls, marker=marker, color=colors[i % len(colors)], label=f"{sh} · {run.label}")
    for (label, points), marker in zip(_by_label(ANCHORS).items(), ANCHOR_MARKERS):
        ax.plot(*zip(*points), linestyle="none", marker=marker, markersize=7, color="black", zorder=3,
                label=label)
        for n, ms in points:
            ax.annotate(f"{ms:g} ms", (n, ms), textcoords="offset points", xytext=(7, 2), fontsize=8)
    ax.plot(*zip(*TARGETS), linestyle="none", marker="*", markersize=13, color="tab:red", zorder=3,
            label="distprove target, one H200")
    for n, ms in TARGETS:
        ax.annotate(f"{ms:g} ms", (n, ms), textcoords="offset points", xytext=(7, -10), fontsize=8,
                    color="tab:red")
    left, _ = ax.get_xlim()
    widest = max([n for _, n, _ in ANCHORS] + [r["constraints"] for run in runs for r in run.rows])
    ax.set_xlim(left, 2.2 * widest)  # every point, and room for the value labels
    ax.set_xlabel("constraints")
    ax.set_ylabel("median latency of one proof (ms)")
    ax.set_title("Groth16 BN254 proof latency: distprove GPU against published anchors")
    ax.grid(True, which="both", alpha=0.3)
    ax.legend(fontsize=7, loc="center left", bbox_to_anchor=(1.01, 0.5))  # beside the axes: many runs
    fig.tight_layout()
    fig.savefig(out, dpi=DPI)
    plt.close(fig)


def plot_stages(runs: list[Run], out: Path) -> None:
    """Stacked stage breakdown of each ``chain`` key size from the newest of ``runs`` (ordered by
    date) that measured it, one MSM at a time where that file has it; write ``out``."""
    newest: dict[int, tuple[Run, dict]] = {}
    for run in runs:
        for r in run.rows:
            if shape(r["key"]) == "chain":
                newest[r["constraints"]] = (run, r)
    if not newest:
        raise FormatError(runs[-1].path, "no chain_ key to break down by stage")
    picked = [newest[n] for n in sorted(newest)]
    rows = [r for _, r in picked]
    stages: list[str] = []
    for r in rows:
        field = "profiled_stages_ms" if "profiled_stages_ms" in r else "stages_ms"
        stages += [s for s in r[field] if s != "total" and s not in stages]
    def stage_ms(r: dict) -> dict:
        return r.get("profiled_stages_ms", r["stages_ms"])

    fig, ax = plt.subplots(figsize=(9, 5))
    xs = range(len(rows))
    sums = [sum(v for k, v in stage_ms(r).items() if k != "total") for r in rows]
    bottom = [0.0] * len(rows)
    cmap = plt.get_cmap("tab10")
    for j, s in enumerate(stages):  # each stage's share of the proof, so sizes 100x apart compare
        h = [100 * stage_ms(r).get(s, 0.0) / t for r, t in zip(rows, sums)]
        ax.bar(xs, h, bottom=bottom, color=cmap(j % 10), label=s, width=0.6)
        bottom = [b + v for b, v in zip(bottom, h)]
    for x, r in zip(xs, rows):
        total = r.get("profiled_total_ms", r["median_total_ms"])
        ax.annotate(f"{total:.0f} ms", (x, 100), textcoords="offset points", xytext=(0, 3), ha="center", fontsize=8)
    ax.set_xticks(list(xs), [f"{r['key']}\n{fmt_constraints(r['constraints'])}\n" + "\n".join(run.label.split()[:2])
                             for run, r in picked], fontsize=7)  # date and commit of the run
    ax.set_ylim(0, 108)
    ax.set_ylabel("share of the proof's stage time (%)")
    ax.set_title("Where a proof's time goes: chain keys, the newest run of each size\n"
                 "(one MSM at a time where measured; total above each bar)", fontsize=10)
    ax.legend(fontsize=8, loc="center left", bbox_to_anchor=(1.01, 0.5))
    ax.grid(True, axis="y", alpha=0.3)
    fig.tight_layout()
    fig.savefig(out, dpi=DPI)
    plt.close(fig)


def _committed_runs() -> list[Run]:
    """The bench_e2e results among bench/results/*e2e*.json; other files that match the pattern
    (e.g. the pool-cap runs of bench_e2e.py --pool-caps) are skipped with a note."""
    runs = []
    for path in sorted((REPO / "bench" / "results").glob("*e2e*.json")):
        try:
            runs.append(load_run(path))
        except FormatError as err:
            print(f"skipped: {err}")
    if not runs:
        raise FormatError(REPO / "bench" / "results", "no bench_e2e result among *e2e*.json")
    return runs


def main(argv: list[str] | None = None) -> None:
    """Command line: plot the given (or all committed) bench_e2e result files."""
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("files", nargs="*", type=Path,
                    help="bench_e2e JSON files (default: bench/results/*e2e*.json)")
    ap.add_argument("--out", type=Path, default=REPO / "docs" / "e2e_latency.png")
    ap.add_argument("--stages-out", type=Path, default=REPO / "docs" / "e2e_stages.png")
    args = ap.parse_args(argv)
    try:
        runs = sorted([load_run(p) for p in args.files] if args.files else _committed_runs(), key=lambda r: r.date)
        plot_latency(runs, args.out)
        plot_stages(runs, args.stages_out)
    except DistproveError as err:
        sys.exit(f"error: {err}")
    print(f"wrote {args.out} and {args.stages_out} from {len(runs)} file(s)")


if __name__ == "__main__":
    main()
