"""A GPU memory budget on the device: a streamed MSM (bases copied chunk by chunk from pinned host
memory, double-buffered) and a chunked resident one equal the resident MSM and the CPU's; a whole
proof under a tiny budget streams its bases, never uploads the streamed arrays, verifies, and the
device memory CuPy's pool holds never exceeds the budget."""

from __future__ import annotations

import random
from pathlib import Path
from typing import Any, Iterator

import dask
import pytest

from distprove import prover
from distprove.backends.base import BASE_ATTR
from distprove.backends.cpu import CpuBackend
from distprove.groth16 import MSM_NAMES
from distprove.keystore import import_key, open_key
from distprove.stages.msm import num_windows
from distprove.stages.stream import chunked_msm_start
from distprove.verifier import verify

from test_stream import random_scalars  # noqa: E402  (tests/ is on the path, as for conftest)

cupy = pytest.importorskip("cupy")
pytestmark = pytest.mark.gpu

DATA = Path(__file__).parents[1] / "data"
MUL_ZKEY = DATA / "mul_chain_1k" / "circuit_final.zkey"
MUL_WTNS = sorted((DATA / "mul_chain_1k" / "witnesses").glob("*.wtns"))
VK = DATA / "mul_chain_1k" / "verification_key.json"


@pytest.fixture()
def gpu() -> Any:
    from distprove.backends.gpu import GpuBackend

    return GpuBackend()


@pytest.fixture()
def peak() -> Iterator[list[int]]:
    """The most bytes CuPy's default pool held during the test, above what it held at the start
    (its blocks freed first): an allocator that notes the pool's total after each allocation."""
    pool = cupy.get_default_memory_pool()
    cupy.cuda.Device().synchronize()
    pool.free_all_blocks()
    base = pool.total_bytes()
    seen = [0]

    def alloc(size: int) -> Any:
        mem = pool.malloc(size)
        seen[0] = max(seen[0], pool.total_bytes() - base)
        return mem

    cupy.cuda.set_allocator(alloc)
    try:
        yield seen
    finally:
        cupy.cuda.set_allocator(pool.malloc)


@pytest.mark.parametrize("which", ["A", "B2", "C", "H"])
@pytest.mark.parametrize("streamed", [True, False])
def test_chunked_msm_equals_the_resident_one_on_the_device(gpu: Any, which: str, streamed: bool) -> None:
    key = open_key(MUL_ZKEY)
    rng = random.Random(f"{which}{streamed}")
    n = key.domain_size if which == "H" else key.n_vars
    host = [random_scalars(n, rng) for _ in range(3)]
    dev = [cupy.asarray(s) for s in host]
    c = 7
    w = num_windows(c)
    want = [gpu.msm_windows(key, which, s, c, 0, w) for s in dev]
    assert want[0] == CpuBackend().msm_windows(key, which, host[0], c, 0, w)
    for chunk in (100, 333, 4096):
        assert chunked_msm_start(gpu, key, which, dev, c, 0, w, chunk, streamed=streamed)() == want
        assert chunked_msm_start(gpu, key, which, dev[:1], c, 0, w, chunk, streamed=streamed)() == want[:1]


def test_streamed_chunks_from_a_key_store(gpu: Any, tmp_path: Path) -> None:
    store = open_key(import_key(MUL_ZKEY, tmp_path / "mul.zarr").path)
    s = cupy.asarray(random_scalars(store.n_vars, random.Random(2)))
    c = 6
    want = gpu.msm_windows(store, "B2", s, c, 0, num_windows(c))
    got = chunked_msm_start(gpu, store, "B2", [s], c, 0, num_windows(c), 200, streamed=True)()
    assert got == [want]


@pytest.mark.parametrize("budget", [(4 << 20) + 1_055_000, (4 << 20) + 1_305_000])
def test_a_proof_under_a_tiny_budget_streams_and_stays_under_it(gpu: Any, peak: list[int], tmp_path: Path,
                                                                 budget: int) -> None:
    """The plan's fixed overhead set to 4 MiB (NTT tables, constants, the pool's rounding) and its
    chunks allowed down to 64 points, so that a 1k-signal key streams within a few MiB: every base
    array at the first budget, B2 alone at the second."""
    gpu.memory_overhead = 4 << 20
    gpu.min_chunk = 64
    key = open_key(MUL_ZKEY)
    with dask.config.set({"distprove.gpu.memory-limit": budget}):
        plan = prover.memory_plan(gpu, key)
        assert plan is not None and plan.streamed and plan.total <= budget
        proofs = list(prover.prove_many(key, MUL_WTNS, gpu))
    cupy.cuda.Device().synchronize()
    for i, proof in enumerate(proofs):
        proof.write(tmp_path / f"{i}.proof.json", tmp_path / f"{i}.public.json")
        assert verify(VK, tmp_path / f"{i}.public.json", tmp_path / f"{i}.proof.json")
    held = gpu._states.get(key.content_hash, {})
    assert not any(BASE_ATTR[which] in held for which in plan.streamed)  # never uploaded whole
    assert peak[0] <= budget, f"peak {peak[0]} bytes over the budget of {budget} (plan: {plan.describe()})"


def test_without_a_budget_the_plan_is_none_and_every_base_resident(gpu: Any) -> None:
    key = open_key(MUL_ZKEY)
    with dask.config.set({"distprove.gpu.memory-limit": None}):
        assert prover.memory_plan(gpu, key) is None
        prover.prove(key, MUL_WTNS[0], gpu)
    held = gpu._states[key.content_hash]
    assert all(BASE_ATTR[which] in held for which in MSM_NAMES)


def test_a_fraction_of_the_card_is_a_budget(gpu: Any) -> None:
    _, total = cupy.cuda.runtime.memGetInfo()
    with dask.config.set({"distprove.gpu.memory-limit": 0.5}):
        assert gpu.memory_budget() == int(0.5 * total)
