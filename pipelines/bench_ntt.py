"""Benchmarks of the GPU NTT, H step and gather (called by pipelines/bench_kernels.py).

Times are CUDA-event medians over >= 5 repetitions after warm-up. Each NTT row carries its floor:
bytes moved (every pass reads and writes the vector once; non-last passes also read their
twiddle table) over the copy bandwidth, and Fr multiplications over the Fr multiplication rate
(``fr_muls``: the products the passes' warps issue, gpu/ntt.py ``plan_products``; ``fr_muls_thread``
leaves out lanes that skip a product their warp does); the larger of the two is the floor.

The variant rows time every build of the pass kernel (``NTT_VARIANTS``) under both plans
(``max_pass_log`` 9: 2^24 as three passes of 2^8; 12: two of 2^12 on the 2^12-tile kernel) at
2^20, 2^22 and 2^24, forward and inverse, each checked equal to the default engine's output.
"""

from __future__ import annotations

import statistics
from typing import Any, Callable

import numpy as np

from distprove.backends.gpu.ntt import BUILDS

BANDWIDTH_BPS = 4.3e12
"""Device-to-device copy bandwidth of an H200 measured here (bytes read + written per second)."""
FR_MUL_PER_S = 41e9
"""Fr Montgomery multiplications per second on an H200 (the project's planning figure)."""
F64_MUL_PER_S = 132 * 4 * 1.98e9 * 32 / 405
"""Issue-slot bound of the FP64-pipe product (field.cuh mont_mul_f64, the device default): 405
SASS instructions a product (165 of them FP64; cuobjdump of bench_field's chain kernel), one warp instruction per cycle per
SM sub-partition at 1.98 GHz: 82.6 G products/s. A dependent chain reaches 52.7 (64%)."""
SHOUP_COST = 214 / 264
"""Multiply instructions of Shoup's product (43 + 2 x 28 widening, 16 low-only) over CIOS's
(128 widening, 8 low-only): a butterfly product's share of a Montgomery product in the floor."""
NTT_VARIANTS: dict[str, tuple[str, ...]] = {
    **BUILDS,
    "default": (),
    "blocks4": ("-DNTT_MIN_BLOCKS=4",),
    "blocks2": ("-DNTT_MIN_BLOCKS=2",),
}
"""Pass-kernel builds by NVRTC options: gpu/ntt.py's BUILDS (montgomery, shoup, unsplit, eager,
unfused: its docstring);
default: FP64-pipe Montgomery products everywhere (field.cuh), butterfly twiddles split on the
host, lazy butterflies, the first level pair done by the load; blocks4/2: the pass kernel
bounded to 4 or 2 blocks per SM instead of 3."""
VARIANT_PLANS = (9, 12)
"""max_pass_log of the plans each variant is timed with."""


def time_ms(fn: Callable[[], Any], reps: int = 7, warmup: int = 2) -> list[float]:
    """Per-repetition milliseconds of ``fn`` (device work), by CUDA events."""
    import cupy

    for _ in range(warmup):
        fn()
    cupy.cuda.Device().synchronize()
    out = []
    for _ in range(reps):
        start, stop = cupy.cuda.Event(), cupy.cuda.Event()
        start.record()
        fn()
        stop.record()
        stop.synchronize()
        out.append(cupy.cuda.get_elapsed_time(start, stop))
    return out


def ntt_floor_ms(log_n: int, *, inverse: bool = False, max_pass_log: int | None = None,
                 post_tab: bool = False, shoup: bool = False,
                 f64: bool = True) -> dict[str, float]:
    """Memory and multiplication floors of one NTT of size 2^log_n as planned by gpu/ntt.py
    (``NttEngine.ntt``: the inverse scales by 1/n on its last pass; ``post_tab``: the H step's
    inverse, whose coset table carries 1/n; ``shoup``: butterfly products at SHOUP_COST; ``f64``:
    products at F64_MUL_PER_S, else CIOS products at FR_MUL_PER_S)."""
    from distprove.backends.gpu.ntt import plan, plan_products

    n = 1 << log_n
    specs = plan(log_n, max_pass_log=max_pass_log)
    nbytes = sum(2 * n * 32 + (n * 32 if not s.last else 0) for s in specs) + (n * 32 if post_tab else 0)
    pr = plan_products(specs, post=inverse and not post_tab, post_tab=post_tab)
    if f64 and not shoup:
        mul_ms = pr.warp / F64_MUL_PER_S * 1e3
    elif f64:  # Shoup butterflies (integer), FP64 products elsewhere
        mul_ms = (pr.butterfly * SHOUP_COST / FR_MUL_PER_S + (pr.warp - pr.butterfly) / F64_MUL_PER_S) * 1e3
    else:
        mul_ms = (pr.warp - ((1 - SHOUP_COST) * pr.butterfly if shoup else 0)) / FR_MUL_PER_S * 1e3
    return {"floor_mem_ms": nbytes / BANDWIDTH_BPS * 1e3, "floor_mul_ms": mul_ms,
            "bytes": nbytes, "fr_muls": pr.warp, "fr_muls_butterfly": pr.butterfly,
            "fr_muls_thread": pr.thread, "shoup": shoup, "f64": f64, "passes": len(specs)}


def _floor(f: dict[str, float]) -> float:
    return max(f["floor_mem_ms"], f["floor_mul_ms"])


def random_mont(cp: Any, n: int, seed: int) -> Any:
    """(n, 8) uint32 random values below r (valid Montgomery representatives)."""
    rng = np.random.default_rng(seed)
    a = rng.integers(0, 1 << 32, size=(n, 8), dtype=np.uint32)
    a[:, 7] %= 0x30644E72
    return cp.asarray(a)


def _row(results: dict, name: str, log_n: int, times: list[float], **extra: Any) -> None:
    row = {"name": name, "log_n": log_n, "median_ms": statistics.median(times),
           "min_ms": min(times), "reps": len(times), **extra}
    results.setdefault("rows", []).append(row)


def run(results: dict, sizes: tuple[int, ...] = (16, 20, 22, 24, 26), reps: int = 7) -> None:
    """Time the NTT (forward, inverse), the H step, the staged four-step, the pass-kernel
    variants and plans (run_variants, at the sizes among 2^20, 2^22, 2^24) and the gather."""
    import cupy as cp

    from distprove.backends.gpu import compile as gcompile
    from distprove.backends.gpu import ntt as gntt

    results["compile"] = [gcompile.measure_cold_warm(m) for m in ("ntt", "gather")]
    eng = gntt.engine()
    for log_n in sizes:
        n = 1 << log_n
        x = random_mont(cp, n, log_n)
        scratch = cp.empty_like(x)
        fwd = ntt_floor_ms(log_n, shoup=eng.k.twiddles == "shoup")
        inv = ntt_floor_ms(log_n, inverse=True, shoup=eng.k.twiddles == "shoup")
        eng.ntt(x, scratch=scratch)  # builds the twiddle tables outside the timing
        eng.ntt(x, inverse=True, scratch=scratch)
        t = time_ms(lambda: eng.ntt(x, scratch=scratch), reps)
        _row(results, "ntt_fwd", log_n, t, floor_ms=_floor(fwd), **fwd)
        t = time_ms(lambda: eng.ntt(x, inverse=True, scratch=scratch), reps)
        _row(results, "ntt_inv", log_n, t, floor_ms=_floor(inv), **inv)
        if log_n in (20, 24):
            a, b, c = (random_mont(cp, n, log_n + i) for i in range(3))
            eng.h_scalars(a, b, c)
            t = time_ms(lambda: eng.h_scalars(a, b, c), reps)
            h_inv = ntt_floor_ms(log_n, inverse=True, post_tab=True, shoup=eng.k.twiddles == "shoup")
            _row(results, "h_scalars(6 ntt + combine)", log_n, t, floor_ms=3 * _floor(fwd) + 3 * _floor(h_inv))
            del a, b, c
            l1, l2 = gntt.fourstep_split(log_n)
            z = x.reshape(1 << l1, 1 << l2, 8)
            for step, fn in (("fourstep_columns", lambda: eng.columns(z)),
                             ("fourstep_twiddle", lambda: eng.twiddle(z, log_n, 0)),
                             ("fourstep_rows", lambda: eng.rows(z)),
                             ("fourstep_transpose", lambda: cp.ascontiguousarray(z.transpose(1, 0, 2)))):
                _row(results, step, log_n, time_ms(fn, reps))
        del x, scratch
        cp.get_default_memory_pool().free_all_blocks()
    run_variants(results, tuple(s for s in sizes if s in (20, 22, 24)), reps)
    gather_rows(results, reps)


def run_variants(results: dict, sizes: tuple[int, ...], reps: int = 7, names: tuple[str, ...] = tuple(NTT_VARIANTS),
                 plans: tuple[int, ...] = VARIANT_PLANS, big512: bool = True, rounds: int = 1) -> None:
    """Each pass-kernel build of ``names`` (NTT_VARIANTS) under each plan of ``plans``, plus (``big512``)
    the 2^12-tile kernel at 512 threads: forward and inverse, equal to the default engine, with
    product counts; ``rounds`` times over, the builds alternating within each round."""
    import cupy as cp

    from distprove.backends.gpu import ntt as gntt

    if not sizes:
        return
    ref_eng = gntt.engine()
    engines = [(f"{name},plan{mp}", gntt.NttEngine(gntt.CupyKernels(NTT_VARIANTS[name]), mp), mp,
                "-DDP_CIOS_MUL" not in NTT_VARIANTS[name])
               for name in names for mp in plans]
    if big512:
        engines.append(("default,plan12,big512", gntt.NttEngine(gntt.CupyKernels(big_threads=512), 12), 12, True))
    for log_n in [s for _ in range(rounds) for s in sizes]:
        x = random_mont(cp, 1 << log_n, 100 + log_n)
        scratch = cp.empty_like(x)
        for inverse in (False, True):
            want = ref_eng.ntt(x.copy(), inverse, scratch)
            for label, eng, mp, f64 in engines:
                got = eng.ntt(x.copy(), inverse, scratch)  # also builds its tables
                same = bool(cp.array_equal(want, got))
                del got
                y = x.copy()
                t = time_ms(lambda: eng.ntt(y, inverse, scratch), reps)
                fl = ntt_floor_ms(log_n, inverse=inverse, max_pass_log=mp,
                                  shoup=eng.k.twiddles == "shoup", f64=f64)
                _row(results, f"ntt_{'inv' if inverse else 'fwd'}[{label}]", log_n, t,
                     equal_to_default=same, max_pass_log=mp, floor_ms=_floor(fl), **fl)
                del y
            del want
        for _, eng, *_ in engines:
            eng.clear()
        ref_eng.clear()
        del x, scratch
        cp.get_default_memory_pool().free_all_blocks()


def gather_rows(results: dict, reps: int = 7) -> None:
    """The gather of a, b and c = a∘b from synthetic CSR matrices."""
    import cupy as cp

    from distprove.backends.gpu.gather import DeviceCsr, gather

    # gather: synthetic CSR shaped like circom keys (about half the rows empty, ~2 terms each)
    for log_n in (20, 24):
        n = 1 << log_n
        rng = np.random.default_rng(log_n)
        n_vars = n // 2
        mats = []
        for _ in range(2):
            lens = rng.choice([0, 0, 1, 2, 3, 5], size=n).astype(np.uint32)
            ptr = np.concatenate([[0], np.cumsum(lens)]).astype(np.uint32)
            nnz = int(ptr[-1])
            sig = rng.integers(0, n_vars, size=nnz, dtype=np.uint32)
            mats.append(DeviceCsr(cp.asarray(ptr), cp.asarray(sig), random_mont(cp, nnz, 7)))
        w = random_mont(cp, n_vars, 8)
        nnz = int(mats[0].signal.size + mats[1].signal.size)
        t = time_ms(lambda: gather(mats[0], mats[1], w), reps)
        _row(results, "gather_abc", log_n, t, nnz=nnz,
             floor_ms=(nnz * (32 + 4 + 32) + 3 * n * 32) / BANDWIDTH_BPS * 1e3)
        del mats, w
        cp.get_default_memory_pool().free_all_blocks()
