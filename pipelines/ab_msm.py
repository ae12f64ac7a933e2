"""A/B of the G1 MSM between source trees, in alternating processes on one GPU.

Each tree (a directory holding a ``distprove`` package, e.g. ``git archive REV distprove
pipelines | tar x -C DIR``; ``.`` is this checkout) runs in a process of its own, trees in turn,
``--rounds`` times, so drift between processes and machines shows next to the difference. A
process times the merged MSM over a precomputed table (``merged_width``) and the window-range MSM
(``pick_window``) of the same 2^N uniform scalars, alternating, after checking both sums against
the known-discrete-log total (benchlib.known_total), then sums CUDA-event
times per kernel of the msm module over one merged MSM (kernels on the side stream include their
wait). Nothing is written but ``--out``::

    python3 pipelines/ab_msm.py --trees .,/tmp/old --log-n 24 --rounds 2 --out ab.json

An arm may add environment settings to its tree, ``TREE+VAR=VALUE[+VAR=VALUE...]``, to compare
configurations of one tree (``.+DASK_DISTPROVE__MSM__AFFINE_ROUNDS=4``); ``--arm`` (repeated) takes
one arm whole, for values holding commas
(``--arm '.+DASK_DISTPROVE__MSM__KERNEL_OPTIONS=["-DA=1","-DB"]'``). The trees' compiled
modules share ``$DISTPROVE_CACHE_DIR`` (kernel text differs, so cubins do).
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import time
from typing import Any


def kernel_times(gm: Any, run: Any) -> dict[str, float]:
    """Device ms per kernel name of the msm module over one call of ``run`` (events around each
    launch, summed per name)."""
    import cupy

    mod = gm._module()
    events: list = []

    class Timed:
        def __init__(self, fn: Any, name: str) -> None:
            object.__setattr__(self, "fn", fn)
            object.__setattr__(self, "name", name)

        def __call__(self, *args: Any, **kw: Any) -> None:
            stream = cupy.cuda.get_current_stream()
            start, stop = cupy.cuda.Event(), cupy.cuda.Event()
            start.record(stream)
            self.fn(*args, **kw)
            stop.record(stream)
            events.append((self.name, start, stop))

        def __getattr__(self, key: str) -> Any:
            return getattr(self.fn, key)

        def __setattr__(self, key: str, value: Any) -> None:
            setattr(self.fn, key, value)

    class Module:
        def get_function(self, name: str) -> Timed:
            return Timed(mod.get_function(name), name)

    saved = gm._module
    gm._module = lambda: Module()
    try:
        run()
        cupy.cuda.Device().synchronize()
    finally:
        gm._module = saved
    out: dict[str, float] = {}
    for name, start, stop in events:
        out[name] = out.get(name, 0.0) + cupy.cuda.get_elapsed_time(start, stop)
    return out


def one_tree(tag: str, log_n: int, reps: int) -> dict:
    """This process's timings (its ``distprove`` is the tree's: see main)."""
    import benchlib
    import cupy

    import distprove
    from distprove import bn254
    from distprove.backends.gpu import msm as gm
    from distprove.stages.msm import combine, num_windows

    g = bn254.G1
    _, scalars, idx, tables = benchlib.msm_inputs({"G1": g}, log_n, 11)
    bases = cupy.ascontiguousarray(tables["G1"][idx])
    c, c0 = gm.merged_width(1 << log_n, g), gm.pick_window(1 << log_n, g)
    table = gm.precompute_multiples(g, bases, c)
    want = benchlib.known_total(g, scalars, idx)
    windows = combine(g, dict(enumerate(gm.msm_windows(g, bases, scalars, c0, 0, num_windows(c0)))), c0)
    if windows != want or gm.msm_merged(g, table, scalars, c) != want:
        raise SystemExit(f"{tag}: a sum differs from the known-discrete-log total")

    def merged() -> Any:
        return gm.msm_merged(g, table, scalars, c)

    def window() -> Any:
        return gm.msm_windows(g, bases, scalars, c0, 0, num_windows(c0))

    for _ in range(2):  # warm: scratch buffers, the pair rounds' plan
        merged()
        window()
    merged_ms, window_ms = [], []
    for _ in range(reps):
        merged_ms += benchlib.wall_ms(merged, 1, warm=False)
        window_ms += benchlib.wall_ms(window, 1, warm=False)
    phases: dict[str, float] = {}
    gm.msm_merged(g, table, scalars, c, phases=phases)
    attrs = {}
    for name in ("msm_radix_digits", "msm_radix_pass1", "msm_radix_mid", "msm_radix_pass2", "msm_pair_jobs"):
        fn = gm._module().get_function(name)
        attrs[name] = {"regs": fn.num_regs, "local_bytes": fn.local_size_bytes}
    return {"tag": tag, "package": os.path.dirname(distprove.__file__), "log_n": log_n, "c": c, "c_window": c0,
            "merged_ms": merged_ms, "window_ms": window_ms, "merged_median": statistics.median(merged_ms),
            "window_median": statistics.median(window_ms), "phases_ms": phases,
            "kernels_ms": kernel_times(gm, merged), "attrs": attrs}


def parse_arm(arm: str) -> tuple[str, dict[str, str]]:
    """(tree, environment settings) of one arm, ``TREE[+VAR=VALUE...]``."""
    tree, *sets = arm.split("+")
    env = {}
    for item in sets:
        var, eq, value = item.partition("=")
        if not eq or not var:
            raise SystemExit(f"{arm}: expected TREE+VAR=VALUE, got {item!r}")
        env[var] = value
    return tree, env


def arm_list(trees: str, arms: list[str]) -> list[str]:
    """The arms to run, in turn: ``--trees``' comma list, then each ``--arm``; ``.`` alone if none."""
    return [t for t in trees.split(",") if t] + arms or ["."]


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--trees", default="",
                    help="comma list of source trees (each holding distprove/), each TREE[+VAR=VALUE...]")
    ap.add_argument("--arm", action="append", default=[], help="one more arm, TREE[+VAR=VALUE...] (repeatable)")
    ap.add_argument("--log-n", type=int, default=24)
    ap.add_argument("--rounds", type=int, default=2, help="processes per tree, trees in turn")
    ap.add_argument("--reps", type=int, default=5)
    ap.add_argument("--out", default="")
    ap.add_argument("--child", default="", help=argparse.SUPPRESS)
    a = ap.parse_args()
    if a.child:  # one tree's process: print its JSON
        print(json.dumps(one_tree(a.child, a.log_n, a.reps)))
        return 0
    arms = [(arm, *parse_arm(arm)) for arm in arm_list(a.trees, a.arm)]  # a malformed one fails before any runs
    here = os.path.dirname(os.path.abspath(__file__))
    rows = []
    for r in range(a.rounds):
        for arm, tree, sets in arms:
            root = os.path.abspath(tree)
            env = {**os.environ, **sets,
                   "PYTHONPATH": os.pathsep.join([root, here, os.environ.get("PYTHONPATH", "")])}
            res = subprocess.run([sys.executable, os.path.abspath(__file__), "--child", arm, "--log-n", str(a.log_n),
                                  "--reps", str(a.reps)], env=env, capture_output=True, text=True)
            if res.returncode != 0:
                print(f"{arm}: failed\n{res.stderr[-2000:]}", flush=True)
                return 1
            row = json.loads(res.stdout.strip().splitlines()[-1])
            row["round"] = r
            rows.append(row)
            print(f"{arm} (round {r}): merged c={row['c']} {row['merged_median']:.2f} ms, window-range "
                  f"c={row['c_window']} {row['window_median']:.2f} ms", flush=True)
    if a.out:
        with open(a.out, "w") as f:
            json.dump({"date": time.strftime("%Y-%m-%d"), "commit": os.environ.get("DISTPROVE_GIT_COMMIT", ""),
                       "rows": rows}, f, indent=1)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
