"""The batch check's per-proof step on the GPU (kernels/batchcheck.cu, backends/gpu/batchcheck.py)
against verifier.py, and BatchCheck(device="gpu") naming the one bad proof of a large batch."""

from __future__ import annotations

import functools
import random
from pathlib import Path

import pytest

from distprove import bn254, curve, verifier
from distprove.formats.jsonio import read_proof, read_public, read_vk

pytestmark = pytest.mark.gpu

DATA = Path(__file__).resolve().parents[1] / "data" / "mul_chain_1k"
BAD = Path(__file__).resolve().parents[1] / "data" / "bad" / "mul_chain_1k"


def test_device_proofs_equal_verifier_py() -> None:
    """On the device (its own field product build), the subgroup answers are in_g2_subgroup's and
    the rows -ρ·pi_a and ρ·pi_c verifier.py's, zero where pi_b is outside G2: fresh random points,
    twist points outside G2 and G2 points plus a point of small order, infinity, ρ halves 0 and 1,
    over two blocks of threads."""
    from test_pairing import twist_point_outside_g2
    from test_verify import _g2_small_order

    from distprove.backends.gpu.batchcheck import DeviceProofs

    rng = random.Random()
    seed = rng.randrange(1 << 32)
    rng.seed(seed)
    g1 = [bn254.mul(bn254.G1, bn254.G1_GEN, rng.randrange(1, bn254.R)) for _ in range(4)]
    g2 = [bn254.mul(bn254.G2, bn254.G2_GEN, rng.randrange(1, bn254.R)) for _ in range(3)]
    small = _g2_small_order()
    outside = [twist_point_outside_g2(rng), small, bn254.add(bn254.G2, g2[0], small)]
    proofs, rhos = [], []
    for i in range(70):
        a = bn254.add(bn254.G1, g1[i % 4], g1[(i + 1) % 4]) if i % 3 else g1[i % 4]
        b = outside[i % 3] if i % 10 == 9 else (None if i == 20 else g2[i % 3])
        c = None if i % 11 == 5 else g1[(i + 2) % 4]
        rhos.append([(0, 1), (1, 0), (1, 1)][i] if i < 3 else (rng.randrange(1 << 64), rng.randrange(1 << 64)))
        proofs.append((a, b, c))
    device = DeviceProofs(proofs, rhos, [bn254.G2_GEN] * len(proofs))
    inside = [verifier.in_g2_subgroup(b) for _, b, _ in proofs]
    assert inside.count(False) == 7
    assert device.inside.tolist() == inside, seed
    neg_a, rho_c = device.multiples()
    for i, ((a, _, c), rho, ok) in enumerate(zip(proofs, rhos, inside)):
        want_c = curve.to_affine(bn254.G1, [curve.combination(bn254.G1, (), verifier._rho_terms(rho, c))])[0]
        assert neg_a[i] == (verifier._negated_multiples([(rho, a)])[0] if ok else None), f"proof {i}, seed {seed}"
        assert rho_c[i] == (want_c if ok else None), f"proof {i}, seed {seed}"


@functools.lru_cache(maxsize=1)
def _valid_items(n: int) -> tuple:
    """n valid (vk, public, proof) triples of mul_chain_1k: its three fixture proofs rerandomized,
    (t·pi_a, t⁻¹·pi_b, pi_c), in turn."""
    key = read_vk(DATA / "verification_key.json")
    items = []
    for i in range(n):
        pi_a, pi_b, pi_c = read_proof(DATA / "proofs" / f"proof_{i % 3}.json")
        t = 2 + i
        (a,) = curve.to_affine(bn254.G1, [curve.combination(bn254.G1, (), [(t, pi_a)])])
        (b,) = curve.to_affine(bn254.G2, [curve.combination(bn254.G2, (), [(pow(t, -1, bn254.R), pi_b)])])
        items.append((key, read_public(DATA / "public" / f"public_{i % 3}.json"), (a, b, pi_c)))
    return tuple(items)


@pytest.mark.parametrize("n", [64, 256])
@pytest.mark.parametrize("kind", [None, "pi_c", "pi_b_outside_g2", "unsatisfied"])
def test_one_bad_proof_in_a_large_batch_is_named(n: int, kind: str | None, monkeypatch: pytest.MonkeyPatch) -> None:
    """A batch of n proofs with one bad proof in the middle (pi_c changed, pi_b a twist point
    outside G2, or snarkjs's proof of an unsatisfied witness): one device step and one Miller
    product over 2n + 2 pairs, and exactly that proof is False (with none, all pass and no proof is
    checked alone)."""
    from test_pairing import twist_point_outside_g2

    from distprove.backends.gpu import batchcheck as gb

    items = list(_valid_items(256)[:n])
    at = n // 2
    vk, public, (pi_a, pi_b, pi_c) = items[at]
    if kind == "pi_c":
        items[at] = (vk, public, (pi_a, pi_b, bn254.add(bn254.G1, pi_c, bn254.G1_GEN)))
    elif kind == "pi_b_outside_g2":
        items[at] = (vk, public, (pi_a, twist_point_outside_g2(random.Random(n)), pi_c))
    elif kind == "unsatisfied":
        items[at] = (vk, read_public(BAD / "public_witness_flipped.json"), read_proof(BAD / "proof_witness_flipped.json"))
    rows, alone = [], []
    real_product, real_check = gb.miller_product_rows, verifier._check
    monkeypatch.setattr(gb, "miller_product_rows", lambda g1, g2: rows.append(g1.shape[0]) or real_product(g1, g2))
    monkeypatch.setattr(verifier, "_check", lambda *a: alone.append(a) or real_check(*a))
    assert verifier.verify_many(items, device="gpu") == [kind is None or i != at for i in range(n)]
    assert rows == [2 * n + 2]
    assert len(alone) == {None: 0, "pi_b_outside_g2": 1}.get(kind, n)
