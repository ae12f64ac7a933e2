"""Kernel benchmark driver for the device machine: NTT (bench_ntt) and, when present, MSM and field.

Usage: python3 pipelines/bench_kernels.py --out results.json [--sizes 16,20,24] [--reps 7]

Each bench module's ``run(results)`` appends rows (dicts with at least ``name``; ideally
``log_n``, ``median_ms``, ``floor_ms``) to ``results["rows"]`` and may add its own keys. The JSON
records the date, the GPU, CuPy's version and the git commit (``$DISTPROVE_GIT_COMMIT``, since
the device copy of the tree may have no .git). A short table is printed last.
"""

from __future__ import annotations

import argparse
import datetime
import importlib
import json
import sys
import traceback
from pathlib import Path

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))
sys.path.insert(0, str(HERE.parent))

from benchlib import device_info, git_commit  # noqa: E402


def table(rows: list[dict]) -> str:
    lines = [f"{'bench':34} {'size':>6} {'median ms':>11} {'floor ms':>10} {'x floor':>8}"]
    for r in rows:
        med, fl = r.get("median_ms"), r.get("floor_ms")
        ratio = f"{med / fl:8.2f}" if med and fl else f"{'':8}"
        size = f"2^{r['log_n']}" if "log_n" in r else str(r.get("n", ""))
        lines.append(f"{str(r.get('name', '?')):34} {size:>6} "
                     f"{(f'{med:11.3f}' if med is not None else ''):>11} "
                     f"{(f'{fl:10.3f}' if fl is not None else ''):>10} {ratio}")
    return "\n".join(lines)


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--out", required=True, help="JSON results file")
    ap.add_argument("--sizes", default="16,20,22,24,26", help="NTT log2 sizes")
    ap.add_argument("--reps", type=int, default=7)
    ap.add_argument("--only", default="", help="comma list of bench modules (ntt,msm,field)")
    ap.add_argument("--ntt-variants", default="", help="comma list of NTT builds (bench_ntt.NTT_VARIANTS): time "
                                                        "only these, on the default plan, alternating, 3 rounds")
    ap.add_argument("--msm-variants", default="default,ptx_mul", help="arithmetic builds of the MSM to time")
    ap.add_argument("--msm-no-cw", action="store_true", help="skip the constant-work MSM rows")
    ap.add_argument("--msm-no-sweep", action="store_true", help="skip the MSM window-width sweep")
    ap.add_argument("--msm-groups", default="G1,G2", help="groups whose MSM cases run")
    ap.add_argument("--msm-tune", action="store_true", help="only the MSM launch-parameter sweep")
    args = ap.parse_args()
    results: dict = {"date": datetime.datetime.now(datetime.timezone.utc).isoformat(),
                     "git_commit": git_commit(), **device_info(), "rows": [], "errors": {}}
    only = set(filter(None, args.only.split(",")))
    for mod_name in ("bench_ntt", "bench_msm", "bench_field"):
        short = mod_name.removeprefix("bench_")
        if only and short not in only:
            continue
        try:
            mod = importlib.import_module(mod_name)
        except ImportError:
            if short == "ntt":
                raise
            continue
        try:
            if short == "ntt" and args.ntt_variants:
                mod.run_variants(results, tuple(int(s) for s in args.sizes.split(",")), args.reps,
                                 tuple(args.ntt_variants.split(",")), (9,), big512=False, rounds=3)
            elif short == "ntt":
                mod.run(results, sizes=tuple(int(s) for s in args.sizes.split(",")), reps=args.reps)
            elif short == "msm" and args.msm_tune:
                mod.tune(results)
            elif short == "msm":
                mod.run(results, variants=tuple(args.msm_variants.split(",")), constant_work=not args.msm_no_cw,
                        sweep=not args.msm_no_sweep, groups_only=tuple(args.msm_groups.split(",")))
            else:
                mod.run(results)
        except Exception:  # keep the other benches' numbers; record the failure
            results["errors"][short] = traceback.format_exc()
            print(results["errors"][short], file=sys.stderr)
        Path(args.out).write_text(json.dumps(results, indent=1, default=str))
    Path(args.out).write_text(json.dumps(results, indent=1, default=str))
    print(json.dumps({k: results[k] for k in ("date", "git_commit", "gpu", "cupy")}))
    for c in results.get("compile", []):
        print(f"compile {c['module']}: cold {c['cold_s']:.2f} s, warm {c['warm_s']:.3f} s")
    print(table(results["rows"]))
    return 1 if results["errors"] else 0


if __name__ == "__main__":
    sys.exit(main())
