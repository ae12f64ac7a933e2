"""One warm run of each heavy kernel inside a profiler range, for Nsight Compute on the GPU machine.

Each case runs once untimed (compile, tables, allocations) and then once between
``cudaProfilerStart`` and ``cudaProfilerStop``, so ``ncu --profile-from-start off`` sees only the
warm launches::

    ncu --clock-control none --profile-from-start off --section SpeedOfLight \
        --section WarpStateStats python3 pipelines/profile_kernels.py --cases g1-24,g2-20,ntt-24

Cases: ``g1-N`` / ``g2-N`` (window sums of every window of 2^N uniform scalars on benchlib's
random-access bases, at pick_window's width; suffixes ``-cC`` for width C, ``-rR`` for R batch-affine
pair rounds, ``@variant`` for one of bench_msm's builds), ``p1-N`` / ``p2-N`` (the merged MSM over a
precomputed table of window multiples, at merged_width or ``-cC``), ``ntt-N`` (forward NTT of 2^N
random Montgomery values). Nothing is checked here: the GPU tests check these kernels.
"""

from __future__ import annotations

import argparse
import os
import sys
from collections.abc import Callable
from typing import Any

sys.path.insert(0, os.path.dirname(__file__))


def _case_inputs(group_name: str, log_n: int) -> tuple[Any, Any, Any]:
    """(group, scalars, bases) of an MSM case: benchlib's 2^log_n uniform scalars (seed 1) and its
    random-access bases of known discrete logarithm."""
    import benchlib

    group = benchlib.groups()[group_name.upper()]
    _, scalars, idx, tables = benchlib.msm_inputs({group_name: group}, log_n, 1)
    return group, scalars, tables[group_name][idx]


def _msm_case(group_name: str, log_n: int, c: int | None, rounds: int, variant: str) -> Callable[[], None]:
    """One MSM case: run once to warm up, once profiled."""
    import bench_msm
    import dask

    from distprove.backends.gpu import msm as gmsm
    from distprove.backends.gpu.msm import msm_windows, pick_window
    from distprove.stages.msm import num_windows

    gmsm.KERNEL_OPTIONS = bench_msm.VARIANTS[variant]

    group, scalars, bases = _case_inputs(group_name, log_n)
    width = c or pick_window(1 << log_n, group)
    print(f"{group_name} 2^{log_n}: c = {width}, pair rounds {rounds}, build {variant}", flush=True)

    def run() -> None:
        with dask.config.set({"distprove.msm.affine-rounds": rounds}):
            msm_windows(group, bases, scalars, width, 0, num_windows(width))

    return run


def _merged_case(group_name: str, log_n: int, c: int | None) -> Callable[[], None]:
    """One merged MSM case (gpu.msm.msm_merged over a table built here): run once to warm up, once
    profiled."""
    from distprove.backends.gpu import msm as gmsm

    group, scalars, bases = _case_inputs(group_name, log_n)
    width = c or gmsm.merged_width(1 << log_n, group)
    table = gmsm.precompute_multiples(group, bases, width)
    print(f"{group_name} 2^{log_n} merged: c = {width}", flush=True)

    def run() -> None:
        gmsm.msm_merged(group, table, scalars, width)

    return run


def _ntt_case(log_n: int) -> Callable[[], None]:
    """One forward NTT case: run once to warm up, once profiled."""
    import bench_ntt
    import cupy

    from distprove.backends.gpu import ntt as gntt

    eng = gntt.engine()
    x = bench_ntt.random_mont(cupy, 1 << log_n, log_n)
    scratch = cupy.empty_like(x)

    def run() -> None:
        eng.ntt(x, scratch=scratch)

    return run


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--cases", default="g1-24,g2-20,ntt-24", help="comma list of cases (see the module doc)")
    args = ap.parse_args()
    import cupy

    for case in args.cases.split(","):
        case, _, variant = case.partition("@")
        parts = case.split("-")
        if parts[0] == "ntt":
            run = _ntt_case(int(parts[1]))
        elif parts[0] in ("p1", "p2"):
            run = _merged_case("g" + parts[0][1], int(parts[1]), int(parts[2][1:]) if len(parts) > 2 else None)
        else:
            opts = {p[0]: int(p[1:]) for p in parts[2:]}
            run = _msm_case(parts[0], int(parts[1]), opts.get("c"), opts.get("r", 0), variant or "default")
        run()  # compile, tables, allocations
        cupy.cuda.Device().synchronize()
        cupy.cuda.profiler.start()
        run()
        cupy.cuda.Device().synchronize()
        cupy.cuda.profiler.stop()
        print(f"profiled {case} {variant}", flush=True)
        del run
        cupy.get_default_memory_pool().free_all_blocks()
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
