"""`distprove compile` fills numba's on-disk cache of the CPU point checks, so the first process
that checks a key's points on the CPU (import-key, a .zkey opened there) compiles nothing."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import distprove
from distprove.backends import gpu

DATA = Path(__file__).parent / "data"
ROOT = Path(distprove.__file__).parents[1]

PROBE = """
import json, sys, tempfile
from pathlib import Path
from distprove.formats import pointcheck
from distprove.keystore import import_key, open_key

zkey = sys.argv[1]
open_key(zkey, device="cpu")
with tempfile.TemporaryDirectory() as tmp:
    import_key(zkey, Path(tmp) / "key.zarr", device="cpu")
print(json.dumps({f.__name__: [sum(f.stats.cache_hits.values()), sum(f.stats.cache_misses.values())]
                  for f in (pointcheck._status_g1, pointcheck._status_g2)}))
"""


def _env(numba_cache: Path) -> dict[str, str]:
    return {**os.environ, "NUMBA_CACHE_DIR": str(numba_cache),
            "PYTHONPATH": os.pathsep.join(filter(None, [str(ROOT), os.environ.get("PYTHONPATH")]))}


def _probe(numba_cache: Path) -> dict[str, list[int]]:
    """{kernel: [cache hits, cache misses]} of the point checks in a fresh process that imports and
    opens another key than the example's on the CPU."""
    res = subprocess.run([sys.executable, "-c", PROBE, str(DATA / "mini" / "mini_0001.zkey")], capture_output=True,
                         text=True, timeout=600, env=_env(numba_cache))
    assert res.returncode == 0, res.stderr
    return json.loads(res.stdout.splitlines()[-1])


def _has_cupy() -> bool:
    try:
        import cupy  # noqa: F401
    except ImportError:
        return False
    return True


def test_compile_fills_numbas_cache_of_the_point_checks(tmp_path: Path) -> None:
    cold = tmp_path / "cold"
    assert all(misses > 0 and hits == 0 for hits, misses in _probe(cold).values())  # the probe sees a compile

    warm = tmp_path / "warm"
    if _has_cupy() and not gpu.available():  # `compile` would need --arch and build every kernel module
        cmd = [sys.executable, "-c", "from distprove.warmup import warm_numba; warm_numba()"]
    else:
        cmd = [sys.executable, "-m", "distprove.cli", "compile"]
    res = subprocess.run(cmd, capture_output=True, text=True, timeout=600, env=_env(warm))
    assert res.returncode == 0, res.stderr
    index = {p.name.split("-")[0] for p in warm.rglob("*.nbi")}
    assert {"pointcheck._status_g1", "pointcheck._status_g2"} <= index, index
    assert all(hits > 0 and misses == 0 for hits, misses in _probe(warm).values())
