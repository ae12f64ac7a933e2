"""Reliability on a GPU (docs/RELIABILITY.md §4-5): out-of-memory retry with CuPy's real pool, and
a short soak whose device memory must stay flat. Written without a device; run with ``-m gpu``.

The OOM test caps CuPy's default memory pool (``set_limit``: the pool then raises CuPy's own
``OutOfMemoryError``, as a full device does) so that the larger key fits alone but not next to
the smaller one: proving with it must evict the smaller key and give the CPU reference proof.
"""

from __future__ import annotations

import importlib.util
from pathlib import Path

import pytest

from distprove.keystore import open_key
from distprove.prover import prove

pytestmark = pytest.mark.gpu

DATA = Path(__file__).parents[1] / "data"
REPO = Path(__file__).parents[2]
SMALL = (DATA / "mul_chain_1k" / "circuit_final.zkey", DATA / "mul_chain_1k" / "witnesses" / "witness_0.wtns")
LARGE = (DATA / "bits_k16" / "circuit_final.zkey", DATA / "bits_k16" / "witnesses" / "witness_0.wtns")
BLINDING = (12345, 67890)


def _pool_peak(zkey: Path, wtns: Path) -> int:
    """Bytes CuPy's pool holds after one proof with ``zkey`` on a fresh backend (about its peak)."""
    import cupy

    from distprove.backends.gpu import GpuBackend

    pool = cupy.get_default_memory_pool()
    pool.free_all_blocks()
    base = pool.total_bytes()
    be = GpuBackend()
    prove(open_key(zkey), wtns, backend=be, blinding=BLINDING)
    peak = pool.total_bytes() - base
    be.evict()
    pool.free_all_blocks()
    return peak


def test_oom_evicts_the_other_key_and_the_proof_is_right() -> None:
    cupy = pytest.importorskip("cupy")
    from distprove.backends.gpu import GpuBackend

    small_key, large_key = open_key(SMALL[0]), open_key(LARGE[0])
    small_resident = sum(int(getattr(small_key, n)[:].nbytes) for n in ("a", "b1", "b2", "c", "h"))
    large_peak = _pool_peak(*LARGE)
    assert _pool_peak(*SMALL) < large_peak
    pool = cupy.get_default_memory_pool()
    pool.free_all_blocks()
    base = pool.used_bytes()
    pool.set_limit(size=base + large_peak + small_resident // 2)
    try:
        be = GpuBackend()
        prove(small_key, SMALL[1], backend=be, blinding=BLINDING)
        assert small_key.content_hash in be._states
        got = prove(large_key, LARGE[1], backend=be, blinding=BLINDING)
        assert small_key.content_hash not in be._states  # evicted to make room
        assert large_key.content_hash in be._states
    finally:
        pool.set_limit(size=0)  # 0 = no limit
    want = prove(large_key, LARGE[1], backend="cpu", blinding=BLINDING)
    assert (got.pi_a, got.pi_b, got.pi_c) == (want.pi_a, want.pi_b, want.pi_c)


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
