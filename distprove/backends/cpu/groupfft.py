"""Group (G1/G2) inverse DFT on the CPU: the arithmetic of ``snarkjs powersoftau prepare phase2``.

A level of size n = 2^p is out[i] = n^-1 · Σ_j ω^(-ij) · in[j] with ω = Fr.w[p]
(SNARKJS_FORMATS.md §5.1, §9); every correct algorithm gives the same affine points, so this
one is chosen for speed:

* radix-2 DIT over natural-order input (bit-reversal first), affine between stages; numpy does
  the index work of a stage, compiled kernels (numba, GIL released) do all field and curve
  arithmetic, one loop over the rows each;
* points stay in the on-disk form: Montgomery limbs (:mod:`distprove.fqlimbs`), the all-zero row
  as infinity; G1 and G2 share one compiled version of each kernel (the Fq2 degree is a run-time
  argument), which keeps a cold compile to a few seconds;
* a twiddle multiplication is a **GLV**-split signed fixed-window ladder: k = k1 + k2·λ (mod r)
  with |k1|, |k2| < 2^127 (lattice reduction, :func:`distprove.glv.split`); [λ]P = φ(P) = (β·x, y), so one
  affine table of [1..2^(c-1)]P serves both halves and the doubling chain is 128 bits instead of
  254. λ is the same for G1 and G2; β differs (they are each other's square: the twist's φ with
  G1's β is [λ²]). The accumulator is Jacobian (dbl-2009-l, madd-2007-bl), the tables affine
  (one batch inversion per table);
* the 1/n scaling is folded into the last stage (twiddles s·ω^j, and [s]·u on the other side).

The mixed addition is complete (P + P doubles, P − P and infinity come out exactly), so
low-entropy inputs (τ = 1) need no special path. About 5× faster than the same algorithm on
Python integers. Inputs must lie in the prime-order subgroup (true of any ptau a ceremony
produced): GLV relies on it.
"""

from __future__ import annotations

from typing import Sequence

import numpy as np

from numba import njit

from distprove import bn254, glv
from distprove.bn254 import FQ_MONT, G1, Q, R, Group
from distprove.fqlimbs import ONE, ZERO, e_add, e_inv, e_is_zero, e_load, e_mul, e_neg, e_scale, e_sqr, e_store, e_sub, limbs_of

WINDOW = 5
"""Ladder window width c: tables of 2^(c-1) = 16 points, ceil(128 / c) = 26 windows."""


def signed_digits(m: int, c: int = WINDOW) -> list[int]:
    """Digits d_w in [-(2^(c-1) - 1), 2^(c-1)] with m = Σ d_w·2^(cw), w < ceil(128 / c); m < 2^127."""
    nw = -(-glv.BITS // c)
    half, mask = 1 << (c - 1), (1 << c) - 1
    out, carry = [], 0
    for w in range(nw):
        d = ((m >> (c * w)) & mask) + carry
        carry = 0
        if d > half:
            d -= 1 << c
            carry = 1
        out.append(d)
    if carry or m >> (c * nw):
        raise ValueError(f"GLV half {m} does not fit {glv.BITS} bits")
    return out


# --- compiled point arithmetic (numba, on Montgomery limbs) ------------------------------
#
# Point vectors are uint64 arrays of limbs in Montgomery form, one row a point, element c of a row
# at [c·d : c·d + d] (d = 1 for G1, 2 for G2), eight limbs each (distprove.fqlimbs):
# affine (n, 2d, 8) with the all-zero row as infinity (as on disk: (0, 0) is on neither curve),
# Jacobian (n, 3d, 8) with Z = 0 as infinity. Every kernel takes d at run time, so G1 and G2 share
# one compiled version; all release the GIL.


@njit(cache=True)
def _jac_dbl(p: tuple, d: int) -> tuple:
    """dbl-2009-l (a = 0); Z = 0 stays 0, and no finite point of either group has Y = 0."""
    X, Y, Z = p
    A = e_sqr(X, d)
    B = e_sqr(Y, d)
    C = e_sqr(B, d)
    D = e_sub(e_sqr(e_add(X, B, d), d), e_add(A, C, d), d)
    D = e_add(D, D, d)
    E = e_add(e_add(A, A, d), A, d)
    X3 = e_sub(e_sqr(E, d), e_add(D, D, d), d)
    C2 = e_add(C, C, d)
    C4 = e_add(C2, C2, d)
    Y3 = e_sub(e_mul(E, e_sub(D, X3, d), d), e_add(C4, C4, d), d)
    Z3 = e_mul(Y, Z, d)
    return X3, Y3, e_add(Z3, Z3, d)


@njit(cache=True)
def _jac_madd(p: tuple, x2: tuple, y2: tuple, d: int) -> tuple:
    """p + (x2, y2) for Jacobian p and a finite affine point (madd-2007-bl), complete: p at
    infinity gives the affine point, P + P doubles, P − P is infinity."""
    X1, Y1, Z1 = p
    if e_is_zero(Z1):
        return x2, y2, (ONE, ZERO)
    Z1Z1 = e_sqr(Z1, d)
    U2 = e_mul(x2, Z1Z1, d)
    S2 = e_mul(y2, e_mul(Z1, Z1Z1, d), d)
    H = e_sub(U2, X1, d)
    rr = e_sub(S2, Y1, d)
    if e_is_zero(H):
        if e_is_zero(rr):
            return _jac_dbl(p, d)
        return (ONE, ZERO), (ONE, ZERO), (ZERO, ZERO)
    rr = e_add(rr, rr, d)
    HH = e_sqr(H, d)
    I = e_add(HH, HH, d)
    I = e_add(I, I, d)
    J = e_mul(H, I, d)
    V = e_mul(X1, I, d)
    X3 = e_sub(e_sub(e_sqr(rr, d), J, d), e_add(V, V, d), d)
    Y1J = e_mul(Y1, J, d)
    Y3 = e_sub(e_mul(rr, e_sub(V, X3, d), d), e_add(Y1J, Y1J, d), d)
    Z3 = e_sub(e_sqr(e_add(Z1, H, d), d), e_add(Z1Z1, HH, d), d)
    return X3, Y3, Z3


@njit(cache=True)
def _store_jac(a: np.ndarray, i: int, d: int, p: tuple) -> None:
    e_store(a, i, 0, d, p[0])
    e_store(a, i, 1, d, p[1])
    e_store(a, i, 2, d, p[2])


@njit(nogil=True, cache=True)
def _k_table(aff: np.ndarray, d: int, size: int, tab: np.ndarray) -> None:
    """Jacobian [1 .. size]·P of every affine row P: entry m − 1 of row i at tab[(m − 1)·n + i]."""
    n = aff.shape[0]
    for i in range(n):
        x, y = e_load(aff, i, 0, d), e_load(aff, i, 1, d)
        if e_is_zero(x) and e_is_zero(y):
            for m in range(size):
                tab[m * n + i] = 0
            continue
        p = (x, y, (ONE, ZERO))
        _store_jac(tab, i, d, p)
        acc = _jac_dbl(p, d)
        for m in range(1, size):
            if m > 1:
                acc = _jac_madd(acc, x, y, d)
            _store_jac(tab, m * n + i, d, acc)


@njit(nogil=True, cache=True)
def _k_to_affine(jac: np.ndarray, d: int, out: np.ndarray) -> None:
    """Jacobian rows to affine rows (infinity to the zero row) with one inversion for all."""
    n = jac.shape[0]
    pre = np.empty((n, d, 8), dtype=np.uint64)
    acc = (ONE, ZERO)
    for i in range(n):
        z = e_load(jac, i, 2, d)
        if not e_is_zero(z):
            e_store(pre, i, 0, d, acc)
            acc = e_mul(acc, z, d)
    inv = e_inv(acc, d)
    for i in range(n - 1, -1, -1):
        z = e_load(jac, i, 2, d)
        if e_is_zero(z):
            out[i] = 0
            continue
        zi = e_mul(inv, e_load(pre, i, 0, d), d)
        inv = e_mul(inv, z, d)
        zi2 = e_sqr(zi, d)
        e_store(out, i, 0, d, e_mul(e_load(jac, i, 0, d), zi2, d))
        e_store(out, i, 1, d, e_mul(e_load(jac, i, 1, d), e_mul(zi2, zi, d), d))


@njit(nogil=True, cache=True)
def _k_ladder(tab: np.ndarray, digits: np.ndarray, beta: np.ndarray, d: int, c: int, out: np.ndarray) -> None:
    """Σ_w 2^(cw)·([d1_w]P + [d2_w]φ(P)) per row: affine tables ``tab`` ([m]P at (m − 1)·n + i),
    signed digits (n, 2, windows), φ(x, y) = (β·x, y); Jacobian rows to ``out``."""
    n = out.shape[0]
    nw = digits.shape[2]
    b = (beta[0], beta[1], beta[2], beta[3], beta[4], beta[5], beta[6], beta[7])
    for i in range(n):
        acc = ((ONE, ZERO), (ONE, ZERO), (ZERO, ZERO))
        for w in range(nw - 1, -1, -1):
            if not e_is_zero(acc[2]):
                for _ in range(c):
                    acc = _jac_dbl(acc, d)
            for h in range(2):
                g = digits[i, h, w]
                if g == 0:
                    continue
                row = (abs(g) - 1) * n + i
                x, y = e_load(tab, row, 0, d), e_load(tab, row, 1, d)
                if e_is_zero(x) and e_is_zero(y):
                    continue
                if h == 1:
                    x = e_scale(x, b, d)
                if g < 0:
                    y = e_neg(y, d)
                acc = _jac_madd(acc, x, y, d)
        _store_jac(out, i, d, acc)


@njit(nogil=True, cache=True)
def _k_madd(jac: np.ndarray, aff: np.ndarray, negate: bool, d: int, out: np.ndarray) -> None:
    """Row-wise (±p) + q for Jacobian rows p (negated when ``negate``) and affine rows q."""
    for i in range(jac.shape[0]):
        x, y = e_load(aff, i, 0, d), e_load(aff, i, 1, d)
        p = (e_load(jac, i, 0, d), e_load(jac, i, 1, d), e_load(jac, i, 2, d))
        if negate:
            p = (p[0], e_neg(p[1], d), p[2])
        if not (e_is_zero(x) and e_is_zero(y)):
            p = _jac_madd(p, x, y, d)
        _store_jac(out, i, d, p)


def _deg(group: Group) -> int:
    return 1 if group is G1 else 2


def _beta(group: Group) -> int:
    return glv.BETA_G1 if group is G1 else glv.BETA_G2


def _beta_limbs(group: Group) -> np.ndarray:
    return np.array(limbs_of(_beta(group) * FQ_MONT % Q), dtype=np.uint64)


def _to_jac(group: Group, pts: np.ndarray) -> np.ndarray:
    """Affine rows as Jacobian rows (Z = 1, or 0 for infinity)."""
    d = _deg(group)
    out = np.zeros((pts.shape[0], 3 * d, 8), dtype=np.uint64)
    out[:, : 2 * d] = pts
    out[pts.reshape(pts.shape[0], -1).any(axis=1), 2 * d] = ONE
    return out


def _to_affine(group: Group, jac: np.ndarray) -> np.ndarray:
    """Jacobian rows to affine rows with one inversion."""
    d = _deg(group)
    out = np.empty((jac.shape[0], 2 * d, 8), dtype=np.uint64)
    if jac.shape[0]:
        _k_to_affine(np.ascontiguousarray(jac), d, out)
    return out


def _madd(group: Group, jac: np.ndarray, aff: np.ndarray, negate: bool = False) -> np.ndarray:
    """Row-wise (±p) + q, complete, as Jacobian rows."""
    out = np.empty_like(jac)
    _k_madd(np.ascontiguousarray(jac), np.ascontiguousarray(aff), negate, _deg(group), out)
    return out


def _glv_digits(ks: Sequence[int], c: int) -> np.ndarray:
    """Signed window digits (n, 2, ceil(128 / c)) of the GLV halves of each scalar (one split per
    distinct scalar: a stage's twiddles repeat across its blocks)."""
    nw = -(-glv.BITS // c)
    out = np.empty((len(ks), 2, nw), dtype=np.int8)
    memo: dict[int, list[list[int]]] = {}
    for i, k in enumerate(ks):
        k = int(k) % R
        rows = memo.get(k)
        if rows is None:
            rows = []
            for half in glv.split(k):
                s = -1 if half < 0 else 1
                rows.append([s * dg for dg in signed_digits(abs(half), c)])
            memo[k] = rows
        out[i] = rows
    return out


def mul_many(group: Group, pts: np.ndarray, scalars: Sequence[int], c: int = WINDOW) -> np.ndarray:
    """Row-wise [k_i]·P_i for affine rows ``pts`` and scalars k_i (any ints, reduced mod r);
    returns Jacobian rows. GLV-split signed fixed-window ladder, one compiled loop over the rows."""
    d = _deg(group)
    n = pts.shape[0]
    out = np.empty((n, 3 * d, 8), dtype=np.uint64)
    if n == 0:
        return out
    size = 1 << (c - 1)
    tab = np.empty((size * n, 3 * d, 8), dtype=np.uint64)
    _k_table(np.ascontiguousarray(pts), d, size, tab)
    _k_ladder(_to_affine(group, tab), _glv_digits(scalars, c), _beta_limbs(group), d, c, out)
    return out


# --- limb conversion ---------------------------------------------------------------------


def affine_from_limbs(group: Group, limbs: np.ndarray) -> np.ndarray:
    """(n, 16|32) Montgomery limb rows (as on disk) -> affine point rows (n, 2d, 8) uint64."""
    a = np.asarray(limbs).reshape(-1, group.limbs)
    return a.astype(np.uint64).reshape(a.shape[0], 2 * _deg(group), 8)


def affine_to_limbs(group: Group, pts: np.ndarray) -> np.ndarray:
    """Affine point rows -> (n, 16|32) Montgomery limb rows, infinity as zeros."""
    return pts.reshape(pts.shape[0], group.limbs).astype(np.uint32)

# --- the iFFT ----------------------------------------------------------------------------


def _bitrev(n: int) -> np.ndarray:
    bits = n.bit_length() - 1
    idx = np.arange(n)
    rev = np.zeros(n, dtype=np.intp)
    for b in range(bits):
        rev |= ((idx >> b) & 1) << (bits - 1 - b)
    return rev


def _butterfly(group: Group, t: np.ndarray, u: np.ndarray) -> np.ndarray:
    """(u + t, u − t) for Jacobian t and affine u rows, as Jacobian rows (lo half, then hi half)."""
    return np.concatenate([_madd(group, t, u), _madd(group, t, u, negate=True)])


def _scaled_butterflies(group: Group, lo_pts: np.ndarray, hi_pts: np.ndarray, twiddles: Sequence[int], scale: int) -> np.ndarray:
    """([s]u + [s·w_i]v, [s]u − [s·w_i]v) for affine rows u = ``lo_pts``, v = ``hi_pts``, twiddles w_i
    and scale s: the lo results, then the hi results, as affine rows."""
    h = lo_pts.shape[0]
    res = mul_many(group, np.concatenate([hi_pts, lo_pts]), [w * scale for w in twiddles] + [scale] * h)
    return _to_affine(group, _butterfly(group, res[:h], _to_affine(group, res[h:])))


def ifft_points(group: Group, pts: np.ndarray, omega: int, scale: int) -> np.ndarray:
    """out[i] = scale · Σ_j ω^(-ij) · in[j] on affine rows of power-of-two length n (ω of order n);
    returns affine rows in natural order."""
    n = pts.shape[0]
    if n & (n - 1) or n == 0:
        raise ValueError(f"iFFT size {n} is not a power of two")
    if n == 1:
        if scale % R == 1:
            return pts
        return _to_affine(group, mul_many(group, pts, [scale]))
    cur = pts[_bitrev(n)]
    w_inv = pow(omega, -1, R)
    m = 2
    while m <= n:
        half = m // 2
        blocks = np.arange(0, n, m)
        j = np.tile(np.arange(half), n // m)
        lo = np.repeat(blocks, half) + j
        hi = lo + half
        wm = pow(w_inv, n // m, R)
        tw = [pow(wm, k, R) for k in range(half)]
        hi_pts, lo_pts = cur[hi], cur[lo]
        if m == n and scale % R != 1:  # last stage: fold the scaling in
            out = _scaled_butterflies(group, lo_pts, hi_pts, [tw[k] for k in j], scale)
        else:
            t = _to_jac(group, hi_pts)
            live = np.flatnonzero(j != 0)
            if live.size:
                t[live] = mul_many(group, hi_pts[live], [tw[k] for k in j[live]])
            out = _to_affine(group, _butterfly(group, t, lo_pts))
        cur = np.empty_like(cur)
        cur[np.concatenate([lo, hi])] = out
        m *= 2
    return cur


def ifft_level(group: Group, limbs: np.ndarray) -> np.ndarray:
    """One ``prepare phase2`` level: the size-2^p group inverse DFT (ω = Fr.w[p], scaled by 2^-p)
    of (2^p, 16|32) Montgomery limb rows, as the same layout."""
    n = np.asarray(limbs).shape[0]
    p = n.bit_length() - 1
    if n != 1 << p:
        raise ValueError(f"level size {n} is not a power of two")
    pts = affine_from_limbs(group, limbs)
    out = ifft_points(group, pts, bn254.root_of_unity(p), pow(n, -1, R))
    return affine_to_limbs(group, out)


def half_level(group: Group, limbs: np.ndarray) -> np.ndarray:
    """The unscaled size-m group inverse DFT (ω = Fr.w[log2 m]) of (m, 16|32) Montgomery limb rows:
    the sub-FFT of one half of a blocked level (:func:`distprove.ptau.half_points`)."""
    m = np.asarray(limbs).shape[0]
    if m == 0 or m & (m - 1):
        raise ValueError(f"half-level size {m} is not a power of two")
    out = ifft_points(group, affine_from_limbs(group, limbs), bn254.root_of_unity(m.bit_length() - 1), 1)
    return affine_to_limbs(group, out)


def column_stage(group: Group, a0: np.ndarray, a1: np.ndarray, p: int, first: int) -> np.ndarray:
    """The last stage of level p (n = 2^p) on columns first … first+w−1 of its two half sub-FFTs
    a0, a1 ((w, 16|32) limb rows each): out[i] = [s]a0[i] + [s·ω^-i]a1[i] for the w rows from
    ``first``, then out[n/2 + i] = [s]a0[i] − [s·ω^-i]a1[i] for the same i (ω = Fr.w[p], s = 2^-p)."""
    w = np.asarray(a0).shape[0]
    w_inv = pow(bn254.root_of_unity(p), -1, R)
    step = pow(w_inv, first, R)
    tw = []
    for _ in range(w):
        tw.append(step)
        step = step * w_inv % R
    out = _scaled_butterflies(group, affine_from_limbs(group, a0), affine_from_limbs(group, a1), tw, pow(1 << p, -1, R))
    return affine_to_limbs(group, out)


def coset_level(group: Group, limbs: np.ndarray, k: int, g: int) -> np.ndarray:
    """Lagrange points of D = H ∪ g·H (H = ⟨Fr.w[k]⟩, m = 2^k) from 2m power points
    (ffjavascript's ``lagrangeEvaluations``, SNARKJS_FORMATS.md §5.1: the level-29 case with
    k = 28, g = 25). With S = g^m, K = (1 − S)^-1, t0/t1 the two halves:
    t0' = K·(t1 − S·t0), t1'[j] = K·g^-j·(t0[j] − t1[j]), output ifft_m(t0') ‖ ifft_m(t1')."""
    m = 1 << k
    a = np.asarray(limbs).reshape(-1, group.limbs)
    if a.shape[0] != 2 * m:
        raise ValueError(f"coset level needs {2 * m} points, got {a.shape[0]}")
    pts = affine_from_limbs(group, a)
    t0, t1 = pts[:m], pts[m:]
    s = pow(g, m, R)
    kk = pow((1 - s) % R, -1, R)
    ginv = pow(g, -1, R)
    # t1 - S t0  and  t0 - t1, as Jacobian rows, then to affine
    d0 = _to_affine(group, _madd(group, mul_many(group, t0, [(-s) % R] * m), t1))
    d1 = _to_affine(group, _madd(group, _to_jac(group, t1), t0, negate=True))
    w = bn254.root_of_unity(k)
    minv = pow(m, -1, R)
    # the K, K·g^-j factors ride on the iFFT inputs
    e0 = _to_affine(group, mul_many(group, d0, [kk] * m))
    e1 = _to_affine(group, mul_many(group, d1, [kk * pow(ginv, j, R) for j in range(m)]))
    o0 = ifft_points(group, e0, w, minv)
    o1 = ifft_points(group, e1, w, minv)
    return np.concatenate([affine_to_limbs(group, o0), affine_to_limbs(group, o1)])
