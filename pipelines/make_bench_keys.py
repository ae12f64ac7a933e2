"""Make benchmark keys and witnesses on the GPU machine: synthetic circuits + the insecure dev setup.

For every kind (chain, bits) and power p (default 16 18 20 22 24) this writes, under OUT/<kind>_k<p>/:
``key.zarr`` (the key store, domain exactly 2^p: 2^p − public − 1 constraints),
``verification_key.json``, ``witness_<i>.wtns``, ``circuit.json`` and ``done.json`` (the timings),
and appends the timings to OUT/timings.json. ``--constraints N`` adds keys of exactly N constraints
under OUT/<kind>_n<N>/ (domain: the next power of two above N + public, as the dev setup takes it);
--powers and --constraints may be given together; with neither, the default powers are made.
Each key is made in a fresh (spawned) process, so memory is returned between keys and the forked
scalar workers never inherit a CUDA context or zarr threads. A key whose done.json exists is skipped
(unless --force), so a run cut short by a time limit resumes where it stopped.

    python pipelines/make_bench_keys.py --out /data/bench [--powers 16 18] [--constraints 1600000]
        [--kinds chain] [--measure-fixed-base] [--check] [--witnesses 2]

THE KEYS ARE INSECURE (known toxic waste): for benchmarks only.
"""

from __future__ import annotations

import argparse
import json
import multiprocessing
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))  # run from a checkout without installing

KINDS = ("chain", "bits")
POWERS = (16, 18, 20, 22, 24)


def _du(path: Path) -> int:
    return sum(f.stat().st_size for f in path.rglob("*") if f.is_file())


def make_one(kind: str, constraints: int, out: Path, args: argparse.Namespace) -> dict:
    """Build one circuit of ``constraints`` rows, its witnesses and its dev key under ``out``;
    return the timings record."""
    from distprove.backends.gpu import available as gpu_available
    from distprove.devsetup import default_workers, dev_setup
    from distprove.keystore import KeyStore
    from distprove.synth import make_circuit, write_circuit

    out.mkdir(parents=True, exist_ok=True)
    workers = args.workers or default_workers()
    t0 = time.perf_counter()
    circuit = make_circuit(kind, constraints, args.public, seed=args.seed)
    t_synth = time.perf_counter() - t0
    t0 = time.perf_counter()
    meta = write_circuit(circuit, out, args.witnesses, r1cs=args.r1cs)
    t_wit = time.perf_counter() - t0
    t0 = time.perf_counter()
    store = dev_setup(
        circuit.r1cs, out / "key.zarr", vk=out / "verification_key.json",
        zkey=out / "key.zkey" if args.zkey else None, seed=args.seed, device=args.device,
        workers=workers, overwrite=True, quiet=True,
    )
    t_setup = time.perf_counter() - t0
    record = {
        "key": out.name,
        "kind": kind,
        "power": store.power,
        "constraints": meta["n_constraints"],
        "n_vars": store.n_vars,
        "n_public": store.n_public,
        "domain_size": store.domain_size,
        "device": "gpu" if args.device == "gpu" or (args.device == "auto" and gpu_available()) else "cpu",
        "workers": workers,
        "synth_s": round(t_synth, 3),
        "witnesses": args.witnesses,
        "witnesses_s": round(t_wit, 3),
        "setup_s": round(t_setup, 3),
        "setup_stages_s": {k: round(v, 3) for k, v in KeyStore(out / "key.zarr").attrs["dev_setup"]["timings"].items()},
        "store_bytes": _du(out / "key.zarr"),
    }
    if args.check and args.witnesses:
        from distprove.prover import prove
        from distprove.verifier import verify

        t0 = time.perf_counter()
        proof = prove(store, out / "witness_0.wtns", backend=args.backend)
        record["check_prove_s"] = round(time.perf_counter() - t0, 3)
        record["check_ok"] = bool(verify(store.vk_json(), proof.public_json(), proof.to_json()))
    (out / "done.json").write_text(json.dumps(record, indent=1) + "\n")
    return record


def _child(kind: str, constraints: int, out: str, args: argparse.Namespace) -> None:
    make_one(kind, constraints, Path(out), args)


def key_sizes(args: argparse.Namespace) -> list[tuple[str, int]]:
    """(folder suffix, constraints) of every key size asked for, smallest first: ``k<p>`` for each
    power p (2^p − public − 1 constraints, domain exactly 2^p) and ``n<N>`` for each exact count N."""
    powers = args.powers if args.powers is not None else ([] if args.constraints else list(POWERS))
    sizes = {(f"k{p}", (1 << p) - args.public - 1) for p in powers}
    sizes |= {(f"n{n}", n) for n in args.constraints or ()}
    return sorted(sizes, key=lambda s: (s[1], s[0]))


def measure_fixed_base(out: Path, log2_g1: int = 20, log2_g2: int = 18) -> None:
    """Time the GPU fixed-base kernels (both affine modes, G1 and G2) on random scalars; write OUT/fixedbase.json."""
    import numpy as np

    from distprove import bn254
    from distprove.backends.gpu.fixedbase import AFFINE_MODES, fixed_base_gpu

    rng = np.random.default_rng(0)
    results = []
    for group, log2 in ((bn254.G1, log2_g1), (bn254.G2, log2_g2)):
        s = rng.integers(0, 2**32, size=(1 << log2, 8), dtype=np.uint32)
        s[:, 7] &= 0x0FFFFFFF  # below 2^252 < r
        fixed_base_gpu(group, s[:1024])  # compile / load the module and upload the table
        outs = {}
        for mode in AFFINE_MODES:
            t0 = time.perf_counter()
            outs[mode] = fixed_base_gpu(group, s, affine=mode)
            dt = time.perf_counter() - t0
            results.append({"group": group.name, "n": 1 << log2, "affine": mode, "s": round(dt, 4),
                            "points_per_s": round((1 << log2) / dt)})
            print(f"fixed-base {group.name} 2^{log2} affine={mode}: {dt:.3f} s", flush=True)
        assert all(np.array_equal(outs[AFFINE_MODES[0]], o) for o in outs.values()), "affine modes disagree"
    (out / "fixedbase.json").write_text(json.dumps(results, indent=1) + "\n")


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--out", type=Path, required=True, help="output folder")
    ap.add_argument("--powers", type=int, nargs="+",
                    help=f"log2 domain sizes (default {' '.join(map(str, POWERS))} unless --constraints is given)")
    ap.add_argument("--constraints", type=int, nargs="+", default=[],
                    help="exact constraint counts (folders <kind>_n<N>, domain the next power of two)")
    ap.add_argument("--kinds", nargs="+", choices=KINDS, default=list(KINDS))
    ap.add_argument("--witnesses", type=int, default=2, help="witnesses per circuit")
    ap.add_argument("--public", type=int, default=1, help="public signals per circuit")
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--device", choices=("auto", "cpu", "gpu"), default="auto", help="fixed-base device")
    ap.add_argument("--workers", type=int, default=0,
                    help="scalar workers: threads for the key scalars, processes for the records (0: all cores)")
    ap.add_argument("--r1cs", action="store_true", help="also write circuit.r1cs")
    ap.add_argument("--zkey", action="store_true", help="also write a snarkjs key.zkey")
    ap.add_argument("--check", action="store_true", help="prove and verify witness_0 with each key")
    ap.add_argument("--backend", default="auto", help="prover backend for --check")
    ap.add_argument("--force", action="store_true", help="rebuild keys that are already done")
    ap.add_argument("--measure-fixed-base", action="store_true",
                    help="first time the GPU fixed-base kernels (batch vs Fermat affine) into OUT/fixedbase.json")
    args = ap.parse_args(argv)
    if any(n < 1 for n in args.constraints):
        ap.error("--constraints must be positive")

    print("WARNING: dev-setup keys are INSECURE (toxic waste known): benchmarks only", file=sys.stderr)
    args.out.mkdir(parents=True, exist_ok=True)
    summary = args.out / "timings.json"
    records = json.loads(summary.read_text()) if summary.exists() else []
    ctx = multiprocessing.get_context("spawn")
    failed = 0
    if args.measure_fixed_base:
        proc = ctx.Process(target=measure_fixed_base, args=(args.out,))
        proc.start()
        proc.join()
        failed += proc.exitcode != 0
    for suffix, constraints in key_sizes(args):
        for kind in args.kinds:
            d = args.out / f"{kind}_{suffix}"
            if (d / "done.json").exists() and not args.force:
                print(f"{d.name}: already done ({d / 'done.json'})", flush=True)
                continue
            t0 = time.perf_counter()
            proc = ctx.Process(target=_child, args=(kind, constraints, str(d), args))
            proc.start()
            proc.join()
            if proc.exitcode != 0:
                print(f"{d.name}: FAILED (exit code {proc.exitcode})", file=sys.stderr, flush=True)
                failed += 1
                continue
            rec = json.loads((d / "done.json").read_text())
            rec["wall_s"] = round(time.perf_counter() - t0, 3)
            records = [r for r in records if (r["kind"], r["constraints"]) != (kind, rec["constraints"])] + [rec]
            summary.write_text(json.dumps(records, indent=1) + "\n")
            st = rec["setup_stages_s"]
            print(
                f"{d.name}: {rec['constraints']} constraints, domain 2^{rec['power']}, "
                f"key built in {rec['setup_s']:.1f} s (scalars {st.get('scalars', 0):.1f}, "
                f"coefficients {st.get('coefficients', 0):.1f}, fixed-base {st.get('fixed_base', 0):.1f} on "
                f"{rec['device']}), {rec['n_vars']} signals, {rec['witnesses']} witnesses in {rec['witnesses_s']:.1f} s, "
                f"store {rec['store_bytes'] / 2**20:.0f} MiB" + (f", check ok={rec['check_ok']}" if "check_ok" in rec else ""),
                flush=True,
            )
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
