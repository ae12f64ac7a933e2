"""GPU ``ptau prepare`` timings: one Lagrange level of size 2^p, G1 and G2 separately.

Inputs are the power sequences of an (insecure) dev ptau made here on the GPU
(``distprove.ptau.new_dev``). Each row times ``level_points(group, section, p, "gpu")`` (upload,
load, device twiddle tables, p passes, affine conversion, download) after a warm-up call that
compiles/loads the kernels, then the two parts of the same level blocked as a Dask prepare runs it
(``half_s``: one half's unscaled sub-FFT, ``half_points``; ``columns_s``: the scaled last stage
over all columns, ``column_points``), and the device twiddle tables alone (``twiddles_s``). At the
smallest power the output is checked cheaply: the Lagrange points sum to in[0] (Σ_i L_i = 1). A
whole prepare at power P costs about Σ_{p ≤ P} (3 G1 + 1 G2 levels) + the extra G1 level P+1,
i.e. ≈ 2·(4·G1(P) + G2(P)).

``--prepare-power P`` times whole prepares of a dev ptau of power P instead: in process, then on
local clusters (``distprove.cluster.client.local_cluster``: one worker per GPU, CPU processes with
``--backend cpu``) of each ``--workers`` size and each ``--block-points`` setting
(``distprove.ptau.block-points``: "config" keeps the configured one, "none" runs every level as one
task), every worker warmed up first (kernels loaded) and the cluster's start not counted. Each row
has the seconds, the speedup over in process and, unless ``--no-check``, whether the output is
byte-identical to the in-process one.

    python pipelines/bench_ptau.py --powers 16,18,20 --json bench_ptau.json
    python pipelines/bench_ptau.py --prepare-power 22 --workers 1,2 --json bench_prepare.json
"""

from __future__ import annotations

import argparse
import filecmp
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


def _timed(fn: Any, reps: int) -> float:
    """Median seconds of ``fn()`` over ``reps`` calls, device-synchronised."""
    times = []
    for _ in range(reps):
        _sync()
        t0 = time.perf_counter()
        fn()
        _sync()
        times.append(time.perf_counter() - t0)
    return statistics.median(times)


def bench(powers: list[int], groups: list[str], reps: int) -> list[dict[str, Any]]:
    from distprove.backends.gpu.groupfft import device_twiddles
    from distprove.bn254 import G1, G2, R
    from distprove.formats.ptau import read_ptau
    from distprove.ptau import column_points, half_points, level_points, new_dev

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
                half = 1 << (p - 1)
                out = level_points(group, section, p, "gpu")  # warm-up: kernels loaded
                level_s = _timed(lambda: level_points(group, section, p, "gpu"), reps)
                halves = [half_points(group, section, p, b, "gpu") for b in (0, 1)]
                half_s = _timed(lambda: half_points(group, section, p, 1, "gpu"), 1)
                columns_s = _timed(lambda: column_points(group, p, 0, halves[0], halves[1], "gpu"), 1)
                twiddles_s = _timed(lambda: (device_twiddles(p, 0, half), device_twiddles(p, 0, half, pow(1 << p, -1, R))), reps)
                row = {"group": gname, "log_n": p, "level_s": level_s, "points_per_s": (1 << p) / level_s,
                       "half_s": half_s, "columns_s": columns_s, "blocked_over_level": (2 * half_s + columns_s) / level_s,
                       "twiddles_s": twiddles_s}
                if p == min(powers):
                    row["sum_check_ok"] = _check(group, section, out)
                rows.append(row)
                print(json.dumps(row), flush=True)
    return rows


def _warm_workers(client: Any, warm: Path, backend: str) -> None:
    """Run one small level of each group on every worker (kernels compiled/loaded, caches built)."""
    from distprove.ptau import compute_level

    futures = [
        client.submit(compute_level, str(warm), sid, 2, backend, 2, workers=[addr], allow_other_workers=False, pure=False)
        for addr in client.scheduler_info(n_workers=-1)["workers"]
        for sid in (2, 3)
    ]
    client.gather(futures)


def bench_prepare(power: int, workers: list[int], blocks: list[str], backend: str, check: bool,
                  directory: str | None) -> list[dict[str, Any]]:
    """Whole-prepare timings at ``power``: in process, then on local clusters of each size in
    ``workers`` with each block setting in ``blocks`` ("config", "none" or a point count)."""
    import dask.config
    from distributed import Client

    from distprove.cluster.client import local_cluster
    from distprove.ptau import block_points, new_dev, prepare

    rows: list[dict[str, Any]] = []
    with tempfile.TemporaryDirectory(dir=directory) as tmp:
        src, warm, ref = Path(tmp) / "dev.ptau", Path(tmp) / "warm.ptau", Path(tmp) / "in_process.ptau"
        t0 = time.perf_counter()
        new_dev(src, power, seed=1, device=backend, warn=False)
        new_dev(warm, 2, seed=2, device=backend, warn=False)
        print(f"dev ptau power {power}: {time.perf_counter() - t0:.1f} s", flush=True)
        prepare(warm, Path(tmp) / "warm_out.ptau", backend=backend)
        t0 = time.perf_counter()
        prepare(src, ref, backend=backend)
        base = time.perf_counter() - t0
        row: dict[str, Any] = {"power": power, "backend": backend, "mode": "in-process", "workers": 1,
                               "seconds": base, "speedup": 1.0}
        rows.append(row)
        print(json.dumps(row), flush=True)
        for n in workers:
            t0 = time.perf_counter()
            cluster = local_cluster(backend, n, dashboard_address=None)
            with cluster, Client(cluster) as client:
                client.wait_for_workers(n)
                _warm_workers(client, warm, backend)
                start = time.perf_counter() - t0
                for setting in blocks:
                    value = block_points() if setting == "config" else None if setting == "none" else int(setting)
                    out = Path(tmp) / f"dask_{n}.ptau"
                    with dask.config.set({"distprove.ptau.block-points": value}):
                        t0 = time.perf_counter()
                        prepare(src, out, backend=backend, client=client)
                        seconds = time.perf_counter() - t0
                    row = {"power": power, "backend": backend, "mode": "dask", "workers": n, "block_points": value,
                           "seconds": seconds, "speedup": base / seconds, "cluster_start_s": start}
                    if check:
                        row["identical"] = filecmp.cmp(ref, out, shallow=False)
                    out.unlink()
                    rows.append(row)
                    print(json.dumps(row), flush=True)
    return rows


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--powers", default="16,18,20", help="comma-separated log2 level sizes")
    ap.add_argument("--groups", default="G1,G2")
    ap.add_argument("--reps", type=int, default=3)
    ap.add_argument("--json", dest="json_out", default=None)
    ap.add_argument("--prepare-power", type=int, default=None, help="time whole prepares of a dev ptau of this power")
    ap.add_argument("--workers", default="1,2", help="with --prepare-power: comma-separated local cluster sizes")
    ap.add_argument("--block-points", default="config,none",
                    help="with --prepare-power: comma-separated distprove.ptau.block-points settings per cluster "
                         "(config, none or a point count)")
    ap.add_argument("--backend", default="gpu", choices=["cpu", "gpu"], help="with --prepare-power")
    ap.add_argument("--no-check", dest="check", action="store_false", help="with --prepare-power: skip the byte comparison")
    ap.add_argument("--dir", default=None, help="with --prepare-power: folder for the files (default: the temp folder)")
    args = ap.parse_args()
    if args.prepare_power is not None:
        rows = bench_prepare(args.prepare_power, [int(n) for n in args.workers.split(",")], args.block_points.split(","),
                             args.backend, args.check, args.dir)
    else:
        rows = bench([int(p) for p in args.powers.split(",")], args.groups.split(","), args.reps)
    if args.json_out:
        Path(args.json_out).write_text(json.dumps(rows, indent=1))


if __name__ == "__main__":
    main()
