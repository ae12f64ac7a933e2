"""Group (G1/G2) inverse DFT on the CPU: the arithmetic of ``snarkjs powersoftau prepare phase2``.

A level of size n = 2^p is out[i] = n^-1 · Σ_j ω^(-ij) · in[j] with ω = Fr.w[p]
(SNARKJS_FORMATS.md §5.1, §9); every correct algorithm gives the same affine points, so this
one is chosen for speed in plain Python:

* radix-2 DIT over natural-order input (bit-reversal first), affine between stages;
* every twiddle multiplication of a stage runs in one **vectorised** ladder: numpy object arrays
  of (gmpy2) integers, one row per point, each row with its own scalar; the accumulator is
  Jacobian (dbl-2009-l, madd-2007-bl), the window table affine (one batch inversion per table);
* **GLV**: k = k1 + k2·λ (mod r) with |k1|, |k2| < 2^127 (lattice reduction, :func:`glv_split`);
  [λ]P = φ(P) = (β·x, y), so one table of [1..2^(c-1)]P serves both halves and the doubling
  chain is 128 bits instead of 254. λ is the same for G1 and G2; β differs (they are each
  other's square: the twist's φ with G1's β is [λ²]);
* the 1/n scaling is folded into the last stage (twiddles s·ω^j, and [s]·u on the other side).

Exceptional additions (P + P, P − P, infinity) are detected per row and finished by the scalar
reference (:mod:`distprove.bn254`), so low-entropy inputs (τ = 1) are handled exactly. Inputs
must lie in the prime-order subgroup (true of any ptau a ceremony produced): GLV relies on it.
"""

from __future__ import annotations

from typing import Sequence

import numpy as np

from distprove import bn254
from distprove.bn254 import FQ_MONT, FQ_MONT_INV, G1, Q, R, Group
from distprove.curve import fast_int

# --- GLV constants ---------------------------------------------------------------------

GLV_LAMBDA = 4407920970296243842393367215006156084916469457145843978461
"""λ: a primitive cube root of unity in Fr with [λ]P = (β·x, y) on both groups."""
GLV_BETA_G1 = 2203960485148121921418603742825762020974279258880205651966
"""β for G1 (a primitive cube root of unity in Fq)."""
GLV_BETA_G2 = GLV_BETA_G1 * GLV_BETA_G1 % Q
"""β for G2 (the other cube root; embedded in Fq2 with c1 = 0)."""
GLV_BITS = 128
"""Magnitudes of k1, k2 are below 2^127; digits are recoded over 128 bits."""
WINDOW = 5
"""Ladder window width c: tables of 2^(c-1) = 16 points, ceil(128 / c) = 26 windows."""


def _lattice() -> tuple[tuple[int, int], tuple[int, int]]:
    """Short basis (a1, b1), (a2, b2) of {(x, y): x + y·λ ≡ 0 mod r} by the extended Euclidean
    algorithm on (r, λ) (Hankerson-Menezes-Vanstone, Algorithm 3.74)."""
    r0, r1 = R, GLV_LAMBDA
    t0, t1 = 0, 1
    bound = 1 << 127  # ~ sqrt(r)
    rows: list[tuple[int, int]] = []
    while r1 >= bound:
        q = r0 // r1
        r0, r1 = r1, r0 - q * r1
        t0, t1 = t1, t0 - q * t1
    # now r0 >= sqrt(r) > r1: (r1, -t1) is the first vector; the second is the shorter of
    # (r0, -t0) and the next remainder's vector.
    q = r0 // r1
    r2, t2 = r0 - q * r1, t0 - q * t1
    rows.append((r1, -t1))
    if r0 * r0 + t0 * t0 <= r2 * r2 + t2 * t2:
        rows.append((r0, -t0))
    else:
        rows.append((r2, -t2))
    return rows[0], rows[1]


GLV_BASIS = _lattice()


def glv_split(k: int) -> tuple[int, int]:
    """Signed (k1, k2) with k ≡ k1 + k2·λ (mod r) and |k1|, |k2| < 2^127."""
    (a1, b1), (a2, b2) = GLV_BASIS
    k %= R
    det = a1 * b2 - a2 * b1
    c1 = (b2 * k * 2 + det) // (2 * det)  # round(b2·k / det)
    c2 = (-b1 * k * 2 + det) // (2 * det)  # round(-b1·k / det)
    k1 = k - c1 * a1 - c2 * a2
    k2 = -c1 * b1 - c2 * b2
    return k1, k2


def signed_digits(m: int, c: int = WINDOW) -> list[int]:
    """Digits d_w in [-(2^(c-1) - 1), 2^(c-1)] with m = Σ d_w·2^(cw), w < ceil(128 / c); m < 2^127."""
    nw = -(-GLV_BITS // c)
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
        raise ValueError(f"GLV half {m} does not fit {GLV_BITS} bits")
    return out


# --- vectorised fields (numpy object arrays) --------------------------------------------

_QM = fast_int(Q)


def _inv_many(a: np.ndarray) -> np.ndarray:
    """Element-wise inverses mod q of a 1-D object array of nonzero values (product tree)."""
    levels = [a]
    while levels[-1].shape[0] > 1:
        cur = levels[-1]
        if cur.shape[0] % 2:
            cur = np.append(cur, np.array([fast_int(1)], dtype=object))
        levels.append(cur[0::2] * cur[1::2] % Q)
    inv = np.array([fast_int(pow(int(levels[-1][0]), -1, Q))], dtype=object)
    for lvl in reversed(levels[:-1]):
        size = lvl.shape[0]
        if size % 2:
            lvl = np.append(lvl, np.array([fast_int(1)], dtype=object))
        out = np.empty(lvl.shape[0], dtype=object)
        out[0::2] = inv * lvl[1::2] % Q
        out[1::2] = inv * lvl[0::2] % Q
        inv = out[:size]
    return inv


class _Fq:
    """Fq on object arrays: an element vector is one array. Lazy reduction: only products are
    reduced mod q; sums and differences stay small multiples of q (possibly negative), so zero
    tests reduce first and every value leaving this module goes through a product or ``% Q``."""

    @staticmethod
    def add(a, b):
        return a + b

    @staticmethod
    def sub(a, b):
        return a - b

    @staticmethod
    def mul(a, b):
        return a * b % _QM

    @staticmethod
    def sqr(a):
        return a * a % _QM

    @staticmethod
    def neg(a):
        return -a

    @staticmethod
    def scale(a, k: int):
        return a * k % _QM

    @staticmethod
    def small(a, k: int):
        return a * k

    @staticmethod
    def is_zero(a) -> np.ndarray:
        return np.equal(a % _QM, 0).astype(bool)

    @staticmethod
    def where(m, a, b):
        return np.where(m, a, b)

    @staticmethod
    def take(a, idx):
        return a[idx]

    @staticmethod
    def put(a, idx, v) -> None:
        a[idx] = v

    @staticmethod
    def const(v, n: int):
        out = np.empty(n, dtype=object)
        out[:] = [fast_int(v)] * n
        return out

    @staticmethod
    def inv(a):
        return _inv_many(a % _QM)

    @staticmethod
    def row(a, i: int):
        return int(a[i]) % Q

    @staticmethod
    def set_row(a, i: int, v) -> None:
        a[i] = fast_int(v)

    @staticmethod
    def concat(parts):
        return np.concatenate(parts)


class _Fq2:
    """Fq2 on object arrays: an element vector is a pair (c0, c1) of arrays; lazy reduction as _Fq."""

    @staticmethod
    def add(a, b):
        return (a[0] + b[0], a[1] + b[1])

    @staticmethod
    def sub(a, b):
        return (a[0] - b[0], a[1] - b[1])

    @staticmethod
    def mul(a, b):
        t0 = a[0] * b[0]
        t1 = a[1] * b[1]
        return ((t0 - t1) % _QM, ((a[0] + a[1]) * (b[0] + b[1]) - t0 - t1) % _QM)

    @staticmethod
    def sqr(a):
        return ((a[0] + a[1]) * (a[0] - a[1]) % _QM, 2 * a[0] * a[1] % _QM)

    @staticmethod
    def neg(a):
        return (-a[0], -a[1])

    @staticmethod
    def scale(a, k: int):
        return (a[0] * k % _QM, a[1] * k % _QM)

    @staticmethod
    def small(a, k: int):
        return (a[0] * k, a[1] * k)

    @staticmethod
    def is_zero(a) -> np.ndarray:
        return np.equal(a[0] % _QM, 0).astype(bool) & np.equal(a[1] % _QM, 0).astype(bool)

    @staticmethod
    def where(m, a, b):
        return (np.where(m, a[0], b[0]), np.where(m, a[1], b[1]))

    @staticmethod
    def take(a, idx):
        return (a[0][idx], a[1][idx])

    @staticmethod
    def put(a, idx, v) -> None:
        a[0][idx] = v[0]
        a[1][idx] = v[1]

    @staticmethod
    def const(v, n: int):
        return (_Fq.const(v[0], n), _Fq.const(v[1], n))

    @staticmethod
    def inv(a):
        a0, a1 = a[0] % _QM, a[1] % _QM
        t = _inv_many((a0 * a0 + a1 * a1) % _QM)
        return (a0 * t % _QM, (-a1) * t % _QM)

    @staticmethod
    def row(a, i: int):
        return (int(a[0][i]) % Q, int(a[1][i]) % Q)

    @staticmethod
    def set_row(a, i: int, v) -> None:
        a[0][i] = fast_int(v[0])
        a[1][i] = fast_int(v[1])

    @staticmethod
    def concat(parts):
        return (np.concatenate([p[0] for p in parts]), np.concatenate([p[1] for p in parts]))


def _field(group: Group):
    return _Fq if group is G1 else _Fq2


def _ones(F, n: int):
    return F.const(1 if F is _Fq else (1, 0), n)


def _zeros(F, n: int):
    return F.const(0 if F is _Fq else (0, 0), n)


def _beta(group: Group) -> int:
    return GLV_BETA_G1 if group is G1 else GLV_BETA_G2


# --- vectorised points ------------------------------------------------------------------
#
# Affine vector: (x, y, inf) with inf a bool array (rows with inf have arbitrary x, y).
# Jacobian vector: (X, Y, Z); Z == 0 is infinity.


def _jac_dbl(F, p):
    """dbl-2009-l on every row (a = 0); Z = 0 stays 0, and no finite point has Y = 0."""
    X, Y, Z = p
    A = F.sqr(X)
    B = F.sqr(Y)
    C = F.sqr(B)
    D = F.sub(F.sqr(F.add(X, B)), F.add(A, C))
    D = F.add(D, D)
    E = F.add(F.add(A, A), A)
    X3 = F.sub(F.sqr(E), F.add(D, D))
    C8 = F.small(C, 8)
    Y3 = F.sub(F.mul(E, F.sub(D, X3)), C8)
    Z3 = F.mul(Y, Z)
    return X3, Y3, F.add(Z3, Z3)


def _jac_madd(group: Group, p, x2, y2, q_inf: np.ndarray):
    """Row-wise p + (x2, y2): Jacobian plus affine (madd-2007-bl), complete: rows with q_inf keep p,
    rows with p at infinity take q, and P ± P rows are finished by :func:`bn254.jac_add_affine`."""
    F = _field(group)
    X1, Y1, Z1 = p
    Z1Z1 = F.sqr(Z1)
    U2 = F.mul(x2, Z1Z1)
    S2 = F.mul(y2, F.mul(Z1, Z1Z1))
    H = F.sub(U2, X1)
    HH = F.sqr(H)
    I = F.small(HH, 4)
    J = F.mul(H, I)
    rr = F.sub(S2, Y1)
    rr = F.add(rr, rr)
    V = F.mul(X1, I)
    X3 = F.sub(F.sub(F.sqr(rr), J), F.add(V, V))
    Y1J = F.mul(Y1, J)
    Y3 = F.sub(F.mul(rr, F.sub(V, X3)), F.add(Y1J, Y1J))
    Z3 = F.sub(F.sqr(F.add(Z1, H)), F.add(Z1Z1, HH))
    p_inf = F.is_zero(Z1)
    special = F.is_zero(H) & ~p_inf & ~q_inf
    one_v = _ones(F, len(q_inf))
    X3 = F.where(q_inf, X1, F.where(p_inf, x2, X3))
    Y3 = F.where(q_inf, Y1, F.where(p_inf, y2, Y3))
    Z3 = F.where(q_inf, Z1, F.where(p_inf, one_v, Z3))
    for i in np.flatnonzero(special):
        r = bn254.jac_add_affine(group, (F.row(X1, i), F.row(Y1, i), F.row(Z1, i)), (F.row(x2, i), F.row(y2, i)))
        F.set_row(X3, i, r[0])
        F.set_row(Y3, i, r[1])
        F.set_row(Z3, i, r[2])
    return X3, Y3, Z3


def _to_affine(group: Group, p):
    """Jacobian rows to affine (x, y, inf) with one batch inversion."""
    F = _field(group)
    X, Y, Z = p
    inf = F.is_zero(Z)
    one = _ones(F, len(inf))
    zi = F.inv(F.where(inf, one, Z))
    zi2 = F.sqr(zi)
    return F.mul(X, zi2), F.mul(Y, F.mul(zi2, zi)), inf


def _neg_y(F, y, m: np.ndarray):
    return F.where(m, F.neg(y), y)


def mul_many(group: Group, pts, scalars: Sequence[int], c: int = WINDOW):
    """Row-wise [k_i]·P_i for affine rows ``pts`` = (x, y, inf) and scalars k_i (any ints, reduced
    mod r); returns Jacobian rows. GLV-split fixed-window ladder, vectorised over the rows."""
    F = _field(group)
    x, y, inf = pts
    n = len(inf)
    ks = [int(k) % R for k in scalars]
    dead = inf | np.array([k == 0 for k in ks], dtype=bool)
    # dead rows compute with a dummy finite point and end at infinity
    gen = F.const(group.generator[0], n), F.const(group.generator[1], n)
    x, y = F.where(dead, gen[0], x), F.where(dead, gen[1], y)
    nw = -(-GLV_BITS // c)
    d1 = np.zeros((n, nw), dtype=np.int64)
    d2 = np.zeros((n, nw), dtype=np.int64)
    for i, k in enumerate(ks):
        k1, k2 = glv_split(k)
        s1, s2 = (-1 if k1 < 0 else 1), (-1 if k2 < 0 else 1)
        d1[i] = [s1 * d for d in signed_digits(abs(k1), c)]
        d2[i] = [s2 * d for d in signed_digits(abs(k2), c)]
    # table [1 .. 2^(c-1)]·P, affine; entry m - 1 of row i at flat index (m - 1)·n + i
    size = 1 << (c - 1)
    no = np.zeros(n, dtype=bool)
    one = _ones(F, n)
    jac = [(x, y, one)]
    if size > 1:
        jac.append(_jac_dbl(F, jac[0]))
    for _ in range(2, size):
        jac.append(_jac_madd(group, jac[-1], x, y, no))
    tx, ty, _ = _to_affine(group, tuple(F.concat([j[t] for j in jac]) for t in range(3)))
    tbx = F.scale(tx, _beta(group))
    rows = np.arange(n)
    acc = (one, one, _zeros(F, n))
    for w in range(nw - 1, -1, -1):
        if w != nw - 1:
            for _ in range(c):
                acc = _jac_dbl(F, acc)
        for digits, tabx in ((d1[:, w], tx), (d2[:, w], tbx)):
            mag = np.abs(digits)
            idx = (np.maximum(mag, 1) - 1) * n + rows
            ex = F.take(tabx, idx)
            ey = _neg_y(F, F.take(ty, idx), digits < 0)
            acc = _jac_madd(group, acc, ex, ey, mag == 0)
    X, Y, Z = acc
    zero = _zeros(F, n)
    return X, Y, F.where(dead, zero, Z)


# --- limb conversion ---------------------------------------------------------------------


def _coords_from_limbs(limbs: np.ndarray) -> np.ndarray:
    """(n, 8k) Montgomery limbs -> (k, n) object array of standard-form coordinates."""
    a = np.ascontiguousarray(limbs, dtype="<u4")
    raw = a.tobytes()
    vals = np.empty(len(raw) // 32, dtype=object)
    vals[:] = [fast_int(int.from_bytes(raw[i : i + 32], "little")) for i in range(0, len(raw), 32)]
    return (vals * FQ_MONT_INV % Q).reshape(a.shape[0], -1).T


def affine_from_limbs(group: Group, limbs: np.ndarray):
    """(n, 16|32) Montgomery limb rows -> vectorised affine points (x, y, inf)."""
    a = np.asarray(limbs).reshape(-1, group.limbs)
    inf = ~a.any(axis=1)
    c = _coords_from_limbs(a)
    if group is G1:
        return c[0].copy(), c[1].copy(), inf
    return (c[0].copy(), c[1].copy()), (c[2].copy(), c[3].copy()), inf


def affine_to_limbs(group: Group, pts) -> np.ndarray:
    """Vectorised affine points -> (n, 16|32) Montgomery limb rows, infinity as zeros."""
    x, y, inf = pts
    cols = [x, y] if group is G1 else [x[0], x[1], y[0], y[1]]
    m = np.stack([c * FQ_MONT % Q for c in cols], axis=1).reshape(-1)
    raw = b"".join(int(v).to_bytes(32, "little") for v in m)
    out = np.frombuffer(raw, dtype="<u4").reshape(len(inf), group.limbs).copy()
    out[inf] = 0
    return out


# --- the iFFT ----------------------------------------------------------------------------


def _bitrev(n: int) -> np.ndarray:
    bits = n.bit_length() - 1
    idx = np.arange(n)
    rev = np.zeros(n, dtype=np.intp)
    for b in range(bits):
        rev |= ((idx >> b) & 1) << (bits - 1 - b)
    return rev


def _butterfly(group: Group, t, u):
    """(u + t, u − t) for Jacobian t and affine u rows, as Jacobian rows (lo half, then hi half)."""
    F = _field(group)
    tx, ty, tz = t
    ux, uy, uinf = u
    neg_t = (tx, F.neg(ty), tz)
    both = tuple(F.concat([a, b]) for a, b in zip(t, neg_t))
    return _jac_madd(group, both, F.concat([ux, ux]), F.concat([uy, uy]), np.concatenate([uinf, uinf]))


def _scaled_butterflies(group: Group, lo_pts, hi_pts, twiddles: Sequence[int], scale: int):
    """([s]u + [s·w_i]v, [s]u − [s·w_i]v) for affine rows u = ``lo_pts``, v = ``hi_pts``, twiddles w_i
    and scale s: the lo results, then the hi results, as vectorised affine points."""
    F = _field(group)
    h = len(lo_pts[2])
    both = tuple(F.concat([a, b]) if t < 2 else np.concatenate([a, b]) for t, (a, b) in enumerate(zip(hi_pts, lo_pts)))
    res = mul_many(group, both, [w * scale for w in twiddles] + [scale] * h)
    t = tuple(F.take(c, np.arange(h)) for c in res)
    u = _to_affine(group, tuple(F.take(c, np.arange(h, 2 * h)) for c in res))
    return _to_affine(group, _butterfly(group, t, u))


def ifft_points(group: Group, pts, omega: int, scale: int):
    """out[i] = scale · Σ_j ω^(-ij) · in[j] on vectorised affine points of power-of-two length n
    (ω of order n); returns vectorised affine points in natural order."""
    F = _field(group)
    x, y, inf = pts
    n = len(inf)
    if n & (n - 1) or n == 0:
        raise ValueError(f"iFFT size {n} is not a power of two")
    if n == 1:
        if scale % R == 1:
            return pts
        return _to_affine(group, mul_many(group, pts, [scale]))
    rev = _bitrev(n)
    cur = (F.take(x, rev), F.take(y, rev), inf[rev])
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
        hi_pts = (F.take(cur[0], hi), F.take(cur[1], hi), cur[2][hi])
        lo_pts = (F.take(cur[0], lo), F.take(cur[1], lo), cur[2][lo])
        h = len(lo)
        if m == n and scale % R != 1:  # last stage: fold the scaling in
            out = _scaled_butterflies(group, lo_pts, hi_pts, [tw[k] for k in j], scale)
        else:
            one = _ones(F, h)
            zero = _zeros(F, h)
            t = (hi_pts[0], hi_pts[1], F.where(hi_pts[2], zero, one))
            live = np.flatnonzero(j != 0)
            if live.size:
                sub = (F.take(hi_pts[0], live), F.take(hi_pts[1], live), hi_pts[2][live])
                res = mul_many(group, sub, [tw[k] for k in j[live]])
                for a, b in zip(t, res):
                    F.put(a, live, b)
            u = lo_pts
            out = _to_affine(group, _butterfly(group, t, u))
        nx, ny = _zeros(F, n), _zeros(F, n)
        ninf = np.zeros(n, dtype=bool)
        pos = np.concatenate([lo, hi])
        F.put(nx, pos, out[0])
        F.put(ny, pos, out[1])
        ninf[pos] = out[2]
        cur = (nx, ny, ninf)
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
    F = _field(group)
    a = np.asarray(limbs).reshape(-1, group.limbs)
    if a.shape[0] != 2 * m:
        raise ValueError(f"coset level needs {2 * m} points, got {a.shape[0]}")
    pts = affine_from_limbs(group, a)
    t0 = tuple(F.take(c, np.arange(m)) if i < 2 else c[:m] for i, c in enumerate(pts))
    t1 = tuple(F.take(c, np.arange(m, 2 * m)) if i < 2 else c[m:] for i, c in enumerate(pts))
    s = pow(g, m, R)
    kk = pow((1 - s) % R, -1, R)
    ginv = pow(g, -1, R)
    # t1 - S t0  and  t0 - t1, as Jacobian rows, then to affine
    st0 = mul_many(group, t0, [(-s) % R] * m)
    d0 = _to_affine(group, _jac_madd(group, st0, t1[0], t1[1], t1[2]))
    neg_t1 = (t1[0], F.neg(t1[1]), t1[2])
    one = _ones(F, m)
    zero = _zeros(F, m)
    d1 = _to_affine(group, _jac_madd(group, (neg_t1[0], neg_t1[1], F.where(t1[2], zero, one)), t0[0], t0[1], t0[2]))
    w = bn254.root_of_unity(k)
    minv = pow(m, -1, R)
    # the K, K·g^-j factors ride on the iFFT inputs
    e0 = _to_affine(group, mul_many(group, d0, [kk] * m))
    e1 = _to_affine(group, mul_many(group, d1, [kk * pow(ginv, j, R) for j in range(m)]))
    o0 = ifft_points(group, e0, w, minv)
    o1 = ifft_points(group, e1, w, minv)
    return np.concatenate([affine_to_limbs(group, o0), affine_to_limbs(group, o1)])
