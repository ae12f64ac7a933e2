"""Blinding and proof assembly on the host (DESIGN.md step 5), via :mod:`._fastec` (gmpy2 when installed)."""

from __future__ import annotations

import secrets
from collections.abc import Iterable, Mapping

from distprove.backends.base import MSM_NAMES, msm_group
from distprove.bn254 import G1, G2, R, Affine
from distprove.stages import _fastec
from distprove.stages.msm import check_window_sums

VK_POINTS = ("alpha1", "beta1", "beta2", "delta1", "delta2")
"""Keys ``assemble`` needs in ``vk_points`` (affine standard-form points; beta2, delta2 in G2)."""


def random_blinding() -> tuple[int, int]:
    """Fresh uniform (r, s) in [0, R) from the secrets module."""
    return secrets.randbelow(R), secrets.randbelow(R)


def _check_names(vk_points: Mapping[str, Affine], msm_names: Iterable[str] = MSM_NAMES) -> None:
    missing = [k for k in VK_POINTS if k not in vk_points] + [k for k in MSM_NAMES if k not in msm_names]
    if missing:
        raise ValueError(f"assemble: missing points {missing}")


class Assembly:
    """One proof assembled from its five MSMs' window terms as they arrive, in any order.

    pi_a = A + alpha1 + r delta1; pi_b = B2 + beta2 + s delta2; and, with b1 = B1 + beta1,
    pi_c = C + H + s pi_a + r b1, which equals DESIGN.md's C + H + s pi_a + r (b1 + s delta1)
    - rs delta1 because G1 has prime order r. :meth:`add` records an MSM's terms and
    :meth:`advance` runs every doubling chain that what has arrived allows: A's, B1's and B2's
    each on their own, C's and H's (with s pi_a + r b1 the first time) once pi_a and b1 are
    known, those that arrived together in one chain. Advancing after each MSM overlaps the
    host's work with the MSMs still on the device; adding all five and then calling
    :meth:`proof` makes four chains in all (three in G1, one in G2), each MSM's Horner merged
    into the blinding's chain.
    """

    def __init__(self, vk_points: Mapping[str, Affine], r: int, s: int) -> None:
        _check_names(vk_points)
        self._vk, self._r, self._s = vk_points, r, s
        self._added: set[str] = set()
        self._terms: dict[str, list[_fastec.WindowTerm]] = {}  # added, not yet in a chain
        self._done: dict[str, Affine] = {}  # pi_a, b1, pi_b (None = infinity) once made
        self._c: Affine = None  # the part of pi_c made so far: the blinding's and C's and/or H's

    def add(self, which: str, terms: list[_fastec.WindowTerm]) -> None:
        """Record MSM ``which``'s window terms [(c, {w: S_w})] (affine, None = infinity)."""
        msm_group(which)  # a known name
        if which in self._added:
            raise ValueError(f"assemble: MSM {which} added twice")
        self._added.add(which)
        self._terms[which] = terms

    def advance(self) -> None:
        """Run every chain that the MSMs added so far allow."""
        chain, vk, r, s = _fastec.combination, self._vk, self._r, self._s
        ready = []
        if "A" in self._terms:
            ready.append(("pi_a", chain(G1, self._terms.pop("A"), [(1, vk["alpha1"]), (r, vk["delta1"])])))
        if "B1" in self._terms:
            ready.append(("b1", chain(G1, self._terms.pop("B1"), [(1, vk["beta1"])])))
        if ready:
            self._done.update(zip((k for k, _ in ready), _fastec.to_affine(G1, [p for _, p in ready], as_int=False)))
        if "B2" in self._terms:
            acc_b = chain(G2, self._terms.pop("B2"), [(1, vk["beta2"]), (s, vk["delta2"])])
            (self._done["pi_b"],) = _fastec.to_affine(G2, [acc_b])
        parts = [k for k in ("C", "H") if k in self._terms]
        if parts and "pi_a" in self._done and "b1" in self._done:
            first = not any(k in self._added and k not in self._terms for k in ("C", "H"))
            scalars = [(s, self._done["pi_a"]), (r, self._done["b1"])] if first else [(1, self._c)]
            acc_c = chain(G1, [t for k in parts for t in self._terms.pop(k)], scalars)
            (self._c,) = _fastec.to_affine(G1, [acc_c], as_int=False)

    def proof(self) -> tuple[Affine, Affine, Affine]:
        """(pi_a, pi_b, pi_c) once all five MSMs are added (ValueError otherwise)."""
        missing = [k for k in MSM_NAMES if k not in self._added]
        if missing:
            raise ValueError(f"assemble: missing points {missing}")
        self.advance()
        return _fastec.int_point(G1, self._done["pi_a"]), self._done["pi_b"], _fastec.int_point(G1, self._c)


def assemble(
    vk_points: Mapping[str, Affine], msm_results: Mapping[str, Affine], r: int, s: int
) -> tuple[Affine, Affine, Affine]:
    """Groth16 proof points (pi_a G1, pi_b G2, pi_c G1) from the five MSM results.

    ``vk_points``: alpha1, beta1, beta2, delta1, delta2; ``msm_results``: A, B1, B2, C, H
    (affine, None = infinity). With r = s = 0 the proof is deterministic (not zero-knowledge).
    """
    _check_names(vk_points, msm_results)
    proof = Assembly(vk_points, r, s)
    for name in MSM_NAMES:  # a finished MSM result is a single window sum at bit position 0
        proof.add(name, [(0, {0: msm_results[name]})])
    return proof.proof()


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
    proof = Assembly(vk_points, r, s)
    for name in MSM_NAMES:
        proof.add(name, window_terms(name, sums[name], widths))
    return proof.proof()


def window_terms(which: str, sums: Mapping[int, Affine], widths: Mapping[str, int]) -> list[_fastec.WindowTerm]:
    """MSM ``which``'s window sums {w: S_w} as :class:`Assembly` terms, checked: its width in
    ``widths`` and every window of [0, W(c)) there (ValueError otherwise)."""
    if which not in widths:
        raise ValueError(f"assemble: missing window width of {which}")
    check_window_sums(sums, widths[which])
    return [(widths[which], sums)]
