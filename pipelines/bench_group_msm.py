"""Grouped against one-at-a-time MSMs: the five MSMs of G proofs of one key on the GPU.

A proof's MSMs here are A, B1 (G1), B2 (G2) over one witness-sized scalar vector, C (G1) over
the same vector and H (G1) over a vector of its own, all of n points (bases from bench_msm's
table of known points, indexed at random). One at a time runs each proof as the GPU backend's
overlapped phase does (G1 and G2 on two streams, A, B1 and B2 sharing one digit sort), proof
after proof; grouped runs gpu.msm.msm_windows_group_start per MSM over the (G, n, 8) stack, in
parts of gpu.msm.proofs_that_fit. Both include the readback and affine conversion of the sums.
Prints ms per proof (median of --reps runs after a warm-up) for n = 2^12, 2^16, 2^20 and G in
{1, 8, 64} by default; the grouped sums are checked equal to the one-at-a-time sums first.

    python pipelines/bench_group_msm.py [--logs 12,16,20] [--proofs 1,8,64] [--witness] [--reps 5]
"""

from __future__ import annotations

import argparse
import statistics
from typing import Any, Callable

import numpy as np

from bench_msm import witness_like
from benchlib import TABLE, base_table, uniform_scalars, wall_ms

NAMES = ("A", "B1", "B2", "C", "H")


def _setup(lg: int, proofs: int, witness: bool, seed: int) -> tuple[dict, Any, Any]:
    """(bases by MSM name, witness stack (G, n, 8), H stack) on the device."""
    import cupy

    from distprove import bn254

    rng = np.random.default_rng(seed)
    n = 1 << lg
    idx = rng.integers(0, TABLE, size=n)
    g1, g2 = cupy.asarray(base_table(bn254.G1))[cupy.asarray(idx)], cupy.asarray(base_table(bn254.G2))[cupy.asarray(idx)]
    bases = {"A": g1, "B1": g1, "B2": g2, "C": g1, "H": g1}

    def stack() -> Any:
        host = uniform_scalars(rng, proofs * n)
        if witness:
            host = witness_like(host, rng)
        return cupy.asarray(host.reshape(proofs, n, 8))

    return bases, stack(), stack()


def _one_at_awall_ms(bases: dict, wit: Any, hs: Any, widths: dict[str, int]) -> Callable[[], list]:
    import cupy

    from distprove.backends.gpu import msm as gm
    from distprove.bn254 import G1, G2
    from distprove.stages.msm import num_windows

    lanes = {"G1": (cupy.cuda.Stream(non_blocking=True), gm.MsmScratch()),
             "G2": (cupy.cuda.Stream(non_blocking=True), gm.MsmScratch())}

    def run() -> list:
        out = []
        for p in range(wit.shape[0]):
            waits = {}
            c = widths["A"]
            sort = gm.sort_digits(wit[p], c, 0, num_windows(c), lanes["G2"][0])
            for which in ("B2", "A", "B1", "C", "H"):
                group = G2 if which == "B2" else G1
                stream, scratch = lanes[group.name]
                s = hs[p] if which == "H" else wit[p]
                cw = widths[which]
                waits[which] = gm.msm_windows_start(group, bases[which], s, cw, 0, num_windows(cw), scratch, stream,
                                                    digits=sort if which in ("A", "B1", "B2") else None)
            out.append({which: waits[which]() for which in NAMES})
        return out

    return run


def _grouped(bases: dict, wit: Any, hs: Any, widths: dict[str, int]) -> Callable[[], list]:
    import cupy

    from distprove.backends.gpu import msm as gm
    from distprove.bn254 import G1, G2
    from distprove.stages.msm import num_windows

    lanes = {"G1": (cupy.cuda.Stream(non_blocking=True), gm.MsmScratch()),
             "G2": (cupy.cuda.Stream(non_blocking=True), gm.MsmScratch())}
    proofs, n = int(wit.shape[0]), int(wit.shape[1])

    def run() -> list:
        free = gm.free_device_bytes()
        c = widths["A"]
        step = gm.proofs_that_fit(G2, n, c, 0, num_windows(c), free, proofs)
        waits: dict[str, list] = {which: [] for which in NAMES}
        for first in range(0, proofs, step):
            part = wit[first:first + step]
            sort = gm.sort_digits(part, c, 0, num_windows(c), lanes["G2"][0])
            for which in ("B2", "A", "B1"):
                group = G2 if which == "B2" else G1
                stream, scratch = lanes[group.name]
                waits[which].append(gm.msm_windows_group_start(group, bases[which], part, c, 0, num_windows(c),
                                                               scratch, stream, digits=sort, max_proofs=step))
        for which in ("C", "H"):
            stream, scratch = lanes["G1"]
            cw = widths[which]
            stack = hs if which == "H" else wit
            waits[which].append(gm.msm_windows_group_start(
                G1, bases[which], stack, cw, 0, num_windows(cw), scratch, stream,
                max_proofs=gm.proofs_that_fit(G1, n, cw, 0, num_windows(cw), free, proofs)))
        sums = {which: [s for w in waits[which] for s in w()] for which in NAMES}
        return [{which: sums[which][p] for which in NAMES} for p in range(proofs)]

    return run


def main() -> None:
    import cupy

    from distprove.backends.gpu import msm as gm
    from distprove.bn254 import G1

    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--logs", default="12,16,20", help="log2 n of the rows")
    ap.add_argument("--proofs", default="1,8,64", help="group sizes G")
    ap.add_argument("--witness", action="store_true", help="witness-like scalars (45%% 0, 45%% 1, 10%% uniform)")
    ap.add_argument("--reps", type=int, default=5)
    a = ap.parse_args()
    print(f"{'log2 n':>6} {'G':>4} {'one-at-a-time ms/proof':>23} {'grouped ms/proof':>17} {'speed-up':>8}")
    for lg in (int(x) for x in a.logs.split(",")):
        for proofs in (int(x) for x in a.proofs.split(",")):
            bases, wit, hs = _setup(lg, proofs, a.witness, seed=lg * 1000 + proofs)
            live = 0.1 if a.witness else 1.0
            wc = gm.pick_window(1 << lg, G1, live)
            widths = {"A": wc, "B1": wc, "B2": wc, "C": wc, "H": gm.pick_window(1 << lg, G1)}
            single, grouped = _one_at_awall_ms(bases, wit, hs, widths), _grouped(bases, wit, hs, widths)
            if single() != grouped():
                raise SystemExit(f"2^{lg} x {proofs}: grouped window sums differ from one at a time")
            t1 = statistics.median(wall_ms(single, a.reps)) / proofs
            tg = statistics.median(wall_ms(grouped, a.reps)) / proofs
            print(f"{lg:>6} {proofs:>4} {t1:>23.3f} {tg:>17.3f} {t1 / tg:>7.2f}x", flush=True)
            del bases, wit, hs, single, grouped
            cupy.get_default_memory_pool().free_all_blocks()


if __name__ == "__main__":
    main()
