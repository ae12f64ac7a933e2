"""Model 2, 4 and 8 GPUs from a 1-GPU measurement (issue #10): a model, not a measurement.

8-GPU machines are not lent (a 4-GPU one was, once), so this script extends what one H200 measured
(``bench/results/``) with the work per GPU, the measured per-task and per-batch costs, and byte
counts over stated (assumed) link bandwidths:

* **Batch throughput** (data mode, no pairing check), keys 2^20 and 2^22: per proof, a worker runs
  its tasks (the measured stage seconds of the 1-GPU batch) and idles between them (the rest of
  the 1-GPU wall time after the per-batch fixed cost, which is one lone proof's latency minus its
  tasks). 2^22 adds the in-process (e2e) time difference between the keys, proofs as prove()
  runs them (the MSMs overlapped): Dask's per-proof overhead is taken as independent of the key's
  size, which a measured 2^22 batch checks. N GPUs take ceil(proofs / N) proofs each;
  the scheduler (``tasks_per_proof`` tasks at ``scheduler_task_s`` each) is a bound.
* **Latency of one 2^24 proof, window-split MSMs** (the split planner as it runs): the prepare on
  one GPU (e2e witness + gather + H, plus the prepare task's measured overhead), then every MSM
  cut into ``windows-per-task`` window ranges pinned round-robin, each costing its share of the
  e2e MSM time plus the measured per-task overhead; a worker other than the preparer reads the
  witness file again and, for its H tasks, recomputes H (gather and NTT: GPU keys as the code runs
  now) or, in files measured before that, fetched the H scalars the prepare downloaded over Dask
  and uploaded them for each H task; then the reducer (measured) on tiny window sums. A what-if
  moves the witness and H device to device instead. The four-step H across GPUs
  (3 vectors of n scalars per transpose) is costed beside it.
* **ptau prepare, power 20**: the level costs (``*ptau-levels*.json``, fitted ∝ 2^p·(p+1) per
  group) list-scheduled over N workers as :class:`distprove.ptau.LevelFeed` submits them (largest
  first, in-place writes, the ``auto`` blocked split, device twiddles) plus the client's I/O (the
  residual of the 1-GPU run, kept serial). The same scheduler run as the measured code ran (file
  order, in-order writes, host twiddles packed once per worker and level, no blocking) is the check.

Every model is checked against each measurement its inputs hold beyond its own (the batch file's
rows for 2 or 4 workers, batches of larger keys, the prepare's 2-worker run); at 1 GPU it
reproduces its inputs by construction. Writes ``bench/results/<date>_scaling-model.json`` and
prints markdown tables.

    python3 pipelines/model_scaling.py [--results bench/results] [--out FILE] [--dask-gbps 2]
"""

from __future__ import annotations

import argparse
import datetime
import json
import math
import re
import sys
from collections.abc import Sequence
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from distprove import config  # noqa: E402
from distprove.backends.gpu.msm import pick_window  # noqa: E402
from distprove.bn254 import G1, G2, Group  # noqa: E402
from distprove.errors import FormatError  # noqa: E402
from distprove.ptau import LevelTask, blocked_levels, level_tasks  # noqa: E402
from distprove.stages.msm import num_windows  # noqa: E402

GPUS = (1, 2, 4, 8)
MSMS: tuple[tuple[str, Group], ...] = (("A", G1), ("B1", G1), ("B2", G2), ("C", G1), ("H", G1))
SCALAR_BYTES = 32
SUM_BYTES = {"G1": 64, "G2": 128}  # one affine window sum
PTAU_POWER = 20
INPUTS = {
    "batch": "2026-12-01_batch-chain20-64-1gpu-s16_h200.json",
    "batch_large": "2026-12-01_batch-chain22-32-1gpu-s16_h200.json,2026-12-01_batch-chain24-2-split-h-new-r1-s16_h200.json",
    "e2e": "2026-12-01_e2e_h200_run29.json",
    "ptau_levels": "2026-11-30_ptau-levels_2xh200.json",
    "ptau_prepare": "2026-11-30_ptau-prepare-p20-twiddlecache_2xh200.json",
}
"""The measurement of each kind the model starts from (file names under ``--results``, each
replaced by its option): a 2^20 batch without the pairing check on one H200, with its split-mode
latency rows (``--batch``; a file with 2- and 4-GPU rows checks the model against them), 2^22 and
2^24 batches that check how the model carries the 2^20 batch to larger keys (``--batch-large``:
files, or '' for none; the 2^24 one with H recomputed, as split mode runs), e2e stage breakdowns
at 2^20, 2^22 and 2^24 of the batch's commit, ptau level costs, and the power-20 prepare on 1 and
2 GPUs."""


@dataclass(frozen=True)
class Assumed:
    """What the model assumes rather than measures (bytes/s, seconds)."""

    dask_tcp: float = 2e9
    """Worker-to-worker Dask transfer on one host (TCP loopback, pickled host arrays): about
    2.3 GiB/s measured in dask/distributed#5258; not measured here."""
    pcie: float = 25e9
    """Host<->device copy of a pageable numpy array; PCIe Gen5 x16 is 64 GB/s per direction by
    the datasheet (pinned copies get near it); H200.md and KINDS.md give no host-link figure."""
    device_link: float = 450e9
    """GPU to GPU over NVLink 4 (H200 SXM datasheet: 900 GB/s both ways); KINDS.md: how the GPUs
    of the x2/x4/x8 machines are linked is not checked. Used only by the what-if rows."""
    scheduler_task_s: float = 1e-3
    """Scheduler cost per task ("each task suffers about 1ms of overhead", distributed docs)."""
    tasks_per_proof: int = 1
    """Data mode as the batches run: one prove-whole task per proof, which writes it (no pairing
    check)."""


def load(path: Path) -> Any:
    """A results file's JSON; FormatError naming the file if it cannot be read."""
    try:
        return json.loads(path.read_text())
    except (OSError, ValueError) as exc:
        raise FormatError(path, f"cannot read measured results ({exc.__class__.__name__}: {exc})") from None


def need(mapping: Any, key: Any, path: Path) -> Any:
    """``mapping[key]``, or a one-line FormatError naming the file and the missing field."""
    try:
        return mapping[key]
    except (KeyError, IndexError, TypeError):
        raise FormatError(path, f"missing field {key!r}") from None


# ---- measured inputs ----------------------------------------------------------------------------


def batch_rows(batch: dict, path: Path) -> tuple[int, dict[int, dict]]:
    """(log2 of the batch's key size, its rows by worker count); the 1-worker row is required."""
    m = re.search(r"(?:_k|\^)(\d+)", str(need(batch, "key", path)))
    if m is None:
        raise FormatError(path, f"cannot tell the key's size from key {batch['key']!r}")
    rows = {int(need(r, "workers", path)): r for r in need(batch, "rows", path)}
    if 1 not in rows:
        raise FormatError(path, "no row for 1 worker")
    return int(m.group(1)), rows


@dataclass(frozen=True)
class E2e:
    """One e2e key: its sizes and the per-stage seconds of one in-process proof (one MSM at a time)."""

    key: str
    log_n: int
    n_vars: int
    seconds: dict[str, float]
    total_s: float
    overlapped_s: float
    """The proof as prove() runs it (the MSMs overlapped), what a data-mode task does."""

    def msm_points(self, which: str) -> int:
        """Points of MSM ``which`` (C skips w[0..nPublic]: one public input in the dev keys)."""
        return {"H": 1 << self.log_n, "C": self.n_vars - 2}.get(which, self.n_vars)


def e2e_entry(e2e: dict, log_n: int, path: Path) -> E2e:
    """The e2e chain key of domain 2^log_n with a per-MSM breakdown."""
    for entry in need(e2e, "synthetic", path):
        ms = entry.get("profiled_stages_ms") or entry.get("stages_ms", {})
        if entry.get("domain_log2") == log_n and "chain" in entry.get("key", "") and "msm_B2" in ms:
            total = entry.get("profiled_total_ms", entry.get("median_total_ms"))
            overlapped = entry.get("median_total_ms", total)
            return E2e(entry["key"], log_n, int(need(entry, "n_vars", path)), {k: v / 1e3 for k, v in ms.items()}, total / 1e3,
                       overlapped / 1e3)
    raise FormatError(path, f"no chain key of domain 2^{log_n} with per-MSM stages")


def e2e_entries(paths: list[Path], sizes: list[int]) -> dict[int, E2e]:
    """Each size's chain key from the first of ``paths`` that has it (a run at the batch's own
    commit first, then one that adds the sizes it lacks)."""
    docs = [(path, load(path)) for path in paths]
    found = {}
    for n in sizes:
        for path, doc in docs:
            try:
                found[n] = e2e_entry(doc, n, path)
                break
            except FormatError:
                continue
        else:
            raise FormatError(paths[-1], f"no chain key of domain 2^{n} with per-MSM stages")
    return found


# ---- batch throughput (data mode) ---------------------------------------------------------------


@dataclass(frozen=True)
class BatchParams:
    """Per-proof worker seconds of a data-mode batch on one GPU (all measured)."""

    proofs: int
    task_s: float
    """Task seconds per proof (the batch's stage seconds / proofs)."""
    idle_s: float
    """Worker idle per proof between tasks (scheduling round trips)."""
    fixed_s: float
    """Per batch: submit, first hops, collect (one lone proof's latency minus its tasks)."""


def batch_params(row: dict, path: Path) -> BatchParams:
    """The 1-GPU row's per-proof costs."""
    proofs = int(need(row, "proofs", path))
    task_s = sum(need(row, "stage_seconds", path).values()) / proofs
    fixed_s = need(row, "latency_data_s", path) - sum(need(row, "latency_data_stages", path).values())
    idle_s = (need(row, "throughput_wall_s", path) - fixed_s) / proofs - task_s
    return BatchParams(proofs, task_s, idle_s, fixed_s)


def batch_throughput(p: BatchParams, gpus: int, extra_s: float, a: Assumed, proofs: int | None = None) -> dict[str, float]:
    """Proofs per second of a batch of ``proofs`` (default: the measured count) on ``gpus`` GPUs
    (``extra_s``: more in-process seconds per proof than the measured key), with what bounds it."""
    proofs = proofs or p.proofs
    work = p.fixed_s + math.ceil(proofs / gpus) * (p.task_s + p.idle_s + extra_s)
    sched = p.fixed_s + proofs * a.tasks_per_proof * a.scheduler_task_s
    wall = max(work, sched)
    return {
        "proofs_per_s": proofs / wall,
        "wall_s": wall,
        "fixed_share": p.fixed_s / wall,
        "scheduler_load": (sched - p.fixed_s) / (wall - p.fixed_s),
    }


# ---- latency of one proof, window-split MSMs ----------------------------------------------------


def msm_tasks(e: E2e, windows_per_task: int) -> list[tuple[str, int, float]]:
    """(MSM, windows, seconds of MSM work) of each split-mode task in the graph's order."""
    tasks = []
    for which, group in MSMS:
        w_count = num_windows(pick_window(e.msm_points(which), group))
        for lo in range(0, w_count, windows_per_task):
            windows = min(windows_per_task, w_count - lo)
            tasks.append((which, windows, e.seconds[f"msm_{which}"] * windows / w_count))
    return tasks


@dataclass(frozen=True)
class SplitParams:
    """Costs of split mode beyond the in-process stages, from the 1-GPU latency row (measured)."""

    fixed_s: float
    prepare_overhead_s: float
    task_overhead_s: float
    reduce_s: float
    write_s: float
    h_on_host: bool = True
    """How the measured code handed H to split H tasks elsewhere: downloaded by the prepare and
    sent through Dask (True), or recomputed from the witness there (as GPU keys run)."""


@dataclass(frozen=True)
class BatchFile:
    """One bench_batch result: its key's size, rows by worker count, and how its split rows handed
    H over (through Dask from the prepare, or recomputed; a file without ``split_h``: through
    Dask)."""

    path: Path
    key: str
    log_n: int
    rows: dict[int, dict]
    h_on_host: bool


def load_batch(path: Path) -> BatchFile:
    """A bench_batch result file (its 1-worker row required)."""
    doc = load(path)
    log_n, rows = batch_rows(doc, path)
    return BatchFile(path, str(doc["key"]), log_n, rows, doc.get("split_h", "host") == "host")


def split_params(row: dict, e: E2e, a: Assumed, windows_per_task: int, path: Path, h_on_host: bool = True) -> SplitParams:
    """Split-mode costs from one lone proof on one GPU, against the same key's e2e stages."""
    stages = need(row, "latency_split_stages", path)
    tasks = msm_tasks(e, windows_per_task)
    prep_inproc = e.seconds["witness"] + e.seconds["gather"] + e.seconds["ntt"]
    prep_inproc += (SCALAR_BYTES << e.log_n) / a.pcie if h_on_host else 0.0
    return SplitParams(
        fixed_s=need(row, "latency_split_s", path) - sum(stages.values()),
        prepare_overhead_s=need(stages, "prove-prepare", path) - prep_inproc,
        task_overhead_s=(need(stages, "msm-windows", path) - sum(t[2] for t in tasks)) / len(tasks),
        reduce_s=stages.get("reduce", 0.0),
        write_s=stages.get("verify-write", 0.0),
        h_on_host=h_on_host,
    )


def split_latency(sp: SplitParams, e: E2e, gpus: int, a: Assumed, windows_per_task: int, device: bool = False,
                  h_on_host: bool | None = None) -> dict[str, float]:
    """Seconds of one proof in split mode on ``gpus`` GPUs and its parts (they add up to ``total``).

    A worker other than the preparer (worker 0) reads and uploads the witness again for its tasks;
    for its H tasks, with ``h_on_host`` (default: as ``sp`` was measured) it fetches the H scalars
    that the prepare downloaded over Dask and uploads them for each H task, without it (GPU keys
    as the code runs now) it recomputes them once (gather and NTT). ``device``: both vectors go
    GPU to GPU instead (a what-if).
    """
    host = sp.h_on_host if h_on_host is None else h_on_host
    h_bytes, w_bytes = SCALAR_BYTES << e.log_n, SCALAR_BYTES * e.n_vars
    link = a.device_link if device else a.dask_tcp
    work, count, extra = [0.0] * gpus, [0] * gpus, [0.0] * gpus
    h_tasks, has_w = [0] * gpus, [False] * gpus
    sum_bytes = 0
    for i, (which, windows, seconds) in enumerate(msm_tasks(e, windows_per_task)):
        k = i % gpus
        work[k] += seconds
        count[k] += 1
        h_tasks[k] += which == "H"
        has_w[k] |= which != "H"
        sum_bytes += windows * SUM_BYTES["G2" if which == "B2" else "G1"] if k else 0  # the reducer on worker 0
    for k in range(1, gpus):
        if device or host:
            extra[k] += h_bytes / link if count[k] else 0.0
            extra[k] += (w_bytes / link if device else e.seconds["witness"]) if has_w[k] else 0.0
            extra[k] += 0.0 if device else h_tasks[k] * h_bytes / a.pcie
        else:
            extra[k] += e.seconds["witness"] if count[k] else 0.0
            extra[k] += e.seconds["gather"] + e.seconds["ntt"] if h_tasks[k] else 0.0
    crit = max(range(gpus), key=lambda k: work[k] + count[k] * sp.task_overhead_s + extra[k])
    parts = {
        "fixed": sp.fixed_s,
        "prepare": e.seconds["witness"] + e.seconds["gather"] + e.seconds["ntt"] + (h_bytes / a.pcie if host else 0.0)
        + sp.prepare_overhead_s,
        "msm_work_even": sum(work) / gpus,
        "msm_imbalance": work[crit] - sum(work) / gpus,
        "task_overhead": count[crit] * sp.task_overhead_s,
        "transfers": extra[crit],
        "window_sums": sum_bytes / link,
        "reduce": sp.reduce_s,
        "write": sp.write_s,
    }
    return {"total": sum(parts.values()), **parts}


def implied_dask_bw(sp: SplitParams, e: E2e, a: Assumed, windows_per_task: int, measured_s: float) -> float | None:
    """The Dask bandwidth (bytes/s) at which the 2-GPU split latency of ``e`` equals ``measured_s``
    (bisection; None when the model is above it even with free transfers)."""
    def at(bw: float) -> float:
        return split_latency(sp, e, 2, Assumed(**{**asdict(a), "dask_tcp": bw}), windows_per_task)["total"]

    lo, hi = 1e7, 1e13
    if at(hi) > measured_s or at(lo) < measured_s:
        return None
    for _ in range(60):
        mid = math.sqrt(lo * hi)
        lo, hi = (mid, hi) if at(mid) > measured_s else (lo, mid)
    return lo


def fourstep_h_s(e: E2e, gpus: int, link: float) -> float:
    """H by the four-step NTT over ``gpus`` GPUs as graph.submit_h_fourstep moves data: every
    column task's worker fetches the prepare's a, b, c (3·n scalars), two transposes move
    (N-1)/N² of 3·n scalars into each worker, the collect gathers n scalars; the NTT work is split."""
    vec = SCALAR_BYTES << e.log_n
    if gpus == 1:
        return e.seconds["ntt"]
    moved = 3 * vec + 2 * 3 * vec * (gpus - 1) / gpus**2 + vec * (gpus - 1) / gpus
    return e.seconds["ntt"] / gpus + moved / link


# ---- ptau prepare -------------------------------------------------------------------------------


def fit(xs: Sequence[float], ys: Sequence[float]) -> float:
    """Least-squares slope of y = b·x through the origin."""
    x, y = np.asarray(xs, float), np.asarray(ys, float)
    return float(x @ y / (x @ x))


@dataclass(frozen=True)
class PtauCosts:
    """Seconds of one level's pieces on one GPU, fitted to the measured level rows."""

    per_unit: dict[str, float]
    """Level seconds / (2^p·(p+1)) by group (the cost LevelTask.cost ranks by)."""
    host_twiddle_s: float
    """Host twiddle packing per scalar (the measured code; shared by the sections of a level).
    The device twiddle tables that replaced it are timed inside ``level_s`` by bench_ptau.py now;
    level rows without them (the default ``ptau_levels`` input) leave them out, so the model
    takes them as free."""

    def level(self, t: LevelTask) -> float:
        return self.per_unit[t.group.name] * (1 << t.p) * (t.p + 1)


def ptau_costs(rows: list[dict], path: Path) -> PtauCosts:
    """Fit the level costs per group, and the host twiddle rate where the rows carry it."""
    per_unit = {}
    for g in ("G1", "G2"):
        mine = [(1 << need(r, "log_n", path), r["log_n"], need(r, "level_s", path)) for r in rows if r.get("group") == g]
        if not mine:
            raise FormatError(path, f"no {g} level rows")
        per_unit[g] = fit([n * (p + 1) for n, p, _ in mine], [sec for _, _, sec in mine])
    host = [(1 << r["log_n"], r["host_twiddles_s"]) for r in rows if r.get("group") == "G1" and "host_twiddles_s" in r]
    return PtauCosts(per_unit, fit(*zip(*host)) if host else 0.0)


@dataclass
class Piece:
    """One Dask task of a prepare: a whole level, a half of a blocked level, or a column range."""

    level: int
    seconds: float
    priority: float
    deps: tuple[int, ...] = ()
    twiddles_p: int | None = None
    """Level whose host twiddles the worker packs first unless it has them (the measured code)."""


def ptau_pieces(tasks: list[LevelTask], c: PtauCosts, blocked: set[int], columns: int, overhead_s: float,
                a: Assumed, measured_code: bool) -> list[Piece]:
    """The pieces of every level. ``measured_code``: file-order priorities and host twiddles (the
    code the prepare files measured); else largest first with device twiddles, as the code is now.
    Blocked levels: two halves (p/(p+1) of the level's ladder work) and ``columns`` column tasks
    (the last stage, 1/(p+1); each fetches a half over Dask), which outrank every level."""
    top = max(t.cost for t in tasks)
    pieces: list[Piece] = []
    for i, t in enumerate(tasks):
        prio = -i if measured_code else t.cost
        total = c.level(t)
        if i not in blocked:
            pieces.append(Piece(i, total + overhead_s, prio, twiddles_p=t.p if measured_code else None))
            continue
        first = len(pieces)
        pieces += [Piece(i, total * t.p / (t.p + 1) / 2 + overhead_s, prio) for _ in range(2)]
        half_bytes = (1 << (t.p - 1)) * t.group.limbs * 4
        pieces += [
            Piece(i, total / (t.p + 1) / columns + half_bytes / a.dask_tcp + overhead_s, top + t.cost, (first, first + 1))
            for _ in range(columns)
        ]
    return pieces


def schedule(tasks: list[LevelTask], pieces: list[Piece], order: Sequence[int], workers: int, budget: int,
             in_order: bool, host_twiddle_s: float) -> float:
    """Seconds until the last piece is done: list scheduling as the Dask feed runs it.

    Levels are submitted in ``order`` while the bytes of levels submitted and not yet written
    stay within ``budget`` (one is always submitted when none is held); a free worker takes the
    highest-priority submitted piece whose inputs are done. A level is written when its pieces are
    done (``in_order``: and every level before it in file order).
    """
    by_level: dict[int, list[int]] = {}
    for j, pc in enumerate(pieces):
        by_level.setdefault(pc.level, []).append(j)
    free, packed = [0.0] * workers, [set() for _ in range(workers)]
    done: dict[int, float] = {}
    written: dict[int, float] = {}
    queue: list[int] = []
    submitted = 0

    def write_times() -> None:
        for i in sorted(by_level):
            if i not in written and all(j in done for j in by_level[i]):
                own = max(done[j] for j in by_level[i])
                if not in_order:
                    written[i] = own
                elif i == 0 or i - 1 in written:
                    written[i] = max(own, written.get(i - 1, 0.0))
            if in_order and i not in written:
                break

    while submitted < len(order) or queue:
        w = min(range(workers), key=free.__getitem__)
        now = free[w]
        while submitted < len(order):
            held = sum(tasks[i].nbytes for i in order[:submitted] if not written.get(i, math.inf) <= now)
            if held and held + tasks[order[submitted]].nbytes > budget:
                break
            queue += by_level[order[submitted]]
            submitted += 1
        ready = [j for j in queue if all(done.get(d, math.inf) <= now for d in pieces[j].deps)]
        if not ready:
            later = [t for t in (*done.values(), *written.values()) if t > now]
            if not later:
                raise RuntimeError("ptau schedule: no piece can run")
            free[w] = min(later)
            continue
        j = max(ready, key=lambda j: pieces[j].priority)
        queue.remove(j)
        seconds = pieces[j].seconds
        p = pieces[j].twiddles_p
        if p is not None and p not in packed[w]:
            packed[w].add(p)
            seconds += ((1 << p) + 1) * host_twiddle_s
        free[w] = done[j] = now + seconds
        write_times()
    return max(done.values())


def ptau_model(costs: PtauCosts, rows: dict[int, dict], sp_task_s: float, a: Assumed, path: Path) -> dict[str, Any]:
    """Power-20 prepare: the measured code's schedule (the check), then the current code's on 1-8 GPUs."""
    tasks = level_tasks(PTAU_POWER)
    top = max(t.nbytes for t in tasks)
    level_s = sum(costs.level(t) for t in tasks)
    twiddles_once = sum(((1 << p) + 1) * costs.host_twiddle_s for p in {t.p for t in tasks})
    io_s = need(rows[1], "seconds", path) - level_s - twiddles_once
    largest_first = sorted(range(len(tasks)), key=lambda i: -tasks[i].cost)

    def as_measured(workers: int) -> float:
        pcs = ptau_pieces(tasks, costs, set(), 2, sp_task_s if workers > 1 else 0.0, a, measured_code=True)
        return schedule(tasks, pcs, range(len(tasks)), workers, max(2, workers) * top, True, costs.host_twiddle_s) + io_s

    def current(workers: int) -> dict[str, float]:
        cols = max(2, workers)
        blocked = blocked_levels(tasks, "auto", cols) if workers > 1 else set()
        pcs = ptau_pieces(tasks, costs, blocked, cols, sp_task_s if workers > 1 else 0.0, a, measured_code=False)
        span = schedule(tasks, pcs, largest_first, workers, cols * top, False, 0.0)
        work = sum(pc.seconds for pc in pcs)
        return {"total": span + io_s, "total_if_io_overlaps": max(span, io_s), "work_even": work / workers,
                "tail_imbalance": span - work / workers, "client_io": io_s, "blocked_levels": len(blocked)}

    return {
        "level_device_s": level_s,
        "host_twiddles_once_s": twiddles_once,
        "client_io_s": io_s,
        "as_measured": {n: as_measured(n) for n in (1, 2)},
        "current": {n: current(n) for n in GPUS},
    }


# ---- the whole model ----------------------------------------------------------------------------


def build(results: Path, files: dict[str, str], a: Assumed) -> dict[str, Any]:
    """Every model, its checks against the multi-GPU measurements and the inputs it read."""
    paths = {role: results / name for role, name in files.items()}
    batch = load_batch(paths["batch"])
    log_b, rows = batch.log_n, batch.rows
    large = [load_batch(results / name) for name in files["batch_large"].split(",") if name]
    e2e = e2e_entries([results / name for name in files["e2e"].split(",")],
                      sorted({log_b, 22, 24} | {b.log_n for b in large}))
    for b in large:
        if e2e[b.log_n].key not in b.key:
            raise FormatError(b.path, f"its key is not the e2e input's chain key of domain 2^{b.log_n}")
    wpt = int(config.get("planner.windows-per-task"))

    bp = batch_params(rows[1], paths["batch"])
    extra = {n: e2e[n].overlapped_s - e2e[log_b].overlapped_s for n in e2e}
    batch_model = {f"2^{n}": {g: batch_throughput(bp, g, extra[n], a) for g in GPUS} for n in (log_b, 22)}
    ratio = e2e[22].overlapped_s / e2e[log_b].overlapped_s  # the other reading: Dask's per-proof overhead grows with the key
    scaled = BatchParams(bp.proofs, bp.task_s * ratio, bp.idle_s * ratio, bp.fixed_s)
    batch_model_scaled = {g: batch_throughput(scaled, g, 0.0, a) for g in GPUS}
    sp = split_params(rows[1], e2e[log_b], a, wpt, batch.path, batch.h_on_host)
    # One 2^24 proof's latency from a lone 2^24 split proof's own costs where a batch measured one
    # (the check rows show how far the batch key's costs carried to it).
    src24 = next((b for b in large if b.log_n == 24), batch)
    sp24 = split_params(src24.rows[1], e2e[24], a, wpt, src24.path, src24.h_on_host) if src24 is not batch else sp
    latency = {
        "split_costs_from": src24.path.name,
        "as_run": {g: split_latency(sp24, e2e[24], g, a, wpt, h_on_host=False) for g in GPUS},
        "device_links": {g: split_latency(sp24, e2e[24], g, a, wpt, device=True) for g in GPUS},
        "data_mode_one_gpu_s": rows[1]["latency_data_s"] + extra[24],
        "h_one_gpu_s": e2e[24].seconds["ntt"],
        "h_fourstep_dask_s": {g: fourstep_h_s(e2e[24], g, a.dask_tcp) for g in GPUS},
        "h_fourstep_device_s": {g: fourstep_h_s(e2e[24], g, a.device_link) for g in GPUS},
    }
    prep_doc = load(paths["ptau_prepare"])
    prep_rows = {int(need(r, "workers", paths["ptau_prepare"])): r for r in prep_doc}
    costs = ptau_costs(load(paths["ptau_levels"]), paths["ptau_levels"])
    ptau = ptau_model(costs, prep_rows, sp.task_overhead_s, a, paths["ptau_prepare"])

    implied = implied_dask_bw(sp, e2e[log_b], a, wpt, rows[2]["latency_split_s"]) if 2 in rows else None
    if implied is not None:
        fitted = Assumed(**{**asdict(a), "dask_tcp": implied})
        latency["dask_bw_matching_2gpu_check"] = implied
        latency["as_run_at_matching_bw"] = {g: split_latency(sp24, e2e[24], g, fitted, wpt, h_on_host=False) for g in GPUS}
    rate = "throughput_proofs_per_s"
    checks = []  # (what, GPUs, 1 GPU measured, n GPUs measured, n GPUs model)
    for n in sorted(g for g in rows if g > 1):
        checks += [
            (f"batch 2^{log_b} proofs/s ({bp.proofs} proofs, data mode)", n,
             rows[1][rate], rows[n][rate], batch_model[f"2^{log_b}"][n]["proofs_per_s"]),
            (f"split latency 2^{log_b}, one proof (s)", n,
             rows[1]["latency_split_s"], rows[n]["latency_split_s"], split_latency(sp, e2e[log_b], n, a, wpt)["total"]),
        ]
    for b in large:  # batches of larger keys: how the model carries the batch key's costs to them
        log_l, rows_l = b.log_n, b.rows
        for n, row in sorted(rows_l.items()):
            checks += [
                (f"batch 2^{log_l} proofs/s ({row['proofs']} proofs, data mode)", n, rows_l[1][rate], row[rate],
                 batch_throughput(bp, n, extra[log_l], a, int(row["proofs"]))["proofs_per_s"]),
                (f"data latency 2^{log_l}, one proof (s)", n, rows_l[1]["latency_data_s"], row["latency_data_s"],
                 rows[1]["latency_data_s"] + extra[log_l]),
                (f"split latency 2^{log_l}, one proof (s)", n, rows_l[1]["latency_split_s"], row["latency_split_s"],
                 split_latency(sp, e2e[log_l], n, a, wpt, h_on_host=b.h_on_host)["total"]),
            ]
    if 2 in prep_rows:
        checks.append((f"ptau prepare p{PTAU_POWER} (s), code as measured", 2,
                       prep_rows[1]["seconds"], prep_rows[2]["seconds"], ptau["as_measured"][2]))
    return {
        "note": "MODEL, not measured: 2, 4 and 8 GPUs extrapolated from 1-GPU measurements (issue #10)",
        "inputs": dict(files),
        "assumed": asdict(a),
        "measured_params": {"batch": asdict(bp), "split": asdict(sp), "split_2^24": asdict(sp24),
                            "windows_per_task": wpt,
                            "ptau_per_unit_s": costs.per_unit, "ptau_host_twiddle_s_per_scalar": costs.host_twiddle_s},
        "batch": batch_model,
        "batch_2^22_if_overhead_scales": batch_model_scaled,
        "latency_2^24": latency,
        "ptau_p20": ptau,
        "checks": [{"what": w, "gpus": n, "measured_1": m1, "measured": mn, "model": pn, "model_over_measured": pn / mn}
                   for w, n, m1, mn, pn in checks],
    }


def markdown(m: dict[str, Any]) -> str:
    """The model's table, its checks against measurements and where 8 GPUs lose, as markdown."""
    (k_small, small), (k_large, large) = m["batch"].items()
    lat = m["latency_2^24"]
    split, dev, pt = lat["as_run"], lat["device_links"], m["ptau_p20"]["current"]

    def cell(series: dict, g: int, key: str, up: bool) -> str:
        v, v1 = series[g][key], series[1][key]
        return f"{v:.2f} ({(v / v1 if up else v1 / v):.2f}×)"

    out = [
        f"| GPUs | batch {k_small} proofs/s | batch {k_large} proofs/s | one 2^24 proof, split, s (as run) "
        "| same, vectors GPU to GPU (what-if), s | ptau prepare p20, s |",
        "|---|---|---|---|---|---|",
    ]
    for g in GPUS:
        cells = [cell(small, g, "proofs_per_s", True), cell(large, g, "proofs_per_s", True), cell(split, g, "total", False),
                 cell(dev, g, "total", False), cell(pt, g, "total", False)]
        out.append(f"| {g} | " + " | ".join(cells) + " |")
    out += ["", "| check | GPUs | 1 GPU measured | measured | model | model / measured |", "|---|---|---|---|---|---|"]
    for c in m["checks"]:
        out.append(f"| {c['what']} | {c['gpus']} | {c['measured_1']:.3f} | {c['measured']:.3f} | {c['model']:.3f} "
                   f"| {c['model_over_measured']:.2f} |")

    b8, s8, p8 = small[8], split[8], pt[8]
    out += [
        "",
        "Where 8 GPUs lose (model):",
        f"* batch {k_small}: {b8['proofs_per_s'] / (8 * small[1]['proofs_per_s']):.2f} of 8× one GPU; the per-batch fixed "
        f"cost is {b8['fixed_share']:.0%} of the wall time; the scheduler is {b8['scheduler_load']:.0%} loaded (not the bound).",
        f"* one 2^24 proof, {s8['total']:.2f} s: prepare on one GPU {s8['prepare']:.2f} s + fixed {s8['fixed']:.2f} s; on the "
        f"slowest worker, transfers and the witness read again {s8['transfers']:.2f} s, MSM work {s8['msm_work_even']:.2f} s "
        f"even share + {s8['msm_imbalance']:.2f} s round-robin imbalance, task overhead {s8['task_overhead']:.2f} s; "
        f"reducer {s8['reduce']:.3f} s, window sums {s8['window_sums'] * 1e6:.0f} µs. "
        f"With the vectors moved GPU to GPU: {dev[8]['total']:.2f} s.",
    ]
    if "dask_bw_matching_2gpu_check" in lat:
        out.append(f"* The 2-GPU split check matches at {lat['dask_bw_matching_2gpu_check'] / 1e9:.2f} GB/s of Dask transfer; "
                   f"at that rate one 2^24 proof on 8 GPUs takes {lat['as_run_at_matching_bw'][8]['total']:.2f} s.")
    out += [
        f"* For reference, the whole 2^24 proof on one GPU in data mode: {lat['data_mode_one_gpu_s']:.2f} s "
        "(its measured Dask latency at the batch key, less that key's in-process time, plus 2^24's).",
        f"* H at 2^24: {lat['h_one_gpu_s'] * 1e3:.0f} ms on one GPU; four-step over 8 GPUs {lat['h_fourstep_dask_s'][8]:.2f} s "
        f"through Dask, {lat['h_fourstep_device_s'][8] * 1e3:.0f} ms over NVLink.",
        f"* ptau p20, {p8['total']:.2f} s: client I/O {p8['client_io']:.2f} s (serial), levels {p8['work_even']:.2f} s even "
        f"share + {p8['tail_imbalance']:.2f} s tail, {p8['blocked_levels']} levels blocked; "
        f"{p8['total_if_io_overlaps']:.2f} s if the client's writes overlapped the levels completely.",
    ]
    return "\n".join(out)


def main(argv: Sequence[str] | None = None) -> dict[str, Any]:
    """Run the model on the results folder, write the JSON, print the markdown; returns the model."""
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--results", type=Path, default=Path(__file__).resolve().parents[1] / "bench" / "results")
    for role, name in INPUTS.items():
        ap.add_argument(f"--{role.replace('_', '-')}", default=name,
                        help=f"file in --results (default {name}){'; or FILE,FILE...' if ',' in name else ''}")
    ap.add_argument("--out", type=Path, help="JSON output (default <results>/<today>_scaling-model.json)")
    ap.add_argument("--dask-gbps", type=float, default=Assumed.dask_tcp / 1e9, help="assumed worker-to-worker GB/s")
    ap.add_argument("--pcie-gbps", type=float, default=Assumed.pcie / 1e9, help="assumed host<->device GB/s")
    args = ap.parse_args(argv)
    a = Assumed(dask_tcp=args.dask_gbps * 1e9, pcie=args.pcie_gbps * 1e9)
    model = build(args.results, {role: getattr(args, role) for role in INPUTS}, a)
    out = args.out or args.results / f"{datetime.date.today().isoformat()}_scaling-model.json"
    out.write_text(json.dumps(model, indent=1) + "\n")
    print(markdown(model))
    print(f"\nwritten {out}")
    return model


if __name__ == "__main__":
    main()
