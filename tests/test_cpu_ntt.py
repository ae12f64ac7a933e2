"""CPU NTT against a naive DFT, round trips, and the H-scalar step against §10.6 and brute force."""

from __future__ import annotations

import random
import secrets

import pytest

from distprove import bn254
from distprove.backends.cpu import CpuBackend
from distprove.backends.cpu.ntt import h_scalars, ntt
from distprove.bn254 import R

from test_vectors import A_EVALS, B_EVALS, C_EVALS, HS, mini_key, mini_witness


def _rng() -> tuple[random.Random, int]:
    seed = secrets.randbits(32)
    return random.Random(seed), seed


def _vector(rng: random.Random, n: int) -> list[int]:
    """Random Fr values with the edge cases 0, 1, r-1 mixed in."""
    return [rng.choice([0, 1, R - 1, rng.randrange(R), rng.randrange(R)]) for _ in range(n)]


def _dft(a: list[int], x: int) -> list[int]:
    """Naive O(n^2) evaluation: out[k] = sum_j a[j] * x^(j*k)."""
    n = len(a)
    return [sum(a[j] * pow(x, j * k, R) for j in range(n)) % R for k in range(n)]


@pytest.mark.parametrize("k", range(1, 9))
def test_ntt_matches_naive_dft(k: int) -> None:
    rng, seed = _rng()
    a = _vector(rng, 1 << k)
    w = bn254.root_of_unity(k)
    assert ntt(a) == _dft(a, w), f"seed={seed}"
    n_inv = pow(1 << k, -1, R)
    assert ntt(a, inverse=True) == [v * n_inv % R for v in _dft(a, pow(w, -1, R))], f"seed={seed}"


@pytest.mark.parametrize("k", [0, 1, 5, 12])
def test_inverse_of_forward_is_identity(k: int) -> None:
    rng, seed = _rng()
    a = _vector(rng, 1 << k)
    assert ntt(ntt(a), inverse=True) == a, f"seed={seed}"
    assert ntt(ntt(a, inverse=True)) == a, f"seed={seed}"


def test_ntt_rejects_non_power_of_two() -> None:
    with pytest.raises(ValueError):
        ntt([1, 2, 3])


def test_backend_ntt_limbs() -> None:
    rng, seed = _rng()
    a = _vector(rng, 64)
    be = CpuBackend()
    out = be.ntt(bn254.limbs_from_ints(a))
    assert out.shape == (64, 8) and out.dtype == "<u4"
    assert bn254.ints_from_limbs(out) == _dft(a, bn254.root_of_unity(6)), f"seed={seed}"
    back = be.ntt(out, inverse=True)
    assert bn254.ints_from_limbs(back) == a, f"seed={seed}"


@pytest.mark.parametrize("k", [1, 3, 5])
def test_h_scalars_are_odd_coset_values(k: int) -> None:
    """hs[j] = A(x)B(x) - C(x) at x = g w^j, with the polynomials interpolated independently."""
    rng, seed = _rng()
    n = 1 << k
    a, b, c = (_vector(rng, n) for _ in range(3))
    w = bn254.root_of_unity(k)
    g = bn254.coset_generator(k)
    n_inv = pow(n, -1, R)

    def at_odd(evals: list[int]) -> list[int]:
        coeffs = [v * n_inv % R for v in _dft(evals, pow(w, -1, R))]
        return [sum(cf * pow(g * pow(w, j, R), i, R) for i, cf in enumerate(coeffs)) % R for j in range(n)]

    pa, pb, pc = at_odd(a), at_odd(b), at_odd(c)
    assert h_scalars(a, b, c) == [(x * y - z) % R for x, y, z in zip(pa, pb, pc)], f"seed={seed}"


def test_h_scalars_on_mini_match_snarkjs() -> None:
    key = mini_key()
    be = CpuBackend()
    evals = be.gather(key, mini_witness())
    assert (list(evals.a), list(evals.b), list(evals.c)) == (A_EVALS, B_EVALS, C_EVALS)
    assert h_scalars(A_EVALS, B_EVALS, C_EVALS) == HS
    assert bn254.ints_from_limbs(be.h_scalars(key, evals)) == HS
