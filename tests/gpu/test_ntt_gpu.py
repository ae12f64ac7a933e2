"""GPU NTT against the CPU reference (small sizes) and against exact properties (large sizes).

Every size 2^1 .. 2^20 and 2^24: up to 2^12 the whole output equals distprove/backends/cpu/ntt.py;
above, (1) a sparse input's output is checked exactly at sampled indices (sum of a few a_j w^{jk}),
(2) one output of a dense random input is evaluated by Horner in Python, (3) inverse(forward(x)) = x,
(4) the staged four-step equals the plain NTT, (5) the coset H step equals the CPU one.
The two-pass plan (max_pass_log 12, 2^12 tiles) and the other pass-kernel builds (gntt.BUILDS)
match the CPU reference up to 2^12 and the default engine bit for bit above.
"""

from __future__ import annotations

import random

import numpy as np
import pytest

from distprove import bn254
from distprove.backends.cpu import ntt as cpu_ntt
from distprove.bn254 import FR_MONT, R

pytestmark = pytest.mark.gpu

R_TOP = R >> 224  # top limb of r: a random top limb below it keeps the value below r


@pytest.fixture(scope="module")
def cp():
    return pytest.importorskip("cupy")


@pytest.fixture(scope="module")
def engine(cp):
    from distprove.backends.gpu import ntt as gntt

    return gntt.engine()


@pytest.fixture(scope="module")
def alt_engines(cp) -> dict:
    """The engines checked against the default (FP64-product butterflies): the 2^12-tile plan,
    and on both plans gntt.BUILDS (CIOS-product and Shoup-product butterflies, unsplit twiddles,
    eager reduction, the unfused load)."""
    from distprove.backends.gpu import ntt as gntt

    engines = {"default,plan12": gntt.NttEngine(gntt.CupyKernels(), 12)}
    for name, opts in gntt.BUILDS.items():
        k = gntt.CupyKernels(opts)
        engines |= {f"{name},plan{mp}": gntt.NttEngine(k, mp) for mp in (9, 12)}
    return engines


def random_limbs(n: int, seed: int) -> np.ndarray:
    """(n, 8) standard-form limbs of uniform-ish values < r, first rows 0, 1, r-1, r-2."""
    rng = np.random.default_rng(seed)
    a = rng.integers(0, 1 << 32, size=(n, 8), dtype=np.uint32)
    a[:, 7] = rng.integers(0, R_TOP, size=n, dtype=np.uint32)
    edge = bn254.limbs_from_ints([0, 1, R - 1, R - 2])
    k = min(n, 4) if n > 4 else 0
    a[:k] = edge[:k]
    return a


def horner(vals: list[int], x: int) -> int:
    acc = 0
    for v in reversed(vals):
        acc = (acc * x + v) % R
    return acc


@pytest.mark.parametrize("log_n", range(1, 13))
def test_matches_cpu_reference(cp, engine, log_n: int) -> None:
    host = random_limbs(1 << log_n, log_n)
    vals = bn254.ints_from_limbs(host)
    for inverse in (False, True):
        x = cp.asarray(host)
        engine.ntt_standard(x, inverse)
        assert bn254.ints_from_limbs(cp.asnumpy(x)) == cpu_ntt.ntt(vals, inverse), f"inverse={inverse}"


@pytest.mark.parametrize("log_n", list(range(13, 21)) + [24])
def test_large_sizes(cp, engine, log_n: int) -> None:
    from distprove.backends.gpu import ntt as gntt

    n = 1 << log_n
    rng = random.Random(log_n)
    w = bn254.root_of_unity(log_n)
    # (1) sparse input, exact outputs at sampled k (forward and inverse)
    pos = sorted({0, n - 1, *(rng.randrange(n) for _ in range(6))})
    coef = {j: rng.randrange(R) for j in pos}
    sparse = np.zeros((n, 8), dtype=np.uint32)
    sparse[pos] = bn254.limbs_from_ints([coef[j] for j in pos])
    ks = sorted({0, 1, n - 1, n // 2, *(rng.randrange(n) for _ in range(200))})
    for inverse in (False, True):
        x = cp.asarray(sparse)
        engine.ntt_standard(x, inverse)
        got = bn254.ints_from_limbs(cp.asnumpy(x[ks]))
        wk = pow(w, -1, R) if inverse else w
        scale = pow(n, -1, R) if inverse else 1
        want = [sum(coef[j] * pow(wk, j * k, R) for j in pos) * scale % R for k in ks]
        assert got == want, f"sparse inverse={inverse}"
    # (2) dense random input: one output by Horner; (3) round trip
    host = random_limbs(n, log_n)
    x = cp.asarray(host)
    engine.ntt_standard(x)
    k = rng.randrange(1, n)
    got = bn254.ints_from_limbs(cp.asnumpy(x[k : k + 1]))[0]
    assert got == horner(bn254.ints_from_limbs(host), pow(w, k, R))
    fwd = x.copy()
    engine.ntt_standard(x, inverse=True)
    assert bool(cp.all(x == cp.asarray(host)))
    # (4) staged four-step == plain (Montgomery in/out)
    m = cp.asarray(host)
    plain = engine.ntt(m.copy())
    staged = gntt.fourstep(engine, m, lambda z: cp.ascontiguousarray(z.transpose(1, 0, 2)))
    assert bool(cp.all(plain == staged))
    # Montgomery path == standard-form path: NTT is linear, so both carry the same R^-1 factor
    assert bool(cp.all(engine.from_montgomery(plain) == engine.from_montgomery(fwd)))


def test_fourstep_blocks_match_plain(cp, engine) -> None:
    """Column blocks and row blocks transformed separately (as on different workers)."""
    from distprove.backends.gpu import ntt as gntt

    log_n = 16
    l1, l2 = gntt.fourstep_split(log_n)
    n1, n2 = 1 << l1, 1 << l2
    x = cp.asarray(random_limbs(1 << log_n, 77))
    plain = engine.ntt(x.copy())
    m = x.reshape(n1, n2, 8)
    blocks = []
    for c0 in range(0, n2, 32):
        blk = cp.ascontiguousarray(m[:, c0 : c0 + 32])
        engine.columns(blk)
        engine.twiddle(blk, log_n, c0)
        blocks.append(blk)
    y = cp.concatenate(blocks, axis=1)
    rows = []
    for r0 in range(0, n1, 100):
        blk = cp.ascontiguousarray(y[r0 : r0 + 100])
        engine.rows(blk)
        rows.append(blk)
    out = cp.ascontiguousarray(cp.concatenate(rows, axis=0).transpose(1, 0, 2)).reshape(-1, 8)
    assert bool(cp.all(out == plain))


@pytest.mark.parametrize("log_n", [1, 3, 10, 11, 14])
def test_h_scalars_match_cpu(cp, engine, log_n: int) -> None:
    n = 1 << log_n
    vecs = [random_limbs(n, 1000 * log_n + i) for i in range(3)]
    ints = [bn254.ints_from_limbs(v) for v in vecs]
    dev = [cp.asarray(bn254.limbs_from_ints([v * FR_MONT % R for v in iv])) for iv in ints]
    hs = engine.h_scalars(*dev)
    assert bn254.ints_from_limbs(cp.asnumpy(hs)) == cpu_ntt.h_scalars(*ints)


def test_h_scalars_2_24_sparse(cp, engine) -> None:
    """2^24 H step, exactly at sampled j: inputs are the evaluations of sparse polynomials, so
    hs[j] = A(x_j) B(x_j) - C(x_j) at x_j = g w^j is a few pow() calls per j."""
    log_n = 24
    n = 1 << log_n
    rng = random.Random(24)
    polys, dev = [], []
    for _ in range(3):
        pos = sorted({0, n - 1, *(rng.randrange(n) for _ in range(4))})
        coef = {i: rng.randrange(R) for i in pos}
        host = np.zeros((n, 8), dtype=np.uint32)
        host[pos] = bn254.limbs_from_ints([coef[i] * FR_MONT % R for i in pos])
        v = cp.asarray(host)
        engine.ntt(v)  # evaluations on the subgroup, Montgomery
        polys.append(coef)
        dev.append(v)
    hs = engine.h_scalars(*dev)
    w, g = bn254.root_of_unity(log_n), bn254.coset_generator(log_n)
    js = sorted({0, n - 1, *(rng.randrange(n) for _ in range(100))})
    got = bn254.ints_from_limbs(cp.asnumpy(hs[js]))
    for j, h in zip(js, got):
        x = g * pow(w, j, R) % R
        a, b, c = (sum(cf * pow(x, i, R) for i, cf in p.items()) % R for p in polys)
        assert h == (a * b - c) % R, f"j={j}"


def test_montgomery_roundtrip_values(cp, engine) -> None:
    host = random_limbs(1000, 3)
    x = cp.asarray(bn254.limbs_from_ints([v * FR_MONT % R for v in bn254.ints_from_limbs(host)]))
    engine.from_montgomery(x)
    assert bn254.ints_from_limbs(cp.asnumpy(x)) == bn254.ints_from_limbs(host)


@pytest.mark.parametrize("log_n", range(1, 13))
def test_alt_engines_match_cpu_reference(cp, alt_engines, log_n: int) -> None:
    host = random_limbs(1 << log_n, 500 + log_n)
    vals = bn254.ints_from_limbs(host)
    for inverse in (False, True):
        want = cpu_ntt.ntt(vals, inverse)
        for name, eng in alt_engines.items():
            x = cp.asarray(host)
            eng.ntt_standard(x, inverse)
            assert bn254.ints_from_limbs(cp.asnumpy(x)) == want, f"{name} inverse={inverse}"


@pytest.mark.parametrize("log_n", list(range(13, 21)) + [22, 24])
def test_alt_engines_equal_default(cp, engine, alt_engines, log_n: int) -> None:
    """Plain (both directions, Montgomery and standard form), H step and staged four-step."""
    from distprove.backends.gpu import ntt as gntt

    n = 1 << log_n
    host = cp.asarray(random_limbs(n, 600 + log_n))
    transpose = lambda z: cp.ascontiguousarray(z.transpose(1, 0, 2))  # noqa: E731
    cases = {
        "fwd": lambda e: e.ntt(host.copy()),
        "inv": lambda e: e.ntt(host.copy(), inverse=True),
        "standard": lambda e: e.ntt_standard(host.copy()),
        "standard_inv": lambda e: e.ntt_standard(host.copy(), inverse=True),
        "fourstep": lambda e: gntt.fourstep(e, host.copy(), transpose),
        "fourstep_inv": lambda e: gntt.fourstep(e, host.copy(), transpose, inverse=True),
    }
    if log_n in (14, 20, 24):
        cases["h_scalars"] = lambda e: e.h_scalars(host.copy(), host[::-1].copy(), cp.roll(host, 1, axis=0))
    for case, fn in cases.items():
        want = fn(engine)
        for name, eng in alt_engines.items():
            assert bool(cp.array_equal(fn(eng), want)), f"{name} {case}"
        del want
    for eng in alt_engines.values():
        eng.clear()
    cp.get_default_memory_pool().free_all_blocks()
