"""Proof verification speed on this host: distprove.pairing beside py_ecc in the same run.

Times (median of ``--reps``) one Miller loop and one final exponentiation with distprove.pairing
and with py_ecc's optimized_bn128 (the verifier's arithmetic before), then ``verify`` of one
fixture proof and ``verify_many`` over groups of 1, 8 and 64 of them (seconds per proof; with
``--processes N`` also on a pool of N processes). Writes a JSON result (date, host, commit, medians).

    python3 pipelines/bench_verify.py --json bench/results/<date>_verify_<host>.json
"""

from __future__ import annotations

import argparse
import datetime
import json
import os
import platform
import sys
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
sys.path.insert(0, str(Path(__file__).resolve().parent))

from bench_cpu_vs_snarkjs import timed as median_s  # noqa: E402  (median seconds of reps calls)

DATA = Path(__file__).resolve().parents[1] / "tests" / "data"


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--reps", type=int, default=5)
    ap.add_argument("--fixture", default="merkle_d20")
    ap.add_argument("--json", type=Path)
    ap.add_argument("--processes", type=int, default=0, help="also time verify_many on a pool of this many processes")
    args = ap.parse_args()

    from py_ecc.optimized_bn128 import FQ, FQ2, final_exponentiate, pairing

    from distprove import bn254
    from distprove import pairing as pr
    from distprove.verifier import verify, verify_many

    p = bn254.mul(bn254.G1, bn254.G1_GEN, 123456789)
    q = bn254.mul(bn254.G2, bn254.G2_GEN, 987654321)
    g1, g2 = (FQ(p[0]), FQ(p[1]), FQ.one()), (FQ2(list(q[0])), FQ2(list(q[1])), FQ2.one())
    f_ours, f_ref = pr.miller_loop(p, q), pairing(g2, g1, final_exponentiate=False)
    res: dict[str, Any] = {
        "miller_loop_s": {"distprove": median_s(lambda: pr.miller_loop(p, q), args.reps),
                          "py_ecc": median_s(lambda: pairing(g2, g1, final_exponentiate=False), max(1, args.reps // 2))},
        "final_exponentiation_s": {"distprove": median_s(lambda: pr.final_exponentiation(f_ours), args.reps),
                                   "py_ecc": median_s(lambda: final_exponentiate(f_ref), args.reps)},
        "final_exponentiation_fast_s": median_s(lambda: pr.final_exponentiation_fast(f_ours), args.reps),
    }
    fx = DATA / args.fixture
    vk = json.loads((fx / "verification_key.json").read_text())
    pairs = [(json.loads(pu.read_text()), json.loads(pf.read_text()))
             for pf, pu in zip(sorted((fx / "proofs").glob("*.json")), sorted((fx / "public").glob("*.json")))]
    res["verify_one_s"] = median_s(lambda: verify(vk, *pairs[0]), args.reps)
    pool = None
    if args.processes:
        import multiprocessing
        from concurrent.futures import ProcessPoolExecutor

        pool = ProcessPoolExecutor(args.processes, mp_context=multiprocessing.get_context("spawn"))
    for n in (1, 8, 64):
        items = [(vk, *pairs[i % len(pairs)]) for i in range(n)]
        assert verify_many(items) == [True] * n
        res[f"verify_many_{n}_s_per_proof"] = median_s(lambda: verify_many(items), max(1, args.reps // 2)) / n
        if pool is not None:
            assert verify_many(items, pool) == [True] * n
            res[f"verify_many_{n}_pool{args.processes}_s_per_proof"] = median_s(lambda: verify_many(items, pool), max(1, args.reps // 2)) / n
    if pool is not None:
        pool.shutdown()
    for k in ("miller_loop_s", "final_exponentiation_s"):
        res[k]["py_ecc_over_distprove"] = res[k]["py_ecc"] / res[k]["distprove"]
    out = {"date": datetime.datetime.now(datetime.timezone.utc).isoformat(timespec="seconds"), "host": platform.node(),
           "cpu": platform.processor() or platform.machine(), "python": platform.python_version(), "fixture": args.fixture,
           "commit": os.environ.get("DISTPROVE_GIT_COMMIT", ""), **res}
    print(json.dumps(out, indent=1))
    if args.json:
        args.json.write_text(json.dumps(out, indent=1))


if __name__ == "__main__":
    main()
