"""Soak test: many small proofs through one long-lived local cluster, host (and GPU) memory sampled.

``--proofs`` witnesses (copies of tests/data/mini's witness, hard-linked) are proved in rounds of
``--round-size`` by :func:`distprove.batch` on one ``LocalCluster`` (CPU, single-threaded worker
processes) that lives for the whole run, as a cron-driven cluster does. After every round the
resident set size (psutil RSS) of the client process (which also runs the local scheduler) and of
each worker process is sampled, after a ``gc.collect()`` everywhere, and, when CuPy sees a GPU on a
worker, that worker's CuPy pool bytes and the device's used memory. The first sample (after round
1: imports done, key resident, pools warm) is the baseline; the report's ``growth`` is the last
sample minus the baseline. Proof outputs are removed after each round (they are checked by the
batch itself: verification is on).

    python pipelines/soak.py --proofs 1000 --round-size 100 --workers 2 --json bench/results/soak-<date>.json
"""

from __future__ import annotations

import argparse
import datetime
import gc
import json
import os
import platform
import shutil
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

REPO = Path(__file__).resolve().parents[1]
MINI_KEY = REPO / "tests" / "data" / "mini" / "mini_0001.zkey"
MINI_WTNS = REPO / "tests" / "data" / "mini" / "witness.wtns"
MiB = 1 << 20


def _process_memory(dask_worker: Any = None) -> dict[str, Any]:
    """RSS of this process after a full collection, and GPU memory when CuPy sees a device."""
    import psutil

    gc.collect()
    out: dict[str, Any] = {"pid": os.getpid()}
    try:  # first: asking the device creates a CUDA context in this process (host and device memory)
        import cupy

        if cupy.cuda.runtime.getDeviceCount() > 0:
            free, total = cupy.cuda.Device().mem_info
            out["gpu_used"] = total - free
            out["gpu_pool"] = cupy.get_default_memory_pool().total_bytes()
    except Exception:  # no CuPy, no driver or no device: host memory only
        pass
    out["rss"] = psutil.Process().memory_info().rss
    return out


def sample(client: Any, proofs_done: int, t0: float) -> dict[str, Any]:
    """One memory sample of the client process and every worker (by worker address)."""
    workers = client.run(_process_memory)
    return {
        "proofs_done": proofs_done,
        "seconds": round(time.perf_counter() - t0, 3),
        "client": _process_memory(),
        "workers": {addr: workers[addr] for addr in sorted(workers)},
    }


def _stage(folder: Path, witness: Path, start: int, count: int) -> None:
    if folder.exists():
        shutil.rmtree(folder)
    folder.mkdir(parents=True)
    for i in range(start, start + count):
        try:
            os.link(witness, folder / f"w{i:05d}.wtns")
        except OSError:  # another file system: copy
            shutil.copy(witness, folder / f"w{i:05d}.wtns")


def growth(samples: list[dict[str, Any]]) -> dict[str, Any]:
    """Memory of the last sample minus the first (baseline): client RSS, total and max per-worker RSS."""
    first, last = samples[0], samples[-1]
    per_worker = {
        addr: last["workers"][addr]["rss"] - first["workers"][addr]["rss"]
        for addr in first["workers"]
        if addr in last["workers"] and last["workers"][addr]["pid"] == first["workers"][addr]["pid"]
    }
    out: dict[str, Any] = {
        "client_rss": last["client"]["rss"] - first["client"]["rss"],
        "worker_rss_max": max(per_worker.values(), default=0),
        "worker_rss": per_worker,
        "workers_restarted": len(first["workers"]) - len(per_worker),
    }
    gpu = [
        last["workers"][a].get("gpu_used", 0) - first["workers"][a].get("gpu_used", 0)
        for a in per_worker
        if "gpu_used" in first["workers"][a]
    ]
    if gpu:
        out["gpu_used_max"] = max(gpu)
    return out


def run_soak(
    proofs: int,
    round_size: int,
    workers: int,
    workdir: Path,
    key: Path = MINI_KEY,
    witness: Path = MINI_WTNS,
    backend: str = "cpu",
    verify: bool = True,
    client: Any = None,
) -> dict[str, Any]:
    """Prove ``proofs`` witnesses in rounds on one cluster (``client``'s, or a new local one) and
    return the report: samples after each round, growth, throughput and failures."""
    import distprove
    from distributed import Client, LocalCluster

    own = client is None
    cluster = None
    if own:
        cluster = LocalCluster(n_workers=workers, threads_per_worker=1, processes=True, dashboard_address=None)
        client = Client(cluster)
    try:
        client.wait_for_workers(workers)
        # A sample before the first round, discarded: its own side effects (the client's CUDA
        # context, about 0.5 GB of device memory and 0.25 GB of RSS on an H200 host, made by the
        # device query) must not land between the baseline and the next sample as "growth".
        sample(client, 0, time.perf_counter())
        t0 = time.perf_counter()
        samples: list[dict[str, Any]] = []
        failed: list[str] = []
        done = 0
        rounds = 0
        prove_seconds = 0.0
        while done < proofs:
            count = min(round_size, proofs - done)
            wdir, out = workdir / "witnesses", workdir / "out"
            _stage(wdir, witness, done, count)
            t1 = time.perf_counter()
            report = distprove.batch(wdir, key=key, out_dir=out, client=client, backend=backend, verify=verify, echo=None)
            prove_seconds += time.perf_counter() - t1
            failed += [f"{r.name}: {r.reason}" for r in report.failed]
            if len(report.proved) != count:
                failed.append(f"round {rounds}: {len(report.proved)} of {count} proved")
            shutil.rmtree(out, ignore_errors=True)
            done += count
            rounds += 1
            samples.append(sample(client, done, t0))
            print(
                f"round {rounds}: {done}/{proofs} proofs, client RSS {samples[-1]['client']['rss'] / MiB:.1f} MiB, "
                "workers " + ", ".join(f"{w['rss'] / MiB:.1f}" for w in samples[-1]["workers"].values()) + " MiB",
                flush=True,
            )
        return {
            "date": datetime.datetime.now(datetime.timezone.utc).strftime("%Y-%m-%dT%H:%M:%SZ"),
            "host": platform.node(),
            "cpu_count": os.cpu_count(),
            "proofs": proofs,
            "round_size": round_size,
            "rounds": rounds,
            "workers": workers,
            "backend": backend,
            "verify": verify,
            "key": os.path.relpath(key, REPO) if str(key).startswith(str(REPO)) else str(key),
            "wall_seconds": round(time.perf_counter() - t0, 3),
            "proofs_per_second": round(proofs / prove_seconds, 3) if prove_seconds else 0.0,
            "failed": failed,
            "baseline": "the sample after round 1 (warm: key resident, pools started)",
            "growth": growth(samples),
            "samples": samples,
        }
    finally:
        if own:
            client.close()
            cluster.close()


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--proofs", type=int, default=1000)
    ap.add_argument("--round-size", type=int, default=100)
    ap.add_argument("--workers", type=int, default=2)
    ap.add_argument("--backend", default="cpu", choices=["cpu", "gpu", "auto"])
    ap.add_argument("--no-verify", dest="verify", action="store_false")
    ap.add_argument("--json", dest="json_path", default=None,
                    help="report path (default bench/results/soak-<UTC date>.json)")
    args = ap.parse_args(argv)
    path = Path(args.json_path or REPO / "bench" / "results" / f"soak-{datetime.date.today().isoformat()}.json")
    with tempfile.TemporaryDirectory(prefix="distprove-soak-") as tmp:
        report = run_soak(args.proofs, args.round_size, args.workers, Path(tmp), backend=args.backend, verify=args.verify)
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps(report, indent=1) + "\n", encoding="utf-8")
    g = report["growth"]
    print(
        f"{report['proofs']} proofs in {report['wall_seconds']:.1f} s ({report['proofs_per_second']:.2f} proofs/s), "
        f"{len(report['failed'])} failed; growth after the first round: client {g['client_rss'] / MiB:+.1f} MiB, "
        f"worker max {g['worker_rss_max'] / MiB:+.1f} MiB -> {path}"
    )
    return 0 if not report["failed"] else 1


if __name__ == "__main__":
    sys.exit(main())
