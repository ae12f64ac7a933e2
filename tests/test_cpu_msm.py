"""CPU Pippenger and the shared window logic against plain scalar multiplication.

Bases mostly have a known discrete log (P_i = k_i G, so the expected MSM is (sum s_i k_i) G),
plus infinity, repeated and negated bases and, in G1, points hashed onto the curve whose
contribution is computed with bn254.mul. Every run draws fresh inputs; the seed is in the
failure message.
"""

from __future__ import annotations

import random
import secrets

import numpy as np
import pytest

from distprove import bn254
from distprove.backends.cpu import CpuBackend
from distprove.backends.cpu import msm as cpu_msm
from distprove.backends.cpu.msm import batch_add, msm_windows, to_mpz_points
from distprove.errors import BackendUnavailable
from distprove.bn254 import G1, G2, Q, R
from distprove.stages.msm import (
    combine,
    default_window,
    live_fraction,
    num_windows,
    signed_digits,
    signed_digits_array,
    split_windows,
)

EDGE_SCALARS = [0, 1, 2, R - 1, R - 2, (R - 1) // 2, 1 << 253, (1 << 254) - 1]


def _rng() -> tuple[random.Random, int]:
    seed = secrets.randbits(32)
    return random.Random(seed), seed


def _hashed_g1(rng: random.Random) -> tuple[int, int]:
    """A G1 point of unknown discrete log: random x until x^3 + 3 is a square (q = 3 mod 4)."""
    while True:
        x = rng.randrange(Q)
        t = (x * x * x + 3) % Q
        y = pow(t, (Q + 1) // 4, Q)
        if y * y % Q == t:
            return (x, y)


def _known_bases(group: bn254.Group, rng: random.Random, n: int) -> tuple[list, list[int]]:
    """n bases P_i = k_i G with k_i = k0 + i*step, then some made infinity, repeated or negated.

    Returns (bases, dlogs) with dlog 0 for infinity.
    """
    k0, step = rng.randrange(1, R), rng.randrange(1, R)
    d = bn254.mul(group, group.generator, step)
    acc = bn254.jac_mul(group, bn254.to_jacobian(group, group.generator), k0)
    jac = []
    for _ in range(n):
        jac.append(acc)
        acc = bn254.jac_add_affine(group, acc, d)
    bases = bn254.batch_to_affine(group, jac)
    ks = [(k0 + i * step) % R for i in range(n)]
    for _ in range(n // 5):
        i, j = rng.randrange(n), rng.randrange(n)
        kind = rng.randrange(3)
        if kind == 0:
            bases[i], ks[i] = None, 0
        elif kind == 1:
            bases[i], ks[i] = bases[j], ks[j]
        else:
            bases[i], ks[i] = bn254.neg(group, bases[j]), (-ks[j]) % R
    return bases, ks


def _scalars(rng: random.Random, n: int) -> list[int]:
    pool = EDGE_SCALARS + [rng.randrange(R) for _ in range(4)]
    return [rng.choice(pool) if rng.random() < 0.5 else rng.randrange(R) for _ in range(n)]


@pytest.fixture(params=["int", "gmpy2"])
def arith(request: pytest.FixtureRequest) -> str:
    """The integer type of the MSM arithmetic: plain ints (always) or the optional gmpy2.mpz."""
    if request.param == "gmpy2" and not cpu_msm.mpz_available():
        pytest.skip("gmpy2 not installed")
    return request.param


def _as(arith: str, group: bn254.Group, bases: list) -> list:
    return to_mpz_points(group, bases) if arith == "gmpy2" else bases


def _plain(group: bn254.Group, p: bn254.Affine) -> bool:
    """True when p is infinity or has plain Python-int coordinates."""
    coords = [] if p is None else (list(p) if group is G1 else [*p[0], *p[1]])
    return all(type(v) is int for v in coords)


def _msm(group: bn254.Group, bases: list, scalars: list[int], c: int) -> bn254.Affine:
    sums = msm_windows(group, bases, bn254.limbs_from_ints(scalars), c, 0, num_windows(c))
    assert all(_plain(group, s) for s in sums)
    return combine(group, dict(enumerate(sums)), c)


# --- signed digits, windows, combine ------------------------------------------------


@pytest.mark.parametrize("c", range(2, 25))
def test_signed_digits_reconstruct(c: int) -> None:
    rng, seed = _rng()
    scalars = EDGE_SCALARS + [rng.randrange(R) for _ in range(50)] + [1 << rng.randrange(254)]
    arr = signed_digits_array(bn254.limbs_from_ints(scalars), c)
    assert arr.shape == (len(scalars), num_windows(c)) and arr.dtype == np.int32
    for s, row in zip(scalars, arr.tolist()):
        d = signed_digits(s, c)
        assert row == d, f"seed={seed} s={s}"
        assert sum(x << (c * w) for w, x in enumerate(d)) == s, f"seed={seed} s={s}"
        assert all(-(1 << (c - 1)) <= x < 1 << (c - 1) for x in d), f"seed={seed} s={s}"


def test_signed_digits_reject_carry_out() -> None:
    s = (1 << 256) - 1  # top 16-bit window carries out
    with pytest.raises(ValueError):
        signed_digits(s, 16)
    with pytest.raises(ValueError):
        signed_digits_array(bn254.limbs_from_ints([s]), 16)


def test_window_count_and_width_bounds() -> None:
    assert [num_windows(c) for c in (2, 8, 11, 16, 24)] == [128, 32, 24, 16, 11]
    for bad in (1, 25):
        with pytest.raises(ValueError):
            num_windows(bad)
    for n in (0, 1, 100, 1 << 14, 1 << 20):
        for g in (G1, G2):
            assert 2 <= default_window(n, g) <= 24


def test_live_fraction_counts_scalars_other_than_zero_and_one() -> None:
    """0 and 1 are not live; 2, r - 1 and a 1 in a higher limb are; every row is read when there
    are at most ``samples`` of them, every ceil(n / samples)-th row when there are more."""
    vals = [0, 1, 2, R - 1, 1 << 32, (1 << 32) + 1, 0, 1]
    limbs = bn254.limbs_from_ints(vals)
    assert live_fraction(limbs) == 4 / 8
    assert live_fraction(limbs[:2]) == 0.0 and live_fraction(limbs[2:4]) == 1.0
    assert live_fraction(np.zeros((0, 8), dtype=np.uint32)) == 1.0
    rng = np.random.default_rng(5)
    n = 100_003
    big = np.zeros((n, 8), dtype=np.uint32)
    big[:, 0] = rng.integers(0, 2, size=n)  # zeros and ones
    live_rows = rng.random(n) < 0.1
    big[live_rows, 3] = 7
    assert abs(live_fraction(big) - live_rows.mean()) < 0.02
    assert live_fraction(big, samples=n) == pytest.approx(live_rows.mean())
    assert live_fraction(big, samples=10) == live_rows[:: -(-n // 10)].mean()


@pytest.mark.parametrize("n, samples", [(1, 4096), (7, 3), (4096, 4096), (5000, 4096), (100_003, 4096)])
def test_live_fractions_of_a_stack_are_each_rows_live_fraction(n: int, samples: int) -> None:
    """A group's live shares in one pass over its stack are, proof by proof, what
    :func:`live_fraction` gives each witness alone (the same rows read), whatever the witnesses'
    mix of zeros, ones and others."""
    from distprove.stages.msm import live_fractions

    rng = np.random.default_rng(n)
    stack = np.zeros((4, n, 8), dtype=np.uint32)
    for g, p in enumerate((0.0, 0.1, 0.5, 1.0)):
        stack[g, :, 0] = rng.integers(0, 2, size=n)
        live = rng.random(n) < p
        stack[g, live, rng.integers(0, 8)] = rng.integers(2, 1 << 32, size=int(live.sum()), dtype=np.uint64)
    got = live_fractions(stack, samples)
    assert got.shape == (4,)
    assert got.tolist() == [live_fraction(stack[g], samples) for g in range(4)]
    assert live_fractions(np.zeros((3, 0, 8), dtype=np.uint32)).tolist() == [1.0] * 3


def test_gpu_window_width_follows_the_live_points() -> None:
    """The GPU's width for n points with a fraction live other than 0/1 is its width for
    n * live uniform points (what reaches the buckets); live = 1 is the uniform choice."""
    from distprove.backends.gpu import msm as gmsm

    for g in (G1, G2):
        for lg in (16, 20, 22, 24):
            n = 1 << lg
            assert gmsm.pick_window(n, g, 1.0) == gmsm.pick_window(n, g)
            assert gmsm.pick_window(n, g, 0.1) == gmsm.pick_window(round(n * 0.1), g)
            assert gmsm.pick_window(n, g, 0.0) == gmsm.pick_window(1, g)
    assert gmsm.pick_window(1 << 22, G1, 0.1) < gmsm.pick_window(1 << 22, G1)


@pytest.mark.parametrize("w_count,parts", [(1, 1), (24, 1), (24, 5), (11, 11), (3, 7), (128, 9)])
def test_split_windows_tiles_range(w_count: int, parts: int) -> None:
    ranges = split_windows(w_count, parts)
    assert ranges[0][0] == 0 and ranges[-1][1] == w_count
    assert all(lo < hi for lo, hi in ranges)
    assert all(a[1] == b[0] for a, b in zip(ranges, ranges[1:]))
    assert len(ranges) == min(parts, w_count)
    sizes = [hi - lo for lo, hi in ranges]
    assert max(sizes) - min(sizes) <= 1


def test_combine_is_horner_and_checks_windows() -> None:
    rng, seed = _rng()
    c = 7
    w_count = num_windows(c)
    ks = [rng.randrange(R) for _ in range(w_count)]
    sums = {w: bn254.mul(G1, G1.generator, k) for w, k in enumerate(ks)}
    sums[3] = None
    ks[3] = 0
    expected = bn254.mul(G1, G1.generator, sum(k << (c * w) for w, k in enumerate(ks)) % R)
    assert combine(G1, sums, c) == expected, f"seed={seed}"
    del sums[5]
    with pytest.raises(ValueError):
        combine(G1, sums, c)
    ks[5] = 0
    expected = bn254.mul(G1, G1.generator, sum(k << (c * w) for w, k in enumerate(ks)) % R)
    assert combine(G1, sums, c, allow_missing=True) == expected, f"seed={seed}"
    with pytest.raises(ValueError):
        combine(G1, {w_count: None}, c, allow_missing=True)


# --- batch-affine addition ----------------------------------------------------------


@pytest.mark.parametrize("group", [G1, G2], ids=["G1", "G2"])
def test_batch_add_matches_reference(group: bn254.Group, arith: str) -> None:
    rng, seed = _rng()
    pts = [bn254.mul(group, group.generator, rng.randrange(1, R)) for _ in range(6)] + [None]
    ps, qs = [], []
    for p in pts:
        for q in pts:
            ps.append(p)
            qs.append(q)
            if p is not None:
                ps.append(p)
                qs.append(bn254.neg(group, p))
    fq = type(_as(arith, G1, [(1, 2)])[0][0])(Q)
    got = batch_add(group, _as(arith, group, ps), _as(arith, group, qs), fq)
    assert got == [bn254.add(group, p, q) for p, q in zip(ps, qs)], f"seed={seed}"


# --- Pippenger ----------------------------------------------------------------------


@pytest.mark.parametrize(
    "group,n,widths",
    [
        (G1, 1, [2, 9]),
        (G1, 2, [3, 12]),
        (G1, 3, [2, 5]),
        (G1, 1000, [4, 8, 11]),
        (G2, 1, [2, 6]),
        (G2, 3, [4]),
        (G2, 200, [5, 9]),
    ],
    ids=lambda v: getattr(v, "name", str(v)),
)
def test_msm_equals_sum_of_multiples(group: bn254.Group, n: int, widths: list[int], arith: str) -> None:
    rng, seed = _rng()
    bases, ks = _known_bases(group, rng, n)
    bases = _as(arith, group, bases)
    scalars = _scalars(rng, n)
    expected = bn254.mul(group, group.generator, sum(s * k for s, k in zip(scalars, ks)) % R)
    for c in widths:
        assert _msm(group, bases, scalars, c) == expected, f"seed={seed} c={c}"


@pytest.mark.parametrize("group", [G1, G2], ids=["G1", "G2"])
@pytest.mark.parametrize("value", [0, 1, R - 1, "random"])
def test_msm_all_equal_scalars(group: bn254.Group, value, arith: str) -> None:
    rng, seed = _rng()
    n = 40
    bases, ks = _known_bases(group, rng, n)
    bases = _as(arith, group, bases)
    s = rng.randrange(R) if value == "random" else value
    expected = bn254.mul(group, group.generator, s * sum(ks) % R)
    for c in (3, 8):
        assert _msm(group, bases, [s] * n, c) == expected, f"seed={seed} c={c}"


def test_msm_hashed_g1_bases(arith: str) -> None:
    """Bases of unknown discrete log, mixed with known ones; reference = sum of bn254.mul."""
    rng, seed = _rng()
    hashed = [_hashed_g1(rng) for _ in range(12)]
    known, ks = _known_bases(G1, rng, 30)
    bases = hashed + [hashed[0], bn254.neg(G1, hashed[1])] + known
    scalars = _scalars(rng, len(bases))
    acc = bn254.mul(G1, G1.generator, sum(s * k for s, k in zip(scalars[14:], ks)) % R)
    for s, p in zip(scalars[:14], bases[:14]):
        acc = bn254.add(G1, acc, bn254.mul(G1, p, s))
    for c in (2, 6, 10):
        assert _msm(G1, _as(arith, G1, bases), scalars, c) == acc, f"seed={seed} c={c}"


@pytest.mark.parametrize("group,c", [(G1, 5), (G1, 11), (G2, 8)], ids=["G1c5", "G1c11", "G2c8"])
def test_every_window_split_combines_to_same_point(group: bn254.Group, c: int) -> None:
    rng, seed = _rng()
    n = 60
    bases, _ = _known_bases(group, rng, n)
    limbs = bn254.limbs_from_ints(_scalars(rng, n))
    w_count = num_windows(c)
    whole = msm_windows(group, bases, limbs, c, 0, w_count)
    single = [msm_windows(group, bases, limbs, c, w, w + 1)[0] for w in range(w_count)]
    assert single == whole, f"seed={seed}"
    full = combine(group, dict(enumerate(whole)), c)
    for t in (1, 5, w_count - 1):
        parts = {}
        for lo, hi in ((0, t), (t, w_count)):
            parts.update(zip(range(lo, hi), msm_windows(group, bases, limbs, c, lo, hi)))
        assert combine(group, parts, c) == full, f"seed={seed} split={t}"


def test_msm_window_range_and_length_checks() -> None:
    limbs = bn254.limbs_from_ints([1, 2])
    bases = [G1.generator, G1.generator]
    for lo, hi in ((0, 0), (-1, 2), (3, 2), (0, num_windows(4) + 1)):
        with pytest.raises(ValueError):
            msm_windows(G1, bases, limbs, 4, lo, hi)
    with pytest.raises(ValueError):
        msm_windows(G1, bases[:1], limbs, 4, 0, 1)


def test_backend_slices_witness_for_c() -> None:
    """CpuBackend.msm_windows("C") uses w[n_public+1:] against key.c; others the whole witness."""
    import types

    rng, seed = _rng()
    n_vars, n_public = 9, 3
    bases, ks = _known_bases(G1, rng, n_vars)
    w = [1] + [rng.randrange(R) for _ in range(n_vars - 1)]
    limbs = bn254.points_to_limbs(G1, bases)
    key = types.SimpleNamespace(
        content_hash=f"test-{seed}", n_public=n_public, n_vars=n_vars, a=limbs, c=limbs[n_public + 1 :]
    )
    be = CpuBackend()
    c = 6
    for which, lo_sig in (("A", 0), ("C", n_public + 1)):
        sums = be.msm_windows(key, which, bn254.limbs_from_ints(w), c, 0, num_windows(c))
        exp = bn254.mul(G1, G1.generator, sum(s * k for s, k in zip(w[lo_sig:], ks[lo_sig:])) % R)
        assert combine(G1, dict(enumerate(sums)), c) == exp, f"seed={seed} {which}"


@pytest.mark.parametrize("use_gmpy2", [False, True, None])
def test_backend_gmpy2_switch(use_gmpy2, monkeypatch: pytest.MonkeyPatch) -> None:
    """Without gmpy2 the default falls back to ints and use_gmpy2=True is refused."""
    import types

    monkeypatch.setattr(cpu_msm, "gmpy2", None)
    if use_gmpy2:
        with pytest.raises(BackendUnavailable):
            CpuBackend(use_gmpy2=True)
        with pytest.raises(RuntimeError):
            to_mpz_points(G1, [G1.generator])
        return
    be = CpuBackend(use_gmpy2=use_gmpy2)
    key = types.SimpleNamespace(content_hash="gen", a=bn254.points_to_limbs(G1, [G1.generator] * 3))
    sums = be.msm_windows(key, "A", bn254.limbs_from_ints([1, 2, 3]), 4, 0, num_windows(4))
    assert combine(G1, dict(enumerate(sums)), 4) == bn254.mul(G1, G1.generator, 6)
    assert type(be._bases(key, "A")[0][0]) is int


def test_backend_key_cache_is_bounded_lru() -> None:
    import types

    be = CpuBackend(max_keys=2)
    keys = [
        types.SimpleNamespace(content_hash=f"k{i}", a=bn254.points_to_limbs(G1, [bn254.mul(G1, G1.generator, i + 1)]))
        for i in range(3)
    ]
    one = bn254.limbs_from_ints([1])
    for i in (0, 1, 0, 2):  # k1 is the least recently used when k2 arrives
        sums = be.msm_windows(keys[i], "A", one, 4, 0, num_windows(4))
        assert combine(G1, dict(enumerate(sums)), 4) == bn254.mul(G1, G1.generator, i + 1)
    assert list(be._states) == ["k0", "k2"]
    with pytest.raises(ValueError):
        CpuBackend(max_keys=0)
