"""CPU Pippenger over the shared signed-digit windows (plain Python ints, G1 and G2).

Bucket accumulation and the running-sum reduction both use batch-affine additions: a whole
round of independent additions shares one field inversion (Montgomery's trick), so an
addition costs about six multiplications. Inputs follow DESIGN.md: affine bases (None =
infinity) and (n, 8) uint32 standard-form scalars.

The arithmetic follows the integer type of the base coordinates: plain Python ints, or
``gmpy2.mpz`` (about 1.7x faster) when the optional gmpy2 is installed and the bases were
converted with :func:`to_mpz_points`. Results are always plain Python ints.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence

import numpy as np

from distprove import bn254
from distprove.bn254 import Q, Affine, Group
from distprove.stages.msm import num_windows, signed_digits_array

try:
    import gmpy2
except ImportError:  # optional: plain ints are the fallback
    gmpy2 = None


def mpz_available() -> bool:
    """True when the optional gmpy2 is importable."""
    return gmpy2 is not None


def to_mpz_points(group: Group, pts: Sequence[Affine]) -> list[Affine]:
    """The same points with gmpy2.mpz coordinates (needs gmpy2; see :func:`mpz_available`)."""
    if gmpy2 is None:
        raise RuntimeError("gmpy2 is not installed")
    mpz = gmpy2.mpz
    if group is bn254.G1:
        return [None if p is None else (mpz(p[0]), mpz(p[1])) for p in pts]
    return [
        None if p is None else ((mpz(p[0][0]), mpz(p[0][1])), (mpz(p[1][0]), mpz(p[1][1])))
        for p in pts
    ]


def _to_int_point(group: Group, p: Affine) -> Affine:
    if p is None:
        return None
    if group is bn254.G1:
        return (int(p[0]), int(p[1]))
    return ((int(p[0][0]), int(p[0][1])), (int(p[1][0]), int(p[1][1])))


def _modulus_like(group: Group, bases: Sequence[Affine]) -> int:
    """Q in the integer type of the first finite base's coordinates (int or gmpy2.mpz)."""
    for p in bases:
        if p is not None:
            coord = p[0] if group is bn254.G1 else p[0][0]
            return type(coord)(Q)
    return Q


def _batch_add_g1(ps: Sequence[Affine], qs: Sequence[Affine], fq: int) -> list[Affine]:
    """Elementwise ps[i] + qs[i] on G1 with one inversion for the whole batch (fq: int or mpz)."""
    out: list[Affine] = [None] * len(ps)
    todo: list[int] = []
    nums: list[int] = []
    dens: list[int] = []
    for i, (p, q) in enumerate(zip(ps, qs)):
        if p is None:
            out[i] = q
            continue
        if q is None:
            out[i] = p
            continue
        x1, y1 = p
        x2, y2 = q
        if x1 != x2:
            nums.append(y2 - y1)
            dens.append(x2 - x1)
        elif y1 == y2 and y1 != 0:
            nums.append(3 * x1 * x1)
            dens.append(2 * y1)
        else:
            continue  # q == -p: the sum is infinity
        todo.append(i)
    if not todo:
        return out
    prefix = [0] * len(todo)
    acc = 1
    for j, d in enumerate(dens):
        prefix[j] = acc
        acc = acc * d % fq
    inv = pow(acc, -1, fq)
    for j in range(len(todo) - 1, -1, -1):
        i = todo[j]
        lam = nums[j] * (inv * prefix[j] % fq) % fq
        inv = inv * dens[j] % fq
        x1, y1 = ps[i]
        x3 = (lam * lam - x1 - qs[i][0]) % fq
        out[i] = (x3, (lam * (x1 - x3) - y1) % fq)
    return out


def _f2mul(a0: int, a1: int, b0: int, b1: int, fq: int) -> tuple[int, int]:
    t0 = a0 * b0
    t1 = a1 * b1
    return ((t0 - t1) % fq, ((a0 + a1) * (b0 + b1) - t0 - t1) % fq)


def _batch_add_g2(ps: Sequence[Affine], qs: Sequence[Affine], fq: int) -> list[Affine]:
    """Elementwise ps[i] + qs[i] on G2 (coordinates in Fq2) with one Fq2 inversion per batch."""
    out: list[Affine] = [None] * len(ps)
    todo: list[int] = []
    nums: list[tuple[int, int]] = []
    dens: list[tuple[int, int]] = []
    for i, (p, q) in enumerate(zip(ps, qs)):
        if p is None:
            out[i] = q
            continue
        if q is None:
            out[i] = p
            continue
        x1, y1 = p
        x2, y2 = q
        if x1 != x2:
            nums.append(((y2[0] - y1[0]) % fq, (y2[1] - y1[1]) % fq))
            dens.append(((x2[0] - x1[0]) % fq, (x2[1] - x1[1]) % fq))
        elif y1 == y2 and y1 != (0, 0):
            s0, s1 = bn254.fq2_sqr(x1)
            nums.append((3 * s0 % fq, 3 * s1 % fq))
            dens.append((2 * y1[0] % fq, 2 * y1[1] % fq))
        else:
            continue
        todo.append(i)
    if not todo:
        return out
    prefix: list[tuple[int, int]] = [(0, 0)] * len(todo)
    acc0, acc1 = 1, 0
    for j, (d0, d1) in enumerate(dens):
        prefix[j] = (acc0, acc1)
        acc0, acc1 = _f2mul(acc0, acc1, d0, d1, fq)
    inv0, inv1 = bn254.fq2_inv((acc0, acc1))
    for j in range(len(todo) - 1, -1, -1):
        i = todo[j]
        p0, p1 = prefix[j]
        di0, di1 = _f2mul(inv0, inv1, p0, p1, fq)
        n0, n1 = nums[j]
        l0, l1 = _f2mul(n0, n1, di0, di1, fq)
        d0, d1 = dens[j]
        inv0, inv1 = _f2mul(inv0, inv1, d0, d1, fq)
        (x10, x11), (y10, y11) = ps[i]
        x20, x21 = qs[i][0]
        ll0 = (l0 + l1) * (l0 - l1)
        ll1 = 2 * l0 * l1
        x30 = (ll0 - x10 - x20) % fq
        x31 = (ll1 - x11 - x21) % fq
        m0, m1 = _f2mul(l0, l1, x10 - x30, x11 - x31, fq)
        out[i] = ((x30, x31), ((m0 - y10) % fq, (m1 - y11) % fq))
    return out


def batch_add(group: Group, ps: Sequence[Affine], qs: Sequence[Affine], fq: int = Q) -> list[Affine]:
    """Elementwise affine sums ps[i] + qs[i] (None = infinity), one field inversion in all.

    ``fq`` is the base-field modulus in the coordinates' integer type (int, or gmpy2.mpz for
    mpz coordinates); the sums come back in that type.
    """
    if len(ps) != len(qs):
        raise ValueError("batch_add needs two sequences of the same length")
    return _batch_add_g1(ps, qs, fq) if group is bn254.G1 else _batch_add_g2(ps, qs, fq)


def _reduce_runs(
    group: Group, keys: np.ndarray, pts: list[Affine], fq: int
) -> tuple[np.ndarray, list[Affine]]:
    """Sum the points of each run of equal keys (keys sorted): pairwise rounds of batch additions."""
    while len(pts) > 1:
        m = len(pts)
        idx = np.arange(m)
        starts = np.ones(m, dtype=bool)
        starts[1:] = keys[1:] != keys[:-1]
        run_start = np.maximum.accumulate(np.where(starts, idx, 0))
        even = (idx - run_start) % 2 == 0
        has_next = np.zeros(m, dtype=bool)
        has_next[:-1] = ~starts[1:]
        left = np.nonzero(even & has_next)[0].tolist()
        if not left:
            break
        sums = batch_add(group, [pts[i] for i in left], [pts[i + 1] for i in left], fq)
        merged = list(pts)
        for i, s in zip(left, sums):
            merged[i] = s
        keep = np.nonzero(even)[0]
        pts = [merged[i] for i in keep.tolist()]
        keys = keys[keep]
    return keys, pts


def _is_one(limbs: np.ndarray) -> np.ndarray:
    return (limbs[:, 0] == 1) & ~limbs[:, 1:].any(axis=1)


def msm_windows(
    group: Group,
    bases: Sequence[Affine],
    scalars: np.ndarray,
    c: int,
    lo: int,
    hi: int,
    constant_work: bool = False,
) -> list[Affine]:
    """Window sums S_lo..S_{hi-1} of sum_i scalars[i] * bases[i] (DESIGN.md windows and digits).

    ``bases``: affine points (None = infinity), int or gmpy2.mpz coordinates; ``scalars``:
    (n, 8) uint32 standard form, each < r. Zero scalars and infinity bases are skipped; scalars
    equal to 1 are summed apart and added to S_0 (only when lo == 0). With ``constant_work``
    the same sums come from :func:`msm_windows_constant_work` instead. Returns hi - lo affine
    points with Python-int coordinates (None = infinity).
    """
    limbs = np.ascontiguousarray(scalars, dtype="<u4").reshape(-1, 8)
    w_count = num_windows(c)
    if not 0 <= lo < hi <= w_count:
        raise ValueError(f"window range [{lo}, {hi}) not inside [0, {w_count})")
    if limbs.shape[0] != len(bases):
        raise ValueError(f"{len(bases)} bases but {limbs.shape[0]} scalars")
    if constant_work:
        return msm_windows_constant_work(group, bases, limbs, c, lo, hi)
    live = np.array([p is not None for p in bases], dtype=bool)
    ones = live & _is_one(limbs)
    rest = np.nonzero(live & ~ones)[0]
    half = 1 << (c - 1)
    n_win = hi - lo
    digits = signed_digits_array(limbs[rest], c)[:, lo:hi]
    row, col = np.nonzero(digits)
    d = digits[row, col].astype(np.int64)
    keys = col.astype(np.int64) * half + np.abs(d) - 1
    point_of = rest[row]
    negate = d < 0
    ones_key = n_win * half
    if lo == 0:
        one_idx = np.nonzero(ones)[0]
        keys = np.concatenate([keys, np.full(one_idx.size, ones_key, dtype=np.int64)])
        point_of = np.concatenate([point_of, one_idx])
        negate = np.concatenate([negate, np.zeros(one_idx.size, dtype=bool)])
    order = np.argsort(keys, kind="stable")
    keys = keys[order]
    pts = [
        bn254.neg(group, bases[i]) if ng else bases[i]
        for i, ng in zip(point_of[order].tolist(), negate[order].tolist())
    ]
    fq = _modulus_like(group, bases)
    keys, pts = _reduce_runs(group, keys, pts, fq)

    buckets: list[list[Affine]] = [[None] * half for _ in range(n_win)]
    ones_sum: Affine = None
    for k, p in zip(keys.tolist(), pts):
        if k == ones_key:
            ones_sum = p
        else:
            w, j = divmod(k, half)
            buckets[w][j] = p
    running: list[Affine] = [None] * n_win
    total: list[Affine] = [None] * n_win
    for j in range(half - 1, -1, -1):
        running = batch_add(group, running, [b[j] for b in buckets], fq)
        total = batch_add(group, total, running, fq)
    if lo == 0 and ones_sum is not None:
        total[0] = batch_add(group, [total[0]], [ones_sum], fq)[0]
    return [_to_int_point(group, p) for p in total]


# --- constant-work mode (docs/CONSTANT_WORK.md) -------------------------------------------
#
# Homogeneous projective points (X, Y, Z) and the complete formulas of bn254.proj_add /
# proj_double, written out on the integers with lazy reduction (``m`` = Q as int or mpz).

_G1_B3 = bn254.proj_b3(bn254.G1)  # 9
_G2_B3 = bn254.proj_b3(bn254.G2)


def _proj_add_g1(p: tuple, q: tuple, m: int) -> tuple:
    """bn254.proj_add on G1 (RCB algorithm 7, 3b = 9)."""
    x1, y1, z1 = p
    x2, y2, z2 = q
    t0 = x1 * x2 % m
    t1 = y1 * y2 % m
    t2 = z1 * z2 % m
    t3 = ((x1 + y1) * (x2 + y2) - t0 - t1) % m
    t4 = ((y1 + z1) * (y2 + z2) - t1 - t2) % m
    t5 = _G1_B3 * (((x1 + z1) * (x2 + z2) - t0 - t2) % m)
    t0 *= 3
    t2 *= _G1_B3
    s, d = t1 + t2, t1 - t2
    return ((t3 * d - t4 * t5) % m, (s * d + t5 * t0) % m, (t4 * s + t0 * t3) % m)


def _m2(a0: int, a1: int, b0: int, b1: int, m: int) -> tuple[int, int]:
    """(a0 + a1 u)(b0 + b1 u) mod m, u^2 = -1 (Karatsuba)."""
    t0 = a0 * b0
    t1 = a1 * b1
    return ((t0 - t1) % m, ((a0 + a1) * (b0 + b1) - t0 - t1) % m)


def _proj_add_g2(p: tuple, q: tuple, m: int) -> tuple:
    """bn254.proj_add on G2 (RCB algorithm 7 over Fq2, 3b = 3b')."""
    (x10, x11), (y10, y11), (z10, z11) = p
    (x20, x21), (y20, y21), (z20, z21) = q
    b0, b1 = _G2_B3
    t00, t01 = _m2(x10, x11, x20, x21, m)
    t10, t11 = _m2(y10, y11, y20, y21, m)
    t20, t21 = _m2(z10, z11, z20, z21, m)
    u0, u1 = _m2(x10 + y10, x11 + y11, x20 + y20, x21 + y21, m)
    t30, t31 = u0 - t00 - t10, u1 - t01 - t11
    u0, u1 = _m2(y10 + z10, y11 + z11, y20 + z20, y21 + z21, m)
    t40, t41 = u0 - t10 - t20, u1 - t11 - t21
    u0, u1 = _m2(x10 + z10, x11 + z11, x20 + z20, x21 + z21, m)
    t50, t51 = _m2(u0 - t00 - t20, u1 - t01 - t21, b0, b1, m)
    t00, t01 = 3 * t00, 3 * t01
    t20, t21 = _m2(t20, t21, b0, b1, m)
    s0, s1 = t10 + t20, t11 + t21
    d0, d1 = t10 - t20, t11 - t21
    a0, a1 = _m2(t30, t31, d0, d1, m)
    c0, c1 = _m2(t40, t41, t50, t51, m)
    e0, e1 = _m2(s0, s1, d0, d1, m)
    f0, f1 = _m2(t50, t51, t00, t01, m)
    g0, g1 = _m2(t40, t41, s0, s1, m)
    h0, h1 = _m2(t00, t01, t30, t31, m)
    return (((a0 - c0) % m, (a1 - c1) % m), ((e0 + f0) % m, (e1 + f1) % m), ((g0 + h0) % m, (g1 + h1) % m))


def proj_adder(group: Group) -> Callable[[tuple, tuple, int], tuple]:
    """The fast complete addition add(p, q, fq) of ``group`` on projective points with int or
    gmpy2.mpz coordinates (``fq`` = Q in that type); equal to bn254.proj_add."""
    return _proj_add_g1 if group is bn254.G1 else _proj_add_g2


def msm_windows_constant_work(
    group: Group, bases: Sequence[Affine], limbs: np.ndarray, c: int, lo: int, hi: int
) -> list[Affine]:
    """:func:`msm_windows` in constant-work mode: the same window sums, another schedule.

    Every scalar (0 and 1 included) adds its base, or the negated base, into one bucket of
    every window in [lo, hi): digit d != 0 into bucket |d| - 1, digit 0 into the window's dummy
    bucket 2^(c-1), which the reduction never reads; infinity bases add the identity. So a
    window costs exactly n bucket additions plus 2 * 2^(c-1) in the running-sum reduction,
    whatever the scalars, all with the complete formulas (no identity or doubling branches).
    NOT constant-time: see docs/CONSTANT_WORK.md.
    """
    fq = _modulus_like(group, bases)
    add = proj_adder(group)
    zero, one = type(fq)(0), type(fq)(1)
    if group is bn254.G2:
        zero, one = (zero, zero), (one, zero)
    ident = (zero, one, zero)
    pos = [ident if p is None else (p[0], p[1], one) for p in bases]
    neg = [ident if p is None else (p[0], _neg_coord(p[1], fq), one) for p in bases]
    half = 1 << (c - 1)
    digits = signed_digits_array(limbs, c)
    out: list[Affine] = []
    for w in range(lo, hi):
        col = digits[:, w].tolist()
        buckets = [ident] * (half + 1)
        for i, d in enumerate(col):
            if d > 0:
                buckets[d - 1] = add(buckets[d - 1], pos[i], fq)
            elif d < 0:
                buckets[-d - 1] = add(buckets[-d - 1], neg[i], fq)
            else:
                buckets[half] = add(buckets[half], pos[i], fq)
        running = total = ident
        for j in range(half - 1, -1, -1):
            running = add(running, buckets[j], fq)
            total = add(total, running, fq)
        out.append(bn254.proj_to_affine(group, _to_int_point3(group, total)))
    return out


def _neg_coord(y: object, fq: int) -> object:
    """-y mod fq for an Fq (int/mpz) or Fq2 (pair) coordinate."""
    if isinstance(y, tuple):
        return ((fq - y[0]) % fq, (fq - y[1]) % fq)
    return (fq - y) % fq


def _to_int_point3(group: Group, p: tuple) -> tuple:
    if group is bn254.G1:
        return tuple(int(v) for v in p)
    return tuple((int(v[0]), int(v[1])) for v in p)
