"""Native (circom --c) witness generators per input: distprove's long-lived driver against a
process per input.

    python pipelines/bench_native_witness.py FIXTURE_DIR... [--reps 30] [--json OUT]

Each FIXTURE_DIR holds ``<name>_cpp.tar.xz`` (or the ``<name>_cpp/`` folder) and
``inputs/*.json`` (tests/data/sha256_32, poseidon_k4, merkle_d20). The folder is built with its
Makefile's flags (-O3) twice: into a scratch distprove cache (the driver) and, as a user would,
with ``make`` in a copy (the plain binary). Four numbers per circuit, each the median
milliseconds per input over ``--reps`` inputs (cycling through the fixture's), after one warm-up:

* ``driver``: :meth:`NativeGenerator.calculate_file` on the folder: the input read and sent
  over the driver's stdin, the witness back over its stdout into an array;
* ``process``: :meth:`NativeGenerator.calculate_file` on the plain binary: a process per input
  (``BIN input.json out.wtns``, files in tmpfs), the .wtns read back into an array;
* ``bare process``: the binary alone as a command (``subprocess.run``; its process start, the
  .dat load, the input's JSON, the circuit and the .wtns write), what a shell loop pays;
* ``wasm``: for comparison, the circuit's ``circuit.wasm`` in wasmtime
  (:meth:`WitnessCalculator.calculate_file`, warm: what a batch pays per input today).

Every witness of the first two ways is checked equal to the other's and to the wasm's.
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import shutil
import statistics
import subprocess
import tarfile
import tempfile
import time
from pathlib import Path

import numpy as np


def _folder(fixture: Path, scratch: Path) -> Path:
    """The fixture's ``<name>_cpp`` folder (unpacked into ``scratch`` when packed)."""
    folders = [p for p in fixture.glob("*_cpp") if p.is_dir()]
    if folders:
        return folders[0]
    (archive,) = fixture.glob("*_cpp.tar.xz")
    with tarfile.open(archive) as tar:
        tar.extractall(scratch, filter="data")
    return scratch / archive.name.removesuffix(".tar.xz")


def _ms(times: list[float]) -> float:
    return round(statistics.median(times) * 1000, 2)


def bench(fixture: Path, reps: int, scratch: Path) -> dict[str, float | int | str]:
    """Median ms per input of the three ways (see the module docstring) for one fixture."""
    from distprove.witness.native import NativeGenerator
    from distprove.witness.wasm import calculator

    folder = _folder(fixture, scratch)
    name = folder.name.removesuffix("_cpp")
    inputs = sorted((fixture / "inputs").glob("*.json"))
    t0 = time.perf_counter()
    driver = NativeGenerator(folder)
    build_driver = time.perf_counter() - t0
    user = scratch / f"user-{name}"
    shutil.copytree(folder, user)
    t0 = time.perf_counter()
    subprocess.run(["make", "-j", str(len(os.sched_getaffinity(0)))], cwd=user, check=True, capture_output=True)
    build_user = time.perf_counter() - t0
    binary = NativeGenerator(user / name)
    wasm = calculator(fixture / "circuit.wasm")

    times: dict[str, list[float]] = {"driver": [], "process": [], "bare process": [], "wasm": []}
    out = scratch / "out.wtns"
    for r in range(reps + 1):
        inp = inputs[r % len(inputs)]
        t0 = time.perf_counter()
        a = driver.calculate_file(inp)
        t1 = time.perf_counter()
        b = binary.calculate_file(inp)
        t2 = time.perf_counter()
        subprocess.run([str(user / name), str(inp), str(out)], check=True, capture_output=True)
        t3 = time.perf_counter()
        c = wasm.calculate_file(inp)
        t4 = time.perf_counter()
        if not (np.array_equal(a, b) and np.array_equal(a, c)):
            raise SystemExit(f"{inp}: the driver's witness differs from the binary's or the wasm's")
        if r:  # the first round warms the caches
            times["driver"].append(t1 - t0)
            times["process"].append(t2 - t1)
            times["bare process"].append(t3 - t2)
            times["wasm"].append(t4 - t3)
    driver.close()
    return {
        "circuit": name,
        "witness values": int(driver.witness_size),
        "inputs": reps,
        **{f"{k} ms": _ms(v) for k, v in times.items()},
        "build s (driver, cache)": round(build_driver, 1),
        "build s (make, user)": round(build_user, 1),
    }


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("fixtures", nargs="+", type=Path)
    ap.add_argument("--reps", type=int, default=30)
    ap.add_argument("--json", type=Path, help="Also write the results here.")
    args = ap.parse_args()
    rows = []
    with tempfile.TemporaryDirectory(prefix="bench-native-") as tmp:
        os.environ["DISTPROVE_CACHE_DIR"] = os.path.join(tmp, "cache")
        for fixture in args.fixtures:
            scratch = Path(tmp) / fixture.name
            scratch.mkdir()
            row = bench(fixture, args.reps, scratch)
            rows.append(row)
            print(json.dumps(row))
    if args.json:
        args.json.write_text(json.dumps({"host": platform.node(), "cpus": len(os.sched_getaffinity(0)),
                                         "command": "python pipelines/bench_native_witness.py "
                                         + " ".join(map(str, args.fixtures)) + f" --reps {args.reps}",
                                         "results": rows}, indent=1) + "\n")


if __name__ == "__main__":
    main()
