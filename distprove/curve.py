"""The host's fast curve arithmetic: the Horner combine and the blinding of a proof, the
verifier's linear combinations, window sums that come back from the GPU, and the modular
inverse that :mod:`distprove.pairing` shares.

One primitive, :func:`combination`: the Jacobian point

    sum over window terms (c, {w: S_w}) of  sum_w 2^(c*w) * S_w   +   sum over (k, P) of k * P

computed in a single doubling chain (Horner for the window sums, interleaved width-5 wNAF for
the scalar terms, all additions mixed Jacobian + affine), so a chain costs about 256 doublings
however many terms it carries. The formulas are inlined per group (no field-ops table, few
reductions) and run on ``gmpy2.mpz`` when gmpy2 is installed (the optional ``fast`` extra,
about 2.5x faster here) or on plain ints. :func:`to_affine` converts many points with one field
inversion per group (Montgomery's trick).

Results equal :mod:`distprove.bn254`'s reference functions bit for bit for every point on the
curve (affine coordinates are unique); scalars are reduced mod r first, as ``bn254.jac_mul``
does. Infinity is ``None`` in affine and in Jacobian form alike.
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass

from distprove.bn254 import G1, Q, R, Affine, Group

try:
    import gmpy2
except ImportError:  # optional: plain ints are the fallback
    gmpy2 = None

fast_int: Callable[[int], int] = gmpy2.mpz if gmpy2 is not None else int
"""The integer type of the host's bulk field arithmetic (here, the synthetic circuits, the dev
setup, the CPU group FFT): ``gmpy2.mpz`` when gmpy2 is installed, else ``int``, which is as
correct and only slower."""

WindowTerm = tuple[int, Mapping[int, Affine]]
"""(c, {w: S_w}): contributes sum_w 2^(c*w) * S_w."""
ScalarTerm = tuple[int, Affine]
"""(k, P): contributes k * P (k reduced mod r)."""

WNAF_WIDTH = 5
"""wNAF width of the scalar terms: 8 odd multiples per point, about 256/6 additions per scalar."""


def default_modulus() -> int:
    """Q as ``gmpy2.mpz`` when gmpy2 is installed, else as a plain int (selects the arithmetic)."""
    return fast_int(Q)


def inverter(q: int) -> Callable[[int], int]:
    """Modular inverse mod ``q`` in q's integer type (gmpy2.invert is ~8x faster than pow on mpz)."""
    if gmpy2 is not None and isinstance(q, type(gmpy2.mpz(0))):
        return lambda a: gmpy2.invert(a, q)
    return lambda a: pow(a, -1, q)


def _batch_inverse(values: Sequence, mul: Callable, inv: Callable) -> list:
    """Inverses of nonzero ``values`` with one inversion (Montgomery's trick)."""
    prefix = []
    acc = None
    for v in values:
        prefix.append(acc)
        acc = v if acc is None else mul(acc, v)
    out = [None] * len(values)
    if acc is None:
        return out
    inv_acc = inv(acc)
    for i in range(len(values) - 1, -1, -1):
        out[i] = inv_acc if prefix[i] is None else mul(inv_acc, prefix[i])
        inv_acc = mul(inv_acc, values[i])
    return out


# --- G1: coordinates in Fq ------------------------------------------------------------------


def _g1_dbl_n(p: tuple, n: int, q: int) -> tuple:
    """2^n * p for a finite Jacobian p (dbl-2009-l, a = 0; Y != 0 on an odd-order group)."""
    X, Y, Z = p
    for _ in range(n):
        A = X * X
        B = Y * Y % q
        C = B * B
        D = 4 * X * B
        E = 3 * A % q
        Z = 2 * Y * Z % q
        X = (E * E - 2 * D) % q
        Y = (E * (D - X) - 8 * C) % q
    return (X, Y, Z)


def _g1_madd(p: tuple | None, a: Affine, q: int) -> tuple | None:
    """Jacobian p + affine a (madd-2007-bl), complete by case analysis (None = infinity)."""
    if a is None:
        return p
    x2, y2 = a
    if p is None:
        return (x2, y2, 1)
    X1, Y1, Z1 = p
    Z1Z1 = Z1 * Z1 % q
    H = (x2 * Z1Z1 - X1) % q
    rr = (y2 * Z1 % q * Z1Z1 - Y1) % q
    if not H:
        return _g1_dbl_n(p, 1, q) if not rr else None
    I = 4 * (H * H % q)
    J = H * I % q
    rr = 2 * rr
    V = X1 * I % q
    X3 = (rr * rr - J - 2 * V) % q
    return (X3, (rr * (V - X3) - 2 * Y1 * J) % q, 2 * Z1 * H % q)


def _g1_neg(a: Affine, q: int) -> Affine:
    return None if a is None else (a[0], (q - a[1]) % q)


def _g1_cast(a: Affine, typ: type) -> Affine:
    return None if a is None else (typ(a[0]), typ(a[1]))


def _g1_to_int(a: Affine) -> Affine:
    return None if a is None else (int(a[0]), int(a[1]))


def _g1_to_affine(pts: Sequence[tuple | None], q: int) -> list[Affine]:
    finite = [i for i, p in enumerate(pts) if p is not None]
    invs = _batch_inverse([pts[i][2] for i in finite], lambda a, b: a * b % q, inverter(q))
    out: list[Affine] = [None] * len(pts)
    for i, zi in zip(finite, invs):
        X, Y, _ = pts[i]
        zi2 = zi * zi % q
        out[i] = (X * zi2 % q, Y * zi2 % q * zi % q)
    return out


# --- G2: coordinates in Fq2 = Fq[u]/(u^2 + 1), pairs (c0, c1) --------------------------------


def _m2(a: tuple, b: tuple, q: int) -> tuple:
    """a * b in Fq2 (Karatsuba), reduced."""
    t0 = a[0] * b[0]
    t1 = a[1] * b[1]
    return ((t0 - t1) % q, ((a[0] + a[1]) * (b[0] + b[1]) - t0 - t1) % q)


def _s2(a: tuple, q: int) -> tuple:
    """a^2 in Fq2, reduced."""
    return ((a[0] + a[1]) * (a[0] - a[1]) % q, 2 * a[0] * a[1] % q)


def _g2_dbl_n(p: tuple, n: int, q: int) -> tuple:
    """2^n * p for a finite Jacobian p over Fq2 (dbl-2009-l inlined; the twist has odd order)."""
    (x0, x1), (y0, y1), (z0, z1) = p
    for _ in range(n):
        a0 = (x0 + x1) * (x0 - x1) % q  # A = X^2
        a1 = 2 * x0 * x1 % q
        b0 = (y0 + y1) * (y0 - y1) % q  # B = Y^2
        b1 = 2 * y0 * y1 % q
        c0 = (b0 + b1) * (b0 - b1)  # C = B^2, unreduced
        c1 = 2 * b0 * b1
        t0 = x0 * b0
        t1 = x1 * b1
        d0 = 4 * (t0 - t1) % q  # D = 4 X B
        d1 = 4 * ((x0 + x1) * (b0 + b1) - t0 - t1) % q
        e0 = 3 * a0  # E = 3 A
        e1 = 3 * a1
        t0 = y0 * z0  # Z3 = 2 Y Z
        t1 = y1 * z1
        z1 = 2 * ((y0 + y1) * (z0 + z1) - t0 - t1) % q
        z0 = 2 * (t0 - t1) % q
        x0 = ((e0 + e1) * (e0 - e1) - 2 * d0) % q  # X3 = E^2 - 2 D
        x1 = (2 * e0 * e1 - 2 * d1) % q
        u0 = d0 - x0  # Y3 = E (D - X3) - 8 C
        u1 = d1 - x1
        t0 = e0 * u0
        t1 = e1 * u1
        y0 = (t0 - t1 - 8 * c0) % q
        y1 = ((e0 + e1) * (u0 + u1) - t0 - t1 - 8 * c1) % q
    return ((x0, x1), (y0, y1), (z0, z1))


def _g2_madd(p: tuple | None, a: Affine, q: int) -> tuple | None:
    """Jacobian p + affine a over Fq2 (madd-2007-bl inlined), complete by case analysis."""
    if a is None:
        return p
    if p is None:
        return (a[0], a[1], (1, 0))
    (x20, x21), (y20, y21) = a
    (X0, X1), (Y0, Y1), (Z0, Z1) = p
    zz0 = (Z0 + Z1) * (Z0 - Z1) % q  # Z1Z1 = Z1^2
    zz1 = 2 * Z0 * Z1 % q
    t0 = x20 * zz0
    t1 = x21 * zz1
    h0 = (t0 - t1 - X0) % q  # H = x2 Z1Z1 - X1
    h1 = ((x20 + x21) * (zz0 + zz1) - t0 - t1 - X1) % q
    t0 = Z0 * zz0
    t1 = Z1 * zz1
    w0 = (t0 - t1) % q  # Z1^3
    w1 = ((Z0 + Z1) * (zz0 + zz1) - t0 - t1) % q
    t0 = y20 * w0
    t1 = y21 * w1
    r0 = (t0 - t1 - Y0) % q  # y2 Z1^3 - Y1
    r1 = ((y20 + y21) * (w0 + w1) - t0 - t1 - Y1) % q
    if not (h0 or h1):
        return _g2_dbl_n(p, 1, q) if not (r0 or r1) else None
    i0 = 4 * (h0 + h1) * (h0 - h1) % q  # I = 4 H^2
    i1 = 8 * h0 * h1 % q
    t0 = h0 * i0
    t1 = h1 * i1
    j0 = (t0 - t1) % q  # J = H I
    j1 = ((h0 + h1) * (i0 + i1) - t0 - t1) % q
    r0 *= 2  # rr = 2 (S2 - Y1)
    r1 *= 2
    t0 = X0 * i0
    t1 = X1 * i1
    v0 = (t0 - t1) % q  # V = X1 I
    v1 = ((X0 + X1) * (i0 + i1) - t0 - t1) % q
    x0 = ((r0 + r1) * (r0 - r1) - j0 - 2 * v0) % q  # X3 = rr^2 - J - 2 V
    x1 = (2 * r0 * r1 - j1 - 2 * v1) % q
    u0 = v0 - x0  # Y3 = rr (V - X3) - 2 Y1 J
    u1 = v1 - x1
    t0 = r0 * u0
    t1 = r1 * u1
    s0 = Y0 * j0
    s1 = Y1 * j1
    y0 = (t0 - t1 - 2 * (s0 - s1)) % q
    y1 = ((r0 + r1) * (u0 + u1) - t0 - t1 - 2 * ((Y0 + Y1) * (j0 + j1) - s0 - s1)) % q
    t0 = Z0 * h0  # Z3 = 2 Z1 H
    t1 = Z1 * h1
    return ((x0, x1), (y0, y1), (2 * (t0 - t1) % q, 2 * ((Z0 + Z1) * (h0 + h1) - t0 - t1) % q))


def _g2_neg(a: Affine, q: int) -> Affine:
    return None if a is None else (a[0], ((q - a[1][0]) % q, (q - a[1][1]) % q))


def _g2_cast(a: Affine, typ: type) -> Affine:
    return None if a is None else ((typ(a[0][0]), typ(a[0][1])), (typ(a[1][0]), typ(a[1][1])))


def _g2_to_int(a: Affine) -> Affine:
    return None if a is None else ((int(a[0][0]), int(a[0][1])), (int(a[1][0]), int(a[1][1])))


def _g2_to_affine(pts: Sequence[tuple | None], q: int) -> list[Affine]:
    inv = inverter(q)

    def inv2(a: tuple) -> tuple:
        d = inv((a[0] * a[0] + a[1] * a[1]) % q)
        return (a[0] * d % q, (q - a[1]) * d % q)

    finite = [i for i, p in enumerate(pts) if p is not None]
    invs = _batch_inverse([pts[i][2] for i in finite], lambda a, b: _m2(a, b, q), inv2)
    out: list[Affine] = [None] * len(pts)
    for i, zi in zip(finite, invs):
        X, Y, _ = pts[i]
        zi2 = _s2(zi, q)
        out[i] = (_m2(X, zi2, q), _m2(Y, _m2(zi2, zi, q), q))
    return out


# --- the group-generic part -----------------------------------------------------------------


@dataclass(frozen=True)
class _Curve:
    dbl_n: Callable
    madd: Callable
    neg: Callable
    cast: Callable
    to_int: Callable
    to_affine: Callable


_G1 = _Curve(_g1_dbl_n, _g1_madd, _g1_neg, _g1_cast, _g1_to_int, _g1_to_affine)
_G2 = _Curve(_g2_dbl_n, _g2_madd, _g2_neg, _g2_cast, _g2_to_int, _g2_to_affine)


def _curve(group: Group) -> _Curve:
    return _G1 if group is G1 else _G2


def wnaf(k: int, width: int = WNAF_WIDTH) -> list[tuple[int, int]]:
    """Nonzero width-``width`` NAF digits of k >= 0 as (bit position, digit), low first.

    Each digit is odd in (-2^(w-1), 2^(w-1)), any two are at least ``width`` bits apart, and
    sum(d * 2^pos) == k.
    """
    out = []
    full = 1 << width
    half = full >> 1
    pos = 0
    while k:
        zeros = (k & -k).bit_length() - 1
        k >>= zeros
        pos += zeros
        d = k & (full - 1)
        if d >= half:
            d -= full
        out.append((pos, d))
        k = (k - d) >> width
        pos += width
    return out


def _odd_multiples(cv: _Curve, pts: Sequence[Affine], q: int) -> list[list[Affine]]:
    """[P, 3P, ..., (2^(w-1) - 1)P] for each finite affine P, with two batch inversions in all."""
    twos = cv.to_affine([cv.dbl_n(cv.madd(None, p, q), 1, q) for p in pts], q)
    count = 1 << (WNAF_WIDTH - 2)
    jac: list = []
    for p, two in zip(pts, twos):
        acc = cv.madd(None, p, q)
        jac.append(acc)
        for _ in range(count - 1):
            acc = cv.madd(acc, two, q)
            jac.append(acc)
    flat = cv.to_affine(jac, q)
    return [flat[i : i + count] for i in range(0, len(flat), count)]


def combination(
    group: Group, windows: Iterable[WindowTerm] = (), scalars: Iterable[ScalarTerm] = (), q: int | None = None
) -> tuple | None:
    """Jacobian sum_(c, S) sum_w 2^(c*w) S_w + sum_(k, P) (k mod r) P in one doubling chain.

    Points are affine (None = infinity), coordinates int or mpz; ``q`` = Q in the integer type to
    compute in (None: :func:`default_modulus`). Returns a Jacobian point in that type, or None.
    """
    q = default_modulus() if q is None else q
    cv, typ = _curve(group), type(q)
    events: defaultdict[int, list] = defaultdict(list)
    for c, sums in windows:
        for w, point in sums.items():
            if point is not None:
                events[c * w].append(cv.cast(point, typ))
    tabled: list[tuple[int, Affine]] = []
    for k, point in scalars:
        k %= R
        if point is None or k == 0:
            continue
        if k == 1:
            events[0].append(cv.cast(point, typ))
        else:
            tabled.append((k, cv.cast(point, typ)))
    if tabled:
        tables = _odd_multiples(cv, [p for _, p in tabled], q)
        for (k, _), pos in zip(tabled, tables):
            neg = [cv.neg(p, q) for p in pos]
            for b, d in wnaf(k):
                events[b].append(pos[d >> 1] if d > 0 else neg[-d >> 1])
    acc = None
    cur = 0
    for b in sorted(events, reverse=True):
        if acc is not None and cur > b:
            acc = cv.dbl_n(acc, cur - b, q)
        cur = b
        for p in events[b]:
            acc = cv.madd(acc, p, q)
    if acc is not None and cur:
        acc = cv.dbl_n(acc, cur, q)
    return acc


def xyzz_to_affine(group: Group, rows: Sequence[Sequence[int]], q: int | None = None) -> list[Affine]:
    """Affine plain-int points of XYZZ rows (X, Y, ZZ, ZZZ), x = X/ZZ and y = Y/ZZZ, ZZ = 0 for
    infinity, with one field inversion in all (Montgomery's trick over ZZ*ZZZ, whose inverse gives
    1/ZZ = ZZZ/(ZZ*ZZZ) and 1/ZZZ = ZZ/(ZZ*ZZZ)).

    G1 rows hold four Fq ints, G2 rows four (c0, c1) pairs. The coordinates may all be in
    Montgomery form: the quotients cancel the factor, so the result is standard form either way.
    """
    q = default_modulus() if q is None else q
    typ = type(q)
    g1 = group is G1
    if g1:
        mul = lambda a, b: a * b % q  # noqa: E731
        inv = inverter(q)
        cast = typ
    else:
        mul = lambda a, b: _m2(a, b, q)  # noqa: E731
        inv_fq = inverter(q)

        def inv(a: tuple) -> tuple:
            d = inv_fq((a[0] * a[0] + a[1] * a[1]) % q)
            return (a[0] * d % q, (q - a[1]) * d % q)

        def cast(a: tuple) -> tuple:
            return (typ(a[0]), typ(a[1]))

    rows = [tuple(cast(v) for v in r) for r in rows]
    finite = [i for i, r in enumerate(rows) if (r[2] if g1 else (r[2][0] or r[2][1]))]
    invs = _batch_inverse([mul(rows[i][2], rows[i][3]) for i in finite], mul, inv)
    out: list[Affine] = [None] * len(rows)
    for i, t in zip(finite, invs):
        x, y, zz, zzz = rows[i]
        out[i] = (mul(x, mul(zzz, t)), mul(y, mul(zz, t)))
    return [_curve(group).to_int(p) for p in out]


def add(group: Group, p: Affine, a: Affine, q: int | None = None) -> Affine:
    """p + a for affine points (None = infinity), plain-int result; complete."""
    q = default_modulus() if q is None else q
    cv = _curve(group)
    typ = type(q)
    return to_affine(group, [cv.madd(cv.madd(None, cv.cast(p, typ), q), cv.cast(a, typ), q)], q)[0]


def int_point(group: Group, p: Affine) -> Affine:
    """The affine point ``p`` with plain-int coordinates."""
    return _curve(group).to_int(p)


def to_affine(group: Group, pts: Sequence[tuple | None], q: int | None = None, as_int: bool = True) -> list[Affine]:
    """Jacobian points (None = infinity) of :func:`combination` to affine, one inversion in all.

    ``as_int``: plain-int coordinates (what the rest of distprove uses); else q's integer type.
    """
    q = default_modulus() if q is None else q
    cv = _curve(group)
    out = cv.to_affine(pts, q)
    return [cv.to_int(p) for p in out] if as_int else out
