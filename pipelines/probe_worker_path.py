"""Where a Dask worker's proofs lose time against the bare in-process loop (an experiment).

Three ways to prove the same ``--proofs`` witnesses of one key on one GPU, alternated over
``--rounds`` so that host-speed drift hits each alike:

* ``bare``: the pipelined bare loop of bench_batch.py (``prover.prove_many``, written in groups);
* ``group``: the worker's own task body, ``work.prove_group`` (groups of the planner's size,
  each proof written as it is assembled), called in this process with a local ProverState: the
  worker's code without Dask;
* ``dask <variant>``: ``distprove.batch`` on a one-worker LocalCUDACluster, once per dask config
  variant (default; the worker profiler off; the nanny's pre-spawn environment cleared; 32
  proofs per task).

If ``group`` matches ``bare``, the worker's code path costs nothing and the gap is the Dask
process around it; if ``group`` matches Dask, the task body is where it goes.

    python pipelines/probe_worker_path.py --key K --witnesses W --proofs 256 --json probe.json
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
import types
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))
sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from bench_batch import prove_loop, run_batch, stage  # noqa: E402

VARIANTS: dict[str, dict[str, Any]] = {
    "default": {},
    "no-profile": {"distributed.worker.profile.enabled": False},
    "no-prespawn-env": {"distributed.nanny.pre-spawn-environ": {}},
    "32-per-task": {"distprove.planner.proofs-per-task": 32},
}


def local_group_runner(key_path: Path, backend_name: str) -> Any:
    """``run(wdir)``: prove every witness of ``wdir`` with ``work.prove_group`` in this process."""
    from distprove.cluster import state as dist_state
    from distprove.cluster import work
    from distprove.cluster.tasks import ProofSpec, Status
    from distprove.groth16 import MSM_NAMES, msm_group
    from distprove.witness.discovery import discover
    from distprove.config import settings

    st = dist_state.ProverState(backend_name)
    st.setup(types.SimpleNamespace(address="local"))
    dist_state.state = lambda: st  # the task bodies look their state up through these two
    dist_state.get_worker = lambda: types.SimpleNamespace(address="local")
    key = st.key(str(key_path))
    be = st.backend
    widths = {w: be.window_width(key.domain_size if w == "H" else key.n_vars, msm_group(w)) for w in MSM_NAMES}
    per_task = settings().proofs_per_task or 8

    def run(wdir: Path) -> None:
        out = wdir.parent / (wdir.name + "-out")
        shutil.rmtree(out, ignore_errors=True)  # as prove_loop does: nothing skipped as already written
        jobs = discover(wdir, key.path, out)
        specs = [ProofSpec(j.name, j.witness, key.path, key.content_hash, j.proof_path, j.public_path) for j in jobs]
        for i in range(0, len(specs), per_task):
            outcomes = work.prove_group(specs[i : i + per_task], widths, True, True)
            bad = [o for o in outcomes if getattr(o, "status", "") != Status.PROVED]
            if bad:
                raise SystemExit(f"group failed: {bad[0]}")

    return run


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--key", type=Path, required=True)
    ap.add_argument("--witnesses", type=Path, required=True)
    ap.add_argument("--proofs", type=int, default=256)
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--backend", default="gpu", choices=("gpu", "cpu"))
    ap.add_argument("--json", type=Path)
    args = ap.parse_args()
    witnesses = sorted(args.witnesses.glob("*.wtns"))
    from distprove.backends.select import get_backend
    from distprove.formats.jsonio import read_vk
    from distprove.keystore import open_key

    rates: dict[str, list[float]] = {}
    with tempfile.TemporaryDirectory(prefix="probe-") as tmp:
        work = Path(tmp)
        backend = get_backend(args.backend)
        key = open_key(args.key)
        vks = {key.content_hash: read_vk(key.vk_json())}
        group = local_group_runner(args.key, args.backend)
        prove_loop(key, backend, vks, stage(witnesses, 8, work / "warm"), False, True)
        group(stage(witnesses, 8, work / "warm-g"))
        for _ in range(args.rounds):
            for name in ("bare", "group"):
                wdir = stage(witnesses, args.proofs, work / name)
                t0 = time.perf_counter()
                if name == "bare":
                    prove_loop(key, backend, vks, wdir, False, True)
                else:
                    group(wdir)
                rates.setdefault(name, []).append(args.proofs / (time.perf_counter() - t0))
                print(f"{name}: {rates[name][-1]:.1f} proofs/s", flush=True)
        getattr(backend, "evict", lambda: None)()

        import dask.config
        from distributed import Client

        from distprove.cluster.client import local_cluster

        for variant, cfg in VARIANTS.items():
            with dask.config.set(cfg):
                cluster = local_cluster(args.backend, n_workers=1, dashboard_address=None)
                with cluster, Client(cluster) as client:
                    client.wait_for_workers(1)
                    run_batch(client, args.key, stage(witnesses, 16, work / "dwarm"), "data", args.backend, False)
                    for _ in range(args.rounds):
                        t0 = time.perf_counter()
                        run_batch(client, args.key, stage(witnesses, args.proofs, work / "dthr"), "data", args.backend, False)
                        rates.setdefault(f"dask {variant}", []).append(args.proofs / (time.perf_counter() - t0))
                        print(f"dask {variant}: {rates[f'dask {variant}'][-1]:.1f} proofs/s", flush=True)
    result = {"key": str(args.key), "proofs": args.proofs, "rates": rates,
              "medians": {k: statistics.median(v) for k, v in rates.items()},
              "commit": os.environ.get("DISTPROVE_GIT_COMMIT", "")}
    print(json.dumps(result["medians"], indent=1))
    if args.json:
        args.json.write_text(json.dumps(result, indent=1))


if __name__ == "__main__":
    main()
