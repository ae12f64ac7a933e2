"""The fast host combine and blinding (distprove.curve) against the bn254 reference.

Every fast path runs twice: on gmpy2.mpz (when installed) and on plain ints.
"""

from __future__ import annotations

import random

import pytest

from distprove import bn254, curve
from distprove.bn254 import G1, G2, Q, R
from distprove.stages.assemble import assemble, assemble_windows
from distprove.stages.msm import combine, num_windows

try:
    import gmpy2
except ImportError:
    gmpy2 = None

MODULI = [pytest.param(Q, id="int")] + (
    [pytest.param(gmpy2.mpz(Q), id="mpz")] if gmpy2 is not None else []
)


@pytest.fixture(params=MODULI)
def fq(request: pytest.FixtureRequest, monkeypatch: pytest.MonkeyPatch) -> int:
    """Q in the integer type under test, also made the default of the public entry points."""
    monkeypatch.setattr(curve, "default_modulus", lambda: request.param)
    return request.param


def points(group: bn254.Group, n: int, rng: random.Random) -> list[bn254.Affine]:
    """n distinct pseudo-random points: k*G, then repeated affine additions of another multiple."""
    p = bn254.mul(group, group.generator, rng.randrange(1, R))
    step = bn254.mul(group, group.generator, rng.randrange(1, R))
    out = []
    for _ in range(n):
        out.append(p)
        p = bn254.add(group, p, step)
    return out


def ref_combine(group: bn254.Group, sums: dict, c: int) -> bn254.Affine:
    """The reference Horner (bn254's Jacobian doubling and mixed addition)."""
    acc = bn254.to_jacobian(group, None)
    for w in range(num_windows(c) - 1, -1, -1):
        for _ in range(c):
            acc = bn254.jac_double(group, acc)
        acc = bn254.jac_add_affine(group, acc, sums.get(w))
    return bn254.to_affine(group, acc)


def ref_assemble(vk: dict, m: dict, r: int, s: int) -> tuple:
    """DESIGN.md step 5 with the reference scalar multiplication."""

    def lin(group: bn254.Group, *terms: tuple[int, bn254.Affine]) -> bn254.Affine:
        acc = bn254.to_jacobian(group, None)
        for k, p in terms:
            acc = bn254.jac_add(group, acc, bn254.jac_mul(group, bn254.to_jacobian(group, p), k))
        return bn254.to_affine(group, acc)

    pi_a = lin(G1, (1, m["A"]), (1, vk["alpha1"]), (r, vk["delta1"]))
    pi_b = lin(G2, (1, m["B2"]), (1, vk["beta2"]), (s, vk["delta2"]))
    b1 = lin(G1, (1, m["B1"]), (1, vk["beta1"]), (s, vk["delta1"]))
    pi_c = lin(G1, (1, m["C"]), (1, m["H"]), (s, pi_a), (r, b1), ((-r * s) % R, vk["delta1"]))
    return pi_a, pi_b, pi_c


def assert_int_point(p: bn254.Affine) -> None:
    if p is not None:
        flat = [v for c in p for v in (c if isinstance(c, tuple) else (c,))]
        assert all(type(v) is int for v in flat), p


@pytest.mark.parametrize("k", [0, 1, 2, 15, 16, 17, 31, 2**253 + 12345, R - 1, R, 2**256 - 1])
def test_wnaf_digits(k: int) -> None:
    digits = curve.wnaf(k)
    assert sum(d << pos for pos, d in digits) == k
    width = curve.WNAF_WIDTH
    assert all(d % 2 == 1 and -(1 << (width - 1)) < d < 1 << (width - 1) for _, d in digits)
    positions = [pos for pos, _ in digits]
    assert all(b - a >= width for a, b in zip(positions, positions[1:]))


@pytest.mark.parametrize("group", [G1, G2], ids=["G1", "G2"])
@pytest.mark.parametrize("c", [3, 16])
def test_combine_equals_reference(group: bn254.Group, c: int, fq: int) -> None:
    rng = random.Random(c * 7 + (group is G2))
    w_count = num_windows(c)
    pts = points(group, w_count, rng)
    sums = {w: (None if rng.random() < 0.25 else pts[w]) for w in range(w_count)}
    sums[w_count - 1] = None  # an infinite top window: the chain starts lower
    got = combine(group, sums, c)
    assert got == ref_combine(group, sums, c)
    assert_int_point(got)
    assert combine(group, {w: None for w in range(w_count)}, c) is None


@pytest.mark.parametrize("group", [G1, G2], ids=["G1", "G2"])
def test_combine_doubling_and_cancelling_cases(group: bn254.Group, fq: int) -> None:
    """Additions that hit P + P and P + (-P) inside the chain, and a chain that returns from infinity."""
    g = group.generator
    g4 = bn254.mul(group, g, 4)
    w_count = num_windows(2)
    pad = {w: None for w in range(w_count)}
    assert combine(group, {**pad, 1: g, 0: g4}, 2) == bn254.mul(group, g, 8)  # 4G + 4G
    assert combine(group, {**pad, 1: g, 0: bn254.neg(group, g4)}, 2) is None  # 4G - 4G
    sums = {**pad, 2: g, 1: bn254.neg(group, g4), 0: g}  # 16G - 16G, then + G
    assert combine(group, sums, 2) == g


@pytest.mark.parametrize("group", [G1, G2], ids=["G1", "G2"])
def test_scalar_terms_equal_reference(group: bn254.Group, fq: int) -> None:
    rng = random.Random(11 + (group is G2))
    p, q = points(group, 2, rng)
    for k in [0, 1, 2, 3, 31, 32, R - 1, R, R + 1, rng.randrange(R), rng.randrange(R)]:
        acc = curve.combination(group, (), [(k, p), (1, q), (k, None)], fq)
        want = bn254.add(group, bn254.mul(group, p, k), q)
        assert curve.to_affine(group, [acc], fq) == [want], k
    # k P + (R - k) P cancels; a window term and scalar terms share one chain
    k = rng.randrange(2, R)
    assert curve.combination(group, (), [(k, p), (R - k, p)], fq) is None
    acc = curve.combination(group, [(4, {0: q, 2: p})], [(k, p)], fq)
    want = bn254.add(group, bn254.add(group, q, bn254.mul(group, p, 256)), bn254.mul(group, p, k))
    assert curve.to_affine(group, [acc], fq) == [want]


def random_case(rng: random.Random, c: int) -> tuple[dict, dict, dict]:
    """A key's vk points, five MSMs' window sums (some infinite) and their combined results."""
    w_count = num_windows(c)
    g1, g2 = points(G1, 4 * w_count + 3, rng), points(G2, w_count + 2, rng)
    vk = {"alpha1": g1[0], "beta1": g1[1], "delta1": g1[2], "beta2": g2[0], "delta2": g2[1]}
    sums = {}
    for i, name in enumerate(("A", "B1", "C", "H")):
        sums[name] = {w: g1[3 + i * w_count + w] for w in range(w_count)}
    sums["B2"] = {w: g2[2 + w] for w in range(w_count)}
    for name in sums:
        for w in rng.sample(range(w_count), 2):
            sums[name][w] = None
    results = {name: ref_combine(G2 if name == "B2" else G1, sums[name], c) for name in sums}
    return vk, sums, results


@pytest.mark.parametrize("rs", [(0, 0), (1, 1), (0, "x"), ("x", 0), (1, "x"), ("x", 1), ("x", "x")])
def test_assemble_equals_reference(rs: tuple, fq: int) -> None:
    rng = random.Random(str(rs))
    r, s = (rng.randrange(R) if v == "x" else v for v in rs)
    c = 5
    vk, sums, results = random_case(rng, c)
    want = ref_assemble(vk, results, r, s)
    got = assemble(vk, results, r, s)
    assert got == want, f"r={r} s={s}"
    assert assemble_windows(vk, sums, {name: c for name in sums}, r, s) == want, f"r={r} s={s}"
    for p in got:
        assert_int_point(p)


def test_assemble_infinite_results(fq: int) -> None:
    """MSM results at infinity (e.g. an all-zero witness part) and all-infinite window sums."""
    rng = random.Random(5)
    c = 6
    vk, sums, results = random_case(rng, c)
    r, s = rng.randrange(R), rng.randrange(R)
    for name in ("A", "C", "H", "B2"):
        results[name] = None
        sums[name] = {w: None for w in range(num_windows(c))}
    want = ref_assemble(vk, results, r, s)
    assert assemble(vk, results, r, s) == want
    assert assemble_windows(vk, sums, {name: c for name in sums}, r, s) == want


def test_assemble_windows_mixed_widths(fq: int) -> None:
    """C and H share a chain even when their window widths differ."""
    rng = random.Random(9)
    vk, sums, results = random_case(rng, 4)
    h_pts = points(G1, num_windows(7), rng)
    sums["H"] = dict(enumerate(h_pts))
    results["H"] = ref_combine(G1, sums["H"], 7)
    widths = {name: 4 for name in sums} | {"H": 7}
    r, s = rng.randrange(R), rng.randrange(R)
    assert assemble_windows(vk, sums, widths, r, s) == ref_assemble(vk, results, r, s)


def test_assemble_windows_checks_inputs() -> None:
    rng = random.Random(3)
    vk, sums, _ = random_case(rng, 8)
    widths = {name: 8 for name in sums}
    first = sums["A"].pop(0)
    with pytest.raises(ValueError, match="missing for windows"):
        assemble_windows(vk, sums, widths, 1, 2)
    sums["A"][0] = first
    with pytest.raises(ValueError, match="window width of B2"):
        assemble_windows(vk, sums, {k: v for k, v in widths.items() if k != "B2"}, 1, 2)
    with pytest.raises(ValueError, match="missing points"):
        assemble_windows({k: v for k, v in vk.items() if k != "delta2"}, sums, widths, 1, 2)


def _rand_nonzero(group: bn254.Group, rng: random.Random):
    if group is G1:
        return rng.randrange(1, Q)
    return (rng.randrange(Q), rng.randrange(1, Q))


@pytest.mark.parametrize("group", [G1, G2], ids=["G1", "G2"])
@pytest.mark.parametrize("montgomery", [False, True], ids=["std", "mont"])
def test_xyzz_to_affine_equals_reference(group: bn254.Group, montgomery: bool, fq: int) -> None:
    """Random Z per point, infinity rows (ZZ = 0) among them, coordinates in standard or
    Montgomery form: the one-inversion conversion gives the reference's affine points."""
    rng = random.Random()
    f = group.f
    pts = points(group, 6, rng)
    pts[2:2] = [None]
    pts.append(None)
    mont = (lambda v: bn254.fq_to_mont(v)) if montgomery else (lambda v: v)
    conv = (lambda v: mont(v)) if group is G1 else (lambda v: (mont(v[0]), mont(v[1])))
    rows = []
    for p in pts:
        if p is None:
            zero = 0 if group is G1 else (0, 0)
            junk = _rand_nonzero(group, rng)
            rows.append([junk, junk, zero, zero if rng.random() < 0.5 else junk])
            continue
        z = _rand_nonzero(group, rng)
        z2 = f.mul(z, z)
        z3 = f.mul(z2, z)
        rows.append([conv(f.mul(p[0], z2)), conv(f.mul(p[1], z3)), conv(z2), conv(z3)])
    assert curve.xyzz_to_affine(group, rows) == pts


@pytest.mark.parametrize("group", [G1, G2], ids=["G1", "G2"])
def test_add_equals_reference(group: bn254.Group, fq: int) -> None:
    """Affine addition, with the doubling, cancelling and infinity cases."""
    rng = random.Random()
    p, q = points(group, 2, rng)
    cases = [(p, q), (p, p), (p, bn254.neg(group, p)), (None, q), (p, None), (None, None)]
    for a, b in cases:
        assert curve.add(group, a, b) == bn254.add(group, a, b)


def test_fast_int_is_gmpy2_when_installed() -> None:
    """fast_int (the integer type of the synthetic circuits, the dev setup and the CPU group FFT)
    and the default modulus follow gmpy2's presence and keep the value."""
    want = int if gmpy2 is None else type(gmpy2.mpz(0))
    assert isinstance(curve.fast_int(Q), want) and curve.fast_int(Q) == Q
    assert isinstance(curve.default_modulus(), want) and curve.default_modulus() == Q
