"""Groth16 verification as ``snarkjs groth16 verify`` does it, on the BN254 pairing of
:mod:`distprove.pairing`.

The check (SNARKJS_FORMATS.md §8): every public signal is in [0, r), pi_a / pi_b / pi_c lie on
their curves (no subgroup check), cpub = IC[0] + Σ public[i]·IC[i+1], and

    e(-pi_a, pi_b) · e(cpub, γ₂) · e(pi_c, δ₂) · e(α₁, β₂) == 1,

computed as a product of Miller loops followed by one final exponentiation.

:func:`verify_many` checks a batch with one random linear combination (secret 128-bit
coefficients ρ_i) and one final exponentiation; terms that share a G2 point of the key are
summed in G1 first. ρ_i is applied to pi_a_i's Miller loop *output* rather than to pi_a_i, so the
batch check equals the product of the individual checks raised to ρ_i even when pi_b is not in
the G2 subgroup (snarkjs accepts such points). Bilinearity in G1 is only used against key points,
and only after checking that they lie in the G2 subgroup.

The Miller loop values are those of py_ecc's optimal ate pairing (the tests compare them). The
checks use :func:`distprove.pairing.final_exponentiation_fast`, the reduced pairing raised to
m = 2x(6x²+3x+1) (x the BN parameter), as snarkjs's (ffjavascript's) does: that does not change
"== 1" since gcd(m, r) = 1, and it is the value snarkjs writes as ``vk_alphabeta_12``
(:func:`alphabeta_12`).
"""

from __future__ import annotations

import functools
import os
import secrets
import time
from collections.abc import Sequence
from typing import Any

import numpy as np

from distprove import bn254, curve
from distprove import pairing as pr
from distprove.errors import FormatError
from distprove.formats.jsonio import VerificationKey, read_proof, read_public, read_vk, vk_to_json

Proof = tuple[bn254.Affine, bn254.Affine, bn254.Affine]
Source = Any
"""A path, JSON already parsed, or (vk) a VerificationKey / (public) a list of ints / (proof) a point tuple."""

RHO_BITS = 128


def _load(vk: Source, public: Source, proof: Source) -> tuple[VerificationKey, list[int], Proof]:
    """Parse (where needed) and validate one (vk, public, proof) triple as snarkjs does.

    jsonio's readers check JSON shape, ranges (public < r, coordinates < q) and curve
    membership; an already-parsed proof tuple gets the curve check here.
    """
    key = vk if isinstance(vk, VerificationKey) else read_vk(vk)
    pub = read_public(public)
    if isinstance(proof, tuple):
        prf: Proof = proof
        for name, group, point in zip(("pi_a", "pi_b", "pi_c"), (bn254.G1, bn254.G2, bn254.G1), prf):
            if not bn254.is_on_curve(group, point):
                raise FormatError("<proof>", f"{name} is not on the {group.name} curve")
    else:
        prf = read_proof(proof)
    if len(pub) != key.n_public:
        name = os.fspath(public) if isinstance(public, (str, os.PathLike)) else "<public>"
        raise FormatError(name, f"{len(pub)} public signals, the verification key has nPublic = {key.n_public}")
    return key, pub, prf


def _cpub(key: VerificationKey, public: Sequence[int]) -> bn254.Affine:
    """IC[0] + Σ public[i]·IC[i+1] (one doubling chain on gmpy2)."""
    terms = [(1, key.ic[0]), *zip(public, key.ic[1:])]
    return curve.to_affine(bn254.G1, [curve.combination(bn254.G1, (), terms)])[0]


def _check(key: VerificationKey, public: Sequence[int], proof: Proof, miller_ab: pr.Fq12 | None = None) -> bool:
    """The pairing equation for one validated proof: four Miller loops, one final exponentiation.
    ``miller_ab``: the Miller loop of (-pi_a, pi_b) already computed (:class:`BatchCheck`)."""
    pi_a, pi_b, pi_c = proof
    pairs = [(_cpub(key, public), key.gamma2), (pi_c, key.delta2), (key.alpha1, key.beta2)]
    if miller_ab is None:
        f = pr.multi_miller_loop([(bn254.neg(bn254.G1, pi_a), pi_b), *pairs])
    else:
        f = pr.mul(miller_ab, pr.multi_miller_loop(pairs))
    return pr.final_exponentiation_fast(f) == pr.ONE


def verify(vk: Source, public: Source, proof: Source) -> bool:
    """Check one Groth16 proof exactly as ``snarkjs groth16 verify`` does.

    ``vk``, ``public`` and ``proof`` are paths (or whatever :mod:`distprove.formats.jsonio`'s
    readers accept) or already-parsed objects: a ``VerificationKey``, a list of ints and a
    ``(pi_a, pi_b, pi_c)`` tuple of affine points. Returns False when the pairing check fails;
    raises :class:`FormatError` when an input is malformed (bad JSON, wrong number of public
    signals, a public signal >= r, a point off its curve).
    """
    return _check(*_load(vk, public, proof))


@functools.lru_cache(maxsize=256)
def _in_g2_subgroup(q: bn254.Affine) -> bool:
    """True when r·q is infinity (checked as (r-1)·q == -q, since bn254.mul reduces k mod r)."""
    return q is None or bn254.mul(bn254.G2, q, bn254.R - 1) == bn254.neg(bn254.G2, q)


def _key_id(key: VerificationKey) -> tuple:
    return (key.alpha1, key.beta2, key.gamma2, key.delta2, tuple(key.ic))


class BatchCheck:
    """:func:`verify_many` fed one proof at a time, so each proof's own pairing work (validation
    and its Miller loop e(-pi_a, pi_b), the largest per-proof share) runs when the proof arrives,
    e.g. beside the next proof's MSMs on a GPU worker; :meth:`results` does the rest (one G1 sum
    per distinct G2 point of the keys, their Miller loops, one final exponentiation).

    The batch equation, with secret ρ_i: Π_i [e(-pi_a_i, pi_b_i)^ρ_i] · e(Σρ_i·cpub_i, γ₂) ·
    e(Σρ_i·pi_c_i, δ₂) · e((Σρ_i)·α₁, β₂) == 1. Σρ_i·cpub_i comes from per-key scalars Σρ_i and
    Σρ_i·public_i[j] (nPublic+1 multiplications per key). Proofs of keys whose G2 points are not
    all in the G2 subgroup, and every proof of a batch that fails, are checked on their own.
    """

    def __init__(self) -> None:
        self.add_seconds = 0.0
        """Time spent in :meth:`add` so far."""
        self._loaded: list[tuple[VerificationKey, list[int], Proof]] = []
        self._terms: list[tuple[int, Any] | None] = []  # (ρ_i, Miller loop of -pi_a_i, pi_b_i), None: alone

    def add(self, vk: Source, public: Source, proof: Source) -> None:
        """Validate one (vk, public, proof) triple and do its share of the pairing work; raises
        :class:`FormatError` on a malformed input (nothing is added then)."""
        t0 = time.perf_counter()
        key, public_, proof_ = _load(vk, public, proof)
        term = None
        if all(_in_g2_subgroup(q) for q in (key.beta2, key.gamma2, key.delta2)):
            pi_a, pi_b, _ = proof_
            term = (1 + secrets.randbelow((1 << RHO_BITS) - 1), pr.miller_loop(bn254.neg(bn254.G1, pi_a), pi_b))
        self._loaded.append((key, public_, proof_))
        self._terms.append(term)
        self.add_seconds += time.perf_counter() - t0

    def __len__(self) -> int:
        return len(self._loaded)

    def results(self) -> list[bool]:
        """Result i is what ``verify`` returns for the i-th proof added."""
        batched = [i for i, t in enumerate(self._terms) if t is not None]
        ok: list[bool | None] = [None] * len(self._loaded)
        if len(batched) > 1 and self._batch_holds(batched):
            for i in batched:
                ok[i] = True
        return [v if v is not None else _check(*self._loaded[i], self._terms[i] and self._terms[i][1])
                for i, v in enumerate(ok)]

    def _batch_holds(self, batched: Sequence[int]) -> bool:
        g1 = bn254.G1
        by_g2: dict[bn254.Affine, list[tuple[int, bn254.Affine]]] = {}
        keys: dict[tuple, VerificationKey] = {}
        scalars: dict[tuple, list[int]] = {}
        powers = []
        for i in batched:
            key, public, (_, _, pi_c) = self._loaded[i]
            rho, miller = self._terms[i]
            powers.append((miller, rho))
            kid = _key_id(key)
            keys.setdefault(kid, key)
            sc = scalars.setdefault(kid, [0] * (key.n_public + 1))
            for j, s in enumerate([1, *public]):
                sc[j] = (sc[j] + rho * s) % bn254.R
            by_g2.setdefault(key.delta2, []).append((rho, pi_c))
        for kid, key in keys.items():
            sc = scalars[kid]
            by_g2.setdefault(key.gamma2, []).extend(zip(sc, key.ic))
            by_g2.setdefault(key.beta2, []).append((sc[0], key.alpha1))
        sums = curve.to_affine(g1, [curve.combination(g1, (), terms) for terms in by_g2.values()])  # one doubling chain each
        factors = [pr.multi_miller_loop([(p, q) for q, p in zip(by_g2, sums)]), pr.multi_power(powers)]
        return pr.product_is_one(factors)


def verify_many(items: Sequence[tuple[Source, Source, Source]]) -> list[bool]:
    """Check many (vk, public, proof) triples; result i is what ``verify(*items[i])`` returns.

    All proofs whose key G2 points lie in the G2 subgroup are checked together with one final
    exponentiation (:class:`BatchCheck`); if that batch check fails, each of them is checked on its
    own so the failing ones are named. Raises :class:`FormatError` on the first malformed input.
    """
    batch = BatchCheck()
    for item in items:
        batch.add(*item)
    return batch.results()


def alphabeta_12(alpha1: bn254.Affine, beta2: bn254.Affine) -> list[list[list[str]]]:
    """e(alpha1, beta2) as snarkjs writes ``vk_alphabeta_12`` in verification_key.json.

    The layout is [2][3][2] decimal strings: Fq12 = Fq6[w]/(w² - v), Fq6 = Fq2[v]/(v³ - ξ),
    ξ = 9 + u, Fq2 = Fq[u]/(u² + 1), c0 first at every level: :mod:`distprove.pairing`'s own tower.
    """
    e = pr.final_exponentiation_fast(pr.miller_loop(alpha1, beta2))  # ffjavascript's value
    return [[[str(int(e[j][k][0])), str(int(e[j][k][1]))] for k in range(3)] for j in range(2)]


def vk_json(n_public: int, points: dict[str, bn254.Affine], ic_limbs: Any) -> dict:
    """A proving key's verification key in snarkjs's verification_key.json layout.

    ``points`` holds at least alpha1 (G1) and beta2, gamma2, delta2 (G2) as affine Python ints;
    ``ic_limbs`` the n_public + 1 IC points as (n, 16) Montgomery limbs (anything numpy-sliceable,
    e.g. a zarr array). The vk's ``vk_alphabeta_12`` is computed here, one pairing.
    """
    ic = bn254.points_from_limbs(bn254.G1, np.asarray(ic_limbs[:]))
    return vk_to_json(
        n_public,
        points["alpha1"],
        points["beta2"],
        points["gamma2"],
        points["delta2"],
        ic,
        alphabeta_12(points["alpha1"], points["beta2"]),
    )
