"""Reliability on a GPU (docs/RELIABILITY.md §4-5): out-of-memory retry with CuPy's real pool, and
a short soak whose device memory must stay flat. Written without a device; run with ``-m gpu``.

The OOM test caps CuPy's default memory pool (``set_limit``: the pool then raises CuPy's own
``OutOfMemoryError``, as a full device does) one byte below what a proof with the larger key
measurably peaked at beside the smaller one: proving it again must evict the smaller key and give
the CPU reference proof.
Where the memory runs out in the overlapped MSM phase, the backend drops the phase (started MSMs,
scratch, cached blocks) and runs its MSMs one at a time, evicting the other key (issue 9).
It runs in fresh processes, where the pool's byte counts belong to the scenario alone.
"""

from __future__ import annotations

import importlib.util
import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from distprove.keystore import open_key
from distprove.prover import prove

pytestmark = pytest.mark.gpu

DATA = Path(__file__).parents[1] / "data"
REPO = Path(__file__).parents[2]
SMALL = (DATA / "bits_k16" / "circuit_final.zkey", DATA / "bits_k16" / "witnesses" / "witness_0.wtns")
LARGE = (DATA / "merkle_d20" / "circuit_final.zkey", DATA / "merkle_d20" / "witnesses" / "witness_0.wtns")
BLINDING = (12345, 67890)


SCENARIO = r"""
import json, sys
import cupy
from distprove.backends.gpu import GpuBackend
from distprove.keystore import open_key
from distprove.prover import prove

small, small_w, large, large_w = sys.argv[1:5]
blinding = (12345, 67890)
pool = cupy.get_default_memory_pool()
peak = [0]


def tracking_malloc(size):
    mem = pool.malloc(size)
    peak[0] = max(peak[0], pool.used_bytes())
    return mem


cupy.cuda.set_allocator(tracking_malloc)
small_key, large_key = open_key(small), open_key(large)
be = GpuBackend()
prove(small_key, small_w, backend=be, blinding=blinding)
be._free_rebuildable()
resident = pool.used_bytes()  # the small key's arrays
# the large proof beside the small key, uncapped: its peak; then back to the small key alone
peak[0] = 0
prove(large_key, large_w, backend=be, blinding=blinding)
need = peak[0]
be.evict(large_key.content_hash)
be._free_rebuildable()
before = list(be._states)
pool.set_limit(size=need - 1)  # the same proof no longer fits beside the small key
got = prove(large_key, large_w, backend=be, blinding=blinding)
print(json.dumps({"before": before, "after": list(be._states), "small": small_key.content_hash,
                  "large": large_key.content_hash, "resident": resident, "need": need,
                  "proof": [got.pi_a, got.pi_b, got.pi_c]}, default=str))
"""


def test_oom_evicts_the_other_key_and_the_proof_is_right() -> None:
    """With the small key resident, the large proof's peak pool use is measured (a tracking
    allocator), the large key dropped again and the pool capped one byte below that peak: the
    same proof must now evict the small key, and it then fits in the bytes the small key held."""
    pytest.importorskip("cupy")
    env = {**os.environ, "PYTHONPATH": os.pathsep.join(filter(None, (str(REPO), os.environ.get("PYTHONPATH"))))}
    res = subprocess.run([sys.executable, "-c", SCENARIO, *(str(p) for p in (*SMALL, *LARGE))], capture_output=True,
                         text=True, timeout=300, env=env)
    assert res.returncode == 0, res.stderr[-3000:]
    out = json.loads(res.stdout.strip().splitlines()[-1])
    assert out["before"] == [out["small"]]
    assert out["after"] == [out["large"]]  # the small key evicted to make room
    want = prove(open_key(LARGE[0]), LARGE[1], backend="cpu", blinding=BLINDING)
    assert out["proof"] == json.loads(json.dumps([want.pi_a, want.pi_b, want.pi_c], default=str))


def test_soak_gpu_memory_is_flat(tmp_path: Path) -> None:
    pytest.importorskip("cupy")
    spec = importlib.util.spec_from_file_location("soak", REPO / "pipelines" / "soak.py")
    soak = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(soak)
    report = soak.run_soak(200, 40, 1, tmp_path, backend="gpu")
    assert report["failed"] == []
    g = report["growth"]
    assert "gpu_used_max" in g, "the workers saw no GPU"
    assert g["gpu_used_max"] < 64 << 20, g
    assert g["worker_rss_max"] < 64 << 20 and g["client_rss"] < 64 << 20, g
