"""Device checks of the GPU Pippenger window sums (distprove/backends/gpu/msm.py, kernels/msm.cu).

Bases have known discrete logs: a table P_j = k_j * G (k_j = b + a*j, built on the CPU with one
addition per point) plus the infinity row, indexed at random. Then the expected window sum is
S_w = (sum_i d_{i,w} k_{idx_i}) * G with d the DESIGN.md signed digits, computed with Python
ints, and for full ranges the Horner combine must equal (sum_i s_i k_{idx_i}) * G, which does
not depend on the digits at all. Scalars mix 0, 1, r-1, random values and one repeated value
(a fat bucket); some bases are infinity.
"""

from __future__ import annotations

import random

import dask
import numpy as np
import pytest

from distprove import bn254
from distprove.bn254 import R
from distprove.stages.msm import combine, num_windows, signed_digits_array

cupy = pytest.importorskip("cupy")
pytestmark = pytest.mark.gpu

TABLE = 512
_tables: dict[str, tuple[list[int], np.ndarray]] = {}


def _table(group: bn254.Group) -> tuple[list[int], np.ndarray]:
    """(k_j, limb rows) for TABLE points k_j * G plus a final infinity row (k = 0)."""
    if group.name not in _tables:
        rng = random.Random()
        a, b = rng.randrange(1, R), rng.randrange(1, R)
        step = bn254.mul(group, group.generator, a)
        acc = bn254.to_jacobian(group, bn254.mul(group, group.generator, b))
        jac = []
        for _ in range(TABLE):
            jac.append(acc)
            acc = bn254.jac_add_affine(group, acc, step)
        pts = bn254.batch_to_affine(group, jac) + [None]
        ks = [(b + a * j) % R for j in range(TABLE)] + [0]
        _tables[group.name] = (ks, bn254.points_to_limbs(group, pts))
    return _tables[group.name]


def _small_table(group: bn254.Group) -> tuple[list[int], np.ndarray]:
    """(k_j, limb rows) for P, Q, S, -P and infinity: drawn at random, buckets see P + P and
    P + (-P) all the time (the special cases of the pair rounds)."""
    rng = random.Random()
    ks = [rng.randrange(1, R) for _ in range(3)]
    ks += [R - ks[0], 0]
    pts = [bn254.mul(group, group.generator, k) for k in ks[:4]] + [None]
    return ks, bn254.points_to_limbs(group, pts)


R_LIMBS = bn254.limbs_from_ints([R - 1])[0]


def _scalars(n: int, pattern: str, rng: np.random.Generator) -> np.ndarray:
    s = rng.integers(0, 1 << 32, size=(n, 8), dtype=np.uint64).astype(np.uint32)
    s[:, 7] = rng.integers(0, 0x30644E72, size=n)  # top limb below r's: every value < r
    if pattern == "equal":
        s[:] = s[0]
    elif pattern == "bits":  # witness-like: 45% zeros, 45% ones
        kind = rng.integers(0, 20, size=n)
        s[kind < 18] = 0
        s[(kind >= 9) & (kind < 18), 0] = 1
    elif pattern == "mixed":
        kind = rng.integers(0, 20, size=n)
        s[kind < 5] = 0
        s[(kind >= 5) & (kind < 10)] = 0
        s[(kind >= 5) & (kind < 10), 0] = 1
        s[kind == 10] = R_LIMBS
        s[kind == 11] = s[0]  # a repeated value: one fat bucket per window
        small = kind == 12
        s[small] = 0
        s[small, 0] = rng.integers(2, 1 << 12, size=int(small.sum()))
    return s


def _indices(n: int, rng: np.random.Generator, table: int = TABLE) -> np.ndarray:
    """Random indices into a table of ``table`` points and its final infinity row (3% of them)."""
    idx = rng.integers(0, table, size=n)
    idx[rng.random(n) < 0.03] = table  # infinity bases
    return idx


def _expected_windows(group, ks, idx, scal, c, lo, hi) -> list:
    digits = signed_digits_array(scal, c)[:, lo:hi].astype(np.int64)
    per_base = np.zeros((len(ks), hi - lo), dtype=np.int64)
    np.add.at(per_base, idx, digits)
    out = []
    for w in range(hi - lo):
        col = per_base[:, w]
        k = sum(int(col[j]) * ks[j] for j in np.nonzero(col)[0]) % R
        out.append(bn254.mul(group, group.generator, k))
    return out


def _expected_total(group, ks, idx, scal) -> bn254.Affine:
    per = [0] * len(ks)
    for j, s in zip(idx.tolist(), bn254.ints_from_limbs(scal)):
        per[j] += s
    return bn254.mul(group, group.generator, sum(p * k for p, k in zip(per, ks)) % R)


def _run_case(group, n, c, window_range, pattern, seed=None, scratch=None, small=False):
    from distprove.backends.gpu.msm import msm_windows

    rng = np.random.default_rng(seed)
    ks, table = _small_table(group) if small else _table(group)
    scal = _scalars(n, pattern, rng)
    if n >= 2:
        scal[1] = R_LIMBS
    if n >= 3:
        scal[2] = 0
        scal[2, 0] = 1
    idx = _indices(n, rng, len(ks) - 1)
    w_count = num_windows(c)
    if window_range == "full":
        lo, hi = 0, w_count
    elif window_range == "upper":
        lo = int(rng.integers(1, w_count))
        hi = int(rng.integers(lo + 1, w_count + 1))
    else:
        lo = 0
        hi = int(rng.integers(1, w_count + 1))
    bases = cupy.asarray(table[idx])
    got = msm_windows(group, bases, cupy.asarray(scal), c, lo, hi, scratch=scratch)
    assert len(got) == hi - lo
    assert got == _expected_windows(group, ks, idx, scal, c, lo, hi)
    if (lo, hi) == (0, w_count):
        sums = {w: p for w, p in enumerate(got)}
        assert combine(group, sums, c) == _expected_total(group, ks, idx, scal)


G1_CASES = [
    (1, 5, "full", "random"),
    (2, 4, "full", "random"),
    (3, 2, "full", "mixed"),
    (1000, 8, "upper", "mixed"),
    (1000, 10, "full", "mixed"),
    (1000, 3, "lower", "mixed"),
    (4000, 20, "lower", "mixed"),
    (1 << 16, 12, "full", "equal"),
    ((1 << 16) + 7, 13, "full", "mixed"),
    ((1 << 16) + 7, 16, "upper", "random"),
    (1 << 20, 16, "full", "mixed"),
]
G2_CASES = [
    (1, 5, "full", "random"),
    (2, 4, "full", "random"),
    (3, 2, "full", "mixed"),
    (1000, 8, "upper", "mixed"),
    (1000, 11, "full", "mixed"),
    (1 << 16, 12, "full", "equal"),
    ((1 << 16) + 7, 13, "full", "mixed"),
    (1 << 20, 16, "lower", "mixed"),
]


@pytest.mark.parametrize("sort", ["radix", "atomic"])
@pytest.mark.parametrize("n,c,window_range,pattern", G1_CASES)
def test_g1_window_sums(n, c, window_range, pattern, sort) -> None:
    with dask.config.set({"distprove.msm.sort": sort}):
        _run_case(bn254.G1, n, c, window_range, pattern)


@pytest.mark.parametrize("sort", ["radix", "atomic"])
@pytest.mark.parametrize("n,c,window_range,pattern", G2_CASES)
def test_g2_window_sums(n, c, window_range, pattern, sort) -> None:
    with dask.config.set({"distprove.msm.sort": sort}):
        _run_case(bn254.G2, n, c, window_range, pattern)


@pytest.mark.parametrize("sort", ["radix", "auto"])
@pytest.mark.parametrize("n,c,lo,hi,pattern", [
    (1, 13, 0, 20, "random"),
    (1000, 13, 0, 20, "mixed"),
    ((1 << 16) + 7, 15, 0, 18, "mixed"),
    ((1 << 16) + 7, 16, 3, 9, "equal"),  # every scalar in one bin of both passes
    ((1 << 17) + 3, 17, 0, 15, "bits"),
    ((1 << 17) + 3, 19, 1, 14, "random"),  # 512 bins; the digit histogram in two rounds of windows
    ((1 << 19) + 5, 15, 0, 18, "bits"),  # auto: the device picks the counting sort
    (1 << 20, 17, 0, 16, "random"),  # auto: the radix sort
    ((1 << 17) + 3, 21, 0, 3, "random"),  # three passes (msm_radix_mid): 20-bit keys
    ((1 << 16) + 7, 22, 1, 3, "equal"),  # three passes, every scalar in one bin of each
    ((1 << 19) + 5, 24, 0, 2, "mixed"),  # three passes of 8 + 8 + 7 bits: 23-bit keys
])
def test_digit_sort_equals_the_digits(n, c, lo, hi, pattern, sort) -> None:
    """msm_sort.cu on the device (tiles of 4096; keys above 18 bits in three passes): entries
    sorted by row (in any order inside a row), each row's
    entries, counts and cursor equal to the digits' computed on the host. ``auto``: from
    RADIX_MIN_N points the device picks. The later passes rank a tile by cells (bin, low part)
    when its low parts span few values (2^20 at c = 17: ~4 Ki items a low part) and in tile order
    with warp ballots when not (2^17 + 3 at c = 19: 256 a low part, 9-bit passes)."""
    from conftest import expected_digit_sort

    from distprove.backends.gpu import msm as gm
    from distprove.backends.gpu.msm import sort_digits, sort_kind

    assert num_windows(c) >= hi
    scal = _scalars(n, pattern, np.random.default_rng())
    want_entries, want_counts, want_cursor = expected_digit_sort(scal, c, lo, hi)
    with dask.config.set({"distprove.msm.sort": sort}):
        kind = sort_kind(n, c)
        got = sort_digits(cupy.asarray(scal), c, lo, hi, cupy.cuda.Stream())  # blocking: after the upload
    got.done.synchronize()
    entries = cupy.asnumpy(got.entries).reshape(-1, 2)[: len(want_entries)]
    assert kind == ("radix" if sort == "radix" else "planned" if n >= gm.RADIX_MIN_N else "atomic")
    assert (np.diff(entries[:, 0].astype(np.int64)) >= 0).all()
    np.testing.assert_array_equal(entries[np.lexsort((entries[:, 1], entries[:, 0]))], want_entries)
    np.testing.assert_array_equal(cupy.asnumpy(got.counts), want_counts)
    np.testing.assert_array_equal(cupy.asnumpy(got.cursor), want_cursor)


AFFINE_CASES = [
    (bn254.G1, 1, 5, "full", "random"),
    (bn254.G1, 2, 4, "full", "equal"),
    (bn254.G1, 3, 2, "full", "mixed"),
    (bn254.G1, 1000, 8, "upper", "mixed"),
    (bn254.G1, 1000, 3, "lower", "mixed"),
    (bn254.G1, 1 << 16, 12, "full", "equal"),
    (bn254.G1, (1 << 16) + 7, 13, "full", "mixed"),
    (bn254.G2, 1, 5, "full", "random"),
    (bn254.G2, 3, 2, "full", "mixed"),
    (bn254.G2, 1000, 11, "upper", "mixed"),
    (bn254.G2, 1 << 16, 12, "full", "equal"),
    (bn254.G2, (1 << 16) + 7, 13, "full", "mixed"),
]


@pytest.mark.parametrize("rounds", [1, 2, 3, 5])
@pytest.mark.parametrize("small", [False, True], ids=["distinct", "small-table"])
@pytest.mark.parametrize("group,n,c,window_range,pattern", AFFINE_CASES,
                         ids=lambda v: v.name if isinstance(v, bn254.Group) else str(v))
def test_window_sums_with_pair_rounds(group, n, c, window_range, pattern, small, rounds) -> None:
    """1, 2, 3 or 5 batch-affine pair rounds before the accumulation: the same known-dlog window
    sums, on 512 distinct bases or on P, Q, S, -P and infinity (doublings and P + (-P) in the
    rounds)."""
    with dask.config.set({"distprove.msm.affine-rounds": rounds}):
        _run_case(group, n, c, window_range, pattern, small=small)


@pytest.mark.parametrize("pattern", ["uniform", "mixed", "bits"])
@pytest.mark.parametrize("group", [bn254.G1, bn254.G2], ids=["G1", "G2"])
def test_window_sums_with_planned_rounds(monkeypatch, group, pattern) -> None:
    """Rounds planned from size steps (1 at 2^6 entries a window, 2 at 2^10, 3 at 2^14): the
    device runs those the sort's entry count reaches (all 3 on uniform scalars, fewer where most
    are 0 or 1), and the window sums stay the known-dlog ones."""
    from distprove.backends.gpu import msm as gmsm

    monkeypatch.setattr(gmsm, "AFFINE_ROUNDS", {"G1": ((6, 1), (10, 2), (14, 3)), "G2": ((6, 1), (10, 2), (14, 3))})
    scratch = gmsm.MsmScratch()
    _run_case(group, 1 << 16, 11, "full", pattern, scratch=scratch)
    ran = int(scratch.take("pair_plan", 1)[0])
    assert ran == {"uniform": 3, "mixed": 3, "bits": 2}[pattern]  # bits: ~6.5 Ki entries a window


@pytest.mark.parametrize("k", [1, 2, 256])
@pytest.mark.parametrize("group", [bn254.G1, bn254.G2], ids=["G1", "G2"])
def test_pair_rounds_any_pairs_per_thread(monkeypatch, group, k) -> None:
    """Jobs per thread from 1 to 256 (strided: a thread's jobs lie in many buckets), two rounds."""
    from distprove.backends.gpu import msm as gmsm

    monkeypatch.setattr(gmsm, "PAIR_K", (k, k))
    with dask.config.set({"distprove.msm.affine-rounds": 2}):
        _run_case(group, (1 << 16) + 7, 13, "full", "mixed", small=True)
        _run_case(group, 5000, 9, "upper", "equal")


def test_scratch_reuse_with_dirty_buffers() -> None:
    from distprove.backends.gpu.msm import MsmScratch

    scratch = MsmScratch()
    _run_case(bn254.G1, 1 << 15, 11, "full", "mixed", scratch=scratch)
    _run_case(bn254.G1, 777, 11, "full", "mixed", scratch=scratch)
    _run_case(bn254.G1, 5000, 9, "upper", "random", scratch=scratch)


def test_all_zero_and_all_one_scalars() -> None:
    from distprove.backends.gpu.msm import msm_windows

    ks, table = _table(bn254.G1)
    rng = np.random.default_rng()
    idx = _indices(3000, rng)
    bases = cupy.asarray(table[idx])
    zeros = np.zeros((3000, 8), dtype=np.uint32)
    assert msm_windows(bn254.G1, bases, cupy.asarray(zeros), 9, 0, num_windows(9)) == [None] * num_windows(9)
    ones = zeros.copy()
    ones[:, 0] = 1
    got = msm_windows(bn254.G1, bases, cupy.asarray(ones), 9, 0, 3)
    assert got[1:] == [None, None]
    assert got[0] == bn254.mul(bn254.G1, bn254.G1.generator, sum(ks[j] for j in idx.tolist()) % R)
    assert msm_windows(bn254.G1, bases, cupy.asarray(ones), 9, 1, 3) == [None, None]


def test_rejects_bad_shapes() -> None:
    from distprove.backends.gpu.msm import msm_windows

    bases = cupy.zeros((4, 16), dtype=cupy.uint32)
    with pytest.raises(ValueError):
        msm_windows(bn254.G1, bases, cupy.zeros((5, 8), dtype=cupy.uint32), 8, 0, 1)
    with pytest.raises(ValueError):
        msm_windows(bn254.G2, bases, cupy.zeros((4, 8), dtype=cupy.uint32), 8, 0, 1)
    with pytest.raises(ValueError):
        msm_windows(bn254.G1, bases, cupy.zeros((4, 8), dtype=cupy.uint32), 8, 3, 3)


def test_started_msms_overlap_and_equal_the_synchronous_ones() -> None:
    """Four MSMs queued with msm_windows_start before any is waited for (two G1 sharing one stream
    and scratch, back to back; two G2 on a second stream) give the synchronous msm_windows sums."""
    from distprove.backends.gpu.msm import MsmScratch, msm_windows, msm_windows_start

    rng = np.random.default_rng()
    jobs = []
    lanes = {name: (cupy.cuda.Stream(non_blocking=True), MsmScratch()) for name in ("G1", "G2")}
    for group, n, c in ((bn254.G1, 20_000, 11), (bn254.G2, 5_003, 9), (bn254.G1, 3_001, 13), (bn254.G2, 777, 8)):
        _, limbs = _table(group)
        bases = cupy.asarray(limbs[_indices(n, rng)])
        scal = cupy.asarray(_scalars(n, "mixed", rng))
        stream, scratch = lanes[group.name]
        ready = cupy.cuda.Event()
        ready.record()
        stream.wait_event(ready)
        wait = msm_windows_start(group, bases, scal, c, 0, num_windows(c), scratch, stream)
        jobs.append((wait, group, bases, scal, c))
    got = [wait() for wait, *_ in jobs]
    for sums, (_, group, bases, scal, c) in zip(got, jobs):
        assert sums == msm_windows(group, bases, scal, c, 0, num_windows(c))


@pytest.mark.parametrize("group,n,c,pattern", [
    (bn254.G1, 1000, 10, "mixed"),
    (bn254.G1, (1 << 16) + 7, 21, "mixed"),  # the radix sort in three passes, over 13 windows as one
    (bn254.G1, (1 << 18) + 5, 22, "equal"),
    (bn254.G2, 3001, 13, "mixed"),
])
def test_precomputed_multiples_msm(group, n, c, pattern) -> None:
    """msm_merged over precompute_multiples' table (every window's digits in one set of buckets)
    equals the window-range MSM's combined sum: bases with infinity, 0/1/r-1 or all-equal scalars."""
    from distprove.backends.gpu.msm import msm_merged, msm_windows, precompute_multiples

    rng = np.random.default_rng()
    _, limbs = _table(group)
    bases = cupy.asarray(limbs[_indices(n, rng)])
    scal = cupy.asarray(_scalars(n, pattern, rng))
    table = precompute_multiples(group, bases, c)
    assert table.shape == (num_windows(c) * n, group.limbs)
    want = combine(group, dict(enumerate(msm_windows(group, bases, scal, 13, 0, num_windows(13)))), 13)
    assert msm_merged(group, table, scal, c) == want


@pytest.mark.parametrize("rounds", [0, 2])
@pytest.mark.parametrize("n,c,lo,hi", [((1 << 16) + 7, 13, 0, 20), (5000, 9, 4, 20), ((1 << 20) + 3, 16, 0, 16)])
def test_shared_digit_sort_across_streams(monkeypatch, n, c, lo, hi, rounds) -> None:
    """One sort_digits on the G2 stream serves a G2 MSM there and two G1 MSMs on another stream
    (a proof's B2, A, B1): each gives the known-dlog window sums of its own bases, also with pair
    rounds (which must leave the shared sort's buffers to the others)."""
    from distprove.backends.gpu import msm as gmsm
    from distprove.backends.gpu.msm import MsmScratch, msm_windows_start, sort_digits

    monkeypatch.setattr(gmsm, "AFFINE_ROUNDS", {"G1": ((0, rounds),), "G2": ((0, rounds),)})  # 1 entry a window

    rng = np.random.default_rng()
    scal = _scalars(n, "mixed", rng)
    dev_scal = cupy.asarray(scal)
    lanes = ((bn254.G2, 1), (bn254.G1, 0), (bn254.G1, 0))
    inputs = []
    for group, _ in lanes:  # every upload before the streams' ready event: they do not wait for the null stream
        ks, table = _table(group)
        idx = _indices(n, rng)
        inputs.append((ks, idx, cupy.asarray(table[idx])))
    streams = (cupy.cuda.Stream(non_blocking=True), cupy.cuda.Stream(non_blocking=True))
    ready = cupy.cuda.Event()
    ready.record()
    for s in streams:
        s.wait_event(ready)
    digits = sort_digits(dev_scal, c, lo, hi, streams[1])
    plan, scratch = [], {"G1": MsmScratch(), "G2": MsmScratch()}
    for (group, lane), (ks, idx, bases) in zip(lanes, inputs):
        wait = msm_windows_start(group, bases, dev_scal, c, lo, hi, scratch[group.name], streams[lane], digits=digits)
        plan.append((group, ks, idx, wait))
    del digits  # the waiters keep the shared buffers alive
    for group, ks, idx, wait in plan:
        assert wait() == _expected_windows(group, ks, idx, scal, c, lo, hi)


@pytest.mark.parametrize("group", [bn254.G1, bn254.G2], ids=["G1", "G2"])
@pytest.mark.parametrize("n", [1 << 12, (1 << 16) + 7])
@pytest.mark.parametrize("proofs", [1, 3, 64])
def test_grouped_msm_matches_per_proof(group: bn254.Group, n: int, proofs: int) -> None:
    """msm_windows_group (G proofs' vectors as G * W virtual windows in one set of launches) gives
    each proof msm_windows's sums over its own vector: mixed scalars (0, 1, r - 1, a repeated value,
    random) for some proofs, witness-like (mostly 0 and 1) for others, infinity bases among the
    points; the whole range at the size's width and a range without window 0."""
    from distprove.backends.gpu import msm as gm

    rng = np.random.default_rng(n * 100 + proofs)
    _, table = _table(group)
    idx = rng.integers(0, len(table), size=n)
    bases = cupy.asarray(table[idx])
    host = rng.integers(0, 1 << 32, size=(proofs, n, 8), dtype=np.uint32)
    host[..., 7] %= 0x30644E72
    for p in range(proofs):
        if p % 2:  # witness-like
            u = rng.random(n)
            host[p][u < 0.9] = 0
            host[p][(u >= 0.45) & (u < 0.9), 0] = 1
        else:
            host[p][::5] = 0
            host[p][1::5] = 0
            host[p][1::5, 0] = 1
            host[p][2::7] = R_LIMBS
            host[p][3::11] = host[p][3]
    scalars = cupy.asarray(host)
    c = gm.pick_window(n, group)
    for lo, hi in ((0, num_windows(c)), (2, 5)):
        got = gm.msm_windows_group(group, bases, scalars, c, lo, hi, scratch=gm.MsmScratch())
        assert len(got) == proofs
        for p in range(proofs):
            assert got[p] == gm.msm_windows(group, bases, scalars[p], c, lo, hi), (p, lo, hi)
    if proofs > 1:  # in parts, and with one grouped sort shared
        assert gm.msm_windows_group(group, bases, scalars, c, 0, num_windows(c), max_proofs=proofs // 2 + 1) == \
            gm.msm_windows_group(group, bases, scalars, c, 0, num_windows(c))
        stream = cupy.cuda.get_current_stream()
        digits = gm.sort_digits(scalars, c, 0, num_windows(c), stream)
        shared = gm.msm_windows_group_start(group, bases, scalars, c, 0, num_windows(c), gm.MsmScratch(), stream,
                                            digits=digits)()
        assert shared == gm.msm_windows_group(group, bases, scalars, c, 0, num_windows(c))


@pytest.mark.parametrize("group", [bn254.G1, bn254.G2], ids=["G1", "G2"])
@pytest.mark.parametrize("proofs", [1, 3, 5, 64])
def test_combined_group_msm_is_the_combine_of_its_sums(group: bn254.Group, proofs: int) -> None:
    """msm_combined_group (each proof's windows and ones combined and made affine on the device)
    gives each proof stages.msm.combine of its window sums: mixed and
    witness-like vectors, an all-zero vector (infinity) and an all-one vector (ones only)."""
    from distprove.backends.gpu import msm as gm
    from distprove.stages.msm import combine

    n = 1 << 12
    rng = np.random.default_rng(proofs)
    _, table = _table(group)
    bases = cupy.asarray(table[rng.integers(0, len(table), size=n)])
    host = rng.integers(0, 1 << 32, size=(proofs, n, 8), dtype=np.uint32)
    host[..., 7] %= 0x30644E72
    host[1::2, ::3] = 0
    host[1::2, 1::3] = 0
    host[1::2, 1::3, 0] = 1
    if proofs > 2:
        host[2] = 0
        host[3 % proofs] = 0
        host[3 % proofs, :, 0] = 1
    scalars = cupy.asarray(host)
    c = gm.pick_window(n, group)
    sums = gm.msm_windows_group(group, bases, scalars, c, 0, num_windows(c), scratch=gm.MsmScratch())
    want = [combine(group, dict(enumerate(s)), c) for s in sums]
    assert gm.msm_combined_group(group, bases, scalars, c, scratch=gm.MsmScratch()) == want
    if proofs > 2:
        assert want[2] is None
        assert gm.msm_combined_group(group, bases, scalars, c, max_proofs=2) == want
