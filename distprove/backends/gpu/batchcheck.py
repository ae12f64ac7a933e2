"""The batched Groth16 check's per-proof work on the GPU (kernels/batchcheck.cu, in the "pairing"
module), feeding the Miller product kernel on the device.

:class:`DeviceProofs` uploads B proofs' points and batch coefficients (one vectorised Montgomery
conversion for all of them), runs one thread a proof (pi_b's G2 subgroup test, -ρ_i·pi_a_i,
ρ_i·pi_c_i) and reads back only the B subgroup answers; :meth:`DeviceProofs.miller_product` then
runs one Miller product over the pairs (-ρ_i·pi_a_i, pi_b_i) and (ρ_i·pi_c_i, δ₂ of the proof's
key), whose G1 rows never leave the device, and the caller's few fixed pairs. CuPy is imported
lazily.
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np

from distprove import bn254
from distprove import pairing as pr

from .compile import get_module
from .pairing import Pair, miller_product_rows, mont_limbs, pairs_to_limbs

BLOCK = 64
"""Threads a block of batchcheck_points (BATCHCHECK_BLOCK in batchcheck.cu)."""

Proof = tuple[bn254.Affine, bn254.Affine, bn254.Affine]
Rho = tuple[int, int]


def proof_rows(proofs: Sequence[Proof], rhos: Sequence[Rho]) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
    """The kernel's inputs: (n, 16) pi_a, (n, 32) pi_b and (n, 16) pi_c Montgomery rows (infinity
    all zero) and (n, 4) u32 words of each (ρ₁, ρ₂), low word first."""
    n = len(proofs)
    coords: list[int] = []
    for a, b, c in proofs:
        coords.extend((0, 0) if a is None else a)
        coords.extend((0, 0, 0, 0) if b is None else (*b[0], *b[1]))
        coords.extend((0, 0) if c is None else c)
    rows = mont_limbs(coords).reshape(n, 64)
    words = np.frombuffer(b"".join(r1.to_bytes(8, "little") + r2.to_bytes(8, "little") for r1, r2 in rhos),
                          dtype="<u4").reshape(n, 4)
    return (np.ascontiguousarray(rows[:, :16]), np.ascontiguousarray(rows[:, 16:48]),
            np.ascontiguousarray(rows[:, 48:]), np.ascontiguousarray(words))


class DeviceProofs:
    """B proofs' share of a batch check, computed on the GPU when constructed.

    ``proofs``: (pi_a, pi_b, pi_c) affine, pi_a and pi_b finite; ``rhos``: their coefficients
    ρ = ρ₁ + λ·ρ₂ (:data:`distprove.verifier.Rho`); ``delta2``: each proof's key's δ₂ (in G2).
    :attr:`inside` says which pi_b lie in G2; a proof whose pi_b does not contributes nothing to
    :meth:`miller_product` (its G1 rows are infinity).
    """

    def __init__(self, proofs: Sequence[Proof], rhos: Sequence[Rho], delta2: Sequence[bn254.Affine]) -> None:
        import cupy as cp

        n = len(proofs)
        a, b, c, rho = proof_rows(proofs, rhos)
        distinct = list(dict.fromkeys(delta2))
        at = {q: j for j, q in enumerate(distinct)}
        _, delta_rows = pairs_to_limbs([(None, q) for q in distinct])
        self._d_b = cp.asarray(b)
        self._d_delta = cp.asarray(np.ascontiguousarray(delta_rows[[at[q] for q in delta2]].reshape(n, 32)))
        self._d_neg_a = cp.empty((n, 16), dtype=cp.uint32)
        self._d_rho_c = cp.empty((n, 16), dtype=cp.uint32)
        d_inside = cp.empty(n, dtype=cp.uint32)
        if n:
            get_module("pairing").get_function("batchcheck_points")(
                ((n + BLOCK - 1) // BLOCK,), (BLOCK,),
                (cp.asarray(a), self._d_b, cp.asarray(c), cp.asarray(rho), self._d_neg_a, self._d_rho_c, d_inside,
                 np.uint32(n)))
        self.inside: np.ndarray = cp.asnumpy(d_inside).astype(bool)
        """(B,) whether each pi_b lies in G2 (verifier.in_g2_subgroup's answer)."""

    def multiples(self) -> tuple[list[bn254.Affine], list[bn254.Affine]]:
        """-ρ_i·pi_a_i and ρ_i·pi_c_i read back as affine points (None where pi_b is outside G2, or
        for infinity): for tests and diagnostics, the check itself never reads them."""
        import cupy as cp

        return (bn254.points_from_limbs(bn254.G1, cp.asnumpy(self._d_neg_a)),
                bn254.points_from_limbs(bn254.G1, cp.asnumpy(self._d_rho_c)))

    def miller_product(self, fixed: Sequence[Pair]) -> pr.Fq12:
        """The product of the Miller loops of every (-ρ_i·pi_a_i, pi_b_i) and (ρ_i·pi_c_i, δ₂_i)
        and of the ``fixed`` pairs (host points), from one Miller launch and one Fq12 read back."""
        import cupy as cp

        g1, g2 = pairs_to_limbs(fixed)
        return miller_product_rows(cp.concatenate([self._d_neg_a, self._d_rho_c, cp.asarray(g1)]),
                                   cp.concatenate([self._d_b, self._d_delta, cp.asarray(g2)]))
