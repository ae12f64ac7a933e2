"""CPU backend against snarkjs on the same fixture keys and witnesses, in the same run.

For each fixture in tests/data: the median wall time of ``distprove.prove(backend="cpu")`` (key
opened once, in process) and of ``snarkjs groth16 prove`` (a node process per proof, as users run
it), over ``--reps`` runs of witness 0. Needs node and snarkjs (``node_modules/.bin/snarkjs``).

    python pipelines/bench_cpu_vs_snarkjs.py --out bench/results/<date>_cpu-vs-snarkjs.json
"""

from __future__ import annotations

import argparse
import datetime
import json
import os
import platform
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from distprove.keystore import open_key  # noqa: E402
from distprove.prover import prove  # noqa: E402

DATA = ROOT / "tests" / "data"
FIXTURES = ("mul_chain_1k", "poseidon_k4", "bits_k16", "merkle_d20")


def timed(fn, reps: int) -> float:
    """Median seconds of ``reps`` calls of ``fn``."""
    times = []
    for _ in range(reps):
        t0 = time.perf_counter()
        fn()
        times.append(time.perf_counter() - t0)
    return statistics.median(times)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--reps", type=int, default=3)
    ap.add_argument("--snarkjs", default=os.environ.get("SNARKJS", str(ROOT / "node_modules" / ".bin" / "snarkjs")))
    ap.add_argument("--out", type=Path, required=True)
    args = ap.parse_args()
    rows = []
    with tempfile.TemporaryDirectory() as tmp:
        for name in FIXTURES:
            zkey = DATA / name / "circuit_final.zkey"
            wtns = DATA / name / "witnesses" / "witness_0.wtns"
            key = open_key(zkey)
            prove(key, wtns, backend="cpu")  # warm: key arrays converted once per process
            ours = timed(lambda: prove(key, wtns, backend="cpu"), args.reps)
            cmd = [args.snarkjs, "groth16", "prove", str(zkey), str(wtns), f"{tmp}/p.json", f"{tmp}/s.json"]
            theirs = timed(lambda: subprocess.run(cmd, check=True, capture_output=True), args.reps)
            rows.append({"fixture": name, "domain_log2": key.power, "n_vars": key.n_vars,
                         "distprove_cpu_s": ours, "snarkjs_s": theirs, "ratio_snarkjs_over_distprove": theirs / ours})
            print(f"{name:<14} 2^{key.power:<3} distprove-cpu {ours:7.2f} s   snarkjs {theirs:6.2f} s   "
                  f"snarkjs/distprove {theirs / ours:5.2f}", flush=True)
    try:
        import gmpy2  # noqa: F401

        bigint = "gmpy2"
    except ImportError:
        bigint = "python int"
    commit = subprocess.run(["git", "rev-parse", "--short", "HEAD"], capture_output=True, text=True, cwd=ROOT).stdout.strip()
    result = {
        "date": datetime.datetime.now(datetime.timezone.utc).isoformat(timespec="seconds"),
        "machine": f"{platform.processor() or platform.machine()}, {os.cpu_count()} cores (shared)",
        "commit": commit,
        "bigint": bigint,
        "reps": args.reps,
        "rows": rows,
    }
    args.out.write_text(json.dumps(result, indent=1))


if __name__ == "__main__":
    main()
