"""Groth16 proof assembly and blinding of a group of proofs on the GPU (kernels/assemble.cu, via NVRTC).

The points are :func:`distprove.stages.assemble.assemble`'s to the bit. A group costs one upload
(each proof's five MSM results and its r, s as standard-form limbs: a byte copy of the integers),
one launch (a G1 thread for pi_a and pi_c and a G2 thread for pi_b a proof) and one readback of
the standard-form affine proof points. The key's part (:func:`vk_words`: alpha1, beta1, beta2 and
comb tables of delta1 and delta2) is made and uploaded once per key. CuPy is imported lazily.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

import numpy as np

from distprove import bn254
from distprove.bn254 import G1, G2, Affine, Group
from distprove.groth16 import MSM_NAMES

from .compile import get_module

THREADS = 32
"""Threads a block (of one curve): a group is at most a few dozen proofs."""
G1_MSMS = ("A", "B1", "C", "H")
"""The G1 MSM results of a proof, in the order of its rows (ASM_G1_MSMS in assemble.cu)."""
COMB_QUARTERS = 4
"""A comb table's scalar quarters (64 bits each): entry m sums 2^(64 j) delta over the bits j of m."""

ProofPoints = tuple[Affine, Affine, Affine]


def comb_table(group: Group, p: Affine) -> list[Affine]:
    """The 16 points of ``p``'s comb table (assemble.cu's asm_comb): entry m is the sum over the
    bits j of m of 2^(64 j) p (entry 0: infinity, never read), by exact doublings (no reduction
    of the multiplier)."""
    quarters = [bn254.to_jacobian(group, p)]
    for _ in range(COMB_QUARTERS - 1):
        q = quarters[-1]
        for _ in range(64):
            q = bn254.jac_double(group, q)
        quarters.append(q)
    parts = bn254.batch_to_affine(group, quarters)
    table: list[Affine] = [None]
    for m in range(1, 1 << COMB_QUARTERS):
        low = m & -m
        table.append(bn254.add(group, table[m ^ low], parts[low.bit_length() - 1]))
    return table


def vk_words(points: Mapping[str, Affine]) -> np.ndarray:
    """(832,) uint32, assemble.cu's ASM_VK_WORDS: the key's alpha1 | beta1 | beta2 | delta1's
    :func:`comb_table` | delta2's, affine Montgomery limbs (the disk layout), infinity all zero."""
    parts = [bn254.points_to_limbs(G1, [points["alpha1"], points["beta1"]]), bn254.points_to_limbs(G2, [points["beta2"]]),
             bn254.points_to_limbs(G1, comb_table(G1, points["delta1"])),
             bn254.points_to_limbs(G2, comb_table(G2, points["delta2"]))]
    return np.concatenate([part.reshape(-1) for part in parts])


def blinding_words(blindings: Sequence[tuple[int, int]]) -> np.ndarray:
    """(k, 16) uint32 standard-form limbs r | s of each proof; ValueError unless 0 <= r, s < R."""
    for i, (r, s) in enumerate(blindings):
        if not (0 <= r < bn254.R and 0 <= s < bn254.R):
            raise ValueError(f"proof {i}'s blinding (r, s) is not in [0, R)")
    return bn254.limbs_from_ints([v for rs in blindings for v in rs]).reshape(-1, 16)


def assemble_group(
    vk: Any, msm_points: Sequence[Mapping[str, Affine]], blindings: Sequence[tuple[int, int]]
) -> list[ProofPoints]:
    """(pi_a, pi_b, pi_c) of each proof from its five MSM results ({which: affine point}, None =
    infinity) and its (r, s), with ``vk`` the device copy of the key's :func:`vk_words`."""
    k = len(msm_points)
    if len(blindings) != k:
        raise ValueError(f"{k} proofs' MSM results but {len(blindings)} blindings")
    for i, points in enumerate(msm_points):
        missing = [which for which in MSM_NAMES if which not in points]
        if missing:
            raise ValueError(f"assemble: proof {i} is missing MSM results {missing}")
    words = blinding_words(blindings)
    if k == 0:
        return []
    import cupy as cp

    g1 = bn254.points_to_limbs(G1, [p[which] for p in msm_points for which in G1_MSMS], mont=False).reshape(k, -1)
    g2 = bn254.points_to_limbs(G2, [p["B2"] for p in msm_points], mont=False)
    d_g1, d_g2, d_blind = cp.asarray(g1), cp.asarray(g2), cp.asarray(words)
    d_a, d_c = cp.empty((k, G1.limbs), dtype=cp.uint32), cp.empty((k, G1.limbs), dtype=cp.uint32)
    d_b = cp.empty((k, G2.limbs), dtype=cp.uint32)
    grid = ((k + THREADS - 1) // THREADS, 2)
    get_module("assemble").get_function("assemble_group")(grid, (THREADS,), (d_g1, d_g2, d_blind, vk, d_a, d_b, d_c,
                                                                            np.uint32(k)))
    pi_a = bn254.points_from_limbs(G1, cp.asnumpy(d_a), mont=False)
    pi_b = bn254.points_from_limbs(G2, cp.asnumpy(d_b), mont=False)
    pi_c = bn254.points_from_limbs(G1, cp.asnumpy(d_c), mont=False)
    return list(zip(pi_a, pi_b, pi_c))
