"""BN254 (snarkjs's ``bn128``) constants and plain-Python field and curve arithmetic.

This module is the arithmetic reference of the project: Python integers, no tricks, so
that every faster path (numpy, CUDA) has something obviously right to be checked against.

Conventions (see ``docs/DESIGN.md``):

* Field elements are Python ``int`` in standard form, reduced below their modulus.
* Fq2 elements are tuples ``(c0, c1)`` meaning ``c0 + c1*u`` with ``u^2 = -1``.
* Affine points are tuples ``(x, y)``; the point at infinity is ``None``.
* Jacobian points are tuples ``(X, Y, Z)`` with ``x = X/Z^2``, ``y = Y/Z^3``; ``Z == 0`` is
  infinity. G1 and G2 share one generic implementation parameterised by a field ops table.
* On disk and on the GPU an element is 32 bytes little-endian in Montgomery form
  (``x * 2^256 mod p``), viewed as eight little-endian ``uint32`` limbs.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Callable, Iterable, Optional, Sequence

import numpy as np

# --- Moduli and Montgomery constants -------------------------------------------------

Q = 21888242871839275222246405745257275088696311157297823662689037894645226208583
"""Base field modulus q (Fq)."""
R = 21888242871839275222246405745257275088548364400416034343698204186575808495617
"""Scalar field modulus r (Fr), the group order."""

MONT = 1 << 256
FQ_MONT = MONT % Q
FR_MONT = MONT % R
FQ_MONT_INV = pow(FQ_MONT, -1, Q)
FR_MONT_INV = pow(FR_MONT, -1, R)
FR_MONT2_INV = FR_MONT_INV * FR_MONT_INV % R
"""R^-2 mod r: decodes a zkey coefficient (stored as coef * R^2 mod r)."""

# --- Roots of unity as ffjavascript builds them --------------------------------------

FR_NQR = 5
FR_S = 28
FR_T = (R - 1) >> FR_S
FR_SHIFT = FR_NQR * FR_NQR % R
"""Fr.shift = 25, the coset used in place of w[k+1] when k == 28."""


def _build_roots() -> list[int]:
    w = [0] * (FR_S + 1)
    w[FR_S] = pow(FR_NQR, FR_T, R)
    for k in range(FR_S, 0, -1):
        w[k - 1] = w[k] * w[k] % R
    return w


FR_ROOTS: list[int] = _build_roots()
"""FR_ROOTS[k] = Fr.w[k], a primitive 2^k-th root of unity (w[28] = 5^t)."""


def root_of_unity(k: int) -> int:
    """Return ffjavascript's Fr.w[k], the primitive 2^k-th root of unity used by snarkjs."""
    if not 0 <= k <= FR_S:
        raise ValueError(f"no 2^{k}-th root of unity in Fr (2-adicity is {FR_S})")
    return FR_ROOTS[k]


def coset_generator(k: int) -> int:
    """The odd-coset multiplier snarkjs uses for a domain of size 2^k (§7.2): w[k+1], or 25 at k=28."""
    return FR_SHIFT if k == FR_S else root_of_unity(k + 1)


# --- Fq2 -----------------------------------------------------------------------------

Fq2 = tuple[int, int]


def fq2_add(a: Fq2, b: Fq2) -> Fq2:
    return ((a[0] + b[0]) % Q, (a[1] + b[1]) % Q)


def fq2_sub(a: Fq2, b: Fq2) -> Fq2:
    return ((a[0] - b[0]) % Q, (a[1] - b[1]) % Q)


def fq2_neg(a: Fq2) -> Fq2:
    return ((-a[0]) % Q, (-a[1]) % Q)


def fq2_mul(a: Fq2, b: Fq2) -> Fq2:
    t0 = a[0] * b[0]
    t1 = a[1] * b[1]
    return ((t0 - t1) % Q, ((a[0] + a[1]) * (b[0] + b[1]) - t0 - t1) % Q)


def fq2_sqr(a: Fq2) -> Fq2:
    return ((a[0] + a[1]) * (a[0] - a[1]) % Q, 2 * a[0] * a[1] % Q)


def fq2_inv(a: Fq2) -> Fq2:
    d = pow((a[0] * a[0] + a[1] * a[1]) % Q, -1, Q)
    return (a[0] * d % Q, (-a[1]) * d % Q)


def fq2_is_zero(a: Fq2) -> bool:
    return a[0] == 0 and a[1] == 0


# --- Generic field table so G1 and G2 share one curve implementation -----------------


@dataclass(frozen=True)
class _FieldOps:
    zero: object
    one: object
    add: Callable
    sub: Callable
    mul: Callable
    sqr: Callable
    neg: Callable
    inv: Callable
    is_zero: Callable


FQ_OPS = _FieldOps(
    zero=0,
    one=1,
    add=lambda a, b: (a + b) % Q,
    sub=lambda a, b: (a - b) % Q,
    mul=lambda a, b: a * b % Q,
    sqr=lambda a: a * a % Q,
    neg=lambda a: (-a) % Q,
    inv=lambda a: pow(a, -1, Q),
    is_zero=lambda a: a == 0,
)
FQ2_OPS = _FieldOps(
    zero=(0, 0),
    one=(1, 0),
    add=fq2_add,
    sub=fq2_sub,
    mul=fq2_mul,
    sqr=fq2_sqr,
    neg=fq2_neg,
    inv=fq2_inv,
    is_zero=fq2_is_zero,
)


@dataclass(frozen=True)
class Group:
    """One of the two curve groups: its field, its curve constant b and generator."""

    name: str
    f: _FieldOps
    b: object
    generator: tuple
    limbs: int
    """uint32 words per affine point in the Montgomery limb layout (16 for G1, 32 for G2)."""


G2_B = (
    19485874751759354771024239261021720505790618469301721065564631296452457478373,
    266929791119991161246907387137283842545076965332900288569378510910307636690,
)
G1_GEN = (1, 2)
G2_GEN = (
    (
        10857046999023057135944570762232829481370756359578518086990519993285655852781,
        11559732032986387107991004021392285783925812861821192530917403151452391805634,
    ),
    (
        8495653923123431417604973247489272438418190587263600148770280649306958101930,
        4082367875863433681332203403145435568316851327593401208105741076214120093531,
    ),
)

G1 = Group("G1", FQ_OPS, 3, G1_GEN, 16)
G2 = Group("G2", FQ2_OPS, G2_B, G2_GEN, 32)

Affine = Optional[tuple]
Jacobian = tuple


def is_on_curve(g: Group, p: Affine) -> bool:
    """True when ``p`` is infinity or satisfies y^2 = x^3 + b (no subgroup check, like snarkjs)."""
    if p is None:
        return True
    f = g.f
    x, y = p
    return f.sqr(y) == f.add(f.mul(f.sqr(x), x), g.b)


def to_jacobian(g: Group, p: Affine) -> Jacobian:
    if p is None:
        return (g.f.one, g.f.one, g.f.zero)
    return (p[0], p[1], g.f.one)


def jac_is_inf(g: Group, p: Jacobian) -> bool:
    return g.f.is_zero(p[2])


def to_affine(g: Group, p: Jacobian) -> Affine:
    f = g.f
    if f.is_zero(p[2]):
        return None
    zi = f.inv(p[2])
    zi2 = f.sqr(zi)
    return (f.mul(p[0], zi2), f.mul(p[1], f.mul(zi2, zi)))


def jac_double(g: Group, p: Jacobian) -> Jacobian:
    """dbl-2009-l (a = 0)."""
    f = g.f
    X, Y, Z = p
    if f.is_zero(Z) or f.is_zero(Y):
        return (f.one, f.one, f.zero)
    A = f.sqr(X)
    B = f.sqr(Y)
    C = f.sqr(B)
    D = f.sub(f.sqr(f.add(X, B)), f.add(A, C))
    D = f.add(D, D)
    E = f.add(f.add(A, A), A)
    F = f.sqr(E)
    X3 = f.sub(F, f.add(D, D))
    C8 = f.add(C, C)
    C8 = f.add(C8, C8)
    C8 = f.add(C8, C8)
    Y3 = f.sub(f.mul(E, f.sub(D, X3)), C8)
    Z3 = f.mul(Y, Z)
    Z3 = f.add(Z3, Z3)
    return (X3, Y3, Z3)


def jac_add(g: Group, p: Jacobian, q: Jacobian) -> Jacobian:
    """add-2007-bl, complete by case analysis (infinity, doubling, inverse)."""
    f = g.f
    if f.is_zero(p[2]):
        return q
    if f.is_zero(q[2]):
        return p
    X1, Y1, Z1 = p
    X2, Y2, Z2 = q
    Z1Z1 = f.sqr(Z1)
    Z2Z2 = f.sqr(Z2)
    U1 = f.mul(X1, Z2Z2)
    U2 = f.mul(X2, Z1Z1)
    S1 = f.mul(Y1, f.mul(Z2, Z2Z2))
    S2 = f.mul(Y2, f.mul(Z1, Z1Z1))
    if U1 == U2:
        if S1 == S2:
            return jac_double(g, p)
        return (f.one, f.one, f.zero)
    H = f.sub(U2, U1)
    I = f.sqr(f.add(H, H))
    J = f.mul(H, I)
    rr = f.sub(S2, S1)
    rr = f.add(rr, rr)
    V = f.mul(U1, I)
    X3 = f.sub(f.sub(f.sqr(rr), J), f.add(V, V))
    S1J = f.mul(S1, J)
    Y3 = f.sub(f.mul(rr, f.sub(V, X3)), f.add(S1J, S1J))
    Z3 = f.mul(f.sub(f.sqr(f.add(Z1, Z2)), f.add(Z1Z1, Z2Z2)), H)
    return (X3, Y3, Z3)


def jac_add_affine(g: Group, p: Jacobian, q: Affine) -> Jacobian:
    """madd-2007-bl: Jacobian plus affine, complete by case analysis."""
    f = g.f
    if q is None:
        return p
    if f.is_zero(p[2]):
        return (q[0], q[1], f.one)
    X1, Y1, Z1 = p
    x2, y2 = q
    Z1Z1 = f.sqr(Z1)
    U2 = f.mul(x2, Z1Z1)
    S2 = f.mul(y2, f.mul(Z1, Z1Z1))
    if U2 == X1:
        if S2 == Y1:
            return jac_double(g, p)
        return (f.one, f.one, f.zero)
    H = f.sub(U2, X1)
    HH = f.sqr(H)
    I = f.add(HH, HH)
    I = f.add(I, I)
    J = f.mul(H, I)
    rr = f.sub(S2, Y1)
    rr = f.add(rr, rr)
    V = f.mul(X1, I)
    X3 = f.sub(f.sub(f.sqr(rr), J), f.add(V, V))
    Y1J = f.mul(Y1, J)
    Y3 = f.sub(f.mul(rr, f.sub(V, X3)), f.add(Y1J, Y1J))
    Z3 = f.sub(f.sqr(f.add(Z1, H)), f.add(Z1Z1, HH))
    return (X3, Y3, Z3)


def jac_neg(g: Group, p: Jacobian) -> Jacobian:
    return (p[0], g.f.neg(p[1]), p[2])


def jac_mul(g: Group, p: Jacobian, k: int) -> Jacobian:
    """Double-and-add scalar multiplication (k reduced mod r first; r is the group order)."""
    k %= R
    acc = (g.f.one, g.f.one, g.f.zero)
    for bit in bin(k)[2:]:
        acc = jac_double(g, acc)
        if bit == "1":
            acc = jac_add(g, acc, p)
    return acc


def add(g: Group, p: Affine, q: Affine) -> Affine:
    """Affine addition (slow path; for tests and assembly, not hot loops)."""
    return to_affine(g, jac_add_affine(g, to_jacobian(g, p), q))


def neg(g: Group, p: Affine) -> Affine:
    return None if p is None else (p[0], g.f.neg(p[1]))


def mul(g: Group, p: Affine, k: int) -> Affine:
    """Affine scalar multiplication k*p."""
    return to_affine(g, jac_mul(g, to_jacobian(g, p), k))


def batch_to_affine(g: Group, pts: Sequence[Jacobian]) -> list[Affine]:
    """Convert many Jacobian points with one field inversion (Montgomery's trick)."""
    f = g.f
    idx = [i for i, p in enumerate(pts) if not f.is_zero(p[2])]
    out: list[Affine] = [None] * len(pts)
    if not idx:
        return out
    prefix = []
    acc = f.one
    for i in idx:
        prefix.append(acc)
        acc = f.mul(acc, pts[i][2])
    inv = f.inv(acc)
    for j in range(len(idx) - 1, -1, -1):
        i = idx[j]
        zi = f.mul(inv, prefix[j])
        inv = f.mul(inv, pts[i][2])
        zi2 = f.sqr(zi)
        out[i] = (f.mul(pts[i][0], zi2), f.mul(pts[i][1], f.mul(zi2, zi)))
    return out


# --- Homogeneous projective coordinates with complete formulas ----------------------
#
# (X : Y : Z) means x = X/Z, y = Y/Z; the identity is (0 : 1 : 0). The addition and doubling
# are Renes-Costello-Batina 2016 algorithms 7 and 9 for a = 0 with b3 = 3b: one formula for
# every input (identity, P + P, P + (-P) included), no case analysis. The constant-work MSM
# mode accumulates with them.

Projective = tuple


def proj_b3(g: Group) -> object:
    """3b, the curve constant of the complete formulas (9 on G1, 3b' on the twist)."""
    return g.f.add(g.f.add(g.b, g.b), g.b)


def proj_identity(g: Group) -> Projective:
    """The identity (0 : 1 : 0)."""
    return (g.f.zero, g.f.one, g.f.zero)


def to_projective(g: Group, p: Affine) -> Projective:
    """Affine (None = infinity) to (x : y : 1), or the identity (0 : 1 : 0)."""
    return proj_identity(g) if p is None else (p[0], p[1], g.f.one)


def proj_to_affine(g: Group, p: Projective) -> Affine:
    """(X : Y : Z) to affine (X/Z, Y/Z); Z == 0 is infinity."""
    f = g.f
    if f.is_zero(p[2]):
        return None
    zi = f.inv(p[2])
    return (f.mul(p[0], zi), f.mul(p[1], zi))


def proj_add(g: Group, p: Projective, q: Projective) -> Projective:
    """Complete addition, RCB 2016 algorithm 7 (a = 0): 12 products and 2 by 3b."""
    f = g.f
    b3 = proj_b3(g)
    X1, Y1, Z1 = p
    X2, Y2, Z2 = q
    t0 = f.mul(X1, X2)
    t1 = f.mul(Y1, Y2)
    t2 = f.mul(Z1, Z2)
    t3 = f.sub(f.mul(f.add(X1, Y1), f.add(X2, Y2)), f.add(t0, t1))  # X1 Y2 + X2 Y1
    t4 = f.sub(f.mul(f.add(Y1, Z1), f.add(Y2, Z2)), f.add(t1, t2))  # Y1 Z2 + Y2 Z1
    t5 = f.sub(f.mul(f.add(X1, Z1), f.add(X2, Z2)), f.add(t0, t2))  # X1 Z2 + X2 Z1
    t0 = f.add(f.add(t0, t0), t0)  # 3 X1 X2
    t2 = f.mul(b3, t2)  # 3b Z1 Z2
    s = f.add(t1, t2)  # Y1 Y2 + 3b Z1 Z2
    d = f.sub(t1, t2)  # Y1 Y2 - 3b Z1 Z2
    t5 = f.mul(b3, t5)  # 3b (X1 Z2 + X2 Z1)
    X3 = f.sub(f.mul(t3, d), f.mul(t4, t5))
    Y3 = f.add(f.mul(s, d), f.mul(t5, t0))
    Z3 = f.add(f.mul(t4, s), f.mul(t0, t3))
    return (X3, Y3, Z3)


def proj_double(g: Group, p: Projective) -> Projective:
    """Complete doubling, RCB 2016 algorithm 9 (a = 0): 6 products, 2 squares, 1 by 3b."""
    f = g.f
    X, Y, Z = p
    t0 = f.sqr(Y)
    z8 = f.add(t0, t0)
    z8 = f.add(z8, z8)
    z8 = f.add(z8, z8)  # 8 Y^2
    t2 = f.mul(proj_b3(g), f.sqr(Z))  # 3b Z^2
    X3 = f.mul(t2, z8)  # 24b Y^2 Z^2
    Y3 = f.add(t0, t2)  # Y^2 + 3b Z^2
    Z3 = f.mul(f.mul(Y, Z), z8)  # 8 Y^3 Z
    t0 = f.sub(t0, f.add(f.add(t2, t2), t2))  # Y^2 - 9b Z^2
    Y3 = f.add(f.mul(t0, Y3), X3)
    XY = f.mul(X, Y)
    X3 = f.mul(t0, XY)
    return (f.add(X3, X3), Y3, Z3)


# --- Montgomery little-endian uint32 limb layout (disk, zarr and GPU) ---------------


def ints_from_limbs(limbs: np.ndarray) -> list[int]:
    """Decode an (n, 8) uint32 array of little-endian limbs into n Python ints (no Montgomery step)."""
    a = np.ascontiguousarray(limbs, dtype="<u4").reshape(-1, 8)
    raw = a.tobytes()
    return [int.from_bytes(raw[i : i + 32], "little") for i in range(0, len(raw), 32)]


_LIMB_CHUNK = 1 << 20
"""Values encoded per pass of :func:`limbs_from_ints` (bounds its temporary bytes to 32 MiB)."""


def limbs_from_ints(values: Iterable[int] | np.ndarray) -> np.ndarray:
    """Encode n ints (each < 2^256; any iterable or an object array, of ints or gmpy2 values) as an
    (n, 8) uint32 little-endian limb array."""
    vals = np.asarray(values if isinstance(values, np.ndarray) else list(values), dtype=object).reshape(-1)
    out = np.empty((vals.shape[0], 8), dtype="<u4")
    for lo in range(0, vals.shape[0], _LIMB_CHUNK):
        part = vals[lo : lo + _LIMB_CHUNK]
        raw = b"".join([int(v).to_bytes(32, "little") for v in part])
        out[lo : lo + part.shape[0]] = np.frombuffer(raw, dtype="<u4").reshape(-1, 8)
    return out


def powers(base: int, n: int) -> np.ndarray:
    """[base^0 … base^(n-1)] mod r as an object array, by an outer product of two short tables
    (about 2·sqrt(n) products in Python, the rest in one NumPy pass). The entries are of
    ``base``'s type (a gmpy2 value gives gmpy2 values)."""
    one = type(base)(1)
    m = 1 << ((max(n, 1) - 1).bit_length() + 1) // 2
    lo = [one]
    for _ in range(m - 1):
        lo.append(lo[-1] * base % R)
    step = pow(base, m, R)
    hi = [one]
    for _ in range(-(-n // m) - 1):
        hi.append(hi[-1] * step % R)
    out = np.multiply.outer(np.array(hi, dtype=object), np.array(lo, dtype=object)).reshape(-1)[:n]
    return out % R


def fq_from_mont(v: int) -> int:
    return v * FQ_MONT_INV % Q


def fq_to_mont(v: int) -> int:
    return v * FQ_MONT % Q


def points_from_limbs(g: Group, limbs: np.ndarray, mont: bool = True) -> list[Affine]:
    """Decode an (n, 16) G1 or (n, 32) G2 limb array into affine points (zeros = infinity): Montgomery
    limbs (the key layout), or with ``mont`` False standard-form ones (G2: x.c0, x.c1, y.c0, y.c1).

    Coordinates are not checked against the curve here; see :func:`is_on_curve`.
    """
    a = np.ascontiguousarray(limbs, dtype="<u4").reshape(-1, g.limbs)
    vals = ints_from_limbs(a.reshape(-1, 8))
    if mont:
        vals = [fq_from_mont(v) for v in vals]
    zero_rows = ~a.any(axis=1)
    out: list[Affine] = []
    if g is G1:
        for i in range(a.shape[0]):
            out.append(None if zero_rows[i] else (vals[2 * i], vals[2 * i + 1]))
    else:
        for i in range(a.shape[0]):
            v = vals[4 * i : 4 * i + 4]
            out.append(None if zero_rows[i] else ((v[0], v[1]), (v[2], v[3])))
    return out


def points_to_limbs(g: Group, pts: Sequence[Affine], mont: bool = True) -> np.ndarray:
    """Encode affine points as limb rows, infinity as all-zero rows: Montgomery limbs (the key
    layout), or with ``mont`` False standard-form ones (a byte copy of the integers)."""
    coords: list[int] = []
    words = g.limbs // 8
    for p in pts:
        if p is None:
            coords.extend([0] * words)
        elif g is G1:
            coords.extend(p)
        else:
            coords.extend((p[0][0], p[0][1], p[1][0], p[1][1]))
    if not coords:
        return np.zeros((0, g.limbs), dtype="<u4")
    if mont:
        coords = [fq_to_mont(c) for c in coords]
    return limbs_from_ints(coords).reshape(-1, g.limbs)
