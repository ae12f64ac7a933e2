"""A batch from inputs against the same batch from precomputed witnesses, on one local cluster.

    python pipelines/bench_input_batch.py CIRCUIT_DIR [--copies 4] [--workers 2] [--backend cpu] [--reps 2]

CIRCUIT_DIR holds the circuit's ``circuit.wasm`` (``circom --wasm``), its inputs
``inputs/*.json`` and a key: ``circuit_final.zkey`` (the fixtures under tests/data), else the
insecure dev key ``dev/circuit.zarr``, which is made from ``circuit.r1cs`` when it is missing
(``devsetup.dev_setup``: fixed-base multiplications on the GPU when CuPy sees one; it also
writes ``dev/verification_key.json`` for ``snarkjs groth16 verify``). The precomputed witnesses
are distprove's own (``distprove.witness.generators.calculate_wtns``, byte for byte snarkjs's), computed once per
input before any timing.

Each input is copied ``--copies`` times into one folder and its witness as many times into
another; both batches run on one cluster (non-daemonic workers, so each has its witness process
pool), alternately ``--reps`` times after one warm-up batch of each, and print proofs/s per run
and their ratio (inputs over witnesses, best run of each; ``run_for_run``: the median of each
round's inputs over that round's witnesses). ``--also NAME=VALUE`` adds a third batch to each
round, the inputs again under the setting ``distprove.NAME`` (VALUE read as Dask reads an
environment variable's: e.g. ``witness.shared-memory=null`` for scratch files), an A/B in one cluster;
``--gen LABEL=GENERATOR`` (repeatable) adds an input batch computed by another witness generator
(e.g. ``--gen native=circuit_cpp``, a ``circom --c`` folder), the generators side by side in one cluster. The input batch computes every
witness on the workers; the witness batch reads them. Each run also gives the seconds to its
first proof and its proofs/s after that one's group (``steady``), which tell a batch's fixed
start-up (the circuit check, the first witness chunk) from a slower pace. ``--keep DIR`` keeps
the last input batch's proofs there (to check one with snarkjs). ``--timeline`` records each
run's Dask task stream and prints, per worker, where its execution slot went: the seconds to the
first proof task, in proof tasks, in other tasks (witness tasks until they secede, ...)
and idle between them, and the tail after the last proof task's slot is given back, and the
seconds its proof tasks spent in each metered stage (the span's fine performance metrics).
``--witness-workers N`` adds N CPU-only witness workers to the cluster
(``distprove.cluster.client.add_witness_workers``) and ``--set NAME=VALUE`` sets ``distprove.NAME``
for the whole run (the cluster included): e.g. ``--set witness.processes=4 --set
witness.on-provers=true`` holds each worker's witness processes to four, the prover's own included,
for a curve of the witness rate against the witness workers added.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import statistics
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

import dask


def circuit_key(circuit: Path, backend: str) -> Path:
    """The folder's key: ``circuit_final.zkey``, else ``dev/circuit.zarr`` (made from
    ``circuit.r1cs`` when missing, on the GPU unless ``backend`` is cpu)."""
    zkey = circuit / "circuit_final.zkey"
    if zkey.is_file():
        return zkey
    store = circuit / "dev" / "circuit.zarr"
    if not store.exists():
        from distprove.devsetup import dev_setup

        r1cs = circuit / "circuit.r1cs"
        if not r1cs.is_file():
            raise SystemExit(f"{circuit}: no circuit_final.zkey, dev/circuit.zarr or circuit.r1cs")
        t0 = time.perf_counter()
        dev_setup(r1cs, store, vk=circuit / "dev" / "verification_key.json", seed=1,
                  device="cpu" if backend == "cpu" else "auto", quiet=True)
        print(f"dev key {store} in {time.perf_counter() - t0:.1f} s (INSECURE: benchmarks only)", flush=True)
    return store


LINK_WITNESS_BYTES = 16 << 20
"""Witness copies from this size on are hard links to one file: 2^20 values x 150 copies would
be 4.8 GB of tmpfs, and a file this size is read from memory either way (the cache effects of
re-reading one small file are what copies avoid)."""


def _folders(circuit: Path, copies: int, tmp: Path) -> tuple[Path, Path]:
    """The input folder (with the wasm) and the witness folder, ``copies`` of each input (large
    witnesses linked, :data:`LINK_WITNESS_BYTES`)."""
    from distprove.witness.generators import calculate_wtns

    wasm = circuit / "circuit.wasm"
    inputs, witnesses, computed = tmp / "inputs", tmp / "witnesses", tmp / "computed"
    for d in (inputs, witnesses, computed):
        d.mkdir()
    shutil.copy(wasm, inputs)
    sources = sorted((circuit / "inputs").glob("*.json"))
    if not sources:
        raise SystemExit(f"{circuit / 'inputs'}: no *.json inputs")
    t0 = time.perf_counter()
    for inp in sources:
        wtns = computed / f"{inp.stem}.wtns"
        calculate_wtns(wasm, inp, wtns)
        link = wtns.stat().st_size >= LINK_WITNESS_BYTES
        for c in range(copies):
            shutil.copy(inp, inputs / f"{inp.stem}_{c}.json")
            (os.link if link else shutil.copy)(wtns, witnesses / f"{inp.stem}_{c}.wtns")
    print(f"{len(sources)} witnesses computed in {time.perf_counter() - t0:.2f} s", flush=True)
    return inputs, witnesses


def _pace(report: Any) -> tuple[float, float]:
    """(seconds to the first proof, proofs/s of the proofs after the first group's) of a BatchReport."""
    times = sorted(r.latency for r in report.proved)
    later = [t for t in times if t > times[0] + 1e-3]
    steady = len(later) / (times[-1] - times[0]) if later else 0.0
    return times[0], steady


def slot_timeline(stream: list[dict[str, Any]], t0: float, t1: float) -> dict[str, dict[str, float]]:
    """Per worker, where its execution slot went between ``t0`` and ``t1`` (a batch's wall
    clock): ``first_proof`` (seconds to its first proof task's start), ``proving`` (in proof
    tasks), ``other`` (in other tasks, by kind), ``idle`` (no task in the slot after the first
    proof task started), ``tail`` (after the last proof task ended), task counts by kind. A task
    that secedes (a witness task waiting for its pool, a proof task draining its last groups)
    holds the slot only until then; the stream shows its whole compute span, so overlapping
    spans are clipped at the next task's start."""
    spans: dict[str, list[tuple[float, float, str]]] = {}
    for rec in stream:
        kind = rec["key"][0] if isinstance(rec["key"], tuple) else str(rec["key"]).split("-")[0]
        for ss in rec.get("startstops", ()):
            if ss.get("action") == "compute":
                spans.setdefault(rec["worker"], []).append((ss["start"], ss["stop"], str(kind)))
    out: dict[str, dict[str, float]] = {}
    for worker, items in spans.items():
        items.sort()
        proofs = [s for s in items if s[2] == "prove-whole"]
        if not proofs:
            continue
        row: dict[str, float] = {"first_proof": proofs[0][0] - t0, "proving": 0.0, "idle": 0.0,
                                 "tail": max(0.0, t1 - max(s[1] for s in proofs))}
        busy_until = proofs[0][0]
        for i, (start, stop, kind) in enumerate(items):
            if start < proofs[0][0]:
                continue
            nxt = items[i + 1][0] if i + 1 < len(items) else stop
            held = max(0.0, min(stop, nxt) - max(start, busy_until))
            row["idle"] += max(0.0, start - busy_until)
            row["proving" if kind == "prove-whole" else f"other:{kind}"] = row.get(
                "proving" if kind == "prove-whole" else f"other:{kind}", 0.0) + held
            row[f"n:{kind}"] = row.get(f"n:{kind}", 0) + 1
            busy_until = max(busy_until, min(stop, nxt))
        out[worker] = {k: round(v, 4) for k, v in row.items()}
    return out


def proof_task_stages(dask_scheduler: Any) -> dict[str, float]:
    """On the scheduler: the seconds the last batch's proof tasks spent in each activity (the
    stages their meters record, Dask's thread-cpu and thread-noncpu), from the fine performance
    metrics of the batch's span (the latest "distprove-batch")."""
    spans = [sp for sp in dask_scheduler.extensions["spans"].spans.values() if sp.name == ("distprove-batch",)]
    if not spans:
        return {}
    last = max(spans, key=lambda sp: sp.enqueued)
    return {activity: round(value, 4) for (context, prefix, activity, unit), value in last.cumulative_worker_metrics.items()
            if context == "execute" and prefix == "prove-whole" and unit == "seconds"}


def task_spans(stream: list[dict[str, Any]], t0: float) -> str:
    """Every task's compute span from ``t0``, in start order, as ``prefix:N@start-stop`` (N: the
    proofs or inputs after the first that its name counts, ``name+N``)."""
    spans = []
    for rec in stream:
        key = rec["key"]
        if not isinstance(key, tuple):
            continue
        more = key[1].rsplit("+", 1)[-1] if "+" in str(key[1]) else "0"
        spans += [(ss["start"], f"{key[0]}:{more}@{ss['start'] - t0:.3f}-{ss['stop'] - t0:.3f}")
                  for ss in rec.get("startstops", ()) if ss.get("action") == "compute"]
    return " ".join(text for _, text in sorted(spans))


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("circuit", type=Path, help="circuit.wasm, inputs/*.json and a key (see above)")
    ap.add_argument("--copies", type=int, default=4)
    ap.add_argument("--workers", type=int, default=2)
    ap.add_argument("--backend", default="cpu")
    ap.add_argument("--reps", type=int, default=2)
    ap.add_argument("--keep", type=Path, help="Copy the last input batch's proofs here.")
    ap.add_argument("--timeline", action="store_true", help="Print where each worker's slot went per run.")
    ap.add_argument("--also", metavar="NAME=VALUE", help="Also run the inputs under distprove.NAME=VALUE each round.")
    ap.add_argument("--gen", metavar="LABEL=GENERATOR", action="append", default=[],
                    help="Also run the inputs with this witness generator each round (repeatable).")
    ap.add_argument("--native", action="store_true",
                    help="Also run the inputs with the circuit's native generator (a *_cpp folder in CIRCUIT_DIR, "
                         "else bench/circuits/native/<name>_cpp), labelled 'native'.")
    ap.add_argument("--witness-workers", type=int, default=0, help="CPU-only witness workers added to the cluster.")
    ap.add_argument("--set", metavar="NAME=VALUE", action="append", default=[],
                    help="Set distprove.NAME=VALUE for the whole run (repeatable).")
    args = ap.parse_args()
    dask.config.set({f"distprove.{n}": dask.config.interpret_value(v) for n, _, v in (a.partition("=") for a in args.set)})
    kinds: list[tuple[str, str, dict[str, Any]]] = [("witnesses", "witnesses", {}), ("inputs", "inputs", {})]
    if args.also:
        name, _, value = args.also.partition("=")
        kinds.append((f"inputs {args.also}", "inputs", {f"distprove.{name}": dask.config.interpret_value(value)}))
    if args.native:
        found = sorted(p for p in args.circuit.glob("*_cpp") if p.is_dir()) or [
            p for p in [Path(__file__).resolve().parent.parent / "bench" / "circuits" / "native" / f"{args.circuit.name}_cpp"]
            if p.is_dir()]
        if not found:
            sys.exit(f"{args.circuit}: no native generator (a *_cpp folder in it or bench/circuits/native/{args.circuit.name}_cpp)")
        args.gen.append(f"native={found[0]}")
    gens = {"inputs": None} | {f"inputs {label}": Path(path).resolve() for label, _, path in (g.partition("=") for g in args.gen)}
    kinds += [(kind, "inputs", {}) for kind in gens if kind != "inputs"]

    import distprove
    from distributed import Client, LocalCluster, get_task_stream

    key = circuit_key(args.circuit, args.backend)
    with tempfile.TemporaryDirectory() as tmp, dask.config.set({"distributed.worker.daemon": False}):
        inputs, witnesses = _folders(args.circuit, args.copies, Path(tmp))
        with LocalCluster(n_workers=args.workers, threads_per_worker=1, dashboard_address=None) as cluster, Client(cluster) as client:
            if args.witness_workers:
                from distprove.cluster.client import add_witness_workers

                add_witness_workers(cluster, args.witness_workers)
                client.wait_for_workers(args.workers + args.witness_workers, timeout=120)
            rows: dict[str, list[float]] = {kind: [] for kind, _, _ in kinds}
            pace: dict[str, list[tuple[float, float]]] = {kind: [] for kind, _, _ in kinds}
            for rep in range(args.reps + 1):
                for kind, source, settings in kinds:
                    folder = inputs if source == "inputs" else witnesses
                    shutil.rmtree(folder / "proofs", ignore_errors=True)
                    with get_task_stream(client) as ts, dask.config.set(settings):
                        t0 = time.time()
                        gen = gens.get(kind) or inputs / "circuit.wasm"
                        report = distprove.batch(folder, key=key, client=client, backend=args.backend, echo=None,
                                                 witness_gen=gen if source == "inputs" else None)
                        t1 = time.time()
                    if not report.ok or report.skipped:
                        sys.exit(f"{kind} batch: {report.summary()}")
                    if rep:  # the first round warms the keys, kernels and witness pools
                        rows[kind].append(report.proofs_per_second)
                        pace[kind].append(_pace(report))
                        print(f"{kind}: {report.summary().splitlines()[0]}; first proof at {pace[kind][-1][0]:.3f} s, "
                              f"then {pace[kind][-1][1]:.2f} proofs/s", flush=True)
                        if args.timeline:
                            print(f"  {kind} slots: {json.dumps(slot_timeline(ts.data, t0, t1))}", flush=True)
                            print(f"  tasks: {task_spans(ts.data, t0)}", flush=True)
                            print(f"  proof task stages: {json.dumps(client.run_on_scheduler(proof_task_stages))}", flush=True)
            if args.keep:
                shutil.copytree(inputs / "proofs", args.keep, dirs_exist_ok=True)
            best = {k: max(v) for k, v in rows.items()} if args.reps else {}
            ratios = {kind: best[kind] / best["witnesses"] for kind, source, _ in kinds if source == "inputs"} if best else {}
            run_for_run = {kind: statistics.median(a / b for a, b in zip(rows[kind], rows["witnesses"]))
                           for kind, source, _ in kinds if source == "inputs"} if best else {}
            print(json.dumps({"circuit": args.circuit.name, "proofs": len(list(inputs.glob("*.json"))),
                              "workers": args.workers, "witness_workers": args.witness_workers,
                              "settings": args.set, "backend": args.backend, "proofs_per_second": rows,
                              "first_proof_s_and_steady": pace, "ratio_best": ratios.get("inputs"),
                              "ratios_best": ratios, "run_for_run": run_for_run}))


if __name__ == "__main__":
    main()
