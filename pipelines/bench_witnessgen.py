"""Witness calculation per input: distprove (wasmtime) against snarkjs 0.7.6 (node), side by side.

    python pipelines/bench_witnessgen.py FIXTURE_DIR... [--reps 5] [--warm-reps 30] [--snarkjs node_modules/.bin/snarkjs]

Each FIXTURE_DIR holds ``circuit.wasm`` and ``inputs/*.json``. Six numbers per circuit, each the
median over ``--reps`` runs (``--warm-reps`` for the in-process ones) cycling through the inputs:

* ``snarkjs cli``: ``snarkjs wtns calculate`` as a command (node start-up and wasm compile included);
* ``distprove cli``: ``distprove wtns calculate`` as a command (Python start-up, compile from
  wasmtime's code cache);
* ``snarkjs warm``: circom_runtime's calculator built once in one node process, then
  ``calculateWTNSBin`` per input (what a long-lived node worker would pay);
* ``distprove warm``: :func:`distprove.witness.wasm.calculate` per input after the first (what a
  Dask worker pays), the .wtns write excluded as in the node number;

and two that split the warm numbers, to tell the engines' machine code from what is around it:

* ``snarkjs run``: circom_runtime's ``_doCalculateWitness`` alone (``init``, the input values,
  the circuit), without the witness readout;
* ``distprove run``: :meth:`WitnessCalculator.run` (the same, in one call into wasmtime).

The two CLI rows also check that both commands wrote the same bytes.

``--processes 1,8,16`` measures instead what a worker's witness pool gets from this host: that
many processes at once, each with its calculator built and warm, computing ``--warm-reps`` inputs
each and writing each .wtns (to ``$TMPDIR``), as a batch's witness tasks do; inputs per second
over the whole pool. It needs no node (the GPU host has none)::

    python pipelines/bench_witnessgen.py bench/circuits/mul_chain_64k --processes 1,4,8,12,16
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]

_NODE_WARM = r"""
const fs = require("fs");
const { WitnessCalculatorBuilder } = require("circom_runtime");
const { utils } = require("ffjavascript");
(async () => {
  const [wasm, reps, ...inputs] = process.argv.slice(1);
  const wc = await WitnessCalculatorBuilder(fs.readFileSync(wasm), {});
  const parsed = inputs.map((p) => utils.unstringifyBigInts(JSON.parse(fs.readFileSync(p, "utf8"))));
  await wc.calculateWTNSBin(parsed[0]);  // warm-up
  const times = { warm: [], run: [] };
  for (let r = 0; r < Number(reps); r++) {
    let t0 = process.hrtime.bigint();
    await wc.calculateWTNSBin(parsed[r % parsed.length]);
    times.warm.push(Number(process.hrtime.bigint() - t0) / 1e9);
    t0 = process.hrtime.bigint();
    await wc._doCalculateWitness(parsed[r % parsed.length], false);
    times.run.push(Number(process.hrtime.bigint() - t0) / 1e9);
  }
  console.log(JSON.stringify(times));
})().then(() => process.exit(0), (e) => { console.error(e); process.exit(1); });
"""


def _wall(cmd: list[str], env: dict[str, str] | None = None) -> float:
    """Seconds one command takes; its stderr is shown when it fails."""
    t0 = time.perf_counter()
    done = subprocess.run(cmd, capture_output=True, env=env, cwd=REPO)
    if done.returncode:
        sys.exit(f"{' '.join(cmd)}: exit {done.returncode}: {done.stderr.decode(errors='replace')[-2000:]}")
    return time.perf_counter() - t0


def bench(fixture: Path, reps: int, warm_reps: int, snarkjs: str) -> dict[str, float | int | str]:
    """Median seconds per input of the four ways (see the module docstring) for one fixture."""
    from distprove.witness.generators import calculate
    from distprove.witness.wasm import calculator, read_input

    wasm = fixture / "circuit.wasm"
    inputs = sorted((fixture / "inputs").glob("*.json"))
    env = {**os.environ, "PYTHONPATH": os.pathsep.join(filter(None, [str(REPO), os.environ.get("PYTHONPATH")]))}
    rows: dict[str, list[float]] = {"snarkjs cli": [], "distprove cli": []}
    with tempfile.TemporaryDirectory() as tmp:
        ours, theirs = Path(tmp) / "ours.wtns", Path(tmp) / "theirs.wtns"
        _wall([sys.executable, "-m", "distprove.cli", "wtns", "calculate", str(wasm), str(inputs[0]), str(ours)], env)
        for r in range(reps):  # alternate, so that a busy moment hits both
            inp = str(inputs[r % len(inputs)])
            rows["snarkjs cli"].append(_wall([snarkjs, "wtns", "calculate", str(wasm), inp, str(theirs)]))
            rows["distprove cli"].append(
                _wall([sys.executable, "-m", "distprove.cli", "wtns", "calculate", str(wasm), inp, str(ours)], env)
            )
            if ours.read_bytes() != theirs.read_bytes():
                raise SystemExit(f"{inp}: distprove and snarkjs wrote different witnesses")
    out = subprocess.run(
        ["node", "-e", _NODE_WARM, str(wasm), str(warm_reps), *map(str, inputs)],
        check=True, capture_output=True, text=True, cwd=REPO,
    )
    node = json.loads(out.stdout)
    rows["snarkjs warm"], rows["snarkjs run"] = node["warm"], node["run"]
    wc = calculator(wasm)
    parsed = [read_input(p) for p in inputs]
    calculate(wasm, inputs[0])
    rows["distprove warm"], rows["distprove run"] = [], []
    for r in range(warm_reps):
        t0 = time.perf_counter()
        calculate(wasm, inputs[r % len(inputs)])
        rows["distprove warm"].append(time.perf_counter() - t0)
        t0 = time.perf_counter()
        wc.run(parsed[r % len(inputs)])
        rows["distprove run"].append(time.perf_counter() - t0)
    result: dict[str, float | int | str] = {"fixture": fixture.name, "witness_size": wc.info.witness_size}
    result.update({k: statistics.median(v) for k, v in rows.items()})
    return result


def _pool_init(wasm: str, first: str) -> None:
    from distprove.witness.generators import calculate

    calculate(wasm, first)


def _pool_run(wasm: str, inputs: list[str], reps: int, out: str) -> float:
    from distprove.witness.generators import calculate_wtns

    t0 = time.perf_counter()
    for r in range(reps):
        calculate_wtns(wasm, inputs[r % len(inputs)], out)
    return time.perf_counter() - t0


def parallel(fixture: Path, counts: list[int], reps: int) -> list[dict[str, float | int | str]]:
    """Inputs per second of ``n`` warm processes at once, for each ``n`` in ``counts``."""
    import multiprocessing

    wasm = str(fixture / "circuit.wasm")
    inputs = [str(p) for p in sorted((fixture / "inputs").glob("*.json"))]
    rows: list[dict[str, float | int | str]] = []
    ctx = multiprocessing.get_context("spawn")
    with tempfile.TemporaryDirectory() as tmp:
        for n in counts:
            with ctx.Pool(n, initializer=_pool_init, initargs=(wasm, inputs[0])) as pool:
                pool.starmap(_pool_run, [(wasm, inputs, 1, f"{tmp}/{i}.wtns") for i in range(n)])  # the pool up
                t0 = time.perf_counter()
                each = pool.starmap(_pool_run, [(wasm, inputs, reps, f"{tmp}/{i}.wtns") for i in range(n)])
                wall = time.perf_counter() - t0
            rows.append({"fixture": fixture.name, "processes": n, "inputs_per_s": n * reps / wall,
                         "ms_per_input_per_process": 1e3 * statistics.median(each) / reps})
            print(f"{fixture.name:<16}{n:>4} processes: {n * reps / wall:8.1f} inputs/s, "
                  f"{rows[-1]['ms_per_input_per_process']:.2f} ms an input in each", flush=True)
    return rows


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("fixtures", nargs="+", type=Path)
    ap.add_argument("--reps", type=int, default=5)
    ap.add_argument("--warm-reps", type=int, default=30)
    ap.add_argument("--snarkjs", default=str(REPO / "node_modules" / ".bin" / "snarkjs"))
    ap.add_argument("--processes", help="Measure warm processes at once instead, e.g. 1,8,16 (no node needed).")
    ap.add_argument("--json", type=Path, help="Also write the results here.")
    args = ap.parse_args()
    if args.processes:
        counts = [int(n) for n in args.processes.split(",")]
        rows = [r for f in args.fixtures for r in parallel(f, counts, args.warm_reps)]
        if args.json:
            args.json.write_text(json.dumps(rows, indent=1))
        return
    results = [bench(f, args.reps, args.warm_reps, args.snarkjs) for f in args.fixtures]
    cols = ["snarkjs cli", "distprove cli", "snarkjs warm", "distprove warm", "snarkjs run", "distprove run"]
    print(f"{'fixture':<16}{'wires':>8}" + "".join(f"{c + ' (ms)':>20}" for c in cols))
    for r in results:
        print(f"{r['fixture']:<16}{r['witness_size']:>8}" + "".join(f"{1e3 * float(r[c]):>20.2f}" for c in cols))
    if args.json:
        args.json.write_text(json.dumps(results, indent=1))


if __name__ == "__main__":
    main()
