"""How the host's per-process speed holds up when several prover processes run at once.

A GPU batch spends a few milliseconds of host Python per proof (window sums to the proof: doubling
chains in G1 and G2 on big integers), so N workers scale only as far as N processes keep their
single-process speed. This runs the same host workload, the blinding-and-Horner arithmetic of one
proof (:func:`distprove.curve.combination` over G1 and G2 scalar terms), in 1, 2, 4, ...
processes at once (started together by a barrier) and reports each process's rate against one alone;
then once more with each process pinned to the CPUs NVML reports for "its" GPU, as dask-cuda's
CPUAffinity plugin pins workers. It also records the CPU model and each GPU's NVML CPU list.

    python pipelines/host_scaling.py --procs 1,2,4 --seconds 3 --json host_scaling.json
"""

from __future__ import annotations

import argparse
import datetime
import json
import os
import sys
import time
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))


def gpu_cpu_lists() -> list[list[int]]:
    """The CPUs NVML (through dask-cuda) reports as close to each GPU; empty without GPUs or dask-cuda."""
    try:
        from dask_cuda.utils import get_cpu_affinity, get_gpu_count

        return [sorted(get_cpu_affinity(i)) for i in range(get_gpu_count())]
    except Exception:  # no dask-cuda, NVML or GPU: nothing to pin to
        return []


def cpu_model() -> dict[str, Any]:
    """Model name, logical CPUs and this process's affinity, from /proc/cpuinfo and os."""
    info: dict[str, Any] = {"logical_cpus": os.cpu_count(), "affinity": len(os.sched_getaffinity(0))}
    try:
        text = Path("/proc/cpuinfo").read_text()
        for field in ("model name", "siblings", "cpu cores"):
            for line in text.splitlines():
                if line.startswith(field):
                    info[field.replace(" ", "_")] = line.split(":", 1)[1].strip()
                    break
    except OSError:
        pass
    return info


def _workload(seconds: float) -> float:
    """Proof assemblies' host arithmetic per second in this process, for about ``seconds``."""
    import secrets

    from distprove.bn254 import G1, G1_GEN, G2, G2_GEN, R
    from distprove.curve import combination

    done, t0 = 0, time.perf_counter()
    while (elapsed := time.perf_counter() - t0) < seconds:
        combination(G1, (), [(secrets.randbelow(R), G1_GEN), (secrets.randbelow(R), G1_GEN)])
        combination(G1, (), [(secrets.randbelow(R), G1_GEN)])
        combination(G2, (), [(secrets.randbelow(R), G2_GEN)])
        done += 1
    return done / elapsed


def _child(cpus: list[int] | None, seconds: float, barrier: Any, results: Any) -> None:
    if cpus:
        os.sched_setaffinity(0, cpus)
    _workload(0.3)  # imports and warm caches
    barrier.wait()
    results.put(_workload(seconds))


def run(n: int, seconds: float, pins: list[list[int]] | None) -> list[float]:
    """Rates of ``n`` processes started together (``pins``: CPU lists, process i gets pins[i % len])."""
    import multiprocessing as mp

    ctx = mp.get_context("spawn")
    barrier, results = ctx.Barrier(n), ctx.Queue()
    procs = [ctx.Process(target=_child, args=(pins[i % len(pins)] if pins else None, seconds, barrier, results))
             for i in range(n)]
    for p in procs:
        p.start()
    rates = [results.get(timeout=seconds + 120) for _ in procs]
    for p in procs:
        p.join()
    return sorted(rates)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--procs", default="1,2,4", help="process counts, e.g. 1,2,4,8")
    ap.add_argument("--seconds", type=float, default=3.0, help="measured seconds per process")
    ap.add_argument("--json", type=Path, help="write the results here")
    args = ap.parse_args()
    counts = [int(x) for x in args.procs.split(",")]
    pins = gpu_cpu_lists()
    result: dict[str, Any] = {"date": datetime.datetime.now(datetime.timezone.utc).isoformat(timespec="seconds"),
                              "cpu": cpu_model(), "gpu_cpu_lists": pins, "runs": []}
    single = None
    for pinned in ([False, True] if pins else [False]):
        for n in counts:
            rates = run(n, args.seconds, pins if pinned else None)
            single = single or rates[0]
            row = {"processes": n, "pinned": pinned, "rates_per_s": rates, "vs_one_alone": [r / single for r in rates]}
            result["runs"].append(row)
            print(f"{n} processes{' pinned' if pinned else ''}: each {', '.join(f'{r:.1f}' for r in rates)} /s "
                  f"({min(row['vs_one_alone']):.2f}-{max(row['vs_one_alone']):.2f} of one alone)", flush=True)
    if args.json:
        args.json.write_text(json.dumps(result, indent=1))
    print(json.dumps({k: result[k] for k in ("cpu", "gpu_cpu_lists")}))


if __name__ == "__main__":
    main()
