"""Inputs per second of one ``distprove wtns calculate GEN FOLDER OUT --jobs N`` command, per
witness generator, per circuit: what a user computing a folder of witnesses gets from the host.

    python3 pipelines/bench_wtns_cli.py CIRCUIT_DIR... [--count 256] [--jobs 16] [--json out.json]

Each CIRCUIT_DIR holds ``circuit.wasm`` and ``inputs/*.json``; its native generator is the
``*_cpp`` folder in it, else ``--native-root/<name>_cpp`` (``name`` the folder's name). The inputs
are copied round-robin to ``--count`` files; each generator's command runs ``--reps`` times into
a fresh output folder (the first run of a native folder also finds its driver in distprove's
cache: pipelines/pack_native.sh builds them off the GPU machine) and the best wall time counts,
the whole command included (start-up, the wasm's compile, every .wtns written). With
``--snarkjs PATH`` (a node host), snarkjs's own ``wtns calculate``, one command per input, runs
``--jobs`` at a time too. Every generator's witnesses must be byte-identical to the wasm's.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import subprocess
import sys
import tempfile
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path


def native_folder(circuit: Path, root: Path | None) -> Path | None:
    """The circuit's ``circom --c`` folder: one inside it, else ``root/<name>_cpp``."""
    inside = sorted(p for p in circuit.glob("*_cpp") if p.is_dir())
    if inside:
        return inside[0]
    if root is not None and (root / f"{circuit.name}_cpp").is_dir():
        return root / f"{circuit.name}_cpp"
    return None


def stage(circuit: Path, count: int, tmp: Path) -> Path:
    """``count`` copies of the circuit's inputs, round-robin, in a fresh folder."""
    sources = sorted((circuit / "inputs").glob("*.json"))
    if not sources:
        raise SystemExit(f"{circuit}: no inputs/*.json")
    folder = tmp / "inputs"
    folder.mkdir()
    for i in range(count):
        shutil.copy(sources[i % len(sources)], folder / f"in_{i:05d}.json")
    return folder


def run_distprove(gen: Path, inputs: Path, out: Path, jobs: int, timeout: float) -> float:
    """Wall seconds of one ``distprove wtns calculate`` over the folder."""
    shutil.rmtree(out, ignore_errors=True)
    t0 = time.perf_counter()
    proc = subprocess.run([sys.executable, "-m", "distprove.cli", "wtns", "calculate", str(gen), str(inputs), str(out),
                           "--jobs", str(jobs)], capture_output=True, text=True, timeout=timeout)
    seconds = time.perf_counter() - t0
    if proc.returncode != 0:
        raise RuntimeError(f"{gen}: exit {proc.returncode}: {(proc.stderr or proc.stdout).strip()[-400:]}")
    return seconds


def run_snarkjs(snarkjs: str, wasm: Path, inputs: Path, out: Path, jobs: int, timeout: float) -> float:
    """Wall seconds of snarkjs's ``wtns calculate``, one command per input, ``jobs`` at a time."""
    shutil.rmtree(out, ignore_errors=True)
    out.mkdir()
    files = sorted(inputs.glob("*.json"))

    def one(p: Path) -> None:
        subprocess.run([snarkjs, "wtns", "calculate", str(wasm), str(p), str(out / f"{p.stem}.wtns")],
                       check=True, capture_output=True, timeout=timeout)

    t0 = time.perf_counter()
    with ThreadPoolExecutor(jobs) as pool:
        list(pool.map(one, files))
    return time.perf_counter() - t0


def same_witnesses(a: Path, b: Path) -> bool:
    """Whether two output folders hold the same .wtns files, byte for byte."""
    names = sorted(p.name for p in a.glob("*.wtns"))
    return names == sorted(p.name for p in b.glob("*.wtns")) and all(
        (a / n).read_bytes() == (b / n).read_bytes() for n in names)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("circuits", nargs="+", type=Path)
    ap.add_argument("--count", type=int, default=256, help="Inputs per command.")
    ap.add_argument("--jobs", type=int, default=os.cpu_count() or 1)
    ap.add_argument("--reps", type=int, default=2)
    ap.add_argument("--native-root", type=Path, help="Where <name>_cpp folders are found for circuits without one.")
    ap.add_argument("--snarkjs", help="snarkjs's command, to time it beside (one command per input).")
    ap.add_argument("--budget", type=float, default=120.0, help="Seconds per circuit; later runs are left out past it.")
    ap.add_argument("--json", type=Path)
    args = ap.parse_args()
    results = []
    for circuit in args.circuits:
        gens = {"wasm": circuit / "circuit.wasm"}
        native = native_folder(circuit, args.native_root)
        if native is not None:
            gens["native"] = native
        row: dict[str, object] = {"circuit": circuit.name, "count": args.count, "jobs": args.jobs}
        start = time.perf_counter()
        with tempfile.TemporaryDirectory() as tmp:
            inputs = stage(circuit, args.count, Path(tmp))
            outs = {}
            for label, gen in gens.items():
                best = None
                for _ in range(args.reps):
                    if best is not None and time.perf_counter() - start > args.budget:
                        break
                    out = Path(tmp) / f"out-{label}"
                    try:
                        s = run_distprove(gen, inputs, out, args.jobs, args.budget)
                    except (RuntimeError, subprocess.TimeoutExpired) as exc:
                        row[f"{label}_error"] = str(exc)[-300:]
                        break
                    best = s if best is None else min(best, s)
                if best is not None:
                    row[f"{label}_s"] = round(best, 3)
                    row[f"{label}_inputs_per_s"] = round(args.count / best, 1)
                    kept = Path(tmp) / f"kept-{label}"
                    shutil.move(out, kept)
                    outs[label] = kept
            if "native" in outs and "wasm" in outs:
                row["native_same_bytes"] = same_witnesses(outs["wasm"], outs["native"])
            if args.snarkjs and "wasm" in outs:
                try:
                    s = run_snarkjs(args.snarkjs, gens["wasm"], inputs, Path(tmp) / "out-snarkjs", args.jobs, args.budget)
                    row["snarkjs_s"] = round(s, 3)
                    row["snarkjs_inputs_per_s"] = round(args.count / s, 1)
                    row["snarkjs_same_bytes"] = same_witnesses(outs["wasm"], Path(tmp) / "out-snarkjs")
                except (subprocess.CalledProcessError, subprocess.TimeoutExpired) as exc:
                    row["snarkjs_error"] = str(exc)[-300:]
        print(json.dumps(row), flush=True)
        results.append(row)
    if args.json:
        args.json.write_text(json.dumps({"host_cores": os.cpu_count(), "results": results}, indent=1))


if __name__ == "__main__":
    main()
