"""Reliability on a GPU (docs/RELIABILITY.md §4-5): out-of-memory retry with CuPy's real pool, and
a short soak whose device memory must stay flat. Written without a device; run with ``-m gpu``.

The OOM test caps CuPy's default memory pool (``set_limit``: the pool then raises CuPy's own
``OutOfMemoryError``, as a full device does) at the least a proof with the larger key needs
when the smaller key is resident and may be evicted (bisected in one process): there, proving
must have evicted the smaller key, and the proof must equal the CPU reference.
Where the memory runs out in the overlapped MSM phase, the backend drops the phase (started MSMs,
scratch, cached blocks) and runs its MSMs one at a time, evicting the other key (issue 9).
It runs in fresh processes, where the pool's byte counts belong to the scenario alone.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from conftest import load_script
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
small_key, large_key = open_key(small), open_key(large)
be = GpuBackend()


def attempt(cap):
    # from the small key resident alone (scratch and tables freed), the large proof under `cap` bytes
    pool.set_limit(size=0)
    be.evict(large_key.content_hash)
    if small_key.content_hash not in be._states:
        prove(small_key, small_w, backend=be, blinding=blinding)
    be._free_rebuildable()
    before = list(be._states)
    pool.set_limit(size=cap)
    try:
        got = prove(large_key, large_w, backend=be, blinding=blinding)
    except cupy.cuda.memory.OutOfMemoryError:
        return None
    return {"before": before, "after": list(be._states), "proof": [got.pi_a, got.pi_b, got.pi_c]}


# the smallest cap (to 64 KiB) under which the large proof succeeds from that state
lo, hi = 0, 1 << 30
best = attempt(hi)
while hi - lo > 1 << 16:
    mid = (lo + hi) // 2
    got = attempt(mid)
    if got is None:
        lo = mid
    else:
        hi, best = mid, got
print(json.dumps({**best, "cap": hi, "small": small_key.content_hash, "large": large_key.content_hash}, default=str))
"""


def test_oom_evicts_the_other_key_and_the_proof_is_right() -> None:
    """With the small key resident, the smallest pool cap under which the large proof still
    succeeds (bisected in one process, each attempt from the same state) is one where the backend
    had to evict the small key: its arrays are bytes the large proof does not need, and freeing
    scratch and tables alone (the first answer to running out) did not make enough room."""
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
    soak = load_script(REPO / "pipelines" / "soak.py")
    report = soak.run_soak(200, 40, 1, tmp_path, backend="gpu")
    assert report["failed"] == []
    g = report["growth"]
    assert "gpu_used_max" in g, "the workers saw no GPU"
    assert g["gpu_used_max"] < 64 << 20, g
    assert g["worker_rss_max"] < 64 << 20 and g["client_rss"] < 64 << 20, g
