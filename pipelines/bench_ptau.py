"""GPU ``ptau prepare`` timings: one Lagrange level of size 2^p, G1 and G2 separately.

Inputs are the power sequences of an (insecure) dev ptau made here on the GPU
(``distprove.ptau.new_dev``). Each row times ``level_points(group, section, p, "gpu")`` (upload,
load, p passes, affine conversion, download) after a warm-up call that builds the twiddle tables
(their host GLV packing is timed separately) and compiles/loads the kernels. At the smallest
power the output is checked cheaply: the Lagrange points sum to in[0] (Σ_i L_i = 1). A whole prepare at power P costs about
Σ_{p ≤ P} (3 G1 + 1 G2 levels) + the extra G1 level P+1, i.e. ≈ 2·(4·G1(P) + G2(P)).

    python pipelines/bench_ptau.py --powers 16,18,20 --json bench_ptau.json
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))


def _sync() -> None:
    import cupy

    cupy.cuda.Device().synchronize()


def _check(group: Any, inp: Any, out: Any) -> bool:
    """Σ_i out[i] = in[0] (the Lagrange basis sums to 1), on the host."""
    from distprove import bn254

    total = bn254.to_jacobian(group, None)
    for q in bn254.points_from_limbs(group, out):
        total = bn254.jac_add_affine(group, total, q)
    return bn254.to_affine(group, total) == bn254.points_from_limbs(group, inp[:1])[0]


def bench(powers: list[int], groups: list[str], reps: int) -> list[dict[str, Any]]:
    from distprove.backends.gpu.groupfft import twiddles
    from distprove.bn254 import G1, G2
    from distprove.formats.ptau import read_ptau
    from distprove.ptau import level_points, new_dev

    rows = []
    with tempfile.TemporaryDirectory() as tmp:
        path = Path(tmp) / "dev.ptau"
        t0 = time.perf_counter()
        new_dev(path, max(powers), seed=1, device="gpu", warn=False)
        print(f"dev ptau power {max(powers)}: {time.perf_counter() - t0:.1f} s", flush=True)
        f = read_ptau(path)
        for gname in groups:
            group, section = (G1, f.tau_g1) if gname == "G1" else (G2, f.tau_g2)
            for p in powers:
                twiddles.cache_clear()
                t0 = time.perf_counter()
                twiddles(p)
                host_tw = time.perf_counter() - t0
                out = level_points(group, section, p, "gpu")  # warm-up: kernels loaded, tables cached
                times = []
                for _ in range(reps):
                    _sync()
                    t0 = time.perf_counter()
                    level_points(group, section, p, "gpu")
                    _sync()
                    times.append(time.perf_counter() - t0)
                row = {"group": gname, "log_n": p, "host_twiddles_s": host_tw, "level_s": statistics.median(times),
                       "points_per_s": (1 << p) / statistics.median(times)}
                if p == min(powers):
                    row["sum_check_ok"] = _check(group, section, out)
                rows.append(row)
                print(json.dumps(row), flush=True)
    return rows


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--powers", default="16,18,20", help="comma-separated log2 level sizes")
    ap.add_argument("--groups", default="G1,G2")
    ap.add_argument("--reps", type=int, default=3)
    ap.add_argument("--json", dest="json_out", default=None)
    args = ap.parse_args()
    rows = bench([int(p) for p in args.powers.split(",")], args.groups.split(","), args.reps)
    if args.json_out:
        Path(args.json_out).write_text(json.dumps(rows, indent=1))


if __name__ == "__main__":
    main()
