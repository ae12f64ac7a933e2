"""Blinding and proof assembly on the host (DESIGN.md step 5), via :mod:`distprove.curve` (gmpy2 when installed)."""

from __future__ import annotations

import secrets
import time
from collections.abc import Iterable, Mapping, Sequence

from distprove import curve
from distprove.bn254 import G1, G2, R, Affine
from distprove.groth16 import MSM_NAMES
from distprove.stages.msm import check_window_sums

VK_POINTS = ("alpha1", "beta1", "beta2", "delta1", "delta2")
"""Keys ``assemble`` needs in ``vk_points`` (affine standard-form points; beta2, delta2 in G2)."""


def random_blinding() -> tuple[int, int]:
    """Fresh uniform (r, s) in [0, R) from the secrets module."""
    return secrets.randbelow(R), secrets.randbelow(R)


def _check_names(vk_points: Mapping[str, Affine], msm_names: Iterable[str]) -> None:
    missing = [k for k in VK_POINTS if k not in vk_points] + [k for k in MSM_NAMES if k not in msm_names]
    if missing:
        raise ValueError(f"assemble: missing points {missing}")


def _assemble(
    vk: Mapping[str, Affine], terms: Mapping[str, list[curve.WindowTerm]], r: int, s: int
) -> tuple[Affine, Affine, Affine]:
    """The proof from each MSM's window terms, in four doubling chains (three in G1, one in G2).

    pi_a = A + alpha1 + r delta1; pi_b = B2 + beta2 + s delta2; and, with b1 = B1 + beta1,
    pi_c = C + H + s pi_a + r b1, which equals DESIGN.md's C + H + s pi_a + r (b1 + s delta1)
    - rs delta1 because G1 has prime order r.
    """
    chain = curve.combination
    acc_a = chain(G1, terms["A"], [(1, vk["alpha1"]), (r, vk["delta1"])])
    acc_b1 = chain(G1, terms["B1"], [(1, vk["beta1"])])
    pi_a, b1 = curve.to_affine(G1, [acc_a, acc_b1], as_int=False)
    acc_c = chain(G1, [*terms["C"], *terms["H"]], [(s, pi_a), (r, b1)])
    acc_b = chain(G2, terms["B2"], [(1, vk["beta2"]), (s, vk["delta2"])])
    (pi_c,) = curve.to_affine(G1, [acc_c])
    (pi_b,) = curve.to_affine(G2, [acc_b])
    return curve.int_point(G1, pi_a), pi_b, pi_c


def assemble(
    vk_points: Mapping[str, Affine], msm_results: Mapping[str, Affine], r: int, s: int
) -> tuple[Affine, Affine, Affine]:
    """Groth16 proof points (pi_a G1, pi_b G2, pi_c G1) from the five MSM results.

    ``vk_points``: alpha1, beta1, beta2, delta1, delta2; ``msm_results``: A, B1, B2, C, H
    (affine, None = infinity). With r = s = 0 the proof is deterministic (not zero-knowledge).
    """
    _check_names(vk_points, msm_results)
    # A finished MSM result is a single window sum at bit position 0.
    return _assemble(vk_points, {k: [(0, {0: msm_results[k]})] for k in MSM_NAMES}, r, s)


def assemble_many(
    vk_points: Mapping[str, Affine], jobs: Sequence[tuple[Mapping[str, Affine], int, int]]
) -> list[tuple[tuple[Affine, Affine, Affine] | ValueError, float]]:
    """:func:`assemble` for several proofs of one key, run as one job of a process pool (all
    arguments are plain ints): ``jobs`` holds each proof's (MSM results, r, s). Result i is
    proof i's points, or the ValueError that refused its inputs (that proof fails alone), and
    the seconds it took."""
    out: list[tuple[tuple[Affine, Affine, Affine] | ValueError, float]] = []
    for msm_results, r, s in jobs:
        t0 = time.perf_counter()
        try:
            out.append((assemble(vk_points, msm_results, r, s), time.perf_counter() - t0))
        except ValueError as exc:
            out.append((exc, time.perf_counter() - t0))
    return out


def assemble_windows(
    vk_points: Mapping[str, Affine],
    sums: Mapping[str, Mapping[int, Affine]],
    widths: Mapping[str, int],
    r: int,
    s: int,
) -> tuple[Affine, Affine, Affine]:
    """:func:`assemble` straight from the five MSMs' window sums: the same proof, faster.

    ``sums[name]`` maps window index -> S_w (affine, None = infinity) and ``widths[name]`` is
    that MSM's window width c; every window of [0, W(c)) must be there (ValueError otherwise).
    The Horner combines share the blinding's doubling chains (C and H share one), so this
    costs about half of :func:`~distprove.stages.msm.combine` five times plus :func:`assemble`.
    """
    _check_names(vk_points, sums)
    for name in MSM_NAMES:
        if name not in widths:
            raise ValueError(f"assemble: missing window width of {name}")
        check_window_sums(sums[name], widths[name])
    return _assemble(vk_points, {k: [(widths[k], sums[k])] for k in MSM_NAMES}, r, s)
