"""Blinding and proof assembly on the host (DESIGN.md step 5), in Python ints."""

from __future__ import annotations

import secrets
from collections.abc import Mapping

from distprove import bn254
from distprove.bn254 import G1, G2, R, Affine

VK_POINTS = ("alpha1", "beta1", "beta2", "delta1", "delta2")
"""Keys ``assemble`` needs in ``vk_points`` (affine standard-form points; beta2, delta2 in G2)."""


def random_blinding() -> tuple[int, int]:
    """Fresh uniform (r, s) in [0, R) from the secrets module."""
    return secrets.randbelow(R), secrets.randbelow(R)


def assemble(
    vk_points: Mapping[str, Affine], msm_results: Mapping[str, Affine], r: int, s: int
) -> tuple[Affine, Affine, Affine]:
    """Groth16 proof points (pi_a G1, pi_b G2, pi_c G1) from the five MSM results.

    ``vk_points``: alpha1, beta1, beta2, delta1, delta2; ``msm_results``: A, B1, B2, C, H
    (affine, None = infinity). With r = s = 0 the proof is deterministic (not zero-knowledge).
    """
    missing = [k for k in VK_POINTS if k not in vk_points] + [
        k for k in ("A", "B1", "B2", "C", "H") if k not in msm_results
    ]
    if missing:
        raise ValueError(f"assemble: missing points {missing}")

    def lin(group: bn254.Group, *terms: tuple[int, Affine]) -> Affine:
        acc = bn254.to_jacobian(group, None)
        for k, p in terms:
            acc = bn254.jac_add(group, acc, bn254.jac_mul(group, bn254.to_jacobian(group, p), k))
        return bn254.to_affine(group, acc)

    vk, m = vk_points, msm_results
    pi_a = lin(G1, (1, m["A"]), (1, vk["alpha1"]), (r, vk["delta1"]))
    pi_b = lin(G2, (1, m["B2"]), (1, vk["beta2"]), (s, vk["delta2"]))
    b1 = lin(G1, (1, m["B1"]), (1, vk["beta1"]), (s, vk["delta1"]))
    pi_c = lin(
        G1, (1, m["C"]), (1, m["H"]), (s, pi_a), (r, b1), ((-r * s) % R, vk["delta1"])
    )
    return pi_a, pi_b, pi_c
