"""The BN254 optimal ate pairing on big integers (gmpy2 when installed): the verifier's arithmetic.

py_ecc's pairing costs ~0.2 s a Miller loop in pure Python (its FQ12 is a degree-12 polynomial
ring and the Frobenius of Q is a 254-bit power), which made the pairing check the bound of a GPU
batch with checks on. This module computes the same pairing value in the tower
Fq2 = Fq[u]/(u^2 + 1), Fq6 = Fq2[v]/(v^3 - xi), Fq12 = Fq6[w]/(w^2 - v), xi = 9 + u, with tuples of
integers:

* Miller loop over the binary digits of 6x + 2 (py_ecc's loop), G2 in affine coordinates on the
  D-type twist y^2 = x^3 + 3/xi (one Fq inversion a step through the Fq2 norm), each line
  evaluated at P as the sparse element y_P + (-lambda x_P) w + (lambda x_T - y_T) v w (vertical
  lines dropped: they lie in a subfield the final exponentiation kills), then the two Frobenius
  lines of the optimal ate pairing.
* Final exponentiation: the easy part by conjugation, one inversion and the p^2-Frobenius
  (constants of Fq); the hard part either exactly, (p^4 - p^2 + 1)/r by square-and-multiply
  (:func:`final_exponentiation`, equal to py_ecc's, which the tests compare: 21 ms on the dev VM),
  or raised to 2x(6x^2 + 3x + 1) by three powers by x (:func:`final_exponentiation_fast`, 5 ms),
  which the checks use: the same "== 1", and ffjavascript's value.
* Products of Miller loops share the accumulator's squarings (:func:`multi_miller_loop`), and a
  batch check's 128-bit coefficients one squaring chain (:func:`multi_power`).

Elements: Fq2 (a, b) = a + b u; Fq6 (c0, c1, c2); Fq12 (c0, c1) = c0 + c1 w.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from distprove import bn254
from distprove.curve import default_modulus, inverter

P = default_modulus()
"""The base field modulus in the arithmetic's integer type (gmpy2.mpz when installed)."""
BN_X = 4965661367192848881
"""The BN parameter x (p = 36x^4 + 36x^3 + 24x^2 + 6x + 1)."""
ATE_LOOP = 6 * BN_X + 2
"""The optimal ate pairing's loop count."""

Fq2 = tuple[Any, Any]
Fq6 = tuple[Fq2, Fq2, Fq2]
Fq12 = tuple[Fq6, Fq6]

# --- Fq2 ------------------------------------------------------------------------------------


_inv = inverter(P)
# The Fq2 operations repeat bn254.fq2_*'s formulas but reduce by P in P's own type: bn254's reduce
# mpz operands by the int Q, which measured 20-25% slower through the whole verifier.


def f2_add(a: Fq2, b: Fq2) -> Fq2:
    return ((a[0] + b[0]) % P, (a[1] + b[1]) % P)


def f2_sub(a: Fq2, b: Fq2) -> Fq2:
    return ((a[0] - b[0]) % P, (a[1] - b[1]) % P)


def f2_neg(a: Fq2) -> Fq2:
    return (-a[0] % P, -a[1] % P)


def f2_mul(a: Fq2, b: Fq2) -> Fq2:
    t0, t1 = a[0] * b[0], a[1] * b[1]
    return ((t0 - t1) % P, ((a[0] + a[1]) * (b[0] + b[1]) - t0 - t1) % P)


def f2_sqr(a: Fq2) -> Fq2:
    return ((a[0] + a[1]) * (a[0] - a[1]) % P, 2 * a[0] * a[1] % P)


def f2_scale(a: Fq2, k: Any) -> Fq2:
    return (a[0] * k % P, a[1] * k % P)


def f2_inv(a: Fq2) -> Fq2:
    n = _inv((a[0] * a[0] + a[1] * a[1]) % P)
    return (a[0] * n % P, -a[1] * n % P)


def f2_conj(a: Fq2) -> Fq2:
    return (a[0], -a[1] % P)


def f2_mul_xi(a: Fq2) -> Fq2:
    """a (9 + u)."""
    return ((9 * a[0] - a[1]) % P, (a[0] + 9 * a[1]) % P)


def f2_pow(a: Fq2, e: int) -> Fq2:
    out = F2_ONE
    for bit in bin(e)[2:]:
        out = f2_sqr(out)
        if bit == "1":
            out = f2_mul(out, a)
    return out


F2_ZERO: Fq2 = (P.__class__(0), P.__class__(0))
F2_ONE: Fq2 = (P.__class__(1), P.__class__(0))

# --- Fq6 = Fq2[v]/(v^3 - xi) -------------------------------------------------------------------


def f6_add(a: Fq6, b: Fq6) -> Fq6:
    return (f2_add(a[0], b[0]), f2_add(a[1], b[1]), f2_add(a[2], b[2]))


def f6_sub(a: Fq6, b: Fq6) -> Fq6:
    return (f2_sub(a[0], b[0]), f2_sub(a[1], b[1]), f2_sub(a[2], b[2]))


def f6_neg(a: Fq6) -> Fq6:
    return (f2_neg(a[0]), f2_neg(a[1]), f2_neg(a[2]))


def f6_mul(a: Fq6, b: Fq6) -> Fq6:
    a0, a1, a2 = a
    b0, b1, b2 = b
    t0, t1, t2 = f2_mul(a0, b0), f2_mul(a1, b1), f2_mul(a2, b2)
    c0 = f2_add(t0, f2_mul_xi(f2_sub(f2_sub(f2_mul(f2_add(a1, a2), f2_add(b1, b2)), t1), t2)))
    c1 = f2_add(f2_sub(f2_sub(f2_mul(f2_add(a0, a1), f2_add(b0, b1)), t0), t1), f2_mul_xi(t2))
    c2 = f2_add(f2_sub(f2_sub(f2_mul(f2_add(a0, a2), f2_add(b0, b2)), t0), t2), t1)
    return (c0, c1, c2)


def f6_mul_v(a: Fq6) -> Fq6:
    """a v (v^3 = xi)."""
    return (f2_mul_xi(a[2]), a[0], a[1])


def f6_inv(a: Fq6) -> Fq6:
    a0, a1, a2 = a
    c0 = f2_sub(f2_sqr(a0), f2_mul_xi(f2_mul(a1, a2)))
    c1 = f2_sub(f2_mul_xi(f2_sqr(a2)), f2_mul(a0, a1))
    c2 = f2_sub(f2_sqr(a1), f2_mul(a0, a2))
    t = f2_inv(f2_add(f2_mul(a0, c0), f2_mul_xi(f2_add(f2_mul(a2, c1), f2_mul(a1, c2)))))
    return (f2_mul(c0, t), f2_mul(c1, t), f2_mul(c2, t))


F6_ZERO: Fq6 = (F2_ZERO, F2_ZERO, F2_ZERO)
F6_ONE: Fq6 = (F2_ONE, F2_ZERO, F2_ZERO)

# --- Fq12 = Fq6[w]/(w^2 - v) -------------------------------------------------------------------

ONE: Fq12 = (F6_ONE, F6_ZERO)


def mul(a: Fq12, b: Fq12) -> Fq12:
    """a b in Fq12 (Karatsuba over Fq6)."""
    t0, t1 = f6_mul(a[0], b[0]), f6_mul(a[1], b[1])
    c1 = f6_sub(f6_sub(f6_mul(f6_add(a[0], a[1]), f6_add(b[0], b[1])), t0), t1)
    return (f6_add(t0, f6_mul_v(t1)), c1)


def sqr(a: Fq12) -> Fq12:
    """a^2 in Fq12 (complex squaring)."""
    t = f6_mul(a[0], a[1])
    c0 = f6_sub(f6_sub(f6_mul(f6_add(a[0], a[1]), f6_add(a[0], f6_mul_v(a[1]))), t), f6_mul_v(t))
    return (c0, f6_add(t, t))


def conj(a: Fq12) -> Fq12:
    """a^(p^6): c0 - c1 w."""
    return (a[0], f6_neg(a[1]))


def inv(a: Fq12) -> Fq12:
    t = f6_inv(f6_sub(f6_mul(a[0], a[0]), f6_mul_v(f6_mul(a[1], a[1]))))
    return (f6_mul(a[0], t), f6_neg(f6_mul(a[1], t)))


def power(a: Fq12, e: int) -> Fq12:
    """a^e, e >= 0, by square-and-multiply."""
    out = ONE
    for bit in bin(e)[2:]:
        out = sqr(out)
        if bit == "1":
            out = mul(out, a)
    return out


_WINDOW = 4
"""Bits per window of :func:`multi_power`: a 128-bit exponent costs 14 products for its table
and one per nonzero window (~30), against ~64 bit by bit."""


def multi_power(terms: Sequence[tuple[Fq12, int]]) -> Fq12:
    """prod a_i^e_i (e_i >= 0) with one shared chain of squarings (Straus, fixed windows of
    :data:`_WINDOW` bits): a batch check's 128-bit coefficients cost one squaring chain, not one
    per proof."""
    tables = []
    for a, e in terms:
        table = [ONE, a]
        for _ in range(2, min(1 << _WINDOW, e + 1)):
            table.append(mul(table[-1], a))
        tables.append(table)
    windows = -(-max((e.bit_length() for _, e in terms), default=0) // _WINDOW)
    mask = (1 << _WINDOW) - 1
    out = ONE
    for w in range(windows - 1, -1, -1):
        for _ in range(_WINDOW):
            out = sqr(out)
        for (_, e), table in zip(terms, tables):
            digit = e >> (w * _WINDOW) & mask
            if digit:
                out = mul(out, table[digit])
    return out


def _mul_line(f: Fq12, a0: Any, b0: Fq2, b1: Fq2) -> Fq12:
    """f (a0 + b0 w + b1 v w) for a0 in Fq: a sparse line, Karatsuba with its zero terms dropped."""
    c0, c1 = f
    t0 = (f2_scale(c0[0], a0), f2_scale(c0[1], a0), f2_scale(c0[2], a0))
    t1 = f6_mul(c1, (b0, b1, F2_ZERO))
    mid = f6_sub(f6_sub(f6_mul(f6_add(c0, c1), (((b0[0] + a0) % P, b0[1]), b1, F2_ZERO)), t0), t1)
    return (f6_add(t0, f6_mul_v(t1)), mid)


# --- Miller loop --------------------------------------------------------------------------------

_XI: Fq2 = (P.__class__(9), P.__class__(1))
_FROB_X = f2_pow(_XI, (int(P) - 1) // 3)
_FROB_Y = f2_pow(_XI, (int(P) - 1) // 2)


def _frobenius_twist(q: tuple[Fq2, Fq2]) -> tuple[Fq2, Fq2]:
    """pi_p(Q) for Q on the twist: (conj(x) xi^((p-1)/3), conj(y) xi^((p-1)/2))."""
    return f2_mul(f2_conj(q[0]), _FROB_X), f2_mul(f2_conj(q[1]), _FROB_Y)


class _Degenerate(Exception):
    """A step met a vertical line or infinity: only for a Q outside G2 of small order."""


def _step(f: Fq12, t: tuple[Fq2, Fq2], q: tuple[Fq2, Fq2] | None, xp: Any, yp: Any) -> tuple[Fq12, tuple[Fq2, Fq2]]:
    """Multiply f by the line through t and q (the tangent when q is None) at P = (xp, yp); return
    f and t + q (2t). For Q in G2, T runs over multiples [k]Q with 0 < k < r, so the line is never
    vertical; otherwise :class:`_Degenerate` is raised."""
    xt, yt = t
    if q is None:
        den = f2_add(yt, yt)
        if den == F2_ZERO:
            raise _Degenerate
        lam = f2_mul(f2_scale(f2_sqr(xt), 3), f2_inv(den))
        x3 = f2_sub(f2_sqr(lam), f2_add(xt, xt))
    else:
        den = f2_sub(q[0], xt)
        if den == F2_ZERO:
            raise _Degenerate
        lam = f2_mul(f2_sub(q[1], yt), f2_inv(den))
        x3 = f2_sub(f2_sub(f2_sqr(lam), xt), q[0])
    y3 = f2_sub(f2_mul(lam, f2_sub(xt, x3)), yt)
    f = _mul_line(f, yp, f2_neg(f2_scale(lam, xp)), f2_sub(f2_mul(lam, xt), yt))
    return f, (x3, y3)


def miller_loop(p: bn254.Affine, q: bn254.Affine) -> Fq12:
    """The optimal ate Miller loop f(P, Q), P in G1 and Q on the twist (affine, None = infinity:
    then 1). Equal to py_ecc's after the final exponentiation; a Q whose multiples meet a vertical
    line (a small-order point outside G2, never an honest proof's) goes through py_ecc's loop."""
    return multi_miller_loop([(p, q)])


def multi_miller_loop(pairs: Sequence[tuple[bn254.Affine, bn254.Affine]]) -> Fq12:
    """prod_i f(P_i, Q_i) with one squaring of the accumulator a step for all pairs (what a
    product of pairings needs before its one final exponentiation)."""
    live = [(p, q) for p, q in pairs if p is not None and q is not None]
    if not live:
        return ONE
    try:
        return _affine_loop(live)
    except _Degenerate:  # some pair's Q is degenerate: each pair on its own, that one by py_ecc
        out = ONE
        for p, q in live:
            try:
                out = mul(out, _affine_loop([(p, q)]))
            except _Degenerate:
                out = mul(out, _py_ecc_loop(p, q))
        return out


def _py_ecc_loop(p: bn254.Affine, q: bn254.Affine) -> Fq12:
    from py_ecc.optimized_bn128 import FQ, FQ2, pairing

    g1 = (FQ(p[0]), FQ(p[1]), FQ.one())
    g2 = (FQ2(list(q[0])), FQ2(list(q[1])), FQ2.one())
    return from_py_ecc(pairing(g2, g1, final_exponentiate=False).coeffs)


def from_py_ecc(coeffs: Sequence[Any]) -> Fq12:
    """The tower element of py_ecc's FQ12 coefficients (basis W^i, W^12 = 18 W^6 - 82): W = w,
    W^2 = v, W^6 = xi, so u = W^6 - 9 and the coefficient of v^k w^j is
    (c[2k+j] + 9 c[2k+j+6]) + c[2k+j+6] u."""
    c = [P.__class__(int(x)) for x in coeffs]

    def at(j: int, k: int) -> Fq2:
        i = 2 * k + j
        return ((c[i] + 9 * c[i + 6]) % P, c[i + 6] % P)

    return ((at(0, 0), at(0, 1), at(0, 2)), (at(1, 0), at(1, 1), at(1, 2)))


def _affine_loop(pairs: Sequence[tuple[bn254.Affine, bn254.Affine]]) -> Fq12:
    mpz = P.__class__
    ps = [(mpz(p[0]), mpz(p[1])) for p, _ in pairs]
    qs = [((mpz(q[0][0]), mpz(q[0][1])), (mpz(q[1][0]), mpz(q[1][1]))) for _, q in pairs]
    f, ts = ONE, list(qs)
    for bit in bin(ATE_LOOP)[3:]:
        f = sqr(f)
        for i, (xp, yp) in enumerate(ps):
            f, ts[i] = _step(f, ts[i], None, xp, yp)
        if bit == "1":
            for i, (xp, yp) in enumerate(ps):
                f, ts[i] = _step(f, ts[i], qs[i], xp, yp)
    for i, (xp, yp) in enumerate(ps):
        q1 = _frobenius_twist(qs[i])
        q2 = _frobenius_twist(q1)
        f, t = _step(f, ts[i], q1, xp, yp)
        f, _ = _step(f, t, (q2[0], f2_neg(q2[1])), xp, yp)
    return f


_HARD = (int(P) ** 4 - int(P) ** 2 + 1) // bn254.R
# f^(p^2) in the tower: Fq2 is fixed by the p^2-power and W = w (W^6 = xi) goes to
# W xi^((p^2 - 1)/6), an element of Fq, so the coefficient of v^k w^j = W^(2k+j) is scaled by
# xi^((2k+j)(p^2 - 1)/6).
_FROB2 = [f2_pow(_XI, i * (int(P) ** 2 - 1) // 6)[0] for i in range(6)]


def frobenius2(f: Fq12) -> Fq12:
    """f^(p^2): ten products by constants of Fq."""
    return tuple(tuple(f2_scale(f[j][k], _FROB2[2 * k + j]) for k in range(3)) for j in range(2))  # type: ignore[return-value]


# f^p: Fq2 coefficients conjugated, and the coefficient of W^i (W = w, v = W^2) scaled by
# W^(i(p - 1)) = xi^(i(p - 1)/6).
_FROB1 = [f2_pow(_XI, i * (int(P) - 1) // 6) for i in range(6)]
FAST_FE_POWER = 2 * BN_X * (6 * BN_X * BN_X + 3 * BN_X + 1)
""":func:`final_exponentiation_fast` is the exact one raised to this power (what ffjavascript's
final exponentiation computes, so snarkjs's ``vk_alphabeta_12`` is its value)."""


def frobenius(f: Fq12) -> Fq12:
    """f^p."""
    return tuple(tuple(f2_mul(f2_conj(f[j][k]), _FROB1[2 * k + j]) for k in range(3)) for j in range(2))  # type: ignore[return-value]


def _easy_part(f: Fq12) -> Fq12:
    """f^((p^6 - 1)(p^2 + 1)): an element of the cyclotomic subgroup (order p^4 - p^2 + 1), where
    the inverse is the conjugate."""
    f = mul(conj(f), inv(f))  # f^(p^6 - 1)
    return mul(frobenius2(f), f)  # ^(p^2 + 1)


def final_exponentiation(f: Fq12) -> Fq12:
    """f^((p^12 - 1)/r), exactly (the hard part (p^4 - p^2 + 1)/r by square-and-multiply)."""
    return power(_easy_part(f), _HARD)


def final_exponentiation_fast(f: Fq12) -> Fq12:
    """The final exponentiation raised to :data:`FAST_FE_POWER`: the hard part as three powers by x
    and a few products and Frobenius maps (Fuentes-Castaneda, Knapp, Rodriguez-Henriquez, "Faster
    hashing to G2", Algorithm 6), about a quarter of the exact one's work. For "== 1" the two agree:
    after the easy part f^h (h = (p^4 - p^2 + 1)/r) lies in the r-torsion, and gcd(FAST_FE_POWER, r) = 1."""
    f = _easy_part(f)
    a = sqr(conj(power(f, BN_X)))  # f^-2x
    b = mul(a, sqr(a))  # f^-6x
    c = conj(power(b, BN_X))  # f^6x^2
    d = mul(c, conj(b))  # f^(6x^2 + 6x)
    e = mul(d, power(sqr(c), BN_X))  # f^(12x^3 + 6x^2 + 6x)
    g = mul(a, e)  # f^(12x^3 + 6x^2 + 4x)
    out = mul(f, mul(c, e))  # f^(12x^3 + 12x^2 + 6x + 1)
    out = mul(frobenius(g), out)
    out = mul(frobenius2(e), out)
    return mul(frobenius(frobenius2(mul(conj(f), g))), out)


def product_is_one(factors: Sequence[Fq12]) -> bool:
    """Whether the final exponentiation of the product of Miller-loop values is 1."""
    acc = ONE
    for x in factors:
        acc = mul(acc, x)
    return final_exponentiation_fast(acc) == ONE
