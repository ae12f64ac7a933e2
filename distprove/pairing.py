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
  lines of the optimal ate pairing. The G2 part of every line
  (:func:`prepare`) does not depend on P, so a fixed point's lines are computed once.
* Final exponentiation: the easy part by conjugation, one inversion and the p^2-Frobenius
  (constants of Fq); the hard part either exactly, (p^4 - p^2 + 1)/r by square-and-multiply
  (:func:`final_exponentiation`, equal to py_ecc's, which the tests compare: 21 ms on the dev VM),
  or raised to 2x(6x^2 + 3x + 1) by three powers by x (:func:`final_exponentiation_fast`, 5 ms),
  which the checks use: the same "== 1", and ffjavascript's value.
* Products of Miller loops share the accumulator's squarings (:func:`multi_miller_loop`,
  :func:`prepared_miller_loop`): a batch check pays one squaring chain, and a line per pair a step.

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
    """a b in Fq6, written out on the six Fq coefficients (schoolbook, one reduction each):
    c0 = a0 b0 + xi (a1 b2 + a2 b1), c1 = a0 b1 + a1 b0 + xi a2 b2, c2 = a0 b2 + a1 b1 + a2 b0."""
    (a00, a01), (a10, a11), (a20, a21) = a
    (b00, b01), (b10, b11), (b20, b21) = b
    r = a10 * b20 - a11 * b21 + a20 * b10 - a21 * b11  # a1 b2 + a2 b1
    i = a10 * b21 + a11 * b20 + a20 * b11 + a21 * b10
    c00 = a00 * b00 - a01 * b01 + 9 * r - i
    c01 = a00 * b01 + a01 * b00 + r + 9 * i
    r = a20 * b20 - a21 * b21  # a2 b2
    i = a20 * b21 + a21 * b20
    c10 = a00 * b10 - a01 * b11 + a10 * b00 - a11 * b01 + 9 * r - i
    c11 = a00 * b11 + a01 * b10 + a10 * b01 + a11 * b00 + r + 9 * i
    c20 = a00 * b20 - a01 * b21 + a10 * b10 - a11 * b11 + a20 * b00 - a21 * b01
    c21 = a00 * b21 + a01 * b20 + a10 * b11 + a11 * b10 + a20 * b01 + a21 * b00
    return ((c00 % P, c01 % P), (c10 % P, c11 % P), (c20 % P, c21 % P))


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


def _mul_line(f: Fq12, a0: Any, b0: Fq2, b1: Fq2) -> Fq12:
    """f (a0 + b0 w + b1 v w) for a0 in Fq: a sparse line, written out on the 12 coefficients
    (products of Fq2 summed unreduced, one reduction a coefficient; xi = 9 + u):

        c0' = a0 c0 + (b0 + b1 v) c1 v,   c1' = a0 c1 + (b0 + b1 v) c0.
    """
    ((x00, x01), (x10, x11), (x20, x21)), ((y00, y01), (y10, y11), (y20, y21)) = f
    (p0, p1), (q0, q1) = b0, b1
    # c1 (b0 + b1 v) v = xi (y1 b1 + y2 b0) + (y0 b0 + xi y2 b1) v + (y0 b1 + y1 b0) v^2
    r = y10 * q0 - y11 * q1 + y20 * p0 - y21 * p1
    i = y10 * q1 + y11 * q0 + y20 * p1 + y21 * p0
    s0, s1 = 9 * r - i, r + 9 * i
    r = y20 * q0 - y21 * q1
    i = y20 * q1 + y21 * q0
    u0, u1 = 9 * r - i, r + 9 * i
    # c0 (b0 + b1 v) = (x0 b0 + xi x2 b1) + (x0 b1 + x1 b0) v + (x1 b1 + x2 b0) v^2
    r = x20 * q0 - x21 * q1
    i = x20 * q1 + x21 * q0
    w0, w1 = 9 * r - i, r + 9 * i
    return (
        (
            ((a0 * x00 + s0) % P, (a0 * x01 + s1) % P),
            ((a0 * x10 + y00 * p0 - y01 * p1 + u0) % P, (a0 * x11 + y00 * p1 + y01 * p0 + u1) % P),
            ((a0 * x20 + y00 * q0 - y01 * q1 + y10 * p0 - y11 * p1) % P,
             (a0 * x21 + y00 * q1 + y01 * q0 + y10 * p1 + y11 * p0) % P),
        ),
        (
            ((a0 * y00 + x00 * p0 - x01 * p1 + w0) % P, (a0 * y01 + x00 * p1 + x01 * p0 + w1) % P),
            ((a0 * y10 + x00 * q0 - x01 * q1 + x10 * p0 - x11 * p1) % P,
             (a0 * y11 + x00 * q1 + x01 * q0 + x10 * p1 + x11 * p0) % P),
            ((a0 * y20 + x10 * q0 - x11 * q1 + x20 * p0 - x21 * p1) % P,
             (a0 * y21 + x10 * q1 + x11 * q0 + x20 * p1 + x21 * p0) % P),
        ),
    )


# --- Miller loop --------------------------------------------------------------------------------

_XI: Fq2 = (P.__class__(9), P.__class__(1))
_FROB_X = f2_pow(_XI, (int(P) - 1) // 3)
_FROB_Y = f2_pow(_XI, (int(P) - 1) // 2)


def frobenius_twist(q: tuple[Fq2, Fq2]) -> tuple[Fq2, Fq2]:
    """psi(Q) = pi_p(Q) for Q on the twist (untwist, p-Frobenius, twist): (conj(x) xi^((p-1)/3), conj(y) xi^((p-1)/2))."""
    return f2_mul(f2_conj(q[0]), _FROB_X), f2_mul(f2_conj(q[1]), _FROB_Y)


class _Degenerate(Exception):
    """A step met a vertical line or infinity: only for a Q outside G2 of small order."""


Line = tuple[Fq2, Fq2]
"""One line of a Miller loop with its G2 part done: (-lambda, lambda x_T - y_T); at P it is the
sparse element y_P + (-lambda x_P) w + (lambda x_T - y_T) v w."""


def _line(t: tuple[Fq2, Fq2], q: tuple[Fq2, Fq2] | None) -> tuple[Line, tuple[Fq2, Fq2]]:
    """The line through t and q (the tangent when q is None), and t + q (2t), written out on Fq
    coefficients (lambda = 3 x_T^2 / 2 y_T or (y_Q - y_T) / (x_Q - x_T), one Fq inversion through
    the Fq2 norm). For Q in G2, T runs over multiples [k]Q with 0 < k < r, so the line is never
    vertical; otherwise :class:`_Degenerate` is raised."""
    (x0, x1), (y0, y1) = t
    if q is None:
        n0, n1 = 3 * (x0 + x1) * (x0 - x1), 6 * x0 * x1  # 3 x_T^2
        d0, d1 = 2 * y0, 2 * y1
    else:
        (qx0, qx1), (qy0, qy1) = q
        n0, n1 = qy0 - y0, qy1 - y1
        d0, d1 = qx0 - x0, qx1 - x1
    norm = (d0 * d0 + d1 * d1) % P
    if not norm:
        raise _Degenerate
    z = _inv(norm)
    i0, i1 = d0 * z % P, -d1 * z % P  # 1 / d
    l0, l1 = (n0 * i0 - n1 * i1) % P, (n0 * i1 + n1 * i0) % P  # lambda
    x3_0 = (l0 + l1) * (l0 - l1) - x0 - (x0 if q is None else qx0)
    x3_1 = 2 * l0 * l1 - x1 - (x1 if q is None else qx1)
    x3_0, x3_1 = x3_0 % P, x3_1 % P
    e0, e1 = x0 - x3_0, x1 - x3_1
    y3 = ((l0 * e0 - l1 * e1 - y0) % P, (l0 * e1 + l1 * e0 - y1) % P)
    c = ((l0 * x0 - l1 * x1 - y0) % P, (l0 * x1 + l1 * x0 - y1) % P)  # lambda x_T - y_T
    return ((-l0 % P, -l1 % P), c), ((x3_0, x3_1), y3)


def prepare(q: bn254.Affine) -> tuple[Line, ...]:
    """The lines of Q's Miller loop (Q on the twist, finite), in loop order: everything of the loop
    that does not depend on P or on the accumulator (one Fq inversion a line), so that the lines of
    a key's fixed G2 points are computed once and a proof's pi_b beside other work. Raises
    :class:`_Degenerate` for a Q whose multiples meet a vertical line (never a point of G2)."""
    mpz = P.__class__
    q = ((mpz(q[0][0]), mpz(q[0][1])), (mpz(q[1][0]), mpz(q[1][1])))
    lines, t = [], q
    for bit in bin(ATE_LOOP)[3:]:
        line, t = _line(t, None)
        lines.append(line)
        if bit == "1":
            line, t = _line(t, q)
            lines.append(line)
    q1 = frobenius_twist(q)
    q2 = frobenius_twist(q1)
    line, t = _line(t, q1)
    lines.append(line)
    line, _ = _line(t, (q2[0], f2_neg(q2[1])))
    lines.append(line)
    return tuple(lines)


def miller_loop(p: bn254.Affine, q: bn254.Affine) -> Fq12:
    """The optimal ate Miller loop f(P, Q), P in G1 and Q on the twist (affine, None = infinity:
    then 1). Equal to py_ecc's after the final exponentiation; a Q whose multiples meet a vertical
    line (a small-order point outside G2, never an honest proof's) goes through py_ecc's loop."""
    return multi_miller_loop([(p, q)])


def multi_miller_loop(pairs: Sequence[tuple[bn254.Affine, bn254.Affine]]) -> Fq12:
    """prod_i f(P_i, Q_i) with one squaring of the accumulator a step for all pairs (what a
    product of pairings needs before its one final exponentiation)."""
    live = [(p, q) for p, q in pairs if p is not None and q is not None]
    prepared, out = [], ONE
    for p, q in live:
        try:
            prepared.append((p, prepare(q)))
        except _Degenerate:  # a small-order point outside G2: py_ecc's loop
            out = mul(out, _py_ecc_loop(p, q))
    return mul(out, prepared_miller_loop(prepared)) if prepared else out


def prepared_miller_loop(pairs: Sequence[tuple[bn254.Affine, Sequence[Line]]]) -> Fq12:
    """prod_i f(P_i, Q_i) for finite P_i and Q_i's lines (:func:`prepare`), equal to the product of
    their :func:`miller_loop` values: one squaring of the accumulator a step for all pairs, then
    each pair's line evaluated at its P and multiplied in."""
    if not pairs:
        return ONE
    mpz = P.__class__
    evals = [(mpz(p[0]), mpz(p[1]), lines) for p, lines in pairs]
    f, k = ONE, 0
    for bit in bin(ATE_LOOP)[3:]:
        f = sqr(f)
        for _ in range(1 + (bit == "1")):  # the doubling line, then the addition line on a 1 bit
            for xp, yp, lines in evals:
                (n0, n1), c = lines[k]
                f = _mul_line(f, yp, (n0 * xp % P, n1 * xp % P), c)
            k += 1
    for _ in range(2):  # the two Frobenius lines
        for xp, yp, lines in evals:
            (n0, n1), c = lines[k]
            f = _mul_line(f, yp, (n0 * xp % P, n1 * xp % P), c)
        k += 1
    return f


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
