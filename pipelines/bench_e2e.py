"""End-to-end proving benchmark: single-proof latency per size and shape, with a stage breakdown.

Two parts, both on one backend (default gpu):

* **fixtures**: every witness of the snarkjs fixtures in tests/data is proved and written under
  ``--proofs-out`` (``<fixture>/<witness>.proof.json`` / ``.public.json``) so the proofs can be
  checked with ``snarkjs groth16 verify`` on a machine that has node; they are also pairing-checked
  here.
* **synthetic keys** made by ``pipelines/make_bench_keys.py`` (``--keys DIR``: every folder with
  ``key.zarr`` and ``witness_*.wtns``, e.g. ``<kind>_k<power>`` or ``<kind>_n<constraints>``, smallest
  circuit first): a warm-up proof (kernel load and key upload), then ``--reps`` timed proofs in each
  stage order of ``prove`` (default: H computed beside the witness MSMs; ``overlap_h=False``: H
  first; ``profile=True``: one MSM at a time, the per-MSM breakdown); the median of each stage of
  ``Proof.timings`` (the prover synchronises the device at every stage boundary) and one pairing
  check. Each row names its constraint count (from the folder's circuit.json) and, on the GPU, its
  memory: the key arrays uploaded (``resident_bytes``) and the high water of CuPy's pool over the
  key's proofs (every other key evicted first).

    python pipelines/bench_e2e.py --keys /tmp/keys --proofs-out /tmp/proofs --out e2e.json
"""

from __future__ import annotations

import argparse
import datetime
import json
import os
import statistics
import sys
import time
from pathlib import Path

import dask

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from distprove.backends.select import get_backend  # noqa: E402
from distprove.keystore import KeyStore, ZkeyKey  # noqa: E402
from distprove.prover import prove  # noqa: E402
from distprove.verifier import verify_many  # noqa: E402

DATA = Path(__file__).resolve().parents[1] / "tests" / "data"
FIXTURES = ("mini", "mul_chain_1k", "poseidon_k4", "bits_k16", "merkle_d20")


def device_name() -> str:
    try:
        import cupy

        return cupy.cuda.runtime.getDeviceProperties(0)["name"].decode()
    except Exception:  # no CuPy or no device: a CPU run
        return "cpu"


def fixture_proofs(backend: str, out: Path) -> list[dict]:
    """Prove every fixture witness, write the proofs under ``out``, pairing-check them all."""
    rows = []
    for name in FIXTURES:
        folder = DATA / name
        zkey = folder / ("mini_0001.zkey" if name == "mini" else "circuit_final.zkey")
        witnesses = [folder / "witness.wtns"] if name == "mini" else sorted((folder / "witnesses").glob("*.wtns"))
        key = ZkeyKey(zkey)
        vk = json.loads((folder / "verification_key.json").read_text())
        (out / name).mkdir(parents=True, exist_ok=True)
        proofs = []
        for w in witnesses:
            p = prove(key, w, backend=backend)
            p.write(out / name / f"{w.stem}.proof.json", out / name / f"{w.stem}.public.json")
            proofs.append(p)
        ok = verify_many([(vk, p.public_json(), p.to_json()) for p in proofs])
        rows.append({"fixture": name, "proofs": len(proofs), "verified": sum(ok),
                     "last_total_s": proofs[-1].timings["total"]})
        print(f"fixture {name}: {sum(ok)}/{len(ok)} proofs verify", flush=True)
    return rows


def circuit_info(folder: Path) -> dict:
    """The folder's circuit.json (written by distprove.synth.write_circuit), or {} without one."""
    path = folder / "circuit.json"
    return json.loads(path.read_text()) if path.exists() else {}


def key_folders(keys: Path) -> list[Path]:
    """The key folders (those holding ``key.zarr``) under ``keys``, by constraint count, then name."""
    folders = [p for p in keys.iterdir() if (p / "key.zarr").exists()]
    return sorted(folders, key=lambda p: (circuit_info(p).get("n_constraints", 0), p.name))


def synthetic(backend: str, keys: Path, reps: int) -> list[dict]:
    """Latency and stage medians for every key folder under ``keys``."""
    rows = []
    for folder in key_folders(keys):
        key = KeyStore(folder / "key.zarr")
        witnesses = sorted(folder.glob("*.wtns"))
        if not witnesses:
            continue
        be = get_backend(backend)
        if hasattr(be, "evict"):  # no other key's arrays or scratch in this key's gpu_memory
            be.evict()
        t0 = time.perf_counter()
        first = prove(key, witnesses[0], backend=backend)
        warmup = time.perf_counter() - t0
        runs = [prove(key, witnesses[i % len(witnesses)], backend=backend) for i in range(reps)]
        stages = {s: statistics.median(r.timings[s] for r in runs) for s in runs[0].timings}
        with dask.config.set({"distprove.msm.live-widths": False}):  # every MSM at its size's width
            dense = [prove(key, witnesses[i % len(witnesses)], backend=backend) for i in range(reps)]
        h_first = [prove(key, witnesses[i % len(witnesses)], backend=backend, overlap_h=False) for i in range(reps)]
        profiled = [prove(key, witnesses[i % len(witnesses)], backend=backend, profile=True) for i in range(reps)]
        breakdown = {s: statistics.median(r.timings[s] for r in profiled) for s in profiled[0].timings}
        ok = verify_many([(key.vk_json(), p.public_json(), p.to_json()) for p in (first, runs[-1], profiled[-1])])
        info = circuit_info(folder)
        row = {
            "key": folder.name,
            "domain_log2": key.power,
            "n_vars": key.n_vars,
            "constraints": info.get("n_constraints"),
            "warmup_s": warmup,
            "reps": reps,
            "median_total_ms": 1e3 * stages["total"],
            "stages_ms": {s: 1e3 * v for s, v in stages.items()},
            "dense_widths_total_ms": 1e3 * statistics.median(r.timings["total"] for r in dense),
            "h_first_total_ms": 1e3 * statistics.median(r.timings["total"] for r in h_first),
            "profiled_total_ms": 1e3 * breakdown["total"],
            "profiled_stages_ms": {s: 1e3 * v for s, v in breakdown.items()},
            "pairing_check": all(ok),
        }
        if hasattr(be, "evict"):
            import cupy

            pool = cupy.get_default_memory_pool()
            row["gpu_memory"] = {"key_resident_bytes": be.resident_bytes(key.content_hash),
                                 "pool_high_water_bytes": pool.total_bytes(), "pool_used_bytes": pool.used_bytes()}
            print(f"{folder.name}: key arrays {row['gpu_memory']['key_resident_bytes'] / 2**30:.2f} GiB on the GPU, "
                  f"CuPy pool high water {pool.total_bytes() / 2**30:.2f} GiB", flush=True)
        rows.append(row)
        print(f"{folder.name} ({row['constraints']} constraints, domain 2^{key.power}): "
              f"median {row['median_total_ms']:.1f} ms, at the size's widths {row['dense_widths_total_ms']:.1f} ms, "
              f"H before the MSMs {row['h_first_total_ms']:.1f} ms, "
              f"one MSM at a time {row['profiled_total_ms']:.1f} ms "
              f"(warm-up {warmup:.2f} s), "
              f"pairing {'OK' if all(ok) else 'FAILED'}", flush=True)
    return rows


def capped(keys: Path, reps: int, caps_gib: list[float]) -> list[dict]:
    """Proof latency on the GPU with CuPy's memory pool capped at each of ``caps_gib`` (``set_limit``:
    past it the pool raises the OutOfMemoryError a smaller device would), every key alone: what a
    GPU with that much free memory would see of the backend's fallbacks (the five MSMs one at a
    time, then an MSM in parts). One warm-up proof, ``reps`` timed ones, a pairing check each."""
    import cupy

    pool = cupy.get_default_memory_pool()
    be = get_backend("gpu")
    rows = []
    for folder in key_folders(keys):
        key = KeyStore(folder / "key.zarr")
        witnesses = sorted(folder.glob("*.wtns"))
        for cap in caps_gib:
            be.evict()
            pool.set_limit(size=int(cap * 2**30))
            try:
                t0 = time.perf_counter()
                proofs = [prove(key, witnesses[0], backend=be)]
                warmup = time.perf_counter() - t0
                proofs += [prove(key, witnesses[i % len(witnesses)], backend=be) for i in range(reps)]
            except cupy.cuda.memory.OutOfMemoryError as exc:
                rows.append({"key": folder.name, "pool_cap_gib": cap, "error": f"out of memory: {exc}"})
                print(f"{folder.name} with the pool capped at {cap} GiB: out of memory ({exc})", flush=True)
                continue
            finally:
                pool.set_limit(size=0)
            ok = verify_many([(key.vk_json(), p.public_json(), p.to_json()) for p in proofs])
            total = statistics.median(p.timings["total"] for p in proofs[1:])
            rows.append({"key": folder.name, "domain_log2": key.power, "pool_cap_gib": cap, "reps": reps,
                         "warmup_s": warmup, "median_total_ms": 1e3 * total,
                         "totals_ms": [1e3 * p.timings["total"] for p in proofs[1:]],
                         "pool_high_water_bytes": pool.total_bytes(), "pairing_check": all(ok)})
            print(f"{folder.name} with the pool capped at {cap} GiB: median {1e3 * total:.1f} ms "
                  f"(warm-up {warmup:.2f} s), high water {pool.total_bytes() / 2**30:.2f} GiB, "
                  f"pairing {'OK' if all(ok) else 'FAILED'}", flush=True)
    be.evict()
    return rows


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--backend", default="gpu")
    ap.add_argument("--keys", type=Path, help="folder of make_bench_keys.py outputs")
    ap.add_argument("--proofs-out", type=Path, help="write the fixture proofs here")
    ap.add_argument("--reps", type=int, default=5)
    ap.add_argument("--pool-caps", default="", help="GiB, comma list: only time --keys with CuPy's pool capped "
                                                     "at each (capped())")
    ap.add_argument("--out", type=Path, required=True)
    args = ap.parse_args()

    header = {
        "date": datetime.datetime.now(datetime.timezone.utc).isoformat(timespec="seconds"),
        "device": device_name(),
        "commit": os.environ.get("DISTPROVE_GIT_COMMIT", ""),
    }
    if args.pool_caps:
        rows = capped(args.keys, args.reps, [float(c) for c in args.pool_caps.split(",")])
        args.out.write_text(json.dumps({**header, "capped": rows}, indent=1))
        return
    result = {
        **header,
        "backend": args.backend,
        "fixtures": fixture_proofs(args.backend, args.proofs_out) if args.proofs_out else [],
        "synthetic": synthetic(args.backend, args.keys, args.reps) if args.keys else [],
    }
    args.out.write_text(json.dumps(result, indent=1))
    print(f"\n{'key':<16}{'constraints':>12}{'domain':>8}{'total ms':>10}  stages (ms)")
    for r in result["synthetic"]:
        for label, total, stages in (("", r["median_total_ms"], r["stages_ms"]),
                                     (" (1 MSM at a time)", r["profiled_total_ms"], r["profiled_stages_ms"])):
            st = " ".join(f"{k}={v:.1f}" for k, v in stages.items() if k != "total")
            print(f"{r['key']:<16}{r['constraints'] or '?':>12}{'2^' + str(r['domain_log2']):>8}"
                  f"{total:>10.1f}  {st}{label}")


if __name__ == "__main__":
    main()
