"""Synthetic circom-style circuits of any size, with satisfying witnesses, for benchmarks.

Three shapes (``make_circuit(kind, ...)``):

* ``chain``: a squaring chain like ICICLE-Snark's benchmark circuit. Row 0 is
  s·s = b1 with s = x + p_2 + … + p_K (x private, p public inputs), row i is b_i·b_i = b_{i+1},
  and b_N is the public output (wire 1). N constraints, N + K + 1 wires.
* ``bits``: SHA-256-like bit work. Units of 99 rows: two 32-bit words x, y decomposed into
  boolean bits (b·(b − 1) = 0 and one packing row Σ 2^j b_j · 1 = word each), their XOR bits
  c_j (2a_j · b_j = a_j + b_j − c_j) and the packed XOR word z. The first K z words are the
  public outputs; rows left over are boolean rows on extra bit wires. Over 95 % of the witness
  values are 0 or 1.
* ``random``: K public and max(T, 8) private inputs, then layers of rows whose A and B rows
  each hold T distinct random earlier wires with coefficients from a pool of 256 random field
  elements, and whose C row is a single fresh wire equal to a·b.

Everything is built with numpy: the CSR matrices directly, the witnesses from vectorised
arithmetic (numpy object arrays of Python integers for field values; the chain's squarings in the
compiled Fr kernels of :mod:`distprove.frlimbs`, slices of them on parallel threads). Field
values are Python ints (gmpy2 integers when installed).
"""

from __future__ import annotations

import json
import os
import random as _random
from dataclasses import dataclass, field
from pathlib import Path
from typing import Callable

import numpy as np

from . import bn254
from .bn254 import R
from .curve import fast_int
from .formats.r1cs import CSR, R1CS

KINDS = ("chain", "bits", "random")
BITS_UNIT_ROWS = 99
_WORD = 32
_COEF_POOL = 256


@dataclass
class SynthCircuit:
    """A synthetic constraint system and the recipe for its witnesses."""

    kind: str
    r1cs: R1CS
    params: dict
    _witness: Callable[[int], np.ndarray] = field(repr=False)

    @property
    def n_public(self) -> int:
        """nPublic as the zkey counts it: outputs plus public inputs."""
        return self.r1cs.n_pub_out + self.r1cs.n_pub_in

    def witness(self, index: int = 0) -> np.ndarray:
        """Witness number ``index`` (its inputs drawn from the seed and index) as (nWires, 8) uint32, standard form."""
        return self._witness(index)


# --- field vectors: numpy object arrays of Python ints -------------------------------


def small_values(limbs: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """For (n, 8) standard-form limbs: (mask, v) where mask marks values below 2^32 or above
    r − 2^32 and v (int64) is the value, or value − r for the latter (small negatives)."""
    a = np.ascontiguousarray(limbs, dtype="<u4").reshape(-1, 8)
    rl = np.frombuffer(R.to_bytes(32, "little"), dtype="<u4")
    small = ~a[:, 1:].any(axis=1)
    neg = ~small & (a[:, 1:] == rl[1:]).all(axis=1) & (a[:, 0] < rl[0])
    v = a[:, 0].astype(np.int64) - np.where(neg, np.int64(rl[0]), np.int64(0))
    return small | neg, v


def field_ints(limbs: np.ndarray) -> np.ndarray:
    """(n, 8) uint32 standard-form limbs -> (n,) object array of ints.

    Values below 2^32 and above r − 2^32 (small coefficients and their negatives, the common
    case) are converted vectorised; the rest one by one.
    """
    a = np.ascontiguousarray(limbs, dtype="<u4").reshape(-1, 8)
    out = np.empty(a.shape[0], dtype=object)
    easy, v = small_values(a)
    out[easy] = v[easy].astype(object) % R
    rest = np.flatnonzero(~easy)
    if rest.size:
        raw = a[rest].tobytes()
        out[rest] = [fast_int(int.from_bytes(raw[i : i + 32], "little")) for i in range(0, len(raw), 32)]
    return out


def take_rows(limbs: np.ndarray, index: np.ndarray) -> np.ndarray:
    """limbs[index] for (n, 8) uint32 limb rows, gathering each row as one 32-byte item (several
    times faster than NumPy's row-by-row gather of a 2-D array)."""
    rows = np.ascontiguousarray(limbs, dtype="<u4").reshape(-1, 8)
    return rows.view(np.dtype((np.void, 32))).reshape(-1)[index].view("<u4").reshape(-1, 8)


def _const_limbs(values: np.ndarray) -> np.ndarray:
    """int64 array of small constants (negative = r − |v|) -> (n, 8) limbs, via a table of the distinct ones
    (of every value from the least to the greatest where that span is short: no sort)."""
    values = np.asarray(values, dtype=np.int64).reshape(-1)
    lo, hi = (int(values.min()), int(values.max())) if values.size else (0, 0)
    if hi - lo < 1 << 12:
        table = bn254.limbs_from_ints(np.array([v % R for v in range(lo, hi + 1)], dtype=object))
        return take_rows(table, values - lo)
    uniq, inv = np.unique(values, return_inverse=True)
    table = bn254.limbs_from_ints(np.array([int(v) % R for v in uniq], dtype=object))
    return take_rows(table, inv.reshape(-1))


def lc_eval(m: CSR, w: np.ndarray) -> np.ndarray:
    """Evaluate every row of a CSR matrix at witness ``w`` ((nWires,) object array): (rows,) object array mod r."""
    rows = m.row_ptr.shape[0] - 1
    out = np.zeros(rows, dtype=object)
    nnz = int(m.row_ptr[-1])
    if nnz == 0:
        return out
    prod = field_ints(m.coef) * w[m.wire.astype(np.int64)]
    starts = np.asarray(m.row_ptr[:-1], dtype=np.int64)
    live = np.flatnonzero(np.diff(m.row_ptr) > 0)
    out[live] = np.add.reduceat(prod, starts[live]) % R
    return out


def unsatisfied_rows(r1cs: R1CS, witness: np.ndarray) -> np.ndarray:
    """Indices of the constraints with ⟨A,w⟩·⟨B,w⟩ ≠ ⟨C,w⟩ (mod r), vectorised; empty when satisfied."""
    w = field_ints(witness)
    a, b, c = (lc_eval(m, w) for m in (r1cs.A, r1cs.B, r1cs.C))
    return np.flatnonzero((a * b - c) % R != 0)


# --- CSR assembly ----------------------------------------------------------------------


def _csr(counts: np.ndarray, wires: np.ndarray, coefs: np.ndarray) -> CSR:
    """Build a CSR from per-row term counts and the row-ordered wires and small-int coefficients."""
    row_ptr = np.zeros(counts.shape[0] + 1, dtype=np.int64)
    np.cumsum(counts, out=row_ptr[1:])
    return CSR(row_ptr, np.ascontiguousarray(wires, dtype="<u4"), _const_limbs(np.asarray(coefs, dtype=np.int64)))


def _blocks(*blocks: tuple[np.ndarray, np.ndarray, np.ndarray]) -> CSR:
    """Concatenate row blocks, each (counts (rows,), wires (rows, t), coefs (rows, t)), into one CSR."""
    counts = np.concatenate([b[0] for b in blocks])
    wires = np.concatenate([b[1].reshape(-1) for b in blocks])
    coefs = np.concatenate([b[2].reshape(-1) for b in blocks])
    return _csr(counts, wires, coefs)


def _block(wires: np.ndarray, coefs: np.ndarray | int) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """A block of rows with the same number of terms: ``wires`` is (rows, t) (or (rows,) for t = 1)."""
    w = wires if wires.ndim == 2 else wires[:, None]
    c = np.broadcast_to(np.asarray(coefs, dtype=np.int64), w.shape)
    return np.full(w.shape[0], w.shape[1], dtype=np.int64), w, c


def _r1cs(kind: str, n_wires: int, n_pub_out: int, n_pub_in: int, n_prv_in: int, A: CSR, B: CSR, C: CSR) -> R1CS:
    n = A.row_ptr.shape[0] - 1
    return R1CS(
        path=f"<synth {kind}>", prime=R, n_wires=n_wires, n_pub_out=n_pub_out, n_pub_in=n_pub_in,
        n_prv_in=n_prv_in, n_labels=n_wires, n_constraints=n, A=A, B=B, C=C, labels=None,
    )


def _rng(seed: int, index: int) -> np.random.Generator:
    return np.random.default_rng([seed, index])


def _random_field(rng: np.random.Generator, n: int) -> list[int]:
    """n uniform elements of Fr drawn from ``rng`` (through a seeded Python RNG)."""
    py = _random.Random(int(rng.integers(0, 2**63)))
    return [py.randrange(R) for _ in range(n)]


# --- chain -------------------------------------------------------------------------------


def chain_circuit(constraints: int, public: int = 1, seed: int = 0) -> SynthCircuit:
    """The squaring chain (see module docstring): ``public`` >= 1 public signals (1 output, public − 1 inputs)."""
    n, k = constraints, public
    if n < 1 or k < 1:
        raise ValueError("chain needs constraints >= 1 and public >= 1 (the output)")
    x_wire = k + 1
    # b_i for i = 0..N: b_0 stands for the sum s (row 0's LC), b_N is wire 1, b_i = K+1+i otherwise.
    b = np.arange(n + 1, dtype=np.int64) + k + 1
    b[n] = 1
    row0 = np.concatenate(([x_wire], np.arange(2, k + 1)))
    ab = _blocks(_block(row0[None, :], 1), _block(b[1:n], 1))
    C = _blocks(_block(b[1:], 1))
    r1cs = _r1cs("chain", n + k + 1, 1, k - 1, 1, ab, ab, C)

    def witness(index: int) -> np.ndarray:
        rng = _rng(seed, index)
        ins = _random_field(rng, k)  # p_2..p_K then x
        from dask.system import CPU_COUNT

        from .frlimbs import square_chain

        # one spare row: b_i = s^(2^i) goes to row K+1+i for i = 1..N, then b_N moves to wire 1
        out = np.zeros((n + k + 2, 8), dtype="<u4")
        out[0, 0] = 1
        out[2 : k + 2] = bn254.limbs_from_ints(np.array(ins, dtype=object))
        square_chain(sum(ins) % R, n, CPU_COUNT, out=out[k + 2 :])
        out[1] = out[n + k + 1]
        return out[: n + k + 1]

    return SynthCircuit("chain", r1cs, {"constraints": n, "public": k, "seed": seed}, witness)


# --- bits --------------------------------------------------------------------------------


def bits_circuit(constraints: int, public: int = 1, seed: int = 0) -> SynthCircuit:
    """The bit-heavy circuit (see module docstring): ``public`` packed XOR words are public outputs."""
    n, k = constraints, public
    units, extra = divmod(n, BITS_UNIT_ROWS)
    if units < max(k, 1) or k < 0:
        raise ValueError(f"bits needs at least {BITS_UNIT_ROWS} constraints per public output (and >= {BITS_UNIT_ROWS})")
    u = np.arange(units, dtype=np.int64)
    j = np.arange(_WORD, dtype=np.int64)
    zw = np.empty(units, dtype=np.int64)
    zw[:k] = 1 + u[:k]
    xw = k + 1 + u
    yw = k + 1 + units + u
    nxt = k + 1 + 2 * units
    zw[k:] = nxt + u[: units - k]
    nxt += units - k
    aw = nxt + _WORD * u[:, None] + j
    bw = aw + _WORD * units
    cw = bw + _WORD * units
    ew = nxt + 3 * _WORD * units + np.arange(extra, dtype=np.int64)
    n_wires = nxt + 3 * _WORD * units + extra
    pow2 = np.broadcast_to(1 << j, (units, _WORD))
    bits_flat = [aw.reshape(-1), bw.reshape(-1), ew]
    zero_u = np.zeros(units, dtype=np.int64)

    def empty(rows: int) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        return np.zeros(rows, dtype=np.int64), np.zeros((rows, 0), dtype=np.int64), np.zeros((rows, 0), dtype=np.int64)

    # Row order: bool(a), bool(b), pack x, pack y, xor, pack z, bool(extra).
    A = _blocks(
        _block(bits_flat[0], 1), _block(bits_flat[1], 1),
        _block(aw, pow2), _block(bw, pow2), _block(aw.reshape(-1), 2), _block(cw, pow2), _block(ew, 1),
    )
    B = _blocks(
        *(_block(np.stack([w, np.zeros_like(w)], axis=1), np.array([1, -1])) for w in bits_flat[:2]),
        _block(zero_u, 1), _block(zero_u, 1), _block(bw.reshape(-1), 1), _block(zero_u, 1),
        _block(np.stack([ew, np.zeros_like(ew)], axis=1), np.array([1, -1])),
    )
    C = _blocks(
        empty(2 * units * _WORD), _block(xw, 1), _block(yw, 1),
        _block(np.stack([aw.reshape(-1), bw.reshape(-1), cw.reshape(-1)], axis=1), np.array([1, 1, -1])),
        _block(zw, 1), empty(extra),
    )
    r1cs = _r1cs("bits", n_wires, k, 0, 2 * units, A, B, C)

    def witness(index: int) -> np.ndarray:
        rng = _rng(seed, index)
        x = rng.integers(0, 1 << _WORD, size=units, dtype=np.uint64)
        y = rng.integers(0, 1 << _WORD, size=units, dtype=np.uint64)
        z = x ^ y
        shifts = np.arange(_WORD, dtype=np.uint64)
        vals = np.zeros(n_wires, dtype=np.uint64)
        vals[0] = 1
        vals[xw], vals[yw], vals[zw] = x, y, z
        vals[aw] = (x[:, None] >> shifts) & 1
        vals[bw] = (y[:, None] >> shifts) & 1
        vals[cw] = (z[:, None] >> shifts) & 1
        vals[ew] = rng.integers(0, 2, size=extra, dtype=np.uint64)
        out = np.zeros((n_wires, 8), dtype="<u4")
        out[:, 0] = vals.astype("<u4")
        return out

    return SynthCircuit("bits", r1cs, {"constraints": n, "public": k, "seed": seed}, witness)


# --- random ------------------------------------------------------------------------------


def _layers(first: int, total: int) -> list[tuple[int, int]]:
    """Row ranges of the layers: each layer has half as many rows as wires defined before it."""
    out, lo, avail = [], 0, first
    while lo < total:
        hi = min(total, lo + max(1, avail // 2))
        out.append((lo, hi))
        avail += hi - lo
        lo = hi
    return out


def random_circuit(constraints: int, public: int = 1, terms: int = 3, seed: int = 0) -> SynthCircuit:
    """Random sparse rows (see module docstring): ``public`` public inputs, ``terms`` terms per A and B row."""
    n, k, t = constraints, public, terms
    if n < 1 or k < 0 or t < 1:
        raise ValueError("random needs constraints >= 1, public >= 0 and terms >= 1")
    p = max(t, 8)
    first = 1 + k + p
    rng = np.random.default_rng([seed, 1 << 32])
    pool = np.array([fast_int(v) for v in _random_field(rng, _COEF_POOL)], dtype=object)
    pool[pool == 0] = fast_int(1)
    pool_limbs = bn254.limbs_from_ints(pool)
    layers = _layers(first, n)
    wires = {}
    coefs = {}
    for m in "AB":
        wm = np.empty((n, t), dtype=np.int64)
        for lo, hi in layers:
            avail = first + lo  # wires 0 .. first+lo-1 are defined before this layer
            # one wire from each of t integer strata of [0, avail): distinct since avail >= t
            edges = (np.arange(t + 1, dtype=np.int64) * avail) // t
            width = np.diff(edges)
            wm[lo:hi] = edges[:-1] + (rng.random((hi - lo, t)) * width).astype(np.int64)
        wires[m] = wm
        coefs[m] = rng.integers(0, _COEF_POOL, size=(n, t))
    row_ptr = np.arange(n + 1, dtype=np.int64) * t

    def mat(m: str) -> CSR:
        return CSR(row_ptr, wires[m].reshape(-1).astype("<u4"), pool_limbs[coefs[m].reshape(-1)])

    fresh = first + np.arange(n, dtype=np.int64)
    C = _csr(np.ones(n, dtype=np.int64), fresh, np.ones(n, dtype=np.int64))
    r1cs = _r1cs("random", first + n, 0, k, p, mat("A"), mat("B"), C)

    def witness(index: int) -> np.ndarray:
        wrng = _rng(seed, index)
        w = np.empty(first + n, dtype=object)
        w[0] = fast_int(1)
        w[1:first] = [fast_int(v) for v in _random_field(wrng, first - 1)]
        for lo, hi in layers:
            ev = [
                (pool[coefs[m][lo:hi]] * w[wires[m][lo:hi]]).sum(axis=1) % R for m in "AB"
            ]
            w[first + lo : first + hi] = ev[0] * ev[1] % R
        return bn254.limbs_from_ints(w)

    return SynthCircuit("random", r1cs, {"constraints": n, "public": k, "terms": t, "seed": seed}, witness)


# --- front door --------------------------------------------------------------------------


def make_circuit(kind: str, constraints: int, public: int = 1, terms: int = 3, seed: int = 0) -> SynthCircuit:
    """Build a synthetic circuit of ``kind`` in ``KINDS`` with exactly ``constraints`` rows."""
    if kind == "chain":
        return chain_circuit(constraints, public, seed)
    if kind == "bits":
        return bits_circuit(constraints, public, seed)
    if kind == "random":
        return random_circuit(constraints, public, terms, seed)
    raise ValueError(f"unknown circuit kind {kind!r} (choose from {', '.join(KINDS)})")


def write_circuit(
    circuit: SynthCircuit, out_dir: str | os.PathLike[str], witnesses: int = 1, *, r1cs: bool = True
) -> dict[str, object]:
    """Write ``circuit.r1cs`` (unless ``r1cs`` is False), ``witness_<i>.wtns`` for i < ``witnesses``
    and ``circuit.json`` (the parameters) to ``out_dir``.

    Returns the description written to circuit.json (paths relative to ``out_dir``).
    """
    from .formats.r1cs import write_r1cs
    from .formats.wtns import write_wtns

    out = Path(out_dir)
    out.mkdir(parents=True, exist_ok=True)
    r = circuit.r1cs
    if r1cs:
        write_r1cs(out / "circuit.r1cs", r.n_wires, r.n_pub_out, r.n_pub_in, r.n_prv_in, r.n_labels, r.A, r.B, r.C)
    names = []
    for i in range(witnesses):
        name = f"witness_{i}.wtns"
        write_wtns(out / name, circuit.witness(i))
        names.append(name)
    meta = {
        "kind": circuit.kind,
        **circuit.params,
        "n_wires": r.n_wires,
        "n_public": circuit.n_public,
        "n_constraints": r.n_constraints,
        "r1cs": "circuit.r1cs" if r1cs else None,
        "witnesses": names,
    }
    (out / "circuit.json").write_text(json.dumps(meta, indent=1) + "\n")
    return meta
