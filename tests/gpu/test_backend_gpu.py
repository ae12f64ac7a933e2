"""Whole proofs on the GPU backend for the fixture keys.

With the same blinding (r, s) the GPU proof must equal the CPU reference proof point for point
(the CPU proofs are verified by snarkjs in tests/test_prove.py); where py_ecc is installed the
GPU proof is also verified with distprove.verify, and a tampered public signal is rejected.
"""

from __future__ import annotations

import random
from pathlib import Path

import numpy as np
import pytest

from distprove import bn254
from distprove.backends.gpu import available
from distprove.prover import prove

pytestmark = pytest.mark.gpu

DATA = Path(__file__).parents[1] / "data"
CASES = [("mini", DATA / "mini" / "mini_0001.zkey", DATA / "mini" / "witness.wtns")] + [
    (name, DATA / name / "circuit_final.zkey", DATA / name / "witnesses" / "witness_0.wtns")
    for name in ("mul_chain_1k", "poseidon_k4", "bits_k16", "merkle_d20")
]


@pytest.fixture(scope="module")
def gpu():
    pytest.importorskip("cupy")
    from distprove.backends.gpu import GpuBackend

    return GpuBackend()


def test_available() -> None:
    assert available()


@pytest.mark.parametrize(("name", "zkey", "witness"), CASES, ids=[c[0] for c in CASES])
def test_gpu_proof_equals_cpu_and_verifies(gpu, name: str, zkey: Path, witness: Path) -> None:
    rng = random.Random(name)
    blinding = (rng.randrange(1, 1 << 250), rng.randrange(1, 1 << 250))
    p_gpu = prove(zkey, witness, backend=gpu, blinding=blinding)
    p_cpu = prove(zkey, witness, backend="cpu", blinding=blinding)
    assert (p_gpu.pi_a, p_gpu.pi_b, p_gpu.pi_c) == (p_cpu.pi_a, p_cpu.pi_b, p_cpu.pi_c)
    assert p_gpu.public == p_cpu.public
    try:
        import py_ecc  # noqa: F401
    except ImportError:
        return
    from distprove.verifier import verify

    vk = DATA / name / "verification_key.json"
    proof = (p_gpu.pi_a, p_gpu.pi_b, p_gpu.pi_c)
    assert verify(vk, p_gpu.public, proof)
    bad = list(p_gpu.public)
    bad[0] = (bad[0] + 1) % bn254.R
    assert not verify(vk, bad, proof)


def test_key_store_proof(gpu, tmp_path: Path) -> None:
    """Bases and CSR uploaded from a zarr key store (chunked reads) give the same proof."""
    pytest.importorskip("zarr")
    pytest.importorskip("py_ecc")  # import_key computes the vk's alphabeta with the verifier
    from distprove.keystore import import_key

    _, zkey, witness = CASES[4]
    store = import_key(zkey, tmp_path / "k.zarr")
    a = prove(store, witness, backend=gpu, blinding=(3, 4))
    b = prove(zkey, witness, backend=gpu, blinding=(3, 4))
    assert (a.pi_a, a.pi_b, a.pi_c) == (b.pi_a, b.pi_b, b.pi_c)


def test_resident_state_and_eviction(gpu, monkeypatch: pytest.MonkeyPatch) -> None:
    from distprove.keystore import open_key

    k1, k2 = open_key(CASES[1][1]), open_key(CASES[2][1])
    gpu.evict()
    d1 = gpu._array(k1, "a")
    assert gpu._array(k1, "a") is d1  # uploaded once
    assert np.array_equal(d1.get(), np.asarray(k1.a[:]))  # unchanged bytes
    gpu._array(k2, "a")
    assert list(gpu._states) == [k1.content_hash, k2.content_hash]
    # an allocation failure evicts the least recently used other key and retries
    import cupy

    real_empty = cupy.empty
    calls = {"n": 0}

    def flaky_empty(*args, **kwargs):  # fails twice: once before and once after freeing the pool
        calls["n"] += 1
        if calls["n"] <= 2:
            raise cupy.cuda.memory.OutOfMemoryError(1 << 40, 0)
        return real_empty(*args, **kwargs)

    monkeypatch.setattr(gpu.cp, "empty", flaky_empty)
    gpu._array(k2, "b1")
    assert calls["n"] == 3
    assert list(gpu._states) == [k2.content_hash]


def test_resident_bytes_count_the_uploaded_key_arrays(gpu) -> None:
    from distprove.keystore import open_key

    k1, k2 = open_key(CASES[1][1]), open_key(CASES[2][1])
    gpu.evict()
    assert gpu.resident_bytes() == 0 and gpu.resident_bytes(k1.content_hash) == 0
    gpu._array(k1, "a")
    one = gpu.resident_bytes(k1.content_hash)
    assert one == np.asarray(k1.a[:]).nbytes
    prove(CASES[2][1], CASES[2][2], backend=gpu, blinding=(5, 6))
    two = gpu.resident_bytes(k2.content_hash)
    assert two >= sum(np.asarray(getattr(k2, m)[:]).nbytes for m in ("a", "b1", "b2", "c", "h"))
    assert gpu.resident_bytes() == one + two
    gpu.evict(k1.content_hash)
    assert gpu.resident_bytes() == two and gpu.resident_bytes(k1.content_hash) == 0


@pytest.mark.parametrize("name", ["merkle_d20", "bits_k16"])
def test_pipelined_proofs_with_prefetched_witnesses_verify(gpu, name: str) -> None:
    """prove_many on the GPU: each next witness is uploaded while the MSMs of the one before run
    (prover.pipelined's prefetch); every proof verifies with its own public signals, and a bad
    witness in the middle raises at its turn after the proofs before it."""
    pytest.importorskip("py_ecc")
    from distprove.prover import prove_many
    from distprove.verifier import verify_many

    zkey = DATA / name / "circuit_final.zkey"
    vk = DATA / name / "verification_key.json"
    witnesses = sorted((DATA / name / "witnesses").glob("*.wtns"))
    order = witnesses + witnesses[::-1]
    proofs = list(prove_many(zkey, order, backend=gpu))
    assert [p.public for p in proofs] == [prove(zkey, w, backend=gpu).public for w in order]
    assert verify_many([(vk, p.public, (p.pi_a, p.pi_b, p.pi_c)) for p in proofs]) == [True] * len(order)
    bad = DATA / "bad" / "truncated.wtns"
    gen = prove_many(zkey, [witnesses[0], bad, witnesses[1]], backend=gpu)
    first = next(gen)
    assert verify_many([(vk, first.public, (first.pi_a, first.pi_b, first.pi_c))]) == [True]
    with pytest.raises(Exception, match="truncated.wtns"):
        next(gen)


ALL_MSMS = ["A", "B1", "B2", "C", "H"]


@pytest.mark.parametrize(("name", "zkey", "witness"), CASES[1:3], ids=[c[0] for c in CASES[1:3]])
def test_precomputed_multiples_give_the_same_proof(gpu, name: str, zkey: Path, witness: Path) -> None:
    """distprove.msm.precompute naming every MSM: each whole MSM runs merged over its table of
    window multiples and the proof equals the window-range MSMs' (same blinding); the tables stay
    resident with the key, W(c) times their bases, and count in resident_bytes."""
    import dask

    from distprove.backends.base import BASE_ATTR
    from distprove.groth16 import msm_group
    from distprove.backends.gpu import msm as gmsm
    from distprove.keystore import open_key
    from distprove.stages.msm import num_windows

    key = open_key(zkey)
    gpu.evict()
    want = prove(zkey, witness, backend=gpu, blinding=(7, 8))
    before = gpu.resident_bytes(key.content_hash)
    with dask.config.set({"distprove.msm.precompute": ALL_MSMS}):
        got = prove(zkey, witness, backend=gpu, blinding=(7, 8))
    assert (got.pi_a, got.pi_b, got.pi_c) == (want.pi_a, want.pi_b, want.pi_c)
    state = gpu._states[key.content_hash]
    tables = {attr.split("_multiples_")[0]: (arr, int(attr.split("_multiples_")[1]))
              for attr, arr in state.items() if "_multiples_" in attr}
    assert sorted(tables) == sorted(ALL_MSMS)
    for which, (table, width) in tables.items():
        bases = state[BASE_ATTR[which]]
        assert width == gmsm.merged_width(bases.shape[0], msm_group(which))
        assert table.shape == (num_windows(width) * bases.shape[0], bases.shape[1])
        assert np.array_equal(table[: bases.shape[0]].get(), bases.get())  # window 0: the bases
    assert gpu.resident_bytes(key.content_hash) == before + sum(int(t.nbytes) for t, _ in tables.values())


def test_precomputed_multiples_only_for_whole_msms_and_when_they_fit(gpu, monkeypatch: pytest.MonkeyPatch) -> None:
    """msm_windows with a table: a whole MSM comes back as its total in window 0 (combine equal to
    the window sums'), a window range that is not whole gets its real window sums; a table that
    does not fit is skipped (the MSM runs by windows) and not tried again until evict()."""
    import cupy
    import dask

    from distprove.backends.gpu import msm as gmsm
    from distprove.keystore import open_key
    from distprove.stages.msm import combine, num_windows

    key = open_key(CASES[2][1])
    gpu.evict()
    rng = random.Random(5)
    vals = [rng.choice([0, 1, bn254.R - 1, rng.randrange(bn254.R)]) for _ in range(key.n_vars)]
    scalars = cupy.asarray(bn254.limbs_from_ints(vals))
    c = 7
    w = num_windows(c)
    plain = gpu.msm_windows(key, "B1", scalars, c, 0, w)
    part = gpu.msm_windows(key, "B1", scalars, c, 2, w)
    with dask.config.set({"distprove.msm.precompute": "B1, B2"}):
        merged = gpu.msm_windows(key, "B1", scalars, c, 0, w)
        assert merged[1:] == [None] * (w - 1)
        assert combine(bn254.G1, dict(enumerate(merged)), c) == combine(bn254.G1, dict(enumerate(plain)), c)
        assert gpu.msm_windows(key, "B1", scalars, c, 2, w) == part
        assert combine(bn254.G2, dict(enumerate(gpu.msm_windows(key, "B2", scalars, c, 0, w))), c) == combine(
            bn254.G2, dict(enumerate(gpu.msm_windows(key, "B2", scalars, c, 0, w, constant_work=True))), c)
        gpu.evict()
        calls = {"n": 0}

        def short(*args, **kwargs):
            calls["n"] += 1
            raise cupy.cuda.memory.OutOfMemoryError(1 << 40, 0)

        monkeypatch.setattr(gmsm, "precompute_multiples", short)
        assert gpu.msm_windows(key, "B1", scalars, c, 0, w) == plain
        assert gpu.msm_windows(key, "B1", scalars, c, 0, w) == plain
        assert calls["n"] == 2  # one try and one after freeing the scratch, then not again
        assert not any("_multiples_" in attr for attr in gpu._states[key.content_hash])


@pytest.mark.parametrize("name", ["mul_chain_1k", "poseidon_k4", "bits_k16"])
def test_grouped_proofs_equal_one_at_a_time_on_the_device(gpu, name: str) -> None:
    """prove_many in groups on the GPU (grouped MSMs combined on the device, msm_start_combined)
    gives the proofs of one at a time with the same (r, s) at group sizes 1, 2, 3, 5 and 7 over
    seven witnesses, each verifying; a bad witness in the middle of a group fails in its turn."""
    pytest.importorskip("py_ecc")
    from distprove.prover import prove_many
    from distprove.verifier import verify_many

    zkey = DATA / name / "circuit_final.zkey"
    vk = DATA / name / "verification_key.json"
    witnesses = (sorted((DATA / name / "witnesses").glob("*.wtns")) * 3)[:7]
    blindings = [(101 + i, 211 + 3 * i) for i in range(len(witnesses))]
    alone = [prove(zkey, w, backend=gpu, blinding=b) for w, b in zip(witnesses, blindings)]
    for size in (1, 2, 3, 5, 7):
        proofs = list(prove_many(zkey, witnesses, backend=gpu, group=size, blindings=blindings))
        assert [p.points for p in proofs] == [p.points for p in alone], size
    assert verify_many([(vk, p.public, p.points) for p in proofs]) == [True] * len(proofs)
    gen = prove_many(zkey, [witnesses[0], DATA / "bad" / "truncated.wtns", witnesses[1]], backend=gpu, group=3)
    first = next(gen)
    assert verify_many([(vk, first.public, first.points)]) == [True]
    with pytest.raises(Exception, match="truncated.wtns"):
        next(gen)
