"""Radix-2 NTT over Fr with ffjavascript's roots, and the H-scalar step (DESIGN.md steps 2-3).

Natural order in and out: ``ntt(a)[k] = sum_j a[j] * w^(j*k)`` with w = bn254.root_of_unity(log2 n),
and the inverse uses w^-1 and scales by 1/n. Each butterfly stage runs as one numpy
object-array operation over Python ints (no per-element interpreter loop).
"""

from __future__ import annotations

from collections.abc import Sequence
from functools import lru_cache

import numpy as np

from distprove import bn254
from distprove.bn254 import R


def log2_size(n: int) -> int:
    """log2 of an NTT size; ValueError unless it is a power of two."""
    k = n.bit_length() - 1
    if n < 1 or 1 << k != n:
        raise ValueError(f"NTT size {n} is not a power of two")
    return k


@lru_cache(maxsize=32)
def bit_reverse(k: int) -> np.ndarray:
    """The bit-reversal permutation of 2^k indices."""
    n = 1 << k
    rev = np.zeros(n, dtype=np.int64)
    for b in range(k):
        rev |= ((np.arange(n) >> b) & 1) << (k - 1 - b)
    return rev


@lru_cache(maxsize=16)
def _twiddles(k: int, inverse: bool) -> np.ndarray:
    """w^j for j < n/2 (w or its inverse), as an object array."""
    w = bn254.root_of_unity(k)
    if inverse:
        w = pow(w, -1, R)
    return bn254.powers(w, max(1, (1 << k) // 2))


@lru_cache(maxsize=16)
def _coset_powers(k: int) -> np.ndarray:
    return bn254.powers(bn254.coset_generator(k), 1 << k)


def _ntt_obj(a: np.ndarray, inverse: bool) -> np.ndarray:
    n = a.shape[0]
    k = log2_size(n)
    a = a[bit_reverse(k)]
    tw_all = _twiddles(k, inverse)
    m = 1
    while m < n:
        tw = tw_all[:: n // (2 * m)][:m]
        blocks = a.reshape(n // (2 * m), 2, m)
        u = blocks[:, 0, :]
        v = blocks[:, 1, :] * tw % R
        a = np.stack(((u + v) % R, (u - v) % R), axis=1).reshape(n)
        m *= 2
    if inverse:
        a = a * pow(n, -1, R) % R
    return a


def ntt(values: Sequence[int], inverse: bool = False) -> list[int]:
    """Forward (or inverse, scaled by 1/n) NTT of n = 2^k Fr elements, natural order in and out."""
    return _ntt_obj(np.array([v % R for v in values], dtype=object), inverse).tolist()


def h_scalars(a: Sequence[int], b: Sequence[int], c: Sequence[int]) -> list[int]:
    """hs[j] = A(x_j) B(x_j) - C(x_j) on the odd coset x_j = g * w^j (g = coset_generator(k)).

    a, b, c are the evaluations on the size-n domain; each goes iNTT, times g^i, NTT.
    """
    n = len(a)
    if not len(b) == len(c) == n:
        raise ValueError("a, b, c must have the same length")
    g_pow = _coset_powers(log2_size(n))
    odd = []
    for vec in (a, b, c):
        coeffs = _ntt_obj(np.array(vec, dtype=object), inverse=True)
        odd.append(_ntt_obj(coeffs * g_pow % R, inverse=False))
    return ((odd[0] * odd[1] - odd[2]) % R).tolist()
