"""The four-step NTT: its CPU block functions, and the Dask graph that runs them on several workers.

References: an O(n^2) DFT in Python ints (small sizes) and the CPU backend's radix-2 NTT, on fresh
random inputs with edge values (0, 1, r-1).
"""

from __future__ import annotations

import secrets

import numpy as np
import pytest
from conftest import local_client

from distprove import bn254
from distprove.backends.base import Evals
from distprove.backends.cpu import CpuBackend
from distprove.backends.cpu import fourstep
from distprove.bn254 import R

EDGES = [0, 1, R - 1]


def random_values(n: int, count: int = 1) -> np.ndarray:
    """(count, n, 8) random field elements (standard form); the first few are edge values."""
    vals = [secrets.randbelow(R) for _ in range(count * n)]
    vals[: min(len(EDGES), len(vals))] = EDGES[: len(vals)]
    return bn254.limbs_from_ints(vals).reshape(count, n, 8)


def dft(values: list[int], inverse: bool) -> list[int]:
    n = len(values)
    w = bn254.root_of_unity(n.bit_length() - 1)
    if inverse:
        w = pow(w, -1, R)
    out = [sum(v * pow(w, j * k, R) for j, v in enumerate(values)) % R for k in range(n)]
    return [x * pow(n, -1, R) % R for x in out] if inverse else out


@pytest.mark.parametrize("k", [0, 1, 2, 3, 4, 5])
@pytest.mark.parametrize("inverse", [False, True])
def test_local_fourstep_equals_dft(k: int, inverse: bool) -> None:
    v = random_values(1 << k)[0]
    expect = dft(bn254.ints_from_limbs(v), inverse)
    for parts in (1, 2, 3):
        assert bn254.ints_from_limbs(fourstep.ntt(v, inverse, parts)) == expect


@pytest.mark.parametrize("k", [6, 7, 9])
def test_local_fourstep_equals_backend_ntt(k: int) -> None:
    v = random_values(1 << k)[0]
    be = CpuBackend()
    for inverse in (False, True):
        assert np.array_equal(fourstep.ntt(v, inverse, parts=3), be.ntt(v, inverse))


def test_blocks_compose_into_h_scalars() -> None:
    """Columns -> rows (inverse) -> coset -> columns -> rows (forward) -> a*b - c, all on one machine."""
    n = 1 << 5
    evals = random_values(n, 3)
    n1, n2 = fourstep.split_sizes(n)
    rows_inv, rows_fwd = fourstep.block_ranges(n1, 2), fourstep.block_ranges(n2, 3)
    cols = [
        fourstep.split_rows(fourstep.column_step(fourstep.take_columns(evals, n1, n2, lo, hi), n, lo, True), rows_inv)
        for lo, hi in fourstep.block_ranges(n2, 2)
    ]
    mid = []
    for j, (lo, _) in enumerate(rows_inv):
        coeffs = fourstep.row_ntts(fourstep.join_columns([c[j] for c in cols]), n, True)
        scaled = fourstep.coset_scale(coeffs, n, lo)
        mid.append(fourstep.split_rows(fourstep.column_step(fourstep.as_columns(scaled), n, lo, False), rows_fwd))
    out = [
        fourstep.h_from_odd(fourstep.row_ntts(fourstep.join_columns([m[l] for m in mid]), n, False))
        for l in range(len(rows_fwd))
    ]
    got = fourstep.natural_order(out)[0]
    a, b, c = (bn254.ints_from_limbs(evals[i]) for i in range(3))
    assert np.array_equal(got, CpuBackend().h_scalars(None, Evals(a, b, c)))


def test_twiddle_and_coset_scale_against_brute_force() -> None:
    n = 1 << 4
    n1, n2 = fourstep.split_sizes(n)
    block = random_values(n1 * 2).reshape(1, n1, 2, 8)
    w = bn254.root_of_unity(4)
    got = fourstep.twiddle(block, n, col_lo=3, inverse=False)
    for k1 in range(n1):
        for j in range(2):
            x = bn254.ints_from_limbs(block[0, k1, j])[0]
            assert bn254.ints_from_limbs(got[0, k1, j])[0] == x * pow(w, k1 * (3 + j), R) % R
    rows = random_values(2 * n2).reshape(1, 2, n2, 8)
    g = bn254.coset_generator(4)
    got = fourstep.coset_scale(rows, n, row_lo=1)
    for i in range(2):
        for k2 in range(n2):
            x = bn254.ints_from_limbs(rows[0, i, k2])[0]
            assert bn254.ints_from_limbs(got[0, i, k2])[0] == x * pow(g, 1 + i + n1 * k2, R) % R


def test_bad_shapes_raise() -> None:
    with pytest.raises(ValueError):
        fourstep.split_sizes(12)
    with pytest.raises(ValueError):
        fourstep.column_ntts(np.zeros((4, 8), dtype="<u4"))
    with pytest.raises(ValueError):
        fourstep.take_columns(np.zeros((1, 8, 8), dtype="<u4"), 4, 4, 0, 1)


# --- across workers ---------------------------------------------------------------------------


@pytest.fixture(scope="module")
def client():
    yield from local_client(3)


@pytest.mark.parametrize("k,count", [(7, 1), (8, 2)])
def test_distributed_ntt_equals_single_ntt(client, k: int, count: int) -> None:
    from distprove.cluster.graph import submit_ntt

    n = 1 << k
    values = random_values(n, count)
    src = client.scatter(values)
    workers = sorted(client.nthreads())
    be = CpuBackend()
    for inverse in (False, True):
        got = submit_ntt(client, "test", src, n, inverse, workers, tag=f"{k}-{inverse}").result()
        assert got.shape == (count, n, 8)
        for i in range(count):
            assert np.array_equal(got[i], be.ntt(values[i], inverse))


def test_distributed_h_equals_backend_h_scalars(client) -> None:
    """The whole four-step H pipeline on 3 workers equals the plain backend's H scalars."""
    from distributed import wait

    from distprove.cluster.graph import submit_h_fourstep
    from distprove.cluster.tasks import Prepared

    n = 1 << 7
    evals = random_values(n, 3)
    prepared = client.scatter(Prepared(None, evals))
    workers = sorted(client.nthreads())
    hs, futures = submit_h_fourstep(client, "h", prepared, n, workers, tag="t")
    wait(futures)
    placed = {w for f in futures for w in client.who_has([f])[f.key]}
    assert len(placed) > 1  # the blocks really ran on several workers
    a, b, c = (bn254.ints_from_limbs(evals[i]) for i in range(3))
    assert np.array_equal(hs.result().reshape(n, 8), CpuBackend().h_scalars(None, Evals(a, b, c)))


def test_plan_uses_fourstep_on_cpu_keys_by_default_and_on_gpu_keys_only_when_asked() -> None:
    from distprove.cluster.planner import DEFAULT_FOURSTEP_MIN_DOMAIN, Plan
    from distprove.cluster.tasks import KeyInfo

    def info(backend: str, domain: int, native: bool = True) -> KeyInfo:
        return KeyInfo("k", "h", 10, 1, domain, {}, backend, native)

    big = DEFAULT_FOURSTEP_MIN_DOMAIN
    two = Plan("split", ("a", "b"))
    assert two.uses_fourstep(info("cpu", big)) and not two.uses_fourstep(info("cpu", big // 2))
    assert not two.uses_fourstep(info("gpu", 1 << 24))  # a GPU's H stays on one worker unless asked
    asked = Plan("split", ("a", "b"), fourstep_min_domain=1 << 10)
    assert asked.uses_fourstep(info("gpu", 1 << 10)) and not asked.uses_fourstep(info("gpu", 1 << 9))
    assert not asked.uses_fourstep(info("gpu", 1 << 12, native=False))  # a backend without block functions
    assert not Plan("split", ("a",), fourstep_min_domain=4).uses_fourstep(info("gpu", 1 << 12))  # one worker
    assert not Plan("data", ("a", "b"), fourstep_min_domain=4).uses_fourstep(info("cpu", 1 << 12))
