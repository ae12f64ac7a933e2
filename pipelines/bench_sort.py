"""Per-kernel times of the GPU digit sorts (msm.cu's counting sort, msm_sort.cu's radix sort).

Each launch of one sort (and each cupy.cumsum between them) is bracketed by CUDA events; the
median of a few repetitions after a warm-up is printed per step, with the sort's floor: the bytes
its kernels must load and store (:func:`floor_bytes`) at the copy bandwidth (4.3 TB/s on an
H200, METHOD.md). Scalars: uniform below r, a fraction ``--live`` of them, the
rest 0 or 1 (witness-like: 0.1). Kinds are values of ``distprove.msm.sort`` (auto: the device's
plan picks).

    python3 pipelines/bench_sort.py --cases 20:15,24:17 --kinds atomic,radix,auto [--live 0.1] [--out FILE]
"""

from __future__ import annotations

import statistics
from typing import Any

import numpy as np

COPY_BYTES_PER_S = 4.3e12


class _Timed:
    """A stand-in for the msm RawModule (and cupy.cumsum) that records an event pair per launch."""

    def __init__(self, mod: Any, log: list) -> None:
        self.mod, self.log = mod, log

    def get_function(self, name: str) -> Any:
        fn = self.mod.get_function(name)
        log = self.log

        def launch(*args: Any) -> None:
            import cupy

            a, b = cupy.cuda.Event(), cupy.cuda.Event()
            a.record()
            fn(*args)
            b.record()
            log.append((name, a, b))

        launch.num_regs = getattr(fn, "num_regs", None)
        return launch


def floor_bytes(kind: str, n: int, nw: int, entries: int) -> int:
    """Bytes a sort of ``n`` scalars into ``entries`` entries over ``nw`` windows must move. Counting
    sort: the scalars twice (count, scatter), each entry written (8 bytes). Radix sort: the scalars
    once, a digit word per scalar and window written and read (4 + 4), each entry written by pass 1
    (8), read by hist2 (4) and pass 2 (8), written by pass 2 (8) and read by the runs (8)."""
    if kind == "atomic":
        return 64 * n + 8 * entries
    return 32 * n + 8 * nw * n + 36 * entries


def time_sort(kind: str, scalars: Any, n: int, c: int, reps: int) -> dict[str, float]:
    """Median ms per step of one digit sort of ``scalars`` (all windows of width ``c``)."""
    import cupy
    import dask

    from distprove.backends.gpu import msm as gm
    from distprove.stages.msm import num_windows

    nw = num_windows(c)
    rows = nw << (c - 1)
    scratch = gm.MsmScratch()
    counts, cursor = scratch.take("counts", rows), scratch.take("cursor", rows)
    entries = scratch.take("entries", 2 * nw * n)
    real_cumsum = cupy.cumsum
    runs: list[dict[str, float]] = []
    for _ in range(reps + 1):
        log: list = []

        def cumsum(*args: Any, **kw: Any) -> Any:
            a, b = cupy.cuda.Event(), cupy.cuda.Event()
            a.record()
            out = real_cumsum(*args, **kw)
            b.record()
            log.append(("cumsum", a, b))
            return out

        counts.fill(0)
        cupy.cumsum = cumsum
        try:
            with dask.config.set({"distprove.msm.sort": kind}):
                gm._sort(_Timed(gm._module(), log), scalars, n, c, 0, nw, counts, cursor, entries, False,
                         scratch.take)
        finally:
            cupy.cumsum = real_cumsum
        cupy.cuda.Device().synchronize()
        step: dict[str, float] = {}
        for i, (name, a, b) in enumerate(log):
            step[f"{i}:{name}"] = cupy.cuda.get_elapsed_time(a, b)
        step["total"] = cupy.cuda.get_elapsed_time(log[0][1], log[-1][2])
        step["entries"] = int(counts.sum())
        runs.append(step)
    runs = runs[1:] or runs  # the first is a warm-up when there are more
    return {k: statistics.median(r[k] for r in runs) for k in runs[0]}


if __name__ == "__main__":
    import argparse
    import json

    import cupy

    from distprove.stages.msm import num_windows

    ap = argparse.ArgumentParser(description="GPU digit sort, per kernel")
    ap.add_argument("--cases", default="20:15,22:16,24:17", help="log2 n:c pairs")
    ap.add_argument("--kinds", default="atomic,radix,auto")
    ap.add_argument("--live", type=float, default=1.0, help="fraction of scalars not 0 or 1")
    ap.add_argument("--reps", type=int, default=5)
    ap.add_argument("--out", default="")
    a = ap.parse_args()
    out: dict = {"rows": []}
    rng = np.random.default_rng(1)
    for spec in a.cases.split(","):
        lg, c = (int(x) for x in spec.split(":"))
        n = 1 << lg
        host = rng.integers(0, 1 << 32, size=(n, 8), dtype=np.uint32)
        host[:, 7] %= 0x30644E72
        dead = rng.random(n) >= a.live
        host[dead] = 0
        host[dead, 0] = rng.integers(0, 2, size=int(dead.sum()))
        scalars = cupy.asarray(host)
        for kind in a.kinds.split(","):
            steps = time_sort(kind, scalars, n, c, a.reps)
            bound = "atomic" if kind == "atomic" else "radix"
            steps["floor"] = 1e3 * floor_bytes(bound, n, num_windows(c), int(steps["entries"])) / COPY_BYTES_PER_S
            out["rows"].append({"log2_n": lg, "c": c, "kind": kind, "live": a.live, "ms": steps})
            print(f"2^{lg} c={c} {kind} live {a.live}: " +
                  ", ".join(f"{k} {v:.3f}" for k, v in steps.items()), flush=True)
    if a.out:
        with open(a.out, "w") as fh:
            json.dump(out, fh, indent=1)
