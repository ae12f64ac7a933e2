"""CPU backend against snarkjs on the same fixture keys and witnesses, in the same run.

For each fixture in tests/data, over ``--reps`` rounds on witness 0 (one run of each per round),
the best (least) and the median wall time of: ``distprove.prove(backend="cpu")`` with the key opened once, in process; a whole
``distprove prove circuit_final.zkey witness_0.wtns --backend cpu`` process (Python starting, the
imports, the .zkey read and its point checks, the proof and its pairing check); and ``snarkjs
groth16 prove`` on the same files (a node process per proof, as users run it). The ratios compare
best with best, the least disturbed run of each on a shared machine. Needs node and snarkjs
(``$SNARKJS`` or ``node_modules/.bin/snarkjs``).

    python pipelines/bench_cpu_vs_snarkjs.py --reps 5 --out bench/results/<date>_cpu-vs-snarkjs.json
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
from collections.abc import Callable
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from distprove.keystore import open_key  # noqa: E402
from distprove.prover import prove  # noqa: E402

DATA = ROOT / "tests" / "data"
FIXTURES = ("mul_chain_1k", "poseidon_k4", "bits_k16", "merkle_d20")
DISTPROVE = [sys.executable, "-m", "distprove.cli"]
"""``distprove`` of this checkout (run with :data:`ENV`)."""
ENV = {**os.environ, "PYTHONPATH": os.pathsep.join(filter(None, (str(ROOT), os.environ.get("PYTHONPATH"))))}


def timed(fns: dict[str, Callable[[], object]], reps: int) -> dict[str, dict[str, float]]:
    """Best (least) and median seconds of ``reps`` calls of each of ``fns``, taking turns (one call
    of each per round), so that a load that comes and goes on a shared machine falls on all."""
    times: dict[str, list[float]] = {name: [] for name in fns}
    for _ in range(reps):
        for name, fn in fns.items():
            t0 = time.perf_counter()
            fn()
            times[name].append(time.perf_counter() - t0)
    return {name: {"best": min(ts), "median": statistics.median(ts)} for name, ts in times.items()}


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--reps", type=int, default=3)
    ap.add_argument("--snarkjs", default=os.environ.get("SNARKJS", str(ROOT / "node_modules" / ".bin" / "snarkjs")))
    ap.add_argument("--out", type=Path, required=True)
    args = ap.parse_args()
    rows = []
    load_before = os.getloadavg()
    with tempfile.TemporaryDirectory() as tmp:
        for name in FIXTURES:
            zkey = DATA / name / "circuit_final.zkey"
            wtns = DATA / name / "witnesses" / "witness_0.wtns"
            key = open_key(zkey)
            prove(key, wtns, backend="cpu")  # warm: key arrays converted once per process
            cli = [*DISTPROVE, "prove", str(zkey), str(wtns), "--out", tmp, "--backend", "cpu"]
            subprocess.run(cli, check=True, capture_output=True, env=ENV)  # numba's cache of the point checks filled
            cmd = [args.snarkjs, "groth16", "prove", str(zkey), str(wtns), f"{tmp}/p.json", f"{tmp}/s.json"]
            t = timed({"ours": lambda: prove(key, wtns, backend="cpu"),
                       "cli": lambda: subprocess.run(cli, check=True, capture_output=True, env=ENV),
                       "snarkjs": lambda: subprocess.run(cmd, check=True, capture_output=True)}, args.reps)
            ours, ours_cli, theirs = t["ours"], t["cli"], t["snarkjs"]
            rows.append({"fixture": name, "domain_log2": key.power, "n_vars": key.n_vars,
                         "distprove_cpu_s": ours, "distprove_cli_s": ours_cli, "snarkjs_s": theirs,
                         "ratio_snarkjs_over_distprove": theirs["best"] / ours["best"],
                         "ratio_distprove_cli_over_snarkjs": ours_cli["best"] / theirs["best"]})
            print(f"{name:<14} 2^{key.power:<3} best of {args.reps}: distprove-cpu {ours['best']:6.2f} s   "
                  f"distprove prove {ours_cli['best']:6.2f} s   snarkjs {theirs['best']:6.2f} s   "
                  f"distprove prove/snarkjs {ours_cli['best'] / theirs['best']:5.2f}", flush=True)
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
        "stat": "best and median of reps (one run of each per round); ratios of the bests",
        "load_average_before_after": [load_before, os.getloadavg()],
        "rows": rows,
    }
    args.out.write_text(json.dumps(result, indent=1))


if __name__ == "__main__":
    main()
