"""Fr vector kernels on 32-bit limbs, compiled by numba, for the dev setup's key scalars and the
synthetic chain witness: the Montgomery arithmetic of :mod:`distprove.fqlimbs` bound to r.

Arrays are (n, 8) uint32 little-endian limbs (the key store's scalar layout); inside the kernels an
element is a tuple of eight uint64 limbs. ``mont(a, b) = a·b·2^-256 mod r``, so the product of a
Montgomery-form value (x·2^256) and a standard-form one is the standard-form product: the kernels
choose the form of each output by the form of the factor they are handed (noted per kernel), and
no separate conversion pass is needed. Every kernel releases the GIL; callers run slices of the
rows on a thread pool (:func:`run_threads`).
"""

from __future__ import annotations

from concurrent.futures import ThreadPoolExecutor
from typing import Callable, Sequence

import numpy as np
from numba import njit

from . import bn254
from .bn254 import R
from .fqlimbs import limbs_of, mod_add, mod_sub, mont_inv, mont_mul

_P = limbs_of(R)
_PINV = np.uint64((-pow(R, -1, 1 << 32)) % (1 << 32))
_PM2 = limbs_of(R - 2)
ONE_M = limbs_of(bn254.FR_MONT)
"""1 in Montgomery form."""
ONE = limbs_of(1)
"""1 in standard form (a Montgomery product with it leaves standard form)."""
_ZERO = limbs_of(0)


def mont(v: int) -> tuple:
    """The Montgomery-form limb tuple of v mod r."""
    return limbs_of(int(v) % R * bn254.FR_MONT % R)


def std(v: int) -> tuple:
    """The standard-form limb tuple of v mod r."""
    return limbs_of(int(v) % R)


@njit(cache=True)
def _mul(a: tuple, b: tuple) -> tuple:
    return mont_mul(a, b, _P, _PINV)


@njit(cache=True)
def _add(a: tuple, b: tuple) -> tuple:
    return mod_add(a, b, _P)


@njit(cache=True)
def _sub(a: tuple, b: tuple) -> tuple:
    return mod_sub(a, b, _P)


@njit(cache=True)
def _load(a: np.ndarray, i: int) -> tuple:
    r = a[i]
    return (
        np.uint64(r[0]), np.uint64(r[1]), np.uint64(r[2]), np.uint64(r[3]),
        np.uint64(r[4]), np.uint64(r[5]), np.uint64(r[6]), np.uint64(r[7]),
    )


@njit(cache=True)
def _store(a: np.ndarray, i: int, v: tuple) -> None:
    for k in range(8):
        a[i, k] = np.uint32(v[k])


@njit(nogil=True, cache=True)
def lagrange_kernel(tau: tuple, x0: tuple, step: tuple, scale: tuple, out: np.ndarray, prefix: np.ndarray) -> bool:
    """out[i] = scale·x_i/(τ − x_i) with x_i = x0·step^i, for i < len(out); one inversion in all.

    τ, x0 and step are Montgomery form; ``out`` comes out in the form of ``scale`` (Montgomery
    scale: Montgomery out, standard scale: standard out). ``prefix`` is scratch of out's shape.
    Returns False (out undefined) when some τ − x_i is 0.
    """
    m = out.shape[0]
    x = x0
    acc = ONE_M
    for i in range(m):  # x_i kept in out, the products of (τ − x_j), j < i, in prefix
        _store(out, i, x)
        _store(prefix, i, acc)
        acc = _mul(acc, _sub(tau, x))
        x = _mul(x, step)
    if acc == _ZERO:
        return False
    # scale/Π(τ − x_i), in scale's form: a Montgomery product with a Montgomery factor keeps the
    # form of the other one, so the running value and everything made from it stay in that form
    inv = _mul(mont_inv(acc, _P, _PINV, _PM2, ONE_M), scale)
    for i in range(m - 1, -1, -1):
        x = _load(out, i)
        d_inv = _mul(inv, _load(prefix, i))  # scale/(τ − x_i)
        inv = _mul(inv, _sub(tau, x))  # scale/Π_{j<i}(τ − x_j)
        _store(out, i, _mul(d_inv, x))
    return True


@njit(nogil=True, cache=True)
def accumulate_kernel(row_ptr: np.ndarray, wire: np.ndarray, coef: np.ndarray, lag: np.ndarray, row_base: int,
                      lo: int, out: np.ndarray) -> None:
    """out[w − lo] += coef_t·lag[row_base + row_t] for every term t of a CSR matrix whose wire w lies
    in [lo, lo + len(out)).

    Every call scans the whole matrix (a comparison a term), so signal ranges need no sorted copy
    of the terms. coef is standard form and lag Montgomery form, so out (zeroed by the caller)
    comes out in standard form.
    """
    hi = lo + out.shape[0]
    for r in range(row_ptr.shape[0] - 1):
        for t in range(row_ptr[r], row_ptr[r + 1]):
            w = np.int64(wire[t])
            if w >= lo and w < hi:
                s = w - lo
                _store(out, s, _add(_load(out, s), _mul(_load(coef, t), _load(lag, row_base + r))))


@njit(nogil=True, cache=True)
def combine_kernel(a: np.ndarray, b: np.ndarray, c: np.ndarray, beta: tuple, alpha: tuple, inv_delta: tuple,
                   first_divided: int, out: np.ndarray) -> None:
    """out[i] = β·a[i] + α·b[i] + c[i], times 1/δ from row ``first_divided`` on (standard form in and
    out; β, α and 1/δ in Montgomery form)."""
    for i in range(out.shape[0]):
        k = _add(_add(_mul(beta, _load(a, i)), _mul(alpha, _load(b, i))), _load(c, i))
        if i >= first_divided:
            k = _mul(inv_delta, k)
        _store(out, i, k)


@njit(nogil=True, cache=True)
def square_chain_kernel(v: tuple, out: np.ndarray) -> None:
    """out[j] = v^(2^(j+1)) in standard form for a Montgomery-form v (the chain's squarings)."""
    for j in range(out.shape[0]):
        v = _mul(v, v)
        _store(out, j, _mul(v, ONE))


def square_chain(
    start: int, count: int, workers: int = 1, chunk: int = 1 << 20, out: np.ndarray | None = None
) -> np.ndarray:
    """[start^(2^1), start^(2^2), …, start^(2^count)] mod r as (count, 8) standard-form limbs
    (written into ``out`` when given).

    Slices of ``chunk`` squarings run on ``workers`` threads, each from its own first value
    start^(2^lo) = start^(2^lo mod (r − 1)) (one exponentiation a slice).
    """
    if out is None:
        out = np.empty((count, 8), dtype="<u4")
    if out.shape != (count, 8) or out.dtype != np.dtype("<u4"):
        raise ValueError(f"square_chain: out must be ({count}, 8) uint32")
    start = int(start) % R

    def task(lo: int, hi: int) -> None:
        square_chain_kernel(mont(pow(start, pow(2, lo, R - 1), R)), out[lo:hi])

    run_threads(task, [(lo, min(lo + chunk, count)) for lo in range(0, count, chunk)], workers)
    return out


def run_threads(task: Callable[..., None], args: Sequence[tuple], workers: int) -> None:
    """Run ``task(*a)`` for every ``a`` on ``workers`` threads (the kernels release the GIL)."""
    if workers <= 1 or len(args) <= 1:
        for a in args:
            task(*a)
        return
    with ThreadPoolExecutor(min(workers, len(args))) as pool:
        for f in [pool.submit(task, *a) for a in args]:
            f.result()
