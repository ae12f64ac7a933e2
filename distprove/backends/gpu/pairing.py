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


def pairs_to_limbs(pairs: Sequence[Pair]) -> tuple[np.ndarray, np.ndarray]:
    """The (k, 16) G1 and (k, 32) G2 rows (Montgomery limbs, infinity all zero) of (P_i, Q_i)."""
    return (bn254.points_to_limbs(bn254.G1, [p for p, _ in pairs]).reshape(-1, 16),
            bn254.points_to_limbs(bn254.G2, [q for _, q in pairs]).reshape(-1, 32))


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
