"""Pack the sm_90 cubins that device runs need into ``.kcarry/kcache.tgz`` (device_run.sh unpacks
it into its cache), compiling any that ``$DISTPROVE_CACHE_DIR`` lacks first (NVRTC, no GPU).

The local cache keeps every build ever made (hundreds of MB); a run needs one cubin per module and
source tree, plus the MSM builds of each ``--msm-option`` an A/B arm sets through
``distprove.msm.kernel-options``. Trees are directories holding a ``distprove`` package (``.`` is
this checkout; e.g. ``git archive REV distprove pipelines | tar x -C .ab/a``)::

    python3 pipelines/pack_kcache.py --trees .,.ab/b --msm-option=-DRADIX_LATER_BLOCKS=4 \
        --msm-option="-DRADIX_LATER_BLOCKS=4 -DRADIX_PREFETCH_VALUES"
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tarfile
from pathlib import Path

ARCH = "sm_90"  # the device tool's H200s

# In the tree's own package: compile what is missing with its parallel build() (what `distprove
# compile` runs), then name each build's cache file.
CHILD = """
import json, sys
from distprove.backends.gpu.compile import MODULES, MODULE_OPTIONS, _cubin, build
arch, extra = sys.argv[1], [tuple(o.split()) for o in json.loads(sys.argv[2])]
build(arch=arch)
for o in extra:
    build(["msm"], options=o, arch=arch)
builds = [(n, ()) for n in MODULES] + [("msm", o) for o in extra]
print(json.dumps([str(_cubin(MODULES[n], n, MODULE_OPTIONS.get(n, ()) + o, arch)[2]) for n, o in builds]))
"""


def cubins(tree: Path, msm_options: list[str], arch: str = ARCH) -> list[Path]:
    """Cache paths of every module of ``tree`` and of its msm module with each of ``msm_options``
    (one build each: options separated by spaces, in distprove.msm.kernel-options' order),
    compiled where missing."""
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(tree), os.environ.get("PYTHONPATH", "")])}
    out = subprocess.run([sys.executable, "-c", CHILD, arch, json.dumps(msm_options)], env=env, cwd=tree,
                         capture_output=True, text=True)
    if out.returncode != 0:
        raise SystemExit(f"{tree}: {out.stderr.strip().splitlines()[-1] if out.stderr.strip() else 'failed'}")
    return [Path(p) for p in json.loads(out.stdout.strip().splitlines()[-1])]


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--trees", default=".", help="comma list of source trees")
    ap.add_argument("--msm-option", action="append", default=[],
                    help="an extra msm build's NVRTC options, space-separated (repeatable: one build each)")
    ap.add_argument("--out", default=".kcarry/kcache.tgz")
    a = ap.parse_args()
    paths = sorted({p for tree in a.trees.split(",") for p in cubins(Path(tree).resolve(), a.msm_option)})
    out = Path(a.out)
    out.parent.mkdir(parents=True, exist_ok=True)
    tmp = out.with_suffix(".tmp")
    with tarfile.open(tmp, "w:gz") as t:
        for p in paths:
            t.add(p, arcname=p.name)
    os.replace(tmp, out)
    print(f"{len(paths)} cubins, {out.stat().st_size >> 10} KiB in {out}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
