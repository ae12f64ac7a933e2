"""The GLV endomorphism of BN254, shared by the group iFFT (CPU and GPU) and the batch check.

φ(x, y) = (β·x, y) is multiplication by λ on G1 (β a cube root of unity in Fq) and, with β²
embedded in Fq2, on G2, for the one λ below (a cube root of unity in Fr). A scalar k splits as
k ≡ k1 + k2·λ (mod r) with |k1|, |k2| < 2^127 (:func:`split`), so a multiplication needs a
128-bit doubling chain instead of a 254-bit one. The other root pair, (λ², β²), is the same map
squared; :mod:`distprove.verifier` uses it for its ρ (``kernels/batchcheck.cu`` holds that β).
Plain Python integers: importing this loads nothing else.
"""

from __future__ import annotations

from typing import Any

from distprove.bn254 import Q, R

LAMBDA = 4407920970296243842393367215006156084916469457145843978461
"""λ: a primitive cube root of unity in Fr with [λ]P = (β·x, y) on both groups."""
BETA_G1 = 2203960485148121921418603742825762020974279258880205651966
"""β for G1 (a primitive cube root of unity in Fq)."""
BETA_G2 = BETA_G1 * BETA_G1 % Q
"""β for G2 (the other cube root; embedded in Fq2 with c1 = 0)."""
BITS = 128
"""Magnitudes of k1, k2 are below 2^127; digits are recoded over 128 bits."""


def _lattice() -> tuple[tuple[int, int], tuple[int, int]]:
    """Short basis (a1, b1), (a2, b2) of {(x, y): x + y·λ ≡ 0 mod r} by the extended Euclidean
    algorithm on (r, λ) (Hankerson-Menezes-Vanstone, Algorithm 3.74)."""
    r0, r1 = R, LAMBDA
    t0, t1 = 0, 1
    bound = 1 << 127  # ~ sqrt(r)
    while r1 >= bound:
        q = r0 // r1
        r0, r1 = r1, r0 - q * r1
        t0, t1 = t1, t0 - q * t1
    # now r0 >= sqrt(r) > r1: (r1, -t1) is the first vector; the second is the shorter of
    # (r0, -t0) and the next remainder's vector.
    q = r0 // r1
    r2, t2 = r0 - q * r1, t0 - q * t1
    second = (r0, -t0) if r0 * r0 + t0 * t0 <= r2 * r2 + t2 * t2 else (r2, -t2)
    return (r1, -t1), second


BASIS = _lattice()
"""The short lattice basis ((a1, b1), (a2, b2)) that :func:`split` rounds against (det = -r)."""


def split(k: Any) -> tuple[Any, Any]:
    """Signed (k1, k2) with k ≡ k1 + k2·λ (mod r) and |k1|, |k2| < 2^127: for a Python int, or
    element-wise for a NumPy object array of them."""
    (a1, b1), (a2, b2) = BASIS
    k = k % R
    det = a1 * b2 - a2 * b1
    c1 = (b2 * k * 2 + det) // (2 * det)  # round(b2·k / det)
    c2 = (-b1 * k * 2 + det) // (2 * det)  # round(-b1·k / det)
    return k - c1 * a1 - c2 * a2, -c1 * b1 - c2 * b2
