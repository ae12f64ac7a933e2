"""Fq and Fq2 arithmetic on fixed-width limbs, compiled by numba: the one implementation that the
CPU point check (:mod:`distprove.formats.pointcheck`), the CPU group iFFT
(:mod:`distprove.backends.cpu.groupfft`) and, for Fr, the dev setup's scalars
(:mod:`distprove.frlimbs`) share.

An Fq element is a tuple of eight 32-bit limbs (little-endian) held in uint64, so a limb product
plus two carries fits a word; values are in Montgomery form (x·2^256 mod q, as on disk) and always
fully reduced below q, so equality and zero tests compare limbs. Products are CIOS Montgomery
(8 × 8 limb steps). Products, sums and the inverse are written once for any odd modulus below
2^255 (``mont_mul``, ``mod_add``, ``mod_sub``, ``mont_inv`` take it as an argument, which numba
folds in as a constant where the caller passes one): the ``fq_*`` functions bind q,
:mod:`distprove.frlimbs` binds r. An Fq2 element is a pair (c0, c1) of Fq tuples (u² = −1); the ``e_*``
functions take the degree d (1 for G1, 2 for G2) at run time and leave c1 = 0 when d = 1, so one
compiled version of the curve code serves both groups (a G1 product costs one Fq product, a G2
product three).

Numba's on-disk cache is keyed on the source file of each compiled entry point (here: the point
check's, the group iFFT's and the Fr kernels), not on this module: after editing it in a checkout, delete
the users' ``__pycache__/*.nbi`` and ``*.nbc`` files (the test suite drops those older than this
file when it starts).
"""

from __future__ import annotations

import numpy as np
from numba import njit

from distprove import bn254

_M32 = np.uint64(0xFFFFFFFF)
_S32 = np.uint64(32)
_ZERO = np.uint64(0)
_ONE = np.uint64(1)


def limbs_of(v: int) -> tuple:
    """The eight 32-bit limbs of 0 <= v < 2^256 as a tuple of uint64."""
    return tuple(np.uint64((v >> (32 * i)) & 0xFFFFFFFF) for i in range(8))


_Q = limbs_of(bn254.Q)
_QINV = np.uint64((-pow(bn254.Q, -1, 1 << 32)) % (1 << 32))
_QM2 = limbs_of(bn254.Q - 2)
ZERO = limbs_of(0)
"""0 in Fq."""
ONE = limbs_of(bn254.FQ_MONT)
"""1 in Fq (Montgomery form: 2^256 mod q)."""


@njit(cache=True)
def fq_ge_q(t: tuple) -> bool:
    """t >= q for 8 limbs."""
    for k in range(7, -1, -1):
        if t[k] != _Q[k]:
            return t[k] > _Q[k]
    return True


@njit(cache=True)
def mod_reduce(t: tuple, carry: np.uint64, p: tuple) -> tuple:
    """t + carry·2^256 reduced once: t − p when that is >= 0 (the value is below 2p)."""
    t0, t1, t2, t3, t4, t5, t6, t7 = t
    d = t0 - p[0]
    d0, b = d & _M32, (d >> _S32) & _ONE
    d = t1 - p[1] - b
    d1, b = d & _M32, (d >> _S32) & _ONE
    d = t2 - p[2] - b
    d2, b = d & _M32, (d >> _S32) & _ONE
    d = t3 - p[3] - b
    d3, b = d & _M32, (d >> _S32) & _ONE
    d = t4 - p[4] - b
    d4, b = d & _M32, (d >> _S32) & _ONE
    d = t5 - p[5] - b
    d5, b = d & _M32, (d >> _S32) & _ONE
    d = t6 - p[6] - b
    d6, b = d & _M32, (d >> _S32) & _ONE
    d = t7 - p[7] - b
    d7, b = d & _M32, (d >> _S32) & _ONE
    if b > carry:
        return t
    return (d0, d1, d2, d3, d4, d5, d6, d7)


@njit(cache=True)
def mont_mul(a: tuple, b: tuple, p: tuple, pinv: np.uint64) -> tuple:
    """a·b·2^-256 mod p (CIOS, one 32-bit word of b a round) for an odd 254-bit modulus p with
    pinv = −p^-1 mod 2^32; inputs < p, limbs < 2^32 in uint64."""
    a0, a1, a2, a3, a4, a5, a6, a7 = a
    q0, q1, q2, q3, q4, q5, q6, q7 = p[0], p[1], p[2], p[3], p[4], p[5], p[6], p[7]
    t0 = t1 = t2 = t3 = t4 = t5 = t6 = t7 = t8 = _ZERO
    for i in range(8):
        bi = b[i]
        s = t0 + a0 * bi
        t0, c = s & _M32, s >> _S32
        s = t1 + a1 * bi + c
        t1, c = s & _M32, s >> _S32
        s = t2 + a2 * bi + c
        t2, c = s & _M32, s >> _S32
        s = t3 + a3 * bi + c
        t3, c = s & _M32, s >> _S32
        s = t4 + a4 * bi + c
        t4, c = s & _M32, s >> _S32
        s = t5 + a5 * bi + c
        t5, c = s & _M32, s >> _S32
        s = t6 + a6 * bi + c
        t6, c = s & _M32, s >> _S32
        s = t7 + a7 * bi + c
        t7, c = s & _M32, s >> _S32
        s = t8 + c
        t8, t9 = s & _M32, s >> _S32
        m = (t0 * pinv) & _M32
        c = (t0 + m * q0) >> _S32
        s = t1 + m * q1 + c
        t0, c = s & _M32, s >> _S32
        s = t2 + m * q2 + c
        t1, c = s & _M32, s >> _S32
        s = t3 + m * q3 + c
        t2, c = s & _M32, s >> _S32
        s = t4 + m * q4 + c
        t3, c = s & _M32, s >> _S32
        s = t5 + m * q5 + c
        t4, c = s & _M32, s >> _S32
        s = t6 + m * q6 + c
        t5, c = s & _M32, s >> _S32
        s = t7 + m * q7 + c
        t6, c = s & _M32, s >> _S32
        s = t8 + c
        t7, t8 = s & _M32, t9 + (s >> _S32)
    return mod_reduce((t0, t1, t2, t3, t4, t5, t6, t7), t8, p)


@njit(cache=True)
def fq_mul(a: tuple, b: tuple) -> tuple:
    """a·b·2^-256 mod q; inputs < q."""
    return mont_mul(a, b, _Q, _QINV)


@njit(cache=True)
def mod_add(a: tuple, b: tuple, p: tuple) -> tuple:
    """a + b mod p (inputs < p < 2^255)."""
    s = a[0] + b[0]
    t0, c = s & _M32, s >> _S32
    s = a[1] + b[1] + c
    t1, c = s & _M32, s >> _S32
    s = a[2] + b[2] + c
    t2, c = s & _M32, s >> _S32
    s = a[3] + b[3] + c
    t3, c = s & _M32, s >> _S32
    s = a[4] + b[4] + c
    t4, c = s & _M32, s >> _S32
    s = a[5] + b[5] + c
    t5, c = s & _M32, s >> _S32
    s = a[6] + b[6] + c
    t6, c = s & _M32, s >> _S32
    s = a[7] + b[7] + c
    return mod_reduce((t0, t1, t2, t3, t4, t5, t6, s & _M32), s >> _S32, p)


@njit(cache=True)
def fq_add(a: tuple, b: tuple) -> tuple:
    """a + b mod q."""
    return mod_add(a, b, _Q)


@njit(cache=True)
def mod_sub(a: tuple, b: tuple, p: tuple) -> tuple:
    """a - b mod p (inputs < p)."""
    d = a[0] - b[0]
    t0, w = d & _M32, (d >> _S32) & _ONE
    d = a[1] - b[1] - w
    t1, w = d & _M32, (d >> _S32) & _ONE
    d = a[2] - b[2] - w
    t2, w = d & _M32, (d >> _S32) & _ONE
    d = a[3] - b[3] - w
    t3, w = d & _M32, (d >> _S32) & _ONE
    d = a[4] - b[4] - w
    t4, w = d & _M32, (d >> _S32) & _ONE
    d = a[5] - b[5] - w
    t5, w = d & _M32, (d >> _S32) & _ONE
    d = a[6] - b[6] - w
    t6, w = d & _M32, (d >> _S32) & _ONE
    d = a[7] - b[7] - w
    t7, w = d & _M32, (d >> _S32) & _ONE
    if w == _ZERO:
        return (t0, t1, t2, t3, t4, t5, t6, t7)
    s = t0 + p[0]
    t0, c = s & _M32, s >> _S32
    s = t1 + p[1] + c
    t1, c = s & _M32, s >> _S32
    s = t2 + p[2] + c
    t2, c = s & _M32, s >> _S32
    s = t3 + p[3] + c
    t3, c = s & _M32, s >> _S32
    s = t4 + p[4] + c
    t4, c = s & _M32, s >> _S32
    s = t5 + p[5] + c
    t5, c = s & _M32, s >> _S32
    s = t6 + p[6] + c
    t6, c = s & _M32, s >> _S32
    s = t7 + p[7] + c
    return (t0, t1, t2, t3, t4, t5, t6, s & _M32)


@njit(cache=True)
def fq_sub(a: tuple, b: tuple) -> tuple:
    """a - b mod q."""
    return mod_sub(a, b, _Q)


@njit(cache=True)
def fq_neg(a: tuple) -> tuple:
    """-a mod q (0 stays 0)."""
    return fq_sub(ZERO, a)


@njit(cache=True)
def mont_inv(a: tuple, p: tuple, pinv: np.uint64, pm2: tuple, one: tuple) -> tuple:
    """a^-1 mod p (Montgomery in, Montgomery out) as a^(p-2), with pm2 = the limbs of p − 2 and
    one = 2^256 mod p; 0 gives 0."""
    r = one
    for k in range(7, -1, -1):
        w = pm2[k]
        for bit in range(31, -1, -1):
            r = mont_mul(r, r, p, pinv)
            if (w >> np.uint64(bit)) & _ONE:
                r = mont_mul(r, a, p, pinv)
    return r


@njit(cache=True)
def fq_inv(a: tuple) -> tuple:
    """a^-1 (Montgomery in, Montgomery out) as a^(q-2); a != 0."""
    return mont_inv(a, _Q, _QINV, _QM2, ONE)


# --- Fq2 (d = 2) or Fq (d = 1) elements: pairs (c0, c1) -----------------------------------


@njit(cache=True)
def e_add(a: tuple, b: tuple, d: int) -> tuple:
    """a + b."""
    return (fq_add(a[0], b[0]), fq_add(a[1], b[1]) if d == 2 else ZERO)


@njit(cache=True)
def e_sub(a: tuple, b: tuple, d: int) -> tuple:
    """a - b."""
    return (fq_sub(a[0], b[0]), fq_sub(a[1], b[1]) if d == 2 else ZERO)


@njit(cache=True)
def e_neg(a: tuple, d: int) -> tuple:
    """-a."""
    return (fq_neg(a[0]), fq_neg(a[1]) if d == 2 else ZERO)


@njit(cache=True)
def e_mul(a: tuple, b: tuple, d: int) -> tuple:
    """a·b (Karatsuba in Fq2: three Fq products)."""
    if d == 1:
        return (fq_mul(a[0], b[0]), ZERO)
    t0 = fq_mul(a[0], b[0])
    t1 = fq_mul(a[1], b[1])
    t2 = fq_mul(fq_add(a[0], a[1]), fq_add(b[0], b[1]))
    return (fq_sub(t0, t1), fq_sub(fq_sub(t2, t0), t1))


@njit(cache=True)
def e_sqr(a: tuple, d: int) -> tuple:
    """a² (in Fq2: (c0 + c1)(c0 − c1), 2·c0·c1)."""
    if d == 1:
        return (fq_mul(a[0], a[0]), ZERO)
    p = fq_mul(a[0], a[1])
    return (fq_mul(fq_add(a[0], a[1]), fq_sub(a[0], a[1])), fq_add(p, p))


@njit(cache=True)
def e_scale(a: tuple, s: tuple, d: int) -> tuple:
    """a·s for an Fq element s."""
    return (fq_mul(a[0], s), fq_mul(a[1], s) if d == 2 else ZERO)


@njit(cache=True)
def e_is_zero(a: tuple) -> bool:
    """a == 0."""
    return a[0] == ZERO and a[1] == ZERO


@njit(cache=True)
def e_inv(a: tuple, d: int) -> tuple:
    """a^-1 for a != 0 (in Fq2: conj(a) / (c0² + c1²))."""
    if d == 1:
        return (fq_inv(a[0]), ZERO)
    t = fq_inv(fq_add(fq_mul(a[0], a[0]), fq_mul(a[1], a[1])))
    return (fq_mul(a[0], t), fq_neg(fq_mul(a[1], t)))


@njit(cache=True)
def e_load(a: np.ndarray, i: int, c: int, d: int) -> tuple:
    """Element ``c`` of row i of a (rows, elements·d, 8) uint64 array (component j at c·d + j)."""
    o = c * d
    r = a[i, o]
    c0 = (r[0], r[1], r[2], r[3], r[4], r[5], r[6], r[7])
    if d == 1:
        return (c0, ZERO)
    r = a[i, o + 1]
    return (c0, (r[0], r[1], r[2], r[3], r[4], r[5], r[6], r[7]))


@njit(cache=True)
def e_store(a: np.ndarray, i: int, c: int, d: int, v: tuple) -> None:
    """Write element v as element ``c`` of row i (the layout of :func:`e_load`)."""
    o = c * d
    for k in range(8):
        a[i, o, k] = v[0][k]
    if d == 2:
        for k in range(8):
            a[i, o + 1, k] = v[1][k]
