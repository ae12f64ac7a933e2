"""distprove.pairing against py_ecc: the same pairing values (after the final exponentiation), for
points of G2 and for twist points outside it, and the field tower's identities."""

from __future__ import annotations

import random

import pytest
from py_ecc.optimized_bn128 import FQ, FQ2, FQ12, final_exponentiate, pairing

from distprove import bn254
from distprove import pairing as pr

Q = bn254.Q


def reference(p: bn254.Affine, q: bn254.Affine) -> pr.Fq12:
    """py_ecc's reduced pairing e(p, q), as a tower element."""
    if p is None or q is None:
        return pr.ONE
    g1 = (FQ(p[0]), FQ(p[1]), FQ.one())
    g2 = (FQ2(list(q[0])), FQ2(list(q[1])), FQ2.one())
    return pr.from_py_ecc(final_exponentiate(pairing(g2, g1, final_exponentiate=False)).coeffs)


def ours(p: bn254.Affine, q: bn254.Affine) -> pr.Fq12:
    return pr.final_exponentiation(pr.miller_loop(p, q))


def fq2_sqrt(a: tuple[int, int]) -> tuple[int, int] | None:
    """A square root in Fq2 (p = 3 mod 4), or None."""
    a0, a1 = a
    n = (a0 * a0 + a1 * a1) % Q
    s = pow(n, (Q + 1) // 4, Q)
    if s * s % Q != n:
        return None
    for d in ((a0 + s) * pow(2, -1, Q) % Q, (a0 - s) * pow(2, -1, Q) % Q):
        x0 = pow(d, (Q + 1) // 4, Q)
        if x0 * x0 % Q == d and x0:
            x1 = a1 * pow(2 * x0, -1, Q) % Q
            if ((x0 * x0 - x1 * x1) % Q, 2 * x0 * x1 % Q) == (a0 % Q, a1 % Q):
                return (x0, x1)
    return None


def twist_point_outside_g2(rng: random.Random) -> bn254.Affine:
    """A random point of y^2 = x^3 + 3/xi over Fq2 (almost surely not in G2: the twist has a large cofactor)."""
    b = bn254.G2_B
    while True:
        x = (rng.randrange(Q), rng.randrange(Q))
        x3 = bn254.fq2_mul(bn254.fq2_mul(x, x), x)
        y = fq2_sqrt(bn254.fq2_add(x3, b))
        if y is not None:
            pt = (x, y)
            assert bn254.is_on_curve(bn254.G2, pt)
            assert bn254.mul(bn254.G2, pt, bn254.R - 1) != bn254.neg(bn254.G2, pt)  # r * pt != O
            return pt


@pytest.mark.parametrize("seed", range(3))
def test_pairing_equals_py_ecc_on_g1_g2(seed: int) -> None:
    rng = random.Random(seed)
    p = bn254.mul(bn254.G1, bn254.G1_GEN, rng.randrange(1, bn254.R))
    q = bn254.mul(bn254.G2, bn254.G2_GEN, rng.randrange(1, bn254.R))
    assert ours(p, q) == reference(p, q)


def test_pairing_equals_py_ecc_outside_g2() -> None:
    """snarkjs does no subgroup check on pi_b, so neither may the verifier's pairing assume it."""
    rng = random.Random(7)
    p = bn254.mul(bn254.G1, bn254.G1_GEN, rng.randrange(1, bn254.R))
    q = twist_point_outside_g2(rng)
    assert ours(p, q) == reference(p, q)


def test_bilinear_nondegenerate_and_infinity() -> None:
    a, b = 0x1234567, 0x89ABCDEF
    g1, g2 = bn254.G1_GEN, bn254.G2_GEN
    e = ours(g1, g2)
    assert e != pr.ONE and pr.power(e, bn254.R) == pr.ONE
    assert ours(bn254.mul(bn254.G1, g1, a), bn254.mul(bn254.G2, g2, b)) == pr.power(e, a * b)
    assert pr.product_is_one([pr.miller_loop(bn254.neg(bn254.G1, g1), g2), pr.miller_loop(g1, g2)])
    assert pr.miller_loop(None, g2) == pr.ONE and pr.miller_loop(g1, None) == pr.ONE


def test_multi_miller_loop_equals_the_product_of_loops() -> None:
    rng = random.Random(5)
    pairs = [(bn254.mul(bn254.G1, bn254.G1_GEN, rng.randrange(1, bn254.R)), bn254.mul(bn254.G2, bn254.G2_GEN, rng.randrange(1, bn254.R)))
             for _ in range(3)] + [(None, bn254.G2_GEN), (bn254.G1_GEN, twist_point_outside_g2(rng))]
    expect = pr.ONE
    for p, q in pairs:
        expect = pr.mul(expect, reference(p, q))
    assert pr.final_exponentiation(pr.multi_miller_loop(pairs)) == expect


def test_degenerate_steps_fall_back_to_py_ecc(monkeypatch: pytest.MonkeyPatch) -> None:
    """A loop that meets a vertical line (only a small-order Q outside G2 can) is py_ecc's."""
    p, q = bn254.G1_GEN, bn254.G2_GEN

    def vertical(*args):
        raise pr._Degenerate

    monkeypatch.setattr(pr, "_line", vertical)
    assert pr.final_exponentiation(pr.miller_loop(p, q)) == reference(p, q)


def test_fast_final_exponentiation_is_the_exact_one_to_a_fixed_power() -> None:
    """final_exponentiation_fast(f) == final_exponentiation(f)^(2x(6x^2+3x+1)) for pairing values,
    values of a Q outside G2, and arbitrary Fq12 elements; and both say "== 1" alike."""
    rng = random.Random(17)
    values = [pr.miller_loop(bn254.mul(bn254.G1, bn254.G1_GEN, rng.randrange(1, bn254.R)), bn254.G2_GEN),
              pr.miller_loop(bn254.G1_GEN, twist_point_outside_g2(rng)),
              tuple(tuple((rng.randrange(Q), rng.randrange(Q)) for _ in range(3)) for _ in range(2))]
    for f in values:
        assert pr.final_exponentiation_fast(f) == pr.power(pr.final_exponentiation(f), pr.FAST_FE_POWER)
    g1, g2 = bn254.G1_GEN, bn254.G2_GEN
    one = pr.mul(pr.miller_loop(bn254.neg(bn254.G1, g1), g2), pr.miller_loop(g1, g2))
    assert pr.final_exponentiation(one) == pr.ONE and pr.final_exponentiation_fast(one) == pr.ONE
    assert pr.final_exponentiation_fast(pr.miller_loop(g1, g2)) != pr.ONE


def test_tower_identities() -> None:
    rng = random.Random(3)

    def rand12() -> pr.Fq12:
        return tuple(tuple((rng.randrange(Q), rng.randrange(Q)) for _ in range(3)) for _ in range(2))  # type: ignore[return-value]

    x, y = rand12(), rand12()
    assert pr.frobenius(x) == pr.power(x, Q) and pr.frobenius2(x) == pr.power(x, Q * Q)
    assert pr.sqr(x) == pr.mul(x, x)
    assert pr.mul(x, pr.inv(x)) == pr.ONE
    assert pr.mul(pr.mul(x, y), pr.inv(y)) == x
    as_py = FQ12([int(c) for c in _to_py_ecc(pr.mul(x, y))])
    assert as_py == FQ12([int(c) for c in _to_py_ecc(x)]) * FQ12([int(c) for c in _to_py_ecc(y)])


def _to_py_ecc(x: pr.Fq12) -> list[int]:
    """The inverse of pairing.from_py_ecc: tower element -> py_ecc's 12 coefficients."""
    co = [0] * 12
    for j in range(2):
        for k in range(3):
            a, b = (int(c) for c in x[j][k])
            co[2 * k + j] = (co[2 * k + j] + a - 9 * b) % Q
            co[2 * k + j + 6] = (co[2 * k + j + 6] + b) % Q
    return co


def test_sparse_line_product_equals_the_dense_one() -> None:
    """_mul_line's written-out product equals a full Fq12 product by the line a0 + b0 w + b1 v w."""
    rng = random.Random(23)

    def f2() -> pr.Fq2:
        return (pr.P.__class__(rng.randrange(Q)), pr.P.__class__(rng.randrange(Q)))

    f = ((f2(), f2(), f2()), (f2(), f2(), f2()))
    a0, b0, b1 = pr.P.__class__(rng.randrange(Q)), f2(), f2()
    dense = (((a0, pr.P.__class__(0)), pr.F2_ZERO, pr.F2_ZERO), (b0, b1, pr.F2_ZERO))
    assert pr._mul_line(f, a0, b0, b1) == pr.mul(f, dense)


def test_prepared_lines_give_the_same_loop() -> None:
    """prepared_miller_loop over prepare()d points equals the product of the points' own loops
    (exactly, before the final exponentiation), and an empty product is one."""
    rng = random.Random(29)
    pairs = [(bn254.mul(bn254.G1, bn254.G1_GEN, rng.randrange(1, bn254.R)), bn254.mul(bn254.G2, bn254.G2_GEN, rng.randrange(1, bn254.R)))
             for _ in range(3)]
    expect = pr.ONE
    for p, q in pairs:
        expect = pr.mul(expect, pr.miller_loop(p, q))
    assert pr.prepared_miller_loop([(p, pr.prepare(q)) for p, q in pairs]) == expect
    reduced = pr.ONE
    for p, q in pairs:
        reduced = pr.mul(reduced, reference(p, q))
    assert pr.final_exponentiation(expect) == reduced
    assert pr.prepared_miller_loop([]) == pr.ONE


def test_miller_loop_value_is_pinned() -> None:
    """The Miller loop's exact value (not only after the final exponentiation) is what the GPU
    Miller loop reproduces to the bit: a change of its lines' scaling or order must show here."""
    import hashlib

    f = pr.miller_loop(bn254.G1_GEN, bn254.G2_GEN)
    digest = hashlib.sha256(repr([int(c) for half in f for f2 in half for c in f2]).encode()).hexdigest()
    assert digest == "752dccac103e72746e34974e9a5ab54248f36c205292433ae9d742cbcf28e25d"
