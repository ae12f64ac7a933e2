"""BN254 Miller loops on the GPU (kernels/pairing.cu, via NVRTC), one pair a thread.

The values are :func:`distprove.pairing.miller_loop`'s to the bit, in its Fq12 tuples, so the host
can mix them with its own and finish with one final exponentiation. A batch check hands its
(P_i, Q_i) pairs (e.g. (-ρ_i·pi_a_i, pi_b_i)) to :func:`miller_product` in one call: one upload,
one Miller launch ending in per-block products, product launches 64 to 1, one Fq12 read back.
A pair the kernel flags as degenerate (a Q outside G2 whose multiples meet a vertical line, where
pairing.py takes py_ecc's loop) is computed on the host. CuPy is imported lazily.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import numpy as np

from distprove import bn254
from distprove import pairing as pr

from .compile import get_module

BLOCK = 64
"""Threads a block of the pairing kernels (PAIRING_BLOCK in pairing.cu): also the fan-in of a
product launch."""
FQ12_WORDS = 96
"""u32 words of one Fq12 row: 12 Fq elements of 8 limbs, pairing.py's tuple order."""

Pair = tuple[bn254.Affine, bn254.Affine]


def _digit_rows(values: Sequence[int]) -> np.ndarray:
    """(16, len(values)) float64: row j holds the j-th little-endian 16-bit digit of each value."""
    raw = b"".join([v.to_bytes(32, "little") for v in values])
    return np.ascontiguousarray(np.frombuffer(raw, dtype="<u2").reshape(len(values), 16).T, dtype=np.float64)


_SHIFTED = _digit_rows([pow(2, 256 + 16 * k, bn254.Q) for k in range(16)]).T
"""Row k: the digits of 2^(256 + 16k) mod q: Σ_k x_k·row k is x·2^256 (mod q), x_k the digits of x."""
_Q_DIGITS = _digit_rows([bn254.Q])[:, 0].astype(np.int64)


def _carry(d: np.ndarray) -> np.ndarray:
    """Carry (m, n) int64 digit rows (n numbers, least significant digit first) into 16-bit digits
    in place, the last row keeping the rest (signed: a borrow leaves it negative)."""
    for j in range(d.shape[0] - 1):
        d[j + 1] += d[j] >> 16
        d[j] &= 0xFFFF
    return d


def mont_limbs(values: Sequence[int]) -> np.ndarray:
    """(n, 8) u32 Montgomery limbs (v·2^256 mod q) of n values < 2^256, vectorised: their 16-bit
    digits times the table of 2^(256 + 16k) mod q in one float64 product (every column sum below
    2^36, so exact), one quotient by q estimated in float64 from the top digits (never above the
    true one, at most 2 below), then at most two conditional subtractions of q."""
    n = len(values)
    if n == 0:
        return np.zeros((0, 8), dtype="<u4")
    s = np.zeros((17, n), dtype=np.int64)  # digit rows, one column per value
    s[:16] = np.einsum("kn,kj->jn", _digit_rows(values), _SHIFTED)  # numpy's own loop: no BLAS threads
    _carry(s)  # s < 16·2^16·q < 2^274: the top row below 2^18
    top = s[16] * 2.0**256 + s[15] * 2.0**240 + s[14] * 2.0**224
    quot = np.maximum(np.floor(top / float(bn254.Q)) - 1, 0).astype(np.int64)  # top/q is off by less than 2^-25
    s[:16] -= _Q_DIGITS[:, None] * quot[None, :]
    _carry(s)
    for _ in range(2):  # s in [0, 3q): subtract q where that leaves it >= 0
        t = s.copy()
        t[:16] -= _Q_DIGITS[:, None]
        _carry(t)
        s = np.where(t[16] >= 0, t, s)
    return np.ascontiguousarray((s[0:16:2] | (s[1:16:2] << 16)).T).astype("<u4")


def pairs_to_limbs(pairs: Sequence[Pair]) -> tuple[np.ndarray, np.ndarray]:
    """The (k, 16) G1 and (k, 32) G2 rows (Montgomery limbs, infinity all zero) of (P_i, Q_i)."""
    g1 = [c for p, _ in pairs for c in ((0, 0) if p is None else p)]
    g2 = [c for _, q in pairs for c in ((0, 0, 0, 0) if q is None else (*q[0], *q[1]))]
    return mont_limbs(g1).reshape(-1, 16), mont_limbs(g2).reshape(-1, 32)


def fq12_from_limbs(rows: np.ndarray) -> list[pr.Fq12]:
    """pairing.py's Fq12 tuples of (k, 96) Montgomery rows."""
    mpz = pr.P.__class__
    flat = bn254.ints_from_limbs(np.ascontiguousarray(rows, dtype="<u4").reshape(-1, 8))
    c = [mpz(v * bn254.FQ_MONT_INV % bn254.Q) for v in flat]
    out = []
    for i in range(0, len(c), 12):
        f2 = [(c[i + 2 * j], c[i + 2 * j + 1]) for j in range(6)]
        out.append(((f2[0], f2[1], f2[2]), (f2[3], f2[4], f2[5])))
    return out


def fq12_to_limbs(values: Sequence[pr.Fq12]) -> np.ndarray:
    """(k, 96) Montgomery rows of pairing.py's Fq12 tuples."""
    flat = [int(x) for f in values for half in f for f2 in half for x in f2]
    return bn254.limbs_from_ints([bn254.fq_to_mont(v) for v in flat]).reshape(-1, FQ12_WORDS)


def _launch_miller(pairs: Sequence[Pair], product: bool) -> tuple[Any, Any]:
    """Upload the pairs and run the Miller kernel; return its device output and flags."""
    import cupy as cp

    g1, g2 = pairs_to_limbs(pairs)
    return launch_miller(cp.asarray(g1), cp.asarray(g2), product)


def launch_miller(d_g1: Any, d_g2: Any, product: bool) -> tuple[Any, Any]:
    """The Miller kernel over device rows ((k, 16) G1, (k, 32) G2 Montgomery limbs): (k, 96) values,
    or (ceil(k / BLOCK), 96) block products when ``product``; and the (k,) degenerate flags."""
    import cupy as cp

    k = d_g1.shape[0]
    blocks = (k + BLOCK - 1) // BLOCK
    d_out = cp.empty((blocks if product else k, FQ12_WORDS), dtype=cp.uint32)
    d_flags = cp.zeros(k, dtype=cp.uint32)
    name = "pairing_miller_product" if product else "pairing_miller"
    get_module("pairing").get_function(name)((blocks,), (BLOCK,), (d_g1, d_g2, d_out, d_flags, np.uint32(k)))
    return d_out, d_flags


def reduce_product(d_rows: Any) -> Any:
    """(1, 96): the product of (n, 96) device rows, by launches of fan-in :data:`BLOCK`."""
    import cupy as cp

    fn = get_module("pairing").get_function("pairing_fq12_product")
    while d_rows.shape[0] > 1:
        n = d_rows.shape[0]
        blocks = (n + BLOCK - 1) // BLOCK
        d_next = cp.empty((blocks, FQ12_WORDS), dtype=cp.uint32)
        fn((blocks,), (BLOCK,), (d_rows, d_next, np.uint32(n)))
        d_rows = d_next
    return d_rows


def miller_loops(pairs: Sequence[Pair]) -> list[pr.Fq12]:
    """[pairing.miller_loop(P_i, Q_i)] for (P_i, Q_i) affine (None = infinity), computed on the GPU."""
    import cupy as cp

    if not pairs:
        return []
    d_out, d_flags = _launch_miller(pairs, product=False)
    out = fq12_from_limbs(cp.asnumpy(d_out))
    for i in np.flatnonzero(cp.asnumpy(d_flags)):
        out[i] = pr.miller_loop(*pairs[i])
    return out


def miller_product(pairs: Sequence[Pair]) -> pr.Fq12:
    """prod_i pairing.miller_loop(P_i, Q_i) (what :func:`pairing.product_is_one` takes), computed on
    the GPU with one Fq12 read back."""
    import cupy as cp

    if not pairs:
        return pr.ONE
    d_out, d_flags = _launch_miller(pairs, product=True)
    out = fq12_from_limbs(cp.asnumpy(reduce_product(d_out)))[0]
    for i in np.flatnonzero(cp.asnumpy(d_flags)):
        out = pr.mul(out, pr.miller_loop(*pairs[i]))
    return out


def miller_product_rows(d_g1: Any, d_g2: Any) -> pr.Fq12:
    """:func:`miller_product` of pairs already on the device as (k, 16) G1 and (k, 32) G2 rows (e.g.
    kernels/batchcheck.cu's output): one Fq12 read back; a pair the kernel flags has its two rows
    read back and is looped on the host."""
    import cupy as cp

    if d_g1.shape[0] == 0:
        return pr.ONE
    d_out, d_flags = launch_miller(d_g1, d_g2, product=True)
    out = fq12_from_limbs(cp.asnumpy(reduce_product(d_out)))[0]
    flagged = np.flatnonzero(cp.asnumpy(d_flags))
    if flagged.size:
        d_idx = cp.asarray(flagged)
        ps = bn254.points_from_limbs(bn254.G1, cp.asnumpy(d_g1[d_idx]))
        qs = bn254.points_from_limbs(bn254.G2, cp.asnumpy(d_g2[d_idx]))
        for p, q in zip(ps, qs):
            out = pr.mul(out, pr.miller_loop(p, q))
    return out
