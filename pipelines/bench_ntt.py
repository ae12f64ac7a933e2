"""Benchmarks of the GPU NTT, H step and gather (called by pipelines/bench_kernels.py).

Times are CUDA-event medians over >= 5 repetitions after warm-up. Each NTT row carries its floor:
bytes moved (every pass reads and writes the vector once; non-last passes also read their
twiddle table) over the copy bandwidth, and Fr multiplications (the butterflies' non-trivial
twiddles, plus one four-step twiddle per element on non-last passes) over the Fr multiplication rate;
the larger of the two is the floor.
"""

from __future__ import annotations

import statistics
from typing import Any, Callable

import numpy as np

BANDWIDTH_BPS = 4.3e12
"""Device-to-device copy bandwidth of an H200 measured here (bytes read + written per second)."""
FR_MUL_PER_S = 41e9
"""Fr Montgomery multiplications per second on an H200 (the project's planning figure)."""


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


def ntt_floor_ms(log_n: int) -> dict[str, float]:
    """Memory and multiplication floors of one NTT of size 2^log_n as planned by gpu/ntt.py."""
    from distprove.backends.gpu.ntt import plan

    n = 1 << log_n
    specs = plan(log_n)
    nbytes = sum(2 * n * 32 + (n * 32 if not s.last else 0) for s in specs)
    # radix-4 pairs of levels: the first pair needs n/4 multiplications, every later level n/2
    muls = sum((n // 4 + (s.m - 2) * n // 2 if s.m >= 2 else 0) + (0 if s.last else n) for s in specs)
    return {"floor_mem_ms": nbytes / BANDWIDTH_BPS * 1e3, "floor_mul_ms": muls / FR_MUL_PER_S * 1e3,
            "bytes": nbytes, "fr_muls": muls, "passes": len(specs)}


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
    """Time the NTT (forward, inverse), the H step, the staged four-step and the gather."""
    import cupy as cp

    from distprove.backends.gpu import compile as gcompile
    from distprove.backends.gpu import ntt as gntt
    from distprove.backends.gpu.gather import DeviceCsr, gather

    results["compile"] = [gcompile.measure_cold_warm(m) for m in ("ntt", "gather")]
    eng = gntt.engine()
    for log_n in sizes:
        n = 1 << log_n
        x = random_mont(cp, n, log_n)
        scratch = cp.empty_like(x)
        floor = ntt_floor_ms(log_n)
        fl = max(floor["floor_mem_ms"], floor["floor_mul_ms"])
        eng.ntt(x, scratch=scratch)  # builds the twiddle tables outside the timing
        eng.ntt(x, inverse=True, scratch=scratch)
        t = time_ms(lambda: eng.ntt(x, scratch=scratch), reps)
        _row(results, "ntt_fwd", log_n, t, floor_ms=fl, **floor)
        t = time_ms(lambda: eng.ntt(x, inverse=True, scratch=scratch), reps)
        _row(results, "ntt_inv", log_n, t, floor_ms=fl, **floor)
        if log_n in (20, 24):
            a, b, c = (random_mont(cp, n, log_n + i) for i in range(3))
            eng.h_scalars(a, b, c)
            t = time_ms(lambda: eng.h_scalars(a, b, c), reps)
            _row(results, "h_scalars(6 ntt + combine)", log_n, t, floor_ms=6 * fl)
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
    # build variants of the pass kernel: no minimum-blocks launch bound (78 registers, 3 blocks/SM);
    # the PTX carry-chain Montgomery product (checked equal to the default build first)
    for opt in ("-DNTT_MIN_BLOCKS=1", "-DDP_PTX_MUL"):
        if 24 not in sizes:
            break
        alt = gntt.NttEngine(gntt.CupyKernels((opt,)))
        x = random_mont(cp, 1 << 24, 1)
        scratch = cp.empty_like(x)
        ref = x.copy()
        eng.ntt(ref, scratch=scratch)
        got = x.copy()
        alt.ntt(got, scratch=scratch)
        same = bool(cp.array_equal(ref, got))
        t = time_ms(lambda: alt.ntt(x, scratch=scratch), reps)
        fl = ntt_floor_ms(24)
        _row(results, f"ntt_fwd[{opt[2:]}]", 24, t, equal_to_default=same,
             floor_ms=max(fl["floor_mem_ms"], fl["floor_mul_ms"]))
        del alt, x, scratch, ref, got
        cp.get_default_memory_pool().free_all_blocks()
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
