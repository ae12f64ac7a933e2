"""Time the CPU stages of a benchmark key without its fixed-base multiplications.

make_bench_keys.py builds a synthetic circuit, its witnesses and the dev-setup key; on a machine
without a GPU the fixed-base part (Python ints) dwarfs everything else. This script times, per
kind, power and worker count, in a fresh spawned process each: the synthetic circuit, one witness,
the key scalars (devsetup.key_scalars) and the zkey coefficient records, and prints one JSON line
per run with a hash of every output (scalars, records, witness), so two checkouts can be compared
for speed and for identical bytes.

    python pipelines/profile_devsetup.py --powers 16 18 20 --workers 1 2 [--kinds chain]
"""

from __future__ import annotations

import argparse
import hashlib
import json
import multiprocessing
import sys
import time
from pathlib import Path
from queue import Empty

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))  # run from a checkout without installing


def profile_one(kind: str, power: int, workers: int, seed: int, queue: multiprocessing.Queue) -> None:
    """Time the stages for a circuit of domain 2^power (2^power − 2 constraints, one public signal)."""
    import numpy as np

    from distprove.devsetup import Toxic, coefficient_records, key_scalars
    from distprove.synth import make_circuit

    rec: dict = {"kind": kind, "power": power, "workers": workers}
    t0 = time.perf_counter()
    circuit = make_circuit(kind, (1 << power) - 2, 1, seed=seed)
    rec["synth_s"] = time.perf_counter() - t0
    t0 = time.perf_counter()
    witness = circuit.witness(0)
    rec["witness_s"] = time.perf_counter() - t0
    t0 = time.perf_counter()
    scalars = key_scalars(circuit.r1cs, Toxic.from_seed(seed), workers)
    rec["scalars_s"] = time.perf_counter() - t0
    t0 = time.perf_counter()
    records = coefficient_records(circuit.r1cs, workers)
    rec["coefficients_s"] = time.perf_counter() - t0
    h = hashlib.sha256()
    for name in ("a", "b", "ic", "c", "h"):
        h.update(np.ascontiguousarray(scalars[name]).tobytes())
    h.update(np.ascontiguousarray(records).tobytes())
    h.update(witness.tobytes())
    rec["sha256"] = h.hexdigest()[:16]
    queue.put({k: round(v, 3) if isinstance(v, float) else v for k, v in rec.items()})


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--powers", type=int, nargs="+", default=[16, 18, 20])
    ap.add_argument("--workers", type=int, nargs="+", default=[1])
    ap.add_argument("--kinds", nargs="+", default=["chain"])
    ap.add_argument("--seed", type=int, default=0)
    args = ap.parse_args(argv)
    ctx = multiprocessing.get_context("spawn")
    failed = 0
    for power in args.powers:
        for kind in args.kinds:
            for workers in args.workers:
                queue = ctx.Queue()
                proc = ctx.Process(target=profile_one, args=(kind, power, workers, args.seed, queue))
                proc.start()
                result = None
                while result is None and (proc.is_alive() or not queue.empty()):
                    try:  # before the join: a child blocks on exit until its queued result is read
                        result = queue.get(timeout=1)
                    except Empty:
                        pass
                proc.join()
                if proc.exitcode != 0 or result is None:
                    print(f"{kind} 2^{power} workers={workers}: FAILED (exit code {proc.exitcode})", file=sys.stderr)
                    failed += 1
                    continue
                print(json.dumps(result), flush=True)
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
