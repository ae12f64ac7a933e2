"""A batch from inputs against the same batch from precomputed witnesses, on one local cluster.

    python pipelines/bench_input_batch.py FIXTURE_DIR [--copies 4] [--workers 2] [--backend cpu] [--reps 2]

FIXTURE_DIR holds ``circuit_final.zkey``, ``circuit.wasm``, ``inputs/input_k.json`` and
``witnesses/witness_k.wtns`` (the fixtures under tests/data). Each input is copied ``--copies``
times into one folder and its witness as many times into another; both batches run on one
cluster (non-daemonic workers, so each has its witness process pool), alternately ``--reps``
times after one warm-up batch of each, and print proofs/s per run and their ratio (inputs over
witnesses). The input batch computes every witness on the workers; the witness batch reads them.
"""

from __future__ import annotations

import argparse
import json
import shutil
import tempfile
from pathlib import Path

import dask


def _folders(fixture: Path, copies: int, tmp: Path) -> tuple[Path, Path]:
    inputs, witnesses = tmp / "inputs", tmp / "witnesses"
    for d in (inputs, witnesses):
        d.mkdir()
        shutil.copy(fixture / "circuit_final.zkey", d)
    shutil.copy(fixture / "circuit.wasm", inputs)
    for inp in sorted((fixture / "inputs").glob("input_*.json")):
        k = inp.stem.removeprefix("input_")
        for c in range(copies):
            shutil.copy(inp, inputs / f"p{k}_{c}.json")
            shutil.copy(fixture / "witnesses" / f"witness_{k}.wtns", witnesses / f"p{k}_{c}.wtns")
    return inputs, witnesses


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("fixture", type=Path)
    ap.add_argument("--copies", type=int, default=4)
    ap.add_argument("--workers", type=int, default=2)
    ap.add_argument("--backend", default="cpu")
    ap.add_argument("--reps", type=int, default=2)
    args = ap.parse_args()

    import distprove
    from distributed import Client, LocalCluster

    with tempfile.TemporaryDirectory() as tmp, dask.config.set({"distributed.worker.daemon": False}):
        inputs, witnesses = _folders(args.fixture, args.copies, Path(tmp))
        with LocalCluster(n_workers=args.workers, threads_per_worker=1, dashboard_address=None) as cluster, Client(cluster) as client:
            rows: dict[str, list[float]] = {"inputs": [], "witnesses": []}
            for rep in range(args.reps + 1):
                for kind, folder in (("witnesses", witnesses), ("inputs", inputs)):
                    shutil.rmtree(folder / "proofs", ignore_errors=True)
                    report = distprove.batch(folder, client=client, backend=args.backend, echo=None)
                    assert report.ok and not report.skipped, report.summary()
                    if rep:  # the first round warms the keys, kernels and witness pools
                        rows[kind].append(report.proofs_per_second)
                        print(f"{kind}: {report.summary().splitlines()[0]}", flush=True)
            best = {k: max(v) for k, v in rows.items()}
            print(json.dumps({"fixture": args.fixture.name, "proofs": len(list(inputs.glob('*.json'))),
                              "workers": args.workers, "backend": args.backend, "proofs_per_second": rows,
                              "ratio_best": best["inputs"] / best["witnesses"]}))


if __name__ == "__main__":
    main()
