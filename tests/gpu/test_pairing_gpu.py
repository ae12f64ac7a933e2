"""GPU Miller loops (kernels/pairing.cu, backends/gpu/pairing.py) against distprove.pairing."""

from __future__ import annotations

import random
from pathlib import Path

import pytest

from distprove import bn254
from distprove import pairing as pr
from distprove.formats.jsonio import read_proof, read_public, read_vk
from distprove.verifier import _cpub

pytestmark = pytest.mark.gpu

DATA = Path(__file__).resolve().parents[1] / "data" / "mul_chain_1k"


def random_pairs(k: int, seed: int) -> list[tuple[bn254.Affine, bn254.Affine]]:
    """k pairs (a_i G1, b_i G2): two random starts walked by random steps (affine additions are
    cheap on the host, scalar products are not), with infinity and negated points among them."""
    rng = random.Random(seed)
    p, dp = (bn254.mul(bn254.G1, bn254.G1_GEN, rng.randrange(1, bn254.R)) for _ in range(2))
    q, dq = (bn254.mul(bn254.G2, bn254.G2_GEN, rng.randrange(1, bn254.R)) for _ in range(2))
    out = []
    for i in range(k):
        out.append((bn254.neg(bn254.G1, p) if i % 5 == 1 else p, bn254.neg(bn254.G2, q) if i % 7 == 2 else q))
        p, q = bn254.add(bn254.G1, p, dp), bn254.add(bn254.G2, q, dq)
    if k >= 7:
        out[3], out[4] = (None, out[3][1]), (out[4][0], None)
    return out


@pytest.mark.parametrize("k", [1, 7, 1000])
def test_miller_loops_equal_pairing_py(k: int) -> None:
    from distprove.backends.gpu.pairing import miller_loops, miller_product

    pairs = random_pairs(k, seed=k)
    want = [pr.miller_loop(p, q) for p, q in pairs]
    assert miller_loops(pairs) == want
    prod = pr.ONE
    for f in want:
        prod = pr.mul(prod, f)
    assert miller_product(pairs) == prod


def _proof_pairs(index: int, corrupt: bool) -> list[tuple[bn254.Affine, bn254.Affine]]:
    key = read_vk(DATA / "verification_key.json")
    public = read_public(DATA / "public" / f"public_{index}.json")
    pi_a, pi_b, pi_c = read_proof(DATA / "proofs" / f"proof_{index}.json")
    if corrupt:
        pi_c = bn254.add(bn254.G1, pi_c, bn254.G1_GEN)
    return [(bn254.neg(bn254.G1, pi_a), pi_b), (_cpub(key, public), key.gamma2), (pi_c, key.delta2),
            (key.alpha1, key.beta2)]


@pytest.mark.parametrize("corrupt", [False, True])
def test_proof_group_passes_or_fails(corrupt: bool) -> None:
    """The four pairs of each of 150 fixture proofs in one call: the product passes
    pairing.product_is_one, and one corrupted proof in the middle makes it fail."""
    from distprove.backends.gpu.pairing import miller_product

    proofs = [_proof_pairs(i, False) for i in range(3)]
    pairs = [pair for n in range(150) for pair in proofs[n % 3]]
    if corrupt:
        pairs[4 * 77 : 4 * 78] = _proof_pairs(77 % 3, True)
    assert pr.product_is_one([miller_product(pairs)]) is not corrupt


def test_empty() -> None:
    from distprove.backends.gpu.pairing import miller_loops, miller_product

    assert miller_loops([]) == [] and miller_product([]) == pr.ONE


@pytest.mark.parametrize("bad", [None, 32])
def test_batch_check_on_the_gpu(bad: int | None, monkeypatch: pytest.MonkeyPatch) -> None:
    """BatchCheck(device="gpu") over 64 rerandomized fixture proofs: one Miller product over the
    2 * 64 proofs' pairs and the key's two fixed pairs, and with a corrupted pi_c in the middle
    exactly that proof is named."""
    from distprove import curve, verifier
    from distprove.backends.gpu import batchcheck as gb

    key = read_vk(DATA / "verification_key.json")
    items = []
    for n in range(64):
        pi_a, pi_b, pi_c = read_proof(DATA / "proofs" / f"proof_{n % 3}.json")
        t = 2 + n
        (a,) = curve.to_affine(bn254.G1, [curve.combination(bn254.G1, (), [(t, pi_a)])])
        (b,) = curve.to_affine(bn254.G2, [curve.combination(bn254.G2, (), [(pow(t, -1, bn254.R), pi_b)])])
        if n == bad:
            pi_c = bn254.add(bn254.G1, pi_c, bn254.G1_GEN)
        items.append((key, read_public(DATA / "public" / f"public_{n % 3}.json"), (a, b, pi_c)))
    calls = []
    real = gb.miller_product_rows
    monkeypatch.setattr(gb, "miller_product_rows", lambda g1, g2: calls.append(g1.shape[0]) or real(g1, g2))
    assert verifier.verify_many(items, device="gpu") == [n != bad for n in range(64)]
    assert calls == [2 * 64 + 2]
