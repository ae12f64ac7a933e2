"""Proof verification speed on this host: distprove.pairing beside py_ecc in the same run.

Times (median of ``--reps``) one Miller loop and one final exponentiation with distprove.pairing
and with py_ecc's optimized_bn128 (the verifier's arithmetic before), then ``verify`` of one
fixture proof and ``verify_many`` over groups of 1, 8 and 64 of them (seconds per proof; with
``--processes N`` also on a pool of N processes). Writes a JSON result (date, host, commit, medians).

``--gpu`` times the device instead (distprove.backends.gpu.pairing): for k = 64, 1024 and 4096
random pairs, the Miller loops and their product on the GPU with one Fq12 read back (whole call:
upload, launches, readback, conversion; and the launches alone by CUDA events), beside one host
Miller loop of distprove.pairing; and ``verify_many(device="gpu")`` (BatchCheck's per-proof step
and Miller product on the device, backends/gpu/batchcheck.py) over 8, 64 and 512 of the fixture's
proofs, seconds per proof, beside the
host's ``verify_many`` (with ``--processes N`` also both on a pool of N processes).

    python3 pipelines/bench_verify.py --json bench/results/<date>_verify_<host>.json
    python3 pipelines/bench_verify.py --gpu --json bench/results/<date>_verify_gpu_<host>.json
"""

from __future__ import annotations

import argparse
import datetime
import json
import os
import platform
import random
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
    ap.add_argument("--gpu", action="store_true", help="time the GPU Miller loops and product instead")
    args = ap.parse_args()
    res = gpu_results(args.reps) | gpu_checks(args) if args.gpu else host_results(args)
    out = {"date": datetime.datetime.now(datetime.timezone.utc).isoformat(timespec="seconds"), "host": platform.node(),
           "cpu": platform.processor() or platform.machine(), "python": platform.python_version(), "fixture": args.fixture,
           "commit": os.environ.get("DISTPROVE_GIT_COMMIT", ""), **res}
    print(json.dumps(out, indent=1))
    if args.json:
        args.json.write_text(json.dumps(out, indent=1))


GPU_SIZES = (64, 1024, 4096)


def gpu_results(reps: int) -> dict[str, Any]:
    """Seconds (median of ``reps``) of miller_product over k random pairs on the device, whole call
    and launches alone, for k in :data:`GPU_SIZES`; the first call (module load) is not timed."""
    import cupy as cp

    from distprove import bn254
    from distprove import pairing as pr
    from distprove.backends.gpu import pairing as gp

    rng = random.Random(1)
    p, dp = (bn254.mul(bn254.G1, bn254.G1_GEN, rng.randrange(1, bn254.R)) for _ in range(2))
    q, dq = (bn254.mul(bn254.G2, bn254.G2_GEN, rng.randrange(1, bn254.R)) for _ in range(2))
    pairs = []
    for _ in range(max(GPU_SIZES)):  # a walk: affine additions are cheap on the host
        pairs.append((p, q))
        p, q = bn254.add(bn254.G1, p, dp), bn254.add(bn254.G2, q, dq)
    assert gp.miller_product(pairs[:3]) == pr.multi_miller_loop(pairs[:3])
    res: dict[str, Any] = {"device": cp.cuda.runtime.getDeviceProperties(0)["name"].decode(),
                           "host_miller_loop_s": median_s(lambda: pr.miller_loop(*pairs[0]), reps), "gpu": {}}
    for k in GPU_SIZES:
        sub = pairs[:k]
        d_g1, d_g2 = (cp.asarray(a) for a in gp.pairs_to_limbs(sub))
        start, stop = cp.cuda.Event(), cp.cuda.Event()
        kernel = []
        for _ in range(reps):
            start.record()
            gp.reduce_product(gp.launch_miller(d_g1, d_g2, product=True)[0])
            stop.record()
            stop.synchronize()
            kernel.append(cp.cuda.get_elapsed_time(start, stop) / 1e3)
        whole = median_s(lambda: gp.miller_product(sub), reps)
        res["gpu"][str(k)] = {"miller_product_s": whole, "launches_s": sorted(kernel)[len(kernel) // 2],
                              "us_per_pair": whole / k * 1e6,
                              "limb_encoding_s": median_s(lambda: gp.pairs_to_limbs(sub), reps)}
    return res


def _fixture_items(fixture: str) -> tuple[dict, list[tuple[dict, dict]]]:
    """The fixture's verification key and its (public, proof) JSON pairs."""
    fx = DATA / fixture
    vk = json.loads((fx / "verification_key.json").read_text())
    return vk, [(json.loads(pu.read_text()), json.loads(pf.read_text()))
                for pf, pu in zip(sorted((fx / "proofs").glob("*.json")), sorted((fx / "public").glob("*.json")))]


def gpu_checks(args: argparse.Namespace) -> dict[str, Any]:
    """Seconds per proof of verify_many over n fixture proofs, the batch's Miller loop on the GPU
    and on the host, in the calling thread and (``--processes``) with a pool."""
    from distprove.verifier import check_pool, verify_many

    vk, pairs = _fixture_items(args.fixture)
    pool = check_pool(args.processes)
    res: dict[str, Any] = {}
    for n in (8, 64, 512):
        items = [(vk, *pairs[i % len(pairs)]) for i in range(n)]
        for device in ("gpu", "cpu"):
            for name, ex in (("", None), (f"_pool{args.processes}", pool)):
                if name and pool is None:
                    continue
                assert verify_many(items, ex, device) == [True] * n
                res[f"verify_many_{device}_{n}{name}_s_per_proof"] = median_s(lambda: verify_many(items, ex, device), max(1, args.reps // 2)) / n
    return res


def host_results(args: argparse.Namespace) -> dict[str, Any]:
    """The host pairing beside py_ecc, and verify / verify_many of the fixture's proofs."""
    from py_ecc.optimized_bn128 import FQ, FQ2, final_exponentiate, pairing

    from distprove import bn254
    from distprove import pairing as pr
    from distprove.verifier import check_pool, verify, verify_many

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
    vk, pairs = _fixture_items(args.fixture)
    res["verify_one_s"] = median_s(lambda: verify(vk, *pairs[0]), args.reps)
    pool = check_pool(args.processes)
    for n in (1, 8, 64):
        items = [(vk, *pairs[i % len(pairs)]) for i in range(n)]
        assert verify_many(items) == [True] * n
        res[f"verify_many_{n}_s_per_proof"] = median_s(lambda: verify_many(items), max(1, args.reps // 2)) / n
        if pool is not None:
            assert verify_many(items, pool) == [True] * n
            res[f"verify_many_{n}_pool{args.processes}_s_per_proof"] = median_s(lambda: verify_many(items, pool), max(1, args.reps // 2)) / n
    for k in ("miller_loop_s", "final_exponentiation_s"):
        res[k]["py_ecc_over_distprove"] = res[k]["py_ecc"] / res[k]["distprove"]
    return res


if __name__ == "__main__":
    main()
