"""Import speed of a snarkjs .zkey, MB/s by stage and end to end.

For each key (``--powers``: chain circuits of domain exactly 2^p built with the insecure dev setup
under ``--scratch``, reused when already there; or ``--zkey`` paths) this times, in one process
after a warm-up import (numba's compiled checks and, with ``--backend gpu``, the kernel are
cached then):

* read: map the file and run read_zkey's container, header and coefficient checks (no points);
* validate: every point of IC, A, B1, B2, C, H (< q, on the curve) on ``--backend``;
* csr: both coefficient matrices as CSR;
* hash: the file's SHA-256;
* write: the zarr key store (chunks, CRC32C, attributes, reopen);
* import: ``import_key`` end to end (stages overlap there: everything runs beside the hash);
* cli: ``distprove import-key`` in a fresh process (interpreter, imports and all);
* prove: ``distprove prove key.zkey witness_0.wtns`` in a fresh process on ``--backend``, what a
  user runs against rapidsnark's whole ``prover key.zkey w.wtns proof.json public.json``; with
  ``--prove`` (on by default only with ``--backend gpu``: a CPU proof of 2^20 takes minutes).

Each stage's MB/s is the .zkey's size over its best wall time of ``--repeat``, and MB per CPU
second over its best CPU time (see :func:`_best`). JSON to ``--out``, with the load average.

``timeline``: one more in-process import, each stage's start and end in ms from the import's
start, as the import logs them at DEBUG (:func:`_timeline`); ``after_hash_ms`` is how long the
import ran on once the hash had ended (the hash is the floor: one stream, it cannot be split).

``--validate none`` is an experiment for machines whose point checks are slow (a CPU of two
cores): the benchmark replaces the point checks with a no-op in its own process, so the overlap
of read, CSR, hash and write can be studied there (no cli or prove stage then: a fresh process
checks the points). The product has no such switch; the JSON says
``"validate": "none (benchmark only: point checks skipped)"``.

    python pipelines/bench_import.py --powers 16 18 --backend cpu --out bench/results/X.json
"""

from __future__ import annotations

import argparse
import json
import logging
import os
import platform
import resource
import shutil
import subprocess
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))  # run from a checkout without installing


def make_key(power: int, scratch: Path) -> Path:
    """A chain circuit's dev .zkey of domain exactly 2^power under ``scratch`` (made once)."""
    from distprove.devsetup import dev_setup
    from distprove.synth import make_circuit, write_circuit

    out = scratch / f"chain_k{power}"
    zkey = out / "key.zkey"
    if zkey.is_file():
        return zkey
    out.mkdir(parents=True, exist_ok=True)
    circuit = make_circuit("chain", (1 << power) - 2, 1, seed=1)
    write_circuit(circuit, out, 1)
    dev_setup(circuit.r1cs, out / "key.zarr", zkey=zkey, seed=1, overwrite=True, quiet=True)
    shutil.rmtree(out / "key.zarr")
    return zkey


def _best(fn, repeat: int, before=None) -> tuple[float, float]:
    """Best wall time and best CPU time (this process's and its children's, all threads) of ``repeat``
    runs, ``before()`` (untimed) ahead of each.

    The CPU time does not grow when other work shares the cores, so it is the figure to compare
    on a busy machine; on an idle one the wall time of a stage that uses every core is its CPU
    time over the core count.
    """
    wall = cpu = float("inf")
    for _ in range(repeat):
        if before is not None:
            before()
        c0 = _cpu()
        t0 = time.perf_counter()
        fn()
        wall = min(wall, time.perf_counter() - t0)
        cpu = min(cpu, _cpu() - c0)
    return wall, cpu


def _timeline(fn) -> dict:
    """Run ``fn`` (an import) once with the key store's DEBUG log captured: each stage's start,
    end and thread, chunk writes merged by array (``n`` chunks, ``busy_ms`` summed)."""
    log = logging.getLogger("distprove.keystore")
    spans: list[tuple[str, float, float, str]] = []

    class Spans(logging.Handler):
        def emit(self, record: logging.LogRecord) -> None:
            if hasattr(record, "span"):
                spans.append((*record.span, record.threadName))

    handler, level, propagate = Spans(), log.level, log.propagate
    log.addHandler(handler)
    log.setLevel(logging.DEBUG)
    log.propagate = False
    try:
        t0 = time.perf_counter()
        fn()
    finally:
        log.removeHandler(handler)
        log.setLevel(level)
        log.propagate = propagate
    merged: dict[str, list] = {}  # name: [first start, last end, count, busy seconds, thread pools]
    for name, a, b, thread in spans:
        m = merged.setdefault(name, [a, b, 0, 0.0, set()])
        m[0], m[1], m[2], m[3] = min(m[0], a), max(m[1], b), m[2] + 1, m[3] + b - a
        m[4].add(thread.split("_")[0])

    def ms(seconds: float) -> float:
        return round(seconds * 1e3, 1)

    rows = [
        {"stage": name, "start_ms": ms(a - t0), "end_ms": ms(b - t0), "n": n, "busy_ms": ms(busy), "threads": sorted(pools)}
        for name, (a, b, n, busy, pools) in sorted(merged.items(), key=lambda item: item[1][0])
    ]
    ends = {row["stage"]: row["end_ms"] for row in rows}
    return {"stages": rows, "after_hash_ms": round(ends["import"] - ends["hash"], 1)}


def _run(cmd: list[str], env: dict[str, str]) -> None:
    """Run a command; a failure raises with the command's own last lines of output."""
    res = subprocess.run(cmd, capture_output=True, text=True, env=env)
    if res.returncode != 0:
        raise SystemExit(f"{' '.join(cmd)} exited {res.returncode}: {(res.stderr or res.stdout)[-2000:]}")


def _cpu() -> float:
    own, kids = resource.getrusage(resource.RUSAGE_SELF), resource.getrusage(resource.RUSAGE_CHILDREN)
    return own.ru_utime + own.ru_stime + kids.ru_utime + kids.ru_stime


def bench_one(zkey: Path, backend: str, repeat: int, scratch: Path, prove: bool, validate: bool = True) -> dict:
    """Stage times (s) and MB/s for one key; without ``validate`` (the point checks already
    replaced by a no-op, see ``--validate``) no validate, cli or prove stage."""
    from distprove.formats.zkey import check_zkey_points, read_zkey
    from distprove.keystore import ZkeyKey, file_sha256, import_key, point_checker, write_store
    from distprove.stages.gather import csr_from_coefficients

    size = zkey.stat().st_size
    store = scratch / f"{zkey.parent.name}-bench.zarr"
    z = read_zkey(zkey, check_points=False)

    def csr() -> None:
        for which in (0, 1):
            csr_from_coefficients(z.coef_matrix, z.coef_row, z.coef_signal, z.coef_value, which, z.domain_size)

    key = ZkeyKey(zkey, device=backend)
    source = {"file": zkey.name, "size": size, "sha256": key.content_hash}
    # Each timed store write goes to a fresh path, as a first import does (replacing a store
    # also removes the old one's files).
    fresh = lambda: shutil.rmtree(store, ignore_errors=True)  # noqa: E731
    stages = {
        "read": _best(lambda: read_zkey(zkey, check_points=False), repeat),
        **({"validate": _best(lambda: check_zkey_points(z, point_checker(backend)), repeat)} if validate else {}),
        "csr": _best(csr, repeat),
        "hash": _best(lambda: file_sha256(zkey), repeat),
        "write": _best(lambda: write_store(store, key, source, key.zkey.n_coefs), repeat, fresh),
        "import": _best(lambda: import_key(zkey, store, device=backend), repeat, fresh),
    }
    fresh()
    timeline = _timeline(lambda: import_key(zkey, store, device=backend))
    cli = [sys.executable, "-m", "distprove.cli", "import-key", "--overwrite", "--backend", backend, str(zkey), str(store)]
    env = {**os.environ, "PYTHONPATH": os.pathsep.join(filter(None, [str(Path(__file__).resolve().parents[1]), os.environ.get("PYTHONPATH")]))}
    if validate:  # a fresh process runs the real point checks: no cli or prove figures without them
        stages["cli"] = _best(lambda: _run(cli, env), repeat)
    witness = zkey.parent / "witness_0.wtns"
    if validate and prove and witness.is_file():
        prove = [sys.executable, "-m", "distprove.cli", "prove", "--backend", backend, "--out", str(scratch / "proofs"),
                 str(zkey), str(witness)]
        stages["prove"] = _best(lambda: _run(prove, env), repeat)
    shutil.rmtree(store, ignore_errors=True)
    mb = size / 1e6
    return {
        "zkey": str(zkey),
        "power": z.power,
        "n_vars": z.n_vars,
        "n_coefs": z.n_coefs,
        "zkey_mb": round(size / 1e6, 2),
        "seconds": {k: round(w, 4) for k, (w, _) in stages.items()},
        "cpu_seconds": {k: round(c, 4) for k, (_, c) in stages.items()},
        "mb_per_s": {k: round(mb / w, 1) for k, (w, _) in stages.items()},
        "mb_per_cpu_s": {k: round(mb / c, 1) if c > 0 else None for k, (_, c) in stages.items()},
        "timeline": timeline,
    }


def _skip_point_checks() -> None:
    """Replace the .zkey point checks with a no-op in this process (``--validate none``): an
    experiment to study the rest of the import where the checks are slow; never the product's."""
    import distprove.formats.zkey as zkey_format

    zkey_format.check_points = lambda *args, **kwargs: None


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--powers", type=int, nargs="*", default=[], help="chain keys of domain 2^p to build and time")
    ap.add_argument("--zkey", type=Path, nargs="*", default=[], help="existing .zkey files to time")
    ap.add_argument("--backend", choices=["cpu", "gpu"], default="cpu", help="where the point checks run")
    ap.add_argument("--scratch", type=Path, default=Path("/tmp/distprove-bench-import"), help="keys and stores")
    ap.add_argument("--repeat", type=int, default=3, help="runs per stage; the best counts")
    ap.add_argument("--prove", action=argparse.BooleanOptionalAction, default=None,
                    help="time a fresh 'distprove prove' process too (default: only with --backend gpu)")
    ap.add_argument("--validate", choices=["on", "none"], default="on",
                    help="none: the point checks become a no-op for this run (benchmark only, labelled in the JSON)")
    ap.add_argument("--out", type=Path, required=True, help="JSON result path")
    args = ap.parse_args()
    if args.validate == "none":
        _skip_point_checks()
    prove = args.backend == "gpu" if args.prove is None else args.prove
    if not args.powers and not args.zkey:
        ap.error("give --powers or --zkey")
    args.scratch.mkdir(parents=True, exist_ok=True)
    keys = [make_key(p, args.scratch) for p in args.powers] + list(args.zkey)
    from distprove.keystore import import_key

    import_key(keys[0], args.scratch / "warmup.zarr", overwrite=True, device=args.backend)  # compile caches
    shutil.rmtree(args.scratch / "warmup.zarr")
    results = []
    for k in keys:
        r = bench_one(k, args.backend, args.repeat, args.scratch, prove, args.validate == "on")
        print(json.dumps(r), flush=True)
        results.append(r)
    record = {
        "benchmark": "bench_import",
        "backend": args.backend,
        "host": {"cpus": os.cpu_count(), "machine": platform.machine(), "python": platform.python_version()},
        "repeat": args.repeat,
        "validate": "on" if args.validate == "on" else "none (benchmark only: point checks skipped)",
        "prove": prove,
        "load_average": [round(x, 2) for x in os.getloadavg()],
        "keys": results,
    }
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text(json.dumps(record, indent=2) + "\n")


if __name__ == "__main__":
    main()
