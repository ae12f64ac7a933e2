"""Batch throughput and latency of distprove.batch on 1 vs N workers (one per GPU on the GPU machine).

First a bare baseline in this process, without Dask: one backend, the key opened once, one warm-up
proof, then the same ``--proofs`` witnesses proved in a plain loop with ``distprove.prove``, checked
(in groups like the batch's, or not at all) and written with the batch's own helpers; proofs per
second with and without the pairing check, and the mean seconds per stage (``Proof.timings``);
and, unchecked, the same loop pipelined with ``distprove.prover.prove_many`` (each proof's host
assembly beside the next proof's MSMs, as a worker's prove-whole task of several proofs runs).
On GPUs, unchecked, that pipelined loop also runs in n x K processes at once (K =
``--workers-per-gpu`` a GPU, no Dask) for each worker count n with n x K > 1: what that many
independent provers get from this host.

Then for each worker count (``--workers-per-gpu K``: each GPU worker K processes sharing the GPU;
the ratios stay per GPU, against one bare process): a warm-up batch (kernels compiled, key
resident), then

* throughput: ``--proofs`` witnesses in data mode -> proofs per second (unchecked: the median of
  :data:`BARE_LOOPS` batches), and ``throughput_vs_bare`` =
  that / (workers x the bare loop's proofs per second with the same pairing-check setting), and
  without the check ``throughput_vs_bare_pipelined`` against the pipelined loop (the same code
  as the worker's, so this ratio is what Dask itself costs) and ``throughput_vs_bare_parallel``
  against the n bare processes at once (what Dask costs on n GPUs, host contention aside);
* latency: one witness in each planner mode -> seconds from submit to the verified proof on disk.

Data mode proves a key whose domain is below ``distprove.planner.fuse-below`` in one task per
proof, or several proofs per task (``--proofs-per-task``, see ``Plan.proofs_per_task``); ``--fuse-below
null`` measures the three-task graph instead (a number sets the threshold).

The key and witnesses come from ``--key``/``--witnesses``, or are made here with the synthetic
circuit generator and the (insecure, benchmark-only) dev setup: ``--synth chain --log-n 16``.
Outputs go to temporary folders that are emptied before each measured batch, so nothing is skipped.

    python pipelines/bench_batch.py --synth chain --log-n 18 --workers 1,2 --proofs 16 --json bench_batch.json
"""

from __future__ import annotations

import argparse
import datetime
import json
import os
import shutil
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from benchlib import GpuBusy  # noqa: E402


def synth_inputs(kind: str, log_n: int, workdir: Path, witnesses: int) -> tuple[Path, list[Path]]:
    """A dev key store and ``witnesses`` witnesses of a synthetic circuit of about 2^log_n constraints."""
    from distprove.devsetup import dev_setup
    from distprove.synth import make_circuit, write_circuit

    circ = make_circuit(kind, (1 << log_n) - 2, public=1)
    cdir = workdir / "circuit"
    meta = write_circuit(circ, cdir, witnesses=witnesses)
    store = workdir / "key.zarr"
    dev_setup(cdir / "circuit.r1cs", store, seed=1, quiet=True)
    return store, [cdir / w for w in meta["witnesses"]]


def gpu_names() -> list[str]:
    """Names of the visible GPUs (empty without CuPy or a device)."""
    try:
        import cupy

        names = [cupy.cuda.runtime.getDeviceProperties(i)["name"] for i in range(cupy.cuda.runtime.getDeviceCount())]
    except Exception:  # no CuPy, no driver, no device: a CPU run
        return []
    return [n.decode() if isinstance(n, bytes) else n for n in names]


def stage(witnesses: list[Path], count: int, folder: Path) -> Path:
    """A fresh witness folder holding ``count`` witnesses (the given ones, repeated under new names)."""
    if folder.exists():
        shutil.rmtree(folder)
    folder.mkdir(parents=True)
    for i in range(count):
        src, dst = witnesses[i % len(witnesses)], folder / f"w{i:04d}.wtns"
        try:
            os.link(src, dst)
        except OSError:  # another file system: copy (the batch refuses links that leave the folder)
            shutil.copyfile(src, dst)
    return folder


def prove_loop(key: Any, backend: Any, vks: dict[str, Any], wdir: Path, check: bool, pipelined: bool = False) -> list[Any]:
    """Prove every witness of ``wdir`` in this process, one after the other, with ``distprove.prove``
    (``pipelined``: with ``distprove.prover.prove_many``, each proof's assembly beside the next
    proof's MSMs, as a worker's prove-whole task of several proofs does it).

    Proofs are checked (``check``) and written as the batch does it: ``output.check_and_write``
    (one batched pairing check per group of ``BatchOptions.verify_group`` proofs, write-once
    outputs) into ``<wdir>-out``. Returns the outcomes (their seconds: the proof's timings,
    verify and write).
    """
    from distprove.cluster.batching import BatchOptions
    from distprove.witness.discovery import discover
    from distprove.prover import prove, prove_many
    from distprove.cluster.output import check_and_write
    from distprove.cluster.tasks import Assembled, ProofSpec, Status

    out = wdir.parent / (wdir.name + "-out")
    if out.exists():
        shutil.rmtree(out)
    jobs = discover(wdir, key.path, out)
    outcomes: list[Any] = []
    ready: list[Any] = []
    proofs = (prove_many(key, [job.witness for job in jobs], backend) if pipelined
              else (prove(key, job.witness, backend) for job in jobs))
    for i, (job, proof) in enumerate(zip(jobs, proofs)):
        spec = ProofSpec(job.name, job.witness, key.path, key.content_hash, job.proof_path, job.public_path)
        ready.append(Assembled(spec, proof, dict(proof.timings)))
        if len(ready) == BatchOptions.verify_group or i == len(jobs) - 1:
            outcomes += check_and_write(ready, vks, check, "bare")
            ready = []
    failed = [o for o in outcomes if o.status != Status.PROVED]
    if failed:
        raise SystemExit(f"bench bare loop failed: {failed[0].name}: {failed[0].reason}")
    return outcomes


def stage_means(outcomes: list[Any]) -> dict[str, float]:
    """Mean seconds per stage over the outcomes (stages in the order the prover reports them)."""
    totals: dict[str, float] = {}
    for o in outcomes:
        for k, v in o.seconds.items():
            totals[k] = totals.get(k, 0.0) + v
    return {k: v / len(outcomes) for k, v in totals.items()}


BARE_LOOPS = 3
"""Measured loops of every unchecked rate (bare, bare in n processes, Dask on n workers), each
reported as the median: on the H200 hosts one loop of the 2^13 fixture key ran 25.8 or 39.5
proofs/s in back-to-back runs, and 70 to 94 in one run of probe_worker_path.py (host Python
speed varies by the minute), so single loops cannot resolve a 10% difference."""


def bare(key_path: Path, witnesses: list[Path], proofs: int, backend_name: str, workdir: Path,
         checks: tuple[bool, ...] = (False, True)) -> dict[str, Any]:
    """The in-process baseline: ``proofs`` proofs in a plain loop, without and/or with the pairing
    check (``checks``).

    One backend and the key opened once (its per-key state stays resident in the backend), one
    warm-up proof (checked and written), then each measured loop from staging the witnesses to the
    last proof on disk (unchecked: the median of :data:`BARE_LOOPS` loops). The backend's device state is released at the end, before the Dask runs.
    """
    from distprove.backends.select import get_backend
    from distprove.formats.jsonio import read_vk
    from distprove.keystore import open_key

    backend = get_backend(backend_name)
    key = open_key(key_path)
    vks = {key.content_hash: read_vk(key.vk_json())}
    prove_loop(key, backend, vks, stage(witnesses, 1, workdir / "bare-warm"), True)
    result: dict[str, Any] = {"backend": backend.name, "proofs": proofs}
    for check, pipelined in [(c, False) for c in checks] + [(False, True)]:
        label = ("verify" if check else "no_verify") + ("_pipelined" if pipelined else "")
        loops = []
        for _ in range(1 if check else BARE_LOOPS):  # unchecked: the median of a few loops
            t0 = time.perf_counter()
            outcomes = prove_loop(key, backend, vks, stage(witnesses, proofs, workdir / "bare"), check, pipelined)
            loops.append((time.perf_counter() - t0, outcomes))
        loops.sort(key=lambda lo: lo[0])
        wall, outcomes = loops[len(loops) // 2]
        result[label] = {"proofs_per_s": proofs / wall, "wall_s": wall, "stage_mean_s": stage_means(outcomes),
                         "loops_proofs_per_s": [proofs / w for w, _ in loops]}
        means = dict(result[label]["stage_mean_s"])
        means["prove total"] = means.pop("total", 0.0)
        shown = ", ".join(f"{k} {v:.3f}" for k, v in means.items())
        print(
            f"bare in-process ({backend.name}{', pipelined' if pipelined else ''}), pairing check {'on' if check else 'off'}: "
            f"{proofs / wall:.2f} proofs/s ({proofs} proofs in {wall:.1f} s); mean s/proof: {shown}",
            flush=True,
        )
    release = getattr(backend, "evict", None)
    if release is not None:
        release()
    return result


def _bare_child(gpu: int, process: int, backend_name: str, key_path: Path, witnesses: list[Path], proofs: int,
                folder: Path, barrier: Any, results: Any) -> None:
    """Process ``process`` of :func:`bare_parallel`: the pipelined unchecked loop on GPU ``gpu``."""
    os.environ["CUDA_VISIBLE_DEVICES"] = str(gpu)  # before CuPy is imported in this fresh process
    from distprove.backends.select import get_backend
    from distprove.formats.jsonio import read_vk
    from distprove.keystore import open_key

    backend = get_backend(backend_name)
    key = open_key(key_path)
    vks = {key.content_hash: read_vk(key.vk_json())}
    prove_loop(key, backend, vks, stage(witnesses, 1, folder / "warm"), True)
    for loop in range(BARE_LOOPS):
        wdir = stage(witnesses, proofs, folder / "run")
        barrier.wait()
        t0 = time.time()
        outcomes = prove_loop(key, backend, vks, wdir, False, True)
        results.put({"gpu": gpu, "process": process, "loop": loop, "start": t0, "stop": time.time(), "stage_mean_s": stage_means(outcomes)})


def bare_parallel(key_path: Path, witnesses: list[Path], proofs: int, n: int, workdir: Path, backend_name: str = "gpu",
                  per_gpu: int = 1) -> dict[str, Any]:
    """The pipelined bare loop in ``n`` processes at once, ``per_gpu`` a GPU (process i on GPU
    i // per_gpu), no Dask: what the host and the GPUs give ``n`` independent provers (the Dask
    batch on as many worker processes is compared with it).

    Each process proves ``proofs`` proofs after its own warm-up, :data:`BARE_LOOPS` times; all
    start each loop together (a barrier). A loop's throughput: n x proofs over the span from the
    first start to the last stop; the median loop is reported.
    """
    import multiprocessing as mp

    ctx = mp.get_context("spawn")
    barrier, results = ctx.Barrier(n), ctx.Queue()
    procs = [ctx.Process(target=_bare_child, args=(i // per_gpu, i, backend_name, key_path, witnesses, proofs,
                                                   workdir / f"par{n}-{i}", barrier, results))
             for i in range(n)]
    for pr in procs:
        pr.start()
    got = [results.get(timeout=600) for _ in range(n * BARE_LOOPS)]
    for pr in procs:
        pr.join()
    loops = []
    for loop in range(BARE_LOOPS):
        mine = sorted((g for g in got if g["loop"] == loop), key=lambda g: g["process"])
        span = max(g["stop"] for g in mine) - min(g["start"] for g in mine)
        loops.append({"proofs_per_s": n * proofs / span, "wall_s": span,
                      "each_proofs_per_s": [proofs / (g["stop"] - g["start"]) for g in mine],
                      "stage_mean_s": [g["stage_mean_s"] for g in mine]})
    loops.sort(key=lambda lo: lo["proofs_per_s"])
    mid = loops[len(loops) // 2]
    print(f"bare in-process ({backend_name}, pipelined) x {n} processes at once ({per_gpu} a GPU): {mid['proofs_per_s']:.2f} proofs/s "
          f"(loops {', '.join(format(lo['proofs_per_s'], '.1f') for lo in loops)}); "
          f"each {', '.join(f'{e:.1f}' for e in mid['each_proofs_per_s'])} proofs/s", flush=True)
    return {"processes": n, "per_gpu": per_gpu, **mid, "loops_proofs_per_s": [lo["proofs_per_s"] for lo in loops]}


def idle_gaps(records: list[dict], t0: float, t1: float) -> dict[str, Any]:
    """Where a batch's wall time [t0, t1] (time.time()) went on each worker, from the task stream:
    seconds before its first task, in gaps between tasks (the largest too) and after its last: a
    gap is time the worker ran none of the batch's tasks."""
    per: dict[str, list[tuple[float, float]]] = {}
    for rec in records:
        for ss in rec.get("startstops", ()):
            if ss.get("action") == "compute":
                per.setdefault(rec.get("worker", "?"), []).append((ss["start"], ss["stop"]))
    out: dict[str, Any] = {}
    for w, spans in per.items():
        spans.sort()
        gaps = [b[0] - a[1] for a, b in zip(spans, spans[1:]) if b[0] > a[1]]
        out[w] = {"tasks": len(spans), "busy_s": sum(b - a for a, b in spans), "before_first_s": spans[0][0] - t0,
                  "between_s": sum(gaps), "largest_gap_s": max(gaps, default=0.0), "after_last_s": t1 - spans[-1][1]}
    return out


def run_batch(client: Any, key: Path, wdir: Path, mode: str, backend: str, verify: bool, verify_in: str = "workers",
              fourstep_min_domain: int | None = None) -> Any:
    import distprove

    out = wdir.parent / (wdir.name + "-out")
    if out.exists():
        shutil.rmtree(out)
    report = distprove.batch(wdir, key=key, out_dir=out, client=client, mode=mode, backend=backend, verify=verify,
                             verify_in=verify_in, fourstep_min_domain=fourstep_min_domain, echo=None)
    if report.failed:
        raise SystemExit(f"bench batch failed:\n{report.summary()}")
    return report


def bench(
    key: Path,
    witnesses: list[Path],
    workers: list[int],
    proofs: int,
    backend: str,
    workdir: Path,
    verify: bool,
    verify_in: str,
    bare_rate: float,
    switch_interval: float | None = None,
    pipelined_rate: float | None = None,
    parallel_rates: dict[int, float] | None = None,
    fourstep_min_domain: int | None = None,
) -> list[dict]:
    """Throughput and latency of distprove.batch on each worker count (``bare_rate``: the bare
    loop's proofs per second with the same pairing-check setting, for ``throughput_vs_bare``;
    ``pipelined_rate``: the pipelined bare loop's, unchecked, for ``throughput_vs_bare_pipelined``;
    ``fourstep_min_domain``: also time one split-mode proof with H as four-step blocks across the
    workers (``latency_split_fourstep_s``); ``parallel_rates``: n -> the pipelined loop's proofs
    per second in n processes at once, for
    ``throughput_vs_bare_parallel``; ``switch_interval``: the workers' ``sys.setswitchinterval``,
    an experiment)."""
    from distributed import Client, get_task_stream

    from distprove.cluster.client import local_cluster

    rows = []
    for n in workers:
        cluster = local_cluster(backend, n_workers=n, dashboard_address=None)
        processes = len(cluster.worker_spec)  # n, or n x distprove.cluster.workers-per-gpu on GPUs
        with cluster, Client(cluster) as client:
            client.wait_for_workers(processes)
            if switch_interval is not None:
                client.run(sys.setswitchinterval, switch_interval)
            # Enough warm-up proofs that every worker proves some (compiles, loads the key).
            run_batch(client, key, stage(witnesses, 8 * processes, workdir / "warm"), "data", backend, verify, verify_in)
            runs = []
            for _ in range(1 if verify else BARE_LOOPS):  # unchecked: the median, as for the bare loops
                t0, wall0 = time.perf_counter(), time.time()
                with GpuBusy() as busy, get_task_stream(client) as stream:
                    thr = run_batch(client, key, stage(witnesses, proofs, workdir / "thr"), "data", backend, verify, verify_in)
                runs.append((time.perf_counter() - t0, wall0, thr, stream.data, busy.percent))
            runs.sort(key=lambda run: run[0])
            wall, wall0, thr, records, gpu_busy = runs[len(runs) // 2]
            row: dict[str, Any] = {
                "workers": n,
                "worker_processes": processes,
                "proofs": proofs,
                "throughput_proofs_per_s": proofs / wall,
                "throughput_wall_s": wall,
                "throughput_vs_bare": proofs / wall / (n * bare_rate),
                "throughput_vs_bare_pipelined": proofs / wall / (n * pipelined_rate) if pipelined_rate else None,
                "throughput_vs_bare_parallel": (proofs / wall / parallel_rates[n]
                                                if parallel_rates and n in parallel_rates else None),
                "worker_cpus": client.run(lambda: len(os.sched_getaffinity(0))),
                "stage_seconds": thr.stage_seconds,
                "proof_stage_mean_s": stage_means(thr.proved),
                "worker_time": idle_gaps(records, wall0, wall0 + wall),
                "loops_proofs_per_s": [proofs / run[0] for run in runs],
                "gpu_busy_percent": gpu_busy,
            }
            latencies = [("data", "data", None), ("split", "split", None)]
            if fourstep_min_domain is not None and n > 1:
                latencies.append(("split_fourstep", "split", fourstep_min_domain))
            for label, mode, threshold in latencies:
                t0 = time.perf_counter()
                lat = run_batch(client, key, stage(witnesses, 1, workdir / f"lat-{label}"), mode, backend, verify, verify_in,
                                threshold)
                row[f"latency_{label}_s"] = time.perf_counter() - t0
                row[f"latency_{label}_stages"] = lat.stage_seconds
            rows.append(row)
            print(
                f"{n} workers{f' ({processes} processes)' if processes != n else ''}: {row['throughput_proofs_per_s']:.2f} proofs/s ({proofs} proofs in {wall:.1f} s; loops "
                f"{', '.join(f'{r:.1f}' for r in row['loops_proofs_per_s'])}), "
                f"{row['throughput_vs_bare']:.2f} of {n} x bare"
                + (f", {row['throughput_vs_bare_pipelined']:.2f} of {n} x pipelined bare; "
                   if row["throughput_vs_bare_pipelined"] else "; ") +
                (f"{row['throughput_vs_bare_parallel']:.2f} of {n} bare processes; "
                 if row["throughput_vs_bare_parallel"] else "") +
                (f"GPU busy {', '.join(f'{p:.0f}%' for p in gpu_busy)}; " if gpu_busy else "") +
                f"latency data {row['latency_data_s']:.2f} s, split {row['latency_split_s']:.2f} s"
                + (f", split with four-step H {row['latency_split_fourstep_s']:.2f} s" if "latency_split_fourstep_s" in row else ""),
                flush=True,
            )
    return rows


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--key", type=Path, help="key store or .zkey (else --synth)")
    ap.add_argument("--witnesses", type=Path, help="folder of .wtns for --key")
    ap.add_argument("--synth", default="chain", help="synthetic circuit kind when no --key (chain, bits, random)")
    ap.add_argument("--log-n", type=int, default=16, help="synthetic circuit size, about 2^N constraints")
    ap.add_argument("--workers", default="1,2", help="worker counts to compare, e.g. 1,2,4")
    ap.add_argument("--proofs", type=int, default=16, help="proofs in the throughput batch")
    ap.add_argument("--workers-per-gpu", type=int, default=1,
                    help="worker processes per GPU of the Dask batches (distprove.cluster.workers-per-gpu); the "
                         "ratios stay per GPU, against one bare process")
    ap.add_argument("--backend", default="auto", choices=("auto", "cpu", "gpu"))
    ap.add_argument("--no-verify", action="store_true", help="skip the pairing check before writing (measures proving alone)")
    ap.add_argument("--verify-in", default="workers", choices=("workers", "client"), help="where proofs are checked")
    ap.add_argument("--fuse-below", help="distprove.planner.fuse-below for the batches: a domain size, or null (never fuse)")
    ap.add_argument("--switch-interval", type=float, help="sys.setswitchinterval on the workers (seconds; an experiment)")
    ap.add_argument("--proofs-per-task", type=int, help="distprove.planner.proofs-per-task for the batches (fused keys)")
    ap.add_argument("--group-domain", type=int, help="distprove.planner.group-domain for the batches (fused keys)")
    ap.add_argument("--groups-in-flight", type=int, help="distprove.msm.groups-in-flight for the loops and the "
                    "workers: groups a grouped pipeline keeps started before waiting for the one before")
    ap.add_argument("--group-proofs", help="distprove.msm.group-proofs for the loops and the workers: proofs proved "
                    "as one group (grouped MSMs combined on the device), or null (the backend's choice, the default)")
    ap.add_argument("--fourstep-min-domain", type=int,
                    help="also time one split-mode proof with H as four-step blocks across the workers (this threshold)")
    ap.add_argument("--pipelined-only", action="store_true",
                    help="of the bare loops run only the pipelined one (the best; at thousands of small proofs the "
                         "one-at-a-time loops take minutes); ratios are then against it")
    ap.add_argument("--no-parallel", action="store_true",
                    help="skip the pipelined bare loop in --workers-per-gpu processes per GPU at once (GPU runs without "
                         "the pairing check)")
    ap.add_argument("--json", type=Path, help="write the results here")
    args = ap.parse_args()
    if args.proofs < 1:
        ap.error("--proofs must be at least 1")
    if args.workers_per_gpu < 1:
        ap.error("--workers-per-gpu must be at least 1")
    planner: dict[str, Any] = {}  # distprove.planner settings the options override
    if args.fuse_below is not None:
        if args.fuse_below != "null" and not args.fuse_below.isdigit():
            ap.error("--fuse-below must be a domain size or null")
        planner["fuse-below"] = None if args.fuse_below == "null" else int(args.fuse_below)
    if args.proofs_per_task is not None:
        planner["proofs-per-task"] = args.proofs_per_task
    if args.group_domain is not None:
        planner["group-domain"] = args.group_domain
    import dask.config

    from distprove import config
    from distprove.cluster.planner import split_hands_h_over

    dask.config.set({f"distprove.planner.{k}": v for k, v in planner.items()})
    dask.config.set({"distprove.cluster.workers-per-gpu": args.workers_per_gpu})
    if args.group_proofs is not None:
        dask.config.set({"distprove.msm.group-proofs": None if args.group_proofs == "null" else int(args.group_proofs)})
    if args.groups_in_flight is not None:
        dask.config.set({"distprove.msm.groups-in-flight": args.groups_in_flight})
    settings = config.settings()
    with tempfile.TemporaryDirectory(prefix="bench-batch-") as tmp:
        workdir = Path(tmp)
        if args.key is not None:
            if args.witnesses is None:
                ap.error("--key needs --witnesses")
            key, witnesses = args.key, sorted(args.witnesses.glob("*.wtns"))
            if not witnesses:
                ap.error(f"{args.witnesses}: no *.wtns files")
        else:
            t0 = time.perf_counter()
            key, witnesses = synth_inputs(args.synth, args.log_n, workdir, witnesses=4)
            print(f"synthetic {args.synth} 2^{args.log_n} key and witnesses in {time.perf_counter() - t0:.1f} s", flush=True)
        workers = [int(w) for w in args.workers.split(",")]
        checks = () if args.pipelined_only else (False,) if args.no_verify else (False, True)
        base = bare(key, witnesses, args.proofs, args.backend, workdir, checks)
        bare_rate = base["no_verify_pipelined" if args.pipelined_only else "no_verify" if args.no_verify else "verify"]["proofs_per_s"]
        pipelined_rate = base["no_verify_pipelined"]["proofs_per_s"] if args.no_verify or args.pipelined_only else None
        parallel = {}
        if args.no_verify and args.backend == "gpu" and not args.no_parallel:
            k = args.workers_per_gpu
            parallel = {n: bare_parallel(key, witnesses, args.proofs, n * k, workdir, per_gpu=k) for n in workers if n * k > 1}
        rows = bench(key, witnesses, workers, args.proofs, args.backend, workdir, not args.no_verify, args.verify_in, bare_rate,
                     args.switch_interval, pipelined_rate, {n: p["proofs_per_s"] for n, p in parallel.items()},
                     args.fourstep_min_domain)
    result = {"date": datetime.datetime.now(datetime.timezone.utc).isoformat(timespec="seconds"), "gpus": gpu_names(),
              "key": str(args.key or f"synth {args.synth} 2^{args.log_n}"), "backend": args.backend,
              "verify": not args.no_verify, "verify_in": args.verify_in, "fuse_below": settings.fuse_below,
              "proofs_per_task": settings.proofs_per_task, "group_domain": settings.group_domain,
              "group_proofs": config.group_proofs(), "groups_in_flight": config.groups_in_flight(),
              # how the split rows handed H to H tasks on other workers
              "split_h": "host" if split_hands_h_over(base["backend"]) else "recompute",
              "switch_interval": args.switch_interval, "workers_per_gpu": args.workers_per_gpu, "rows": rows, "bare": base,
              "bare_parallel": list(parallel.values()),
              "commit": os.environ.get("DISTPROVE_GIT_COMMIT", "")}
    if args.json:
        args.json.write_text(json.dumps(result, indent=1))
    print(json.dumps(result, indent=1))


if __name__ == "__main__":
    main()
