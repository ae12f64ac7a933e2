"""Groth16 verification as ``snarkjs groth16 verify`` does it, on the BN254 pairing of
:mod:`distprove.pairing`.

The check (SNARKJS_FORMATS.md §8): every public signal is in [0, r), pi_a / pi_b / pi_c lie on
their curves (no subgroup check), cpub = IC[0] + Σ public[i]·IC[i+1], and

    e(-pi_a, pi_b) · e(cpub, γ₂) · e(pi_c, δ₂) · e(α₁, β₂) == 1,

computed as a product of Miller loops followed by one final exponentiation.

:func:`verify_many` checks a batch with one random linear combination (secret 128-bit
coefficients ρ_i), one shared Miller loop and one final exponentiation; terms that share a G2
point of the key are summed in G1 first. ρ_i is applied on the G1 side, to pi_a_i, which
needs bilinearity in G1 for pi_b_i: a proof is batched only when pi_b_i and its key's G2 points
pass a G2 subgroup check (snarkjs checks none, so a proof that fails it is checked on its own).
Then the batch check equals the product of the individual checks raised to ρ_i.

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
from concurrent.futures import Executor, Future, ProcessPoolExecutor
from typing import TYPE_CHECKING, Any

import numpy as np

from distprove import bn254, curve, glv
from distprove import pairing as pr
from distprove.errors import FormatError
from distprove.formats.jsonio import VerificationKey, read_proof, read_public, read_vk, vk_to_json

if TYPE_CHECKING:  # pragma: no cover
    from distprove.backends.gpu.batchcheck import DeviceProofs

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


def _check(key: VerificationKey, public: Sequence[int], proof: Proof, b_lines: Sequence[pr.Line] | None = None) -> bool:
    """The pairing equation for one validated proof: four Miller loops, one final exponentiation.
    ``b_lines``: pi_b's Miller loop lines, already computed (:class:`BatchCheck`)."""
    pi_a, pi_b, pi_c = proof
    pairs = [(_cpub(key, public), key.gamma2), (pi_c, key.delta2), (key.alpha1, key.beta2)]
    if b_lines is None:
        f = pr.multi_miller_loop([(bn254.neg(bn254.G1, pi_a), pi_b), *pairs])
    else:
        f = pr.mul(pr.prepared_miller_loop([(bn254.neg(bn254.G1, pi_a), b_lines)]), pr.multi_miller_loop(pairs))
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


def in_g2_subgroup(q: bn254.Affine) -> bool:
    """Whether a point of the twist lies in G2 (r·q is infinity), by the endomorphism test for BN
    curves (El Housni, Guillevic, Piellard, ePrint 2022/348, §5.1): q is in G2 iff
    [x+1]q + ψ([x]q) + ψ²([x]q) == ψ³([2x]q), ψ the untwist-Frobenius-twist map, x the BN
    parameter; one multiplication by the 63-bit x instead of one by r."""
    if q is None:
        return True
    g2 = bn254.G2
    (xq,) = curve.to_affine(g2, [curve.combination(g2, (), [(pr.BN_X, q)])], as_int=False)
    if xq is None:
        return False  # the order of q divides x, which is smaller than r
    psi1 = pr.frobenius_twist(xq)
    psi2 = pr.frobenius_twist(psi1)
    minus_psi3 = bn254.neg(g2, pr.frobenius_twist(psi2))
    return curve.combination(g2, (), [(1, t) for t in (xq, q, psi1, psi2, minus_psi3, minus_psi3)]) is None


@functools.lru_cache(maxsize=256)
def _key_g2(q: bn254.Affine) -> tuple[pr.Line, ...] | None:
    """A key's G2 point's Miller loop lines, or None when the point is not in G2 (then proofs of the key are checked alone)."""
    return pr.prepare(q) if q is not None and in_g2_subgroup(q) else None


def _key_id(key: VerificationKey) -> tuple:
    return (key.alpha1, key.beta2, key.gamma2, key.delta2, tuple(key.ic))


def _batchable(key: VerificationKey, proof: Proof) -> bool:
    """Whether the proof may join a batch before its pi_b's subgroup check: finite pi_a, pi_b and
    key G2 points all in G2 (then their lines are cached)."""
    return proof[0] is not None and proof[1] is not None and all(_key_g2(q) is not None for q in (key.beta2, key.gamma2, key.delta2))


GLV_BETA = glv.BETA_G1 * glv.BETA_G1 % bn254.Q
"""A cube root of unity mod q: φ(x, y) = (β·x, y) maps G1 to itself (:mod:`distprove.glv`'s
other root pair; kernels/batchcheck.cu holds this β)."""
GLV_LAMBDA = glv.LAMBDA * glv.LAMBDA % bn254.R
"""The cube root of unity mod r with φ(P) = λ·P on G1."""
Rho = tuple[int, int]
"""A batch coefficient ρ = ρ₁ + λ·ρ₂ mod r with ρ₁, ρ₂ < 2^(RHO_BITS/2): multiples ρ·P cost one
doubling chain of half the length, ρ₁·P + ρ₂·φ(P). The nonzero vectors (a, b) with
a + λ·b ≡ 0 (mod r) are all longer than 2^126, and two choices of (ρ₁, ρ₂) differ by less than
2^65, so the 2^RHO_BITS - 1 nonzero choices give distinct nonzero ρ mod r: a failing proof passes the batch with probability at most 1/(2^RHO_BITS - 1),
as with ρ drawn below 2^RHO_BITS."""


Term = tuple[Rho, "bn254.Affine | None", "tuple[pr.Line, ...] | None"]
"""A batched proof's share: (ρ, -ρ·pi_a, pi_b's Miller loop lines); the last two None while a
pool computes them (:func:`chunk_loop`) and on the GPU (the device holds -ρ·pi_a)."""


def _rho() -> Rho:
    k = 1 + secrets.randbelow((1 << RHO_BITS) - 1)
    half = RHO_BITS // 2
    return k & ((1 << half) - 1), k >> half


def _rho_value(rho: Rho) -> int:
    return (rho[0] + GLV_LAMBDA * rho[1]) % bn254.R


def _rho_terms(rho: Rho, p: bn254.Affine) -> list[tuple[int, bn254.Affine]]:
    """ρ·p as scalar terms of :func:`distprove.curve.combination`: ρ₁·p + ρ₂·φ(p)."""
    return [(rho[0], p), (rho[1], None if p is None else (GLV_BETA * p[0] % bn254.Q, p[1]))]


def _negated_multiples(terms: Sequence[tuple[Rho, bn254.Affine]]) -> list[bn254.Affine]:
    """-ρ·P for each (ρ, P), with one field inversion in all."""
    g1 = bn254.G1
    return curve.to_affine(g1, [curve.combination(g1, (), _rho_terms(rho, bn254.neg(g1, p))) for rho, p in terms])


def _term(key: VerificationKey, proof: Proof) -> Term | None:
    """A proof's own share of the batch check on the host, or None when the proof is to be checked
    alone (a key point or pi_b outside G2, or a point at infinity)."""
    if not _batchable(key, proof) or not in_g2_subgroup(proof[1]):
        return None
    rho = _rho()
    return rho, _negated_multiples([(rho, proof[0])])[0], pr.prepare(proof[1])


def chunk_loop(chunk: Sequence[tuple[Rho, bn254.Affine, bn254.Affine]]) -> tuple[list[bool], pr.Fq12]:
    """A pool process's share of a :class:`BatchCheck` on the host: for proofs given as
    (ρ, pi_a, pi_b), whether each pi_b lies in G2, and the Miller loop product of (-ρ·pi_a, pi_b)
    over those that do (their accumulator squarings shared)."""
    inside = [in_g2_subgroup(b) for _, _, b in chunk]
    live = [(rho, a, b) for (rho, a, b), ok in zip(chunk, inside) if ok]
    negs = _negated_multiples([(rho, a) for rho, a, _ in live])
    return inside, pr.prepared_miller_loop([(n, pr.prepare(b)) for n, (_, _, b) in zip(negs, live)])


DEVICES = ("cpu", "gpu")
"""Where :class:`BatchCheck` runs its batch's per-proof work and Miller loop."""


class BatchCheck:
    """:func:`verify_many` fed one proof at a time. On the host (``device="cpu"``) each proof's own
    share of the work runs when it arrives: validation, a G2 subgroup check of pi_b,
    -ρ_i·pi_a_i and pi_b_i's Miller loop lines. :meth:`results` does the rest: one
    Miller loop whose accumulator squarings all pairs share, over every (-ρ_i·pi_a_i, pi_b_i) and
    one pair per distinct G2 point of the keys (their lines cached per point), then one final
    exponentiation.

    With an ``executor`` (a process pool: the arithmetic holds the GIL), ``add`` only validates
    and draws ρ_i; every ``chunk`` proofs go to the pool as one :func:`chunk_loop` task (subgroup
    checks, multiplications and a partial Miller loop), so the calling thread is free while they
    run; the final exponentiation, and the proofs checked alone after a failed batch, run there too.

    With ``device="gpu"`` ``add`` only validates (JSON, ranges, curve equations, on the host) and
    draws ρ_i, and :meth:`results` does the batch's per-proof work as one device step
    (:class:`distprove.backends.gpu.batchcheck.DeviceProofs`, kernels/batchcheck.cu): every pi_b_i's
    G2 subgroup test (the same test as :func:`in_g2_subgroup`), -ρ_i·pi_a_i and ρ_i·pi_c_i, which
    stay on the device as the G1 side of ONE Miller product over (-ρ_i·pi_a_i, pi_b_i),
    (ρ_i·pi_c_i, δ₂) and the keys' fixed pairs (pairs the kernel flags as degenerate are looped on
    the host), then one final exponentiation on the host. Only the B subgroup answers and one
    Fq12 come back. The executor, if any, then runs the final exponentiation and the proofs
    checked alone.

    The batch equation, with secret ρ_i: Π_i e(-ρ_i·pi_a_i, pi_b_i) · e(Σρ_i·cpub_i, γ₂) ·
    Π_i e(ρ_i·pi_c_i, δ₂) · e((Σρ_i)·α₁, β₂) == 1 (on the host the δ₂ terms of a key are summed in
    G1 first, one pair). Every G2 point in it lies in G2 (checked), so by bilinearity its left
    side is exactly Π_i v_i^ρ_i, v_i the value ``verify`` compares with 1 for proof i: a batch
    with a failing proof passes with probability at most 2^-RHO_BITS. Σρ_i·cpub_i comes from
    per-key scalars Σρ_i and Σρ_i·public_i[j] (nPublic+1 multiplications per key). Proofs whose
    pi_b or key points are not in G2 (snarkjs accepts such a pi_b), and every proof of a batch of
    several that fails, are checked on their own.
    """

    def __init__(self, executor: Executor | None = None, chunk: int = 8, device: str = "cpu") -> None:
        if device not in DEVICES:
            raise ValueError(f"device must be one of {DEVICES} (got {device!r})")
        self.add_seconds = 0.0
        """Time spent in :meth:`add` so far."""
        self.device = device
        self._executor = executor
        self._chunk = chunk
        self._loaded: list[tuple[VerificationKey, list[int], Proof]] = []
        self._terms: list[Term | None] = []  # None: checked alone
        self._pending: list[int] = []  # with an executor: batched proofs not yet sent
        self._sent: list[tuple[list[int], Future]] = []

    def add(self, vk: Source, public: Source, proof: Source) -> None:
        """Validate one (vk, public, proof) triple and do its share of the pairing work; raises
        :class:`FormatError` on a malformed input (nothing is added then)."""
        t0 = time.perf_counter()
        key, public_, proof_ = _load(vk, public, proof)
        if self._executor is None and self.device == "cpu":
            term = _term(key, proof_)
        else:  # the pool's chunks, or the device in results(), do the rest
            term = (_rho(), None, None) if _batchable(key, proof_) else None
        self._loaded.append((key, public_, proof_))
        self._terms.append(term)
        if term is not None and self._executor is not None and self.device == "cpu":
            self._pending.append(len(self._terms) - 1)
            if len(self._pending) >= self._chunk:
                self._send()
        self.add_seconds += time.perf_counter() - t0

    def _send(self) -> None:
        chunk = [(self._terms[i][0], self._loaded[i][2][0], self._loaded[i][2][1]) for i in self._pending]
        self._sent.append((self._pending, self._executor.submit(chunk_loop, chunk)))
        self._pending = []

    def __len__(self) -> int:
        return len(self._loaded)

    def results(self) -> list[bool]:
        """Result i is what ``verify`` returns for the i-th proof added."""
        if self._pending:
            self._send()
        partials = []
        for indices, future in self._sent:
            inside, got = future.result()
            partials.append(got)
            for i, ok in zip(indices, inside):
                if not ok:  # pi_b outside G2
                    self._terms[i] = None
        self._sent = []
        batched = [i for i, t in enumerate(self._terms) if t is not None]
        device = None
        if self.device == "gpu" and batched:
            from distprove.backends.gpu.batchcheck import DeviceProofs

            device = DeviceProofs([self._loaded[i][2] for i in batched], [self._terms[i][0] for i in batched],
                                  [self._loaded[i][0].delta2 for i in batched])
            for i, inside in zip(batched, device.inside):
                if not inside:  # pi_b outside G2
                    self._terms[i] = None
            batched = [i for i in batched if self._terms[i] is not None]
        ok: list[bool | None] = [None] * len(self._loaded)
        if batched:
            holds = self._batch_holds(batched, partials, device)
            if holds or len(batched) == 1:  # one proof alone: the equation is v^ρ == 1, exactly v == 1
                for i in batched:
                    ok[i] = holds
        alone = [i for i, v in enumerate(ok) if v is None]
        args = [(*self._loaded[i], self._terms[i] and self._terms[i][2]) for i in alone]
        mapper = map if self._executor is None else self._executor.map
        for i, v in zip(alone, mapper(_check, *zip(*args)) if args else ()):
            ok[i] = v
        return ok  # type: ignore[return-value]

    def _batch_holds(self, batched: Sequence[int], partials: Sequence[pr.Fq12] = (), device: "DeviceProofs | None" = None) -> bool:
        """The batch equation over the proofs ``batched``; ``partials``: the Miller loop products of
        the pairs computed by the pool (the other pairs have their lines); ``device``: the
        :class:`~distprove.backends.gpu.batchcheck.DeviceProofs` holding the proofs' pairs."""
        g1 = bn254.G1
        by_g2: dict[bn254.Affine, list[tuple[int, bn254.Affine]]] = {}
        keys: dict[tuple, VerificationKey] = {}
        scalars: dict[tuple, list[int]] = {}
        pairs = []
        for i in batched:
            key, public, (_, _, pi_c) = self._loaded[i]
            rho, neg_a, b_lines = self._terms[i]
            rho_r = _rho_value(rho)
            if b_lines is not None:
                pairs.append((neg_a, b_lines))
            kid = _key_id(key)
            keys.setdefault(kid, key)
            sc = scalars.setdefault(kid, [0] * (key.n_public + 1))
            for j, s in enumerate([1, *public]):
                sc[j] = (sc[j] + rho_r * s) % bn254.R
            if device is None:
                by_g2.setdefault(key.delta2, []).extend(_rho_terms(rho, pi_c))
        for kid, key in keys.items():
            sc = scalars[kid]
            by_g2.setdefault(key.gamma2, []).extend(zip(sc, key.ic))
            by_g2.setdefault(key.beta2, []).append((sc[0], key.alpha1))
        sums = curve.to_affine(g1, [curve.combination(g1, (), terms) for terms in by_g2.values()])  # one doubling chain each
        if device is not None:
            fixed = [(p, q) for q, p in zip(by_g2, sums) if p is not None]
            return self._is_one(device.miller_product(fixed))
        pairs += [(p, _key_g2(q)) for q, p in zip(by_g2, sums) if p is not None]
        f = pr.prepared_miller_loop(pairs)
        for part in partials:
            f = pr.mul(f, part)
        return self._is_one(f)

    def _is_one(self, f: pr.Fq12) -> bool:
        """Whether the final exponentiation of ``f`` is 1: in the executor's process when there is
        one (pure-Python arithmetic, a few ms that would hold the GIL against the thread that
        proves; one Fq12 goes there and a bool comes back), else here."""
        if self._executor is None:
            return _final_is_one(f)
        return self._executor.submit(_final_is_one, f).result()


def _final_is_one(f: pr.Fq12) -> bool:
    """The batch equation's last step: the final exponentiation of ``f`` is 1."""
    return pr.final_exponentiation_fast(f) == pr.ONE


_POOLS: dict[int, ProcessPoolExecutor] = {}


def check_pool(processes: int, shared: bool = True) -> ProcessPoolExecutor | None:
    """This process's pool of ``processes`` spawned processes for :class:`BatchCheck` (started
    once and kept; with ``shared`` False a new one, which the caller shuts down), or None when
    ``processes`` < 1 or this process may not start children: a daemonic process, which Dask's
    worker processes are unless ``distributed.worker.daemon`` is False (the local clusters of
    :mod:`distprove.cluster.client` set it)."""
    import multiprocessing

    if processes < 1 or multiprocessing.current_process().daemon:
        return None
    if not shared:
        return ProcessPoolExecutor(processes, mp_context=multiprocessing.get_context("spawn"))
    pool = _POOLS.get(processes)
    if pool is None or getattr(pool, "_broken", False):
        pool = _POOLS[processes] = ProcessPoolExecutor(processes, mp_context=multiprocessing.get_context("spawn"))
    return pool


def verify_many(
    items: Sequence[tuple[Source, Source, Source]], executor: Executor | None = None, device: str = "cpu"
) -> list[bool]:
    """Check many (vk, public, proof) triples; result i is what ``verify(*items[i])`` returns.

    All proofs whose key G2 points and pi_b lie in the G2 subgroup are checked together with one
    final exponentiation (:class:`BatchCheck`, on ``executor``'s processes when given); if that
    batch check fails, each of them is checked on its own so the failing ones are named.
    ``device="gpu"``: the batch's per-proof work and Miller loop on the GPU. Raises :class:`FormatError` on the
    first malformed input.
    """
    batch = BatchCheck(executor, device=device)
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
