"""Where the proving thread's time goes in the bare grouped loop (``distprove.prover.prove_many``).

Every call the prover makes on its backend is timed on the host (the call itself and, for calls
that return a waiter, the waiter), while ``nvidia-smi`` samples the GPU's busy share. The report
per group gives each backend call's host seconds; what is left of the wall is the prover's own
Python (witness file reads are the backend's ``read_witness_file``/``load_witness_group``). A call
that only waits on the device (``settle``, ``synchronize``, a waiter) and takes long says the
host idles there; a short device share (busy %) with long host calls says the host is the limit.

    python pipelines/profile_group_loop.py --synth chain --log-n 12 --proofs 2048
"""

from __future__ import annotations

import argparse
import json
import sys
import tempfile
import threading
import time
from collections import defaultdict
from pathlib import Path
from typing import Any, Callable

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
sys.path.insert(0, str(Path(__file__).resolve().parent))

from bench_batch import stage, synth_inputs  # noqa: E402
from benchlib import GpuBusy  # noqa: E402


class TimedBackend:
    """A backend whose calls (and the waiters they return) add their host seconds to ``spent``."""

    def __init__(self, backend: Any) -> None:
        self._backend = backend
        self.spent: dict[str, float] = defaultdict(float)
        self.calls: dict[str, int] = defaultdict(int)
        self._lock = threading.Lock()

    def _add(self, name: str, seconds: float) -> None:
        with self._lock:
            self.spent[name] += seconds
            self.calls[name] += 1

    def _timed(self, name: str, fn: Callable[..., Any]) -> Callable[..., Any]:
        def call(*args: Any, **kwargs: Any) -> Any:
            t = time.perf_counter()
            try:
                out = fn(*args, **kwargs)
            finally:
                self._add(name, time.perf_counter() - t)
            if callable(out) and not isinstance(out, type):
                return self._timed(name + "/wait", out)
            return out

        return call

    def __getattr__(self, name: str) -> Any:
        attr = getattr(self._backend, name)
        if not callable(attr) or name.startswith("_"):
            return attr
        return self._timed(name, attr)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--synth", default="chain")
    ap.add_argument("--log-n", type=int, default=12)
    ap.add_argument("--proofs", type=int, default=2048)
    ap.add_argument("--group", type=int, default=None, help="proofs a group (default: the backend's choice)")
    ap.add_argument("--loops", type=int, default=3)
    ap.add_argument("--backend", default="gpu")
    ap.add_argument("--groups-in-flight", type=int, default=None, help="distprove.msm.groups-in-flight")
    ap.add_argument("--json", default=None)
    args = ap.parse_args()

    import dask.config

    if args.groups_in_flight is not None:
        dask.config.set({"distprove.msm.groups-in-flight": args.groups_in_flight})
    from distprove.backends.select import get_backend
    from distprove import config
    from distprove.keystore import open_key
    from distprove.prover import group_size, prove_many

    work = Path(tempfile.mkdtemp(prefix="profile-group-"))
    store, witnesses = synth_inputs(args.synth, args.log_n, work, 8)
    backend = get_backend(args.backend)
    key = open_key(store, device="gpu" if backend.name == "gpu" else "cpu")
    size = args.group or group_size(backend, key)
    for _ in prove_many(key, witnesses, backend, group=size):  # warm-up: kernels, the key resident
        pass
    wdir = stage(witnesses, args.proofs, work / "w")
    files = sorted(wdir.glob("*.wtns"))
    loops = []
    for _ in range(args.loops):
        timed = TimedBackend(backend)
        with GpuBusy(period_ms=50) as busy:
            t0 = time.perf_counter()
            n = sum(1 for _ in prove_many(key, files, timed, group=size))  # type: ignore[arg-type]
            wall = time.perf_counter() - t0
        groups = -(-n // size)
        per_group = {k: v / groups * 1e3 for k, v in sorted(timed.spent.items(), key=lambda kv: -kv[1])}
        loops.append({"proofs": n, "groups_in_flight": config.groups_in_flight(), "wall_s": wall, "proofs_per_s": n / wall, "group": size,
                      "gpu_busy_percent": busy.percent, "ms_per_group": per_group,
                      "calls_per_group": {k: v / groups for k, v in timed.calls.items()},
                      "wall_ms_per_group": wall / groups * 1e3})
        print(f"{n} proofs in groups of {size}: {n / wall:.1f} proofs/s, {wall / groups * 1e3:.1f} ms a group, "
              f"GPU busy {busy.percent}", flush=True)
        for k, v in per_group.items():
            print(f"    {v:8.2f} ms  {k}", flush=True)
    if args.json:
        Path(args.json).write_text(json.dumps({"key": f"synth {args.synth} 2^{args.log_n}", "loops": loops}, indent=1))


if __name__ == "__main__":
    main()
