"""Fq product and square rates on the GPU (called by pipelines/bench_kernels.py, or run directly).

A test kernel runs a long dependent chain x <- x * y (fq_mul), and one x <- x^2 (fq_sqr), in every
thread of a grid that fills the device; the rate is threads * chain / time, against the planning
ceiling of 41 G Fq mul/s (10.97 T int ops/s over CIOS's 264 multiply-adds). Each arithmetic
variant of field.cuh is measured (default: the device's own choice, the FP64-pipe product on
sm_90/sm_100 and CIOS elsewhere; f64_mul: the FP64-pipe product on any device; cios: CIOS in C
with PTX add/sub; portable: CIOS in plain C; ptx_mul: CIOS as PTX carry chains), and a sample of
results is checked against Python ints."""

from __future__ import annotations

import statistics
import time
from typing import Any

import numpy as np

from distprove.backends.gpu.compile import FIELD_BUILDS

CEILING_GMUL_S = 41.0
CHAIN = 4096
THREADS = 132 * 2048 * 2

KERNEL = r"""
extern "C" __global__ void fq_mul_chain(const u32* xs, const u32* ys, u32* out, u32 n, u32 chain) {
    u32 i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i >= n) return;
    Fq x = fq_load(xs + 8 * i), y = fq_load(ys + 8 * i);
    for (u32 k = 0; k < chain; k++) x = fq_mul(x, y);
    fq_store(out + 8 * i, x);
}
extern "C" __global__ void fq_sqr_chain(const u32* xs, const u32* ys, u32* out, u32 n, u32 chain) {
    u32 i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i >= n) return;
    Fq x = fq_load(xs + 8 * i);
    for (u32 k = 0; k < chain; k++) x = fq_sqr(x);
    fq_store(out + 8 * i, x);
}
"""


VARIANTS = FIELD_BUILDS


def _module(variant: str) -> Any:
    import cupy

    from distprove.backends.gpu.compile import BASE_OPTIONS, module_source

    return cupy.RawModule(code=module_source(["field.cuh"]) + KERNEL, options=(*BASE_OPTIONS, *VARIANTS[variant]))


def run(results: dict, reps: int = 5, variants: list[str] | None = None) -> None:
    """Append two rows per variant (products, squares): Fq rate (G/s) and its ratio to the ceiling."""
    import cupy

    from distprove import bn254

    rng = np.random.default_rng()
    host = rng.integers(0, 1 << 32, size=(2, THREADS, 8), dtype=np.uint32)
    host[:, :, 7] %= 0x30644E72
    xs, ys = cupy.asarray(host[0]), cupy.asarray(host[1])
    out = cupy.empty_like(xs)
    args = (xs, ys, out, np.uint32(THREADS), np.uint32(CHAIN))
    grid = ((THREADS + 255) // 256,)
    rinv = pow(1 << 256, -1, bn254.Q)
    for variant in variants or list(VARIANTS):
        t0 = time.perf_counter()
        mod = _module(variant)
        compile_s = time.perf_counter() - t0
        for op in ("mul", "sqr"):
            fn = mod.get_function(f"fq_{op}_chain")
            fn(grid, (256,), args)
            cupy.cuda.Device().synchronize()
            times = []
            for _ in range(reps):
                start, stop = cupy.cuda.Event(), cupy.cuda.Event()
                start.record()
                fn(grid, (256,), args)
                stop.record()
                stop.synchronize()
                times.append(cupy.cuda.get_elapsed_time(start, stop))
            ms = statistics.median(times)
            res = cupy.asnumpy(out)
            # Check a sample against Python: values are stored as v R mod q.
            ok = True
            for i in rng.integers(0, THREADS, size=8).tolist():
                x, y = (bn254.ints_from_limbs(host[k, i : i + 1])[0] * rinv % bn254.Q for k in (0, 1))
                v = x * pow(y, CHAIN, bn254.Q) if op == "mul" else pow(x, 1 << CHAIN, bn254.Q)
                ok &= bn254.ints_from_limbs(res[i : i + 1])[0] == v * (1 << 256) % bn254.Q
            rate = THREADS * CHAIN / (ms * 1e-3) / 1e9
            row = {"name": f"fq_{op} chain ({variant})", "n": THREADS, "median_ms": ms,
                   "gmul_per_s": rate, "ceiling_gmul_per_s": CEILING_GMUL_S, "of_ceiling": rate / CEILING_GMUL_S,
                   "correct": bool(ok), "compile_s": compile_s,
                   "floor_ms": THREADS * CHAIN / (CEILING_GMUL_S * 1e9) * 1e3}
            results["rows"].append(row)
            print(f"{row['name']}: {rate:.1f} G/s ({rate / CEILING_GMUL_S:.0%} of {CEILING_GMUL_S} G), "
                  f"correct={ok}, compile {compile_s:.1f} s", flush=True)


if __name__ == "__main__":
    import argparse
    import datetime
    import json

    from benchlib import device_info, git_commit

    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--variants", default=",".join(VARIANTS), help="comma list of " + ", ".join(VARIANTS))
    ap.add_argument("--out", help="JSON results file")
    a = ap.parse_args()

    r: dict = {"date": datetime.datetime.now(datetime.timezone.utc).isoformat(), "git_commit": git_commit(),
               **device_info(), "rows": []}
    run(r, variants=a.variants.split(","))
    if a.out:
        with open(a.out, "w") as f:
            json.dump(r, f, indent=1)
