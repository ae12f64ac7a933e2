"""Static SASS census of the kernel modules: per kernel, registers, stack, instructions, local
memory loads and stores (spills), calls and barriers. No GPU needed, only NVRTC (to compile into
the cache, as ``distprove compile --arch``) and the CUDA binary tools:

    pip download --no-deps -d /tmp/w nvidia-cuda-cuobjdump nvidia-cuda-nvdisasm
    for f in /tmp/w/*.whl; do unzip -qo "$f" -d /tmp/cudatools; done
    python pipelines/sass_report.py --bin /tmp/cudatools/nvidia/cu13/bin ntt msm --kernel pass

Read before tuning a kernel: spills show here that timings alone do not explain (an NTT pass
kernel that indexed shared memory through a computed pointer spilled 27 values to local memory). Counts are
static (each instruction once, loops not unrolled by the count); ``--dump DIR`` also writes each
module's full SASS for reading.
"""

from __future__ import annotations

import argparse
import collections
import json
import os
import re
import subprocess
import sys
import tempfile
from pathlib import Path

_RES = re.compile(r"Function (\w+):\s*\n\s*REG:(\d+) STACK:(\d+) SHARED:(\d+) LOCAL:(\d+)")
_FUNC = re.compile(r"\s+Function : (\w+)")
_INSTR = re.compile(r"\s+/\*[0-9a-f]{4,6}\*/\s+(?:@!?U?P\w+\s+)?([A-Z][A-Z0-9_]*)")


def census(sass: str) -> dict[str, collections.Counter]:
    """Opcode counts (the mnemonic before its first dot) per function of ``cuobjdump -sass`` text."""
    out: dict[str, collections.Counter] = {}
    current = None
    for line in sass.splitlines():
        m = _FUNC.match(line)
        if m:
            current = out.setdefault(m.group(1), collections.Counter())
            continue
        m = _INSTR.match(line)
        if m and current is not None:
            current[m.group(1)] += 1
    return out


def resources(text: str) -> dict[str, dict[str, int]]:
    """REG, STACK, SHARED, LOCAL per function of ``cuobjdump -res-usage`` text."""
    return {m.group(1): dict(zip(("reg", "stack", "shared", "local"), map(int, m.groups()[1:])))
            for m in _RES.finditer(text)}


def report(module: str, options: tuple[str, ...], arch: str, tools: Path | None,
           kernel_filter: str = "", dump: Path | None = None) -> list[dict]:
    """One row per kernel of ``module`` built with ``options`` (compiled into the cache if absent)."""
    from distprove.backends.gpu import compile as gcompile

    _, path, _ = gcompile._ensure_cubin(gcompile.MODULES[module], module,
                                        gcompile.MODULE_OPTIONS.get(module, ()) + options, arch)
    env = dict(os.environ)
    if tools is not None:
        env["PATH"] = f"{tools}{os.pathsep}{env.get('PATH', '')}"
    with tempfile.TemporaryDirectory() as tmp:
        cubin = Path(tmp) / f"{module}.cubin"
        cubin.write_bytes(gcompile.elf_complete(path.read_bytes()))  # caches made before the fix
        run = lambda *a: subprocess.run(["cuobjdump", *a, str(cubin)], capture_output=True, text=True,  # noqa: E731
                                        env=env, check=True).stdout
        sass, res = run("-sass"), resources(run("-res-usage"))
    if dump is not None:
        dump.mkdir(parents=True, exist_ok=True)
        (dump / f"{module}{''.join(options)}.sass").write_text(sass)
    rows = []
    for fn, ops in sorted(census(sass).items()):
        if kernel_filter and kernel_filter not in fn:
            continue
        rows.append({"module": module, "options": list(options), "kernel": fn, **res.get(fn, {}),
                     "instructions": sum(ops.values()), "local_loads": ops["LDL"], "local_stores": ops["STL"],
                     "calls": ops["CALL"], "barriers": ops["BAR"], "fp64": ops["DFMA"] + ops["DADD"] + ops["DMUL"],
                     "opcodes": dict(ops.most_common(12))})
    return rows


def main() -> int:
    from distprove.backends.gpu.compile import MODULES

    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("modules", nargs="*", help=f"modules (default all: {', '.join(MODULES)})")
    ap.add_argument("--option", action="append", default=[], help="extra NVRTC option (repeatable)")
    ap.add_argument("--arch", default="sm_90")
    ap.add_argument("--bin", type=Path, help="folder holding cuobjdump and nvdisasm")
    ap.add_argument("--kernel", default="", help="only kernels whose name contains this")
    ap.add_argument("--dump", type=Path, help="write each module's SASS here")
    ap.add_argument("--json", type=Path, help="write the rows here")
    a = ap.parse_args()
    rows = [r for m in (a.modules or list(MODULES))
            for r in report(m, tuple(a.option), a.arch, a.bin, a.kernel, a.dump)]
    print(f"{'kernel':34} {'reg':>4} {'stack':>6} {'instr':>6} {'LDL':>4} {'STL':>4} {'call':>4} {'bar':>4} {'fp64':>5}")
    for r in rows:
        print(f"{r['kernel']:34} {r.get('reg', '?'):>4} {r.get('stack', '?'):>6} {r['instructions']:>6} "
              f"{r['local_loads']:>4} {r['local_stores']:>4} {r['calls']:>4} {r['barriers']:>4} {r['fp64']:>5}")
    if a.json:
        a.json.write_text(json.dumps(rows, indent=1))
    return 0


if __name__ == "__main__":
    sys.exit(main())
