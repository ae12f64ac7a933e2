"""The compiled pieces of the CPU group iFFT (distprove.fqlimbs, backends/cpu/groupfft.py kernels)
against the plain-Python reference (distprove.bn254) on random inputs and on the exceptional
cases: zero and q − 1 field elements, points at infinity, P + P and P − P additions, and
scalars 0, 1, r − 1, r."""

from __future__ import annotations

import random

import numpy as np
import pytest

from distprove import bn254, fqlimbs, glv
from distprove.backends.cpu import groupfft as gf
from distprove.bn254 import FQ_MONT, FQ_MONT_INV, G1, G2, Q, R

GROUPS = [pytest.param(G1, id="G1"), pytest.param(G2, id="G2")]


def _enc(v: int) -> tuple:
    return fqlimbs.limbs_of(v * FQ_MONT % Q)


def _dec(t: tuple) -> int:
    return sum(int(w) << (32 * i) for i, w in enumerate(t)) * FQ_MONT_INV % Q


def _comps(group: bn254.Group, e) -> list[int]:
    return [e] if group is G1 else list(e)


def _jac_rows(group: bn254.Group, pts: list) -> np.ndarray:
    """Jacobian reference points as (n, 3d, 8) Montgomery limb rows."""
    d = 1 if group is G1 else 2
    out = np.zeros((len(pts), 3 * d, 8), dtype=np.uint64)
    for i, p in enumerate(pts):
        out[i] = [_enc(c) for e in p for c in _comps(group, e)]
    return out


def _jac_random_z(group: bn254.Group, p, rng: random.Random):
    """A Jacobian form of affine p (or infinity) with a random Z."""
    f = group.f
    if p is None:
        return bn254.to_jacobian(group, None)
    z = rng.randrange(1, Q) if group is G1 else (rng.randrange(Q), rng.randrange(1, Q))
    z2 = f.sqr(z)
    return f.mul(p[0], z2), f.mul(p[1], f.mul(z2, z)), z


def _affine(group: bn254.Group, jac: np.ndarray) -> list:
    return bn254.points_from_limbs(group, gf.affine_to_limbs(group, gf._to_affine(group, jac)))


def test_field_ops_match_python() -> None:
    rng = random.Random()
    vals = [0, 1, 2, Q - 1, Q - 2] + [rng.randrange(Q) for _ in range(40)]
    for a in vals:
        b = rng.choice(vals)
        ea, eb = _enc(a), _enc(b)
        assert _dec(fqlimbs.fq_mul(ea, eb)) == a * b % Q
        assert _dec(fqlimbs.fq_add(ea, eb)) == (a + b) % Q
        assert _dec(fqlimbs.fq_sub(ea, eb)) == (a - b) % Q
        assert _dec(fqlimbs.fq_neg(ea)) == -a % Q
        if a:
            assert _dec(fqlimbs.fq_inv(ea)) == pow(a, -1, Q)
    for _ in range(20):
        a = (rng.choice(vals), rng.choice(vals))
        b = (rng.choice(vals), rng.choice(vals))
        ea, eb = (_enc(a[0]), _enc(a[1])), (_enc(b[0]), _enc(b[1]))
        for got, want in [
            (fqlimbs.e_mul(ea, eb, 2), bn254.fq2_mul(a, b)),
            (fqlimbs.e_sqr(ea, 2), bn254.fq2_sqr(a)),
            (fqlimbs.e_sub(ea, eb, 2), bn254.fq2_sub(a, b)),
            (fqlimbs.e_mul(ea, eb, 1), (a[0] * b[0] % Q, 0)),
        ]:
            assert (_dec(got[0]), _dec(got[1])) == want
        if a != (0, 0):
            got = fqlimbs.e_inv(ea, 2)
            assert (_dec(got[0]), _dec(got[1])) == bn254.fq2_inv(a)


@pytest.mark.parametrize("group", GROUPS)
def test_madd_rows_complete(group: bn254.Group) -> None:
    """(±P) + Q on random rows and on P + P, P − P and infinity on either side or both."""
    rng = random.Random()
    pts = [bn254.mul(group, group.generator, rng.randrange(1, R)) for _ in range(6)]
    a, b, c = pts[0], pts[1], pts[2]
    cases = [(a, b), (c, c), (a, bn254.neg(group, a)), (None, b), (c, None), (None, None)] + list(zip(pts, pts[::-1]))
    jac = _jac_rows(group, [_jac_random_z(group, p, rng) for p, _ in cases])
    aff = gf.affine_from_limbs(group, bn254.points_to_limbs(group, [q for _, q in cases]))
    for negate in (False, True):
        got = _affine(group, gf._madd(group, jac, aff, negate=negate))
        want = [bn254.add(group, bn254.neg(group, p) if negate and p is not None else p, q) for p, q in cases]
        assert got == want, negate


@pytest.mark.parametrize("group", GROUPS)
def test_to_affine_with_infinity(group: bn254.Group) -> None:
    rng = random.Random()
    pts = [bn254.mul(group, group.generator, rng.randrange(1, R)) for _ in range(5)]
    pts[2] = None
    jac = _jac_rows(group, [_jac_random_z(group, p, rng) for p in pts])
    assert _affine(group, jac) == pts
    assert gf._to_affine(group, jac[:0]).shape == (0, jac.shape[1] * 2 // 3, 8)


@pytest.mark.parametrize("group", GROUPS)
def test_mul_many_edge_scalars(group: bn254.Group) -> None:
    """Scalars 0, 1, r − 1, r, λ, −λ and random ones on random points, repeated points, ±P pairs and
    infinity; every row against bn254.mul."""
    rng = random.Random()
    p = bn254.mul(group, group.generator, rng.randrange(1, R))
    pts = [p, p, bn254.neg(group, p), None, group.generator] + [bn254.mul(group, group.generator, rng.randrange(1, R)) for _ in range(4)]
    lam = glv.LAMBDA
    specials = [0, 1, R - 1, R, lam, R - lam, 2, (1 << 127) - 1, rng.randrange(R)]
    rows, ks = [], []
    for k in specials:
        for q in pts:
            rows.append(q)
            ks.append(k)
    v = gf.affine_from_limbs(group, bn254.points_to_limbs(group, rows))
    got = _affine(group, gf.mul_many(group, v, ks))
    assert got == [bn254.mul(group, q, k) if q is not None else None for q, k in zip(rows, ks)]


@pytest.mark.parametrize("group", GROUPS)
def test_limb_round_trip(group: bn254.Group) -> None:
    pts = [group.generator, None, bn254.mul(group, group.generator, 5)]
    limbs = bn254.points_to_limbs(group, pts)
    assert np.array_equal(gf.affine_to_limbs(group, gf.affine_from_limbs(group, limbs)), limbs)
