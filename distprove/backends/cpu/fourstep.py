"""Four-step NTT blocks over Fr (CPU reference, Python ints): the field math of the distributed NTT.

An NTT of size n = n1·n2 views the input as an n1 × n2 matrix M[j1][j2] = v[n2·j1 + j2] and runs as

1. column sub-NTTs: for each column j2, a size-n1 NTT over j1 (root ω^n2)  -> B[k1][j2];
2. twiddle multiply: B[k1][j2] *= ω^(k1·j2);
3. transpose: rows of B are gathered from the column blocks (in Dask: worker to worker);
4. row sub-NTTs: for each row k1, a size-n2 NTT over j2 (root ω^n1) -> X[k1 + n1·k2].

The inverse uses ω⁻¹ throughout and scales by 1/n in the row step, so both equal
``CpuBackend.ntt`` (ω = ``bn254.root_of_unity(log2 n)``, natural order in and out).

Blocks are (V, rows, cols, 8) uint32 arrays of standard-form elements: V vectors transformed
together (a, b and c of a proof share every task), compact for moving between workers. Row
blocks leave step 4 as X[k1 + n1·k2] for their rows k1: read as columns (:func:`as_columns`),
they are exactly the input columns of the next transform of the same size split as (n2, n1), so
an inverse transform followed by a forward one needs no extra transpose in between.
"""

from __future__ import annotations

import sys
from collections.abc import Sequence
from functools import lru_cache
from types import ModuleType

import numpy as np

from distprove import bn254
from distprove.bn254 import R

from .ntt import bit_reverse, log2_size


def split_sizes(n: int) -> tuple[int, int]:
    """The matrix shape (n1, n2) of a size-n transform: n1 = 2^ceil(k/2) rows, n2 = 2^floor(k/2) columns."""
    k = log2_size(n)
    return 1 << (k - k // 2), 1 << (k // 2)


def block_ranges(size: int, parts: int) -> list[tuple[int, int]]:
    """Split [0, size) into at most ``parts`` contiguous non-empty ranges of near-equal length."""
    if size < 1 or parts < 1:
        raise ValueError("need a positive size and at least one part")
    parts = min(parts, size)
    base, extra = divmod(size, parts)
    out, lo = [], 0
    for i in range(parts):
        hi = lo + base + (1 if i < extra else 0)
        out.append((lo, hi))
        lo = hi
    return out


# --- conversions -------------------------------------------------------------------------


def _to_obj(limbs: np.ndarray) -> np.ndarray:
    """(..., 8) uint32 limbs -> object array of Python ints with shape (...)."""
    shape = limbs.shape[:-1]
    out = np.empty(int(np.prod(shape, dtype=np.int64)), dtype=object)
    out[:] = bn254.ints_from_limbs(limbs)
    return out.reshape(shape)


def _to_limbs(values: np.ndarray) -> np.ndarray:
    """Object array of Python ints (< 2^256) -> (..., 8) uint32 limbs."""
    return bn254.limbs_from_ints(values.reshape(-1).tolist()).reshape(values.shape + (8,))


def _check_block(block: np.ndarray) -> None:
    if block.ndim != 4 or block.shape[-1] != 8:
        raise ValueError(f"expected a (V, rows, cols, 8) block, got shape {block.shape}")


# --- field helpers on object arrays ----------------------------------------------------


def _root(n: int, inverse: bool) -> int:
    w = bn254.root_of_unity(log2_size(n))
    return pow(w, -1, R) if inverse else w


@lru_cache(maxsize=32)
def _stage_twiddles(m: int, inverse: bool) -> np.ndarray:
    return bn254.powers(_root(m, inverse), max(1, m // 2))


def _ntt_last_axis(a: np.ndarray, inverse: bool) -> np.ndarray:
    """Unscaled radix-2 NTT of size m along the last axis of an object array (natural order)."""
    m = a.shape[-1]
    lead = a.shape[:-1]
    x = a.reshape(-1, m)[:, bit_reverse(log2_size(m))]
    tw_all = _stage_twiddles(m, inverse)
    h = 1
    while h < m:
        tw = tw_all[:: m // (2 * h)][:h]
        blocks = x.reshape(x.shape[0], m // (2 * h), 2, h)
        u = blocks[:, :, 0, :]
        v = blocks[:, :, 1, :] * tw % R
        x = np.stack(((u + v) % R, (u - v) % R), axis=2).reshape(-1, m)
        h *= 2
    return x.reshape(lead + (m,))


def _column_ntts(obj: np.ndarray, inverse: bool) -> np.ndarray:
    return np.moveaxis(_ntt_last_axis(np.moveaxis(obj, 1, -1), inverse), -1, 1)


def _twiddle(obj: np.ndarray, n: int, col_lo: int, inverse: bool) -> np.ndarray:
    rows, cols = obj.shape[1], obj.shape[2]
    w = _root(n, inverse)
    col_base = np.array([pow(w, j, R) for j in range(col_lo, col_lo + cols)], dtype=object)
    table = np.empty((rows, cols), dtype=object)
    acc = np.ones(cols, dtype=object)
    for k1 in range(rows):
        table[k1] = acc
        acc = acc * col_base % R
    return obj * table % R


def _row_ntts(obj: np.ndarray, n: int, inverse: bool) -> np.ndarray:
    out = _ntt_last_axis(obj, inverse)
    return out * pow(n, -1, R) % R if inverse else out


# --- the block functions (uint32 limbs in and out) ---------------------------------------


def take_columns(values: np.ndarray, n1: int, n2: int, lo: int, hi: int) -> np.ndarray:
    """Columns [lo, hi) of the n1 × n2 matrix view of (V, n, 8) vectors: a (V, n1, hi-lo, 8) block."""
    v = np.asarray(values)
    if v.ndim != 3 or v.shape[1] != n1 * n2 or v.shape[2] != 8:
        raise ValueError(f"expected (V, {n1 * n2}, 8) vectors, got shape {v.shape}")
    return np.ascontiguousarray(v.reshape(v.shape[0], n1, n2, 8)[:, :, lo:hi])


def column_ntts(block: np.ndarray, inverse: bool = False) -> np.ndarray:
    """Step 1: an unscaled NTT of size rows (a power of two) down every column of a (V, rows, cols, 8) block."""
    _check_block(block)
    return _to_limbs(_column_ntts(_to_obj(block), inverse))


def twiddle(block: np.ndarray, n: int, col_lo: int, inverse: bool = False) -> np.ndarray:
    """Step 2: multiply entry [k1][j] of a column block by ω_n^(±k1·(col_lo + j))."""
    _check_block(block)
    return _to_limbs(_twiddle(_to_obj(block), n, col_lo, inverse))


def column_step(block: np.ndarray, n: int, col_lo: int, inverse: bool = False) -> np.ndarray:
    """Steps 1 and 2 for the columns [col_lo, col_lo + cols) of a size-n transform (one conversion)."""
    _check_block(block)
    return _to_limbs(_twiddle(_column_ntts(_to_obj(block), inverse), n, col_lo, inverse))


def split_rows(block: np.ndarray, ranges: Sequence[tuple[int, int]]) -> tuple[np.ndarray, ...]:
    """Step 3, sending side: cut a column block into the row ranges the row tasks own."""
    _check_block(block)
    return tuple(np.ascontiguousarray(block[:, lo:hi]) for lo, hi in ranges)


def join_columns(pieces: Sequence[np.ndarray]) -> np.ndarray:
    """Step 3, receiving side: one row block from its pieces of every column block (in column order)."""
    for p in pieces:
        _check_block(p)
    return np.concatenate(list(pieces), axis=2)


def row_ntts(block: np.ndarray, n: int, inverse: bool = False) -> np.ndarray:
    """Step 4: an NTT of size cols down every row of a (V, rows, cols, 8) block; the inverse scales by 1/n."""
    _check_block(block)
    return _to_limbs(_row_ntts(_to_obj(block), n, inverse))


def coset_scale(block: np.ndarray, n: int, row_lo: int) -> np.ndarray:
    """Multiply X[k1 + n1·k2] (row k1 = row_lo + i of a row-step output) by g^(k1 + n1·k2).

    g = ``bn254.coset_generator(log2 n)``, the odd coset of snarkjs's H computation (DESIGN.md step 2).
    """
    _check_block(block)
    rows, n2 = block.shape[1], block.shape[2]
    n1 = n // n2
    g = bn254.coset_generator(log2_size(n))
    first = bn254.powers(g, row_lo + rows)[row_lo:]
    table = np.multiply.outer(first, bn254.powers(pow(g, n1, R), n2)) % R
    return _to_limbs(_to_obj(block) * table % R)


def as_columns(block: np.ndarray) -> np.ndarray:
    """A row-step output block (V, rb, n2, 8) read as columns of the next transform split as (n2, n1)."""
    _check_block(block)
    return np.ascontiguousarray(block.transpose(0, 2, 1, 3))


def natural_order(blocks: Sequence[np.ndarray]) -> np.ndarray:
    """(V, n, 8) vectors from the row-step outputs of all row blocks (in row order): out[k1 + n1·k2]."""
    full = np.concatenate(list(blocks), axis=1)
    v, n1, n2 = full.shape[0], full.shape[1], full.shape[2]
    return np.ascontiguousarray(full.transpose(0, 2, 1, 3)).reshape(v, n1 * n2, 8)


def h_from_odd(block: np.ndarray) -> np.ndarray:
    """hs = a·b - c (mod r) from a (3, ...) block holding a, b, c on the odd coset; shape (1, ...)."""
    if block.shape[0] != 3:
        raise ValueError(f"expected the three vectors a, b, c, got {block.shape[0]}")
    a, b, c = (_to_obj(block[i]) for i in range(3))
    return _to_limbs((a * b - c) % R)[None]


def ntt(values: np.ndarray, inverse: bool = False, parts: int = 1, ops: ModuleType | None = None) -> np.ndarray:
    """The four-step NTT of (n, 8) standard-form values on one machine, in ``parts`` blocks per step.

    Equal to the plain radix-2 NTT; it is the local composition of the block functions that the
    Dask graph distributes: this module's, or another backend's ``ops`` module (``column_step``
    and ``row_ntts`` on its device).
    """
    ops = ops or sys.modules[__name__]
    v = np.asarray(values, dtype="<u4").reshape(1, -1, 8)
    n = v.shape[1]
    n1, n2 = split_sizes(n)
    rows = block_ranges(n1, parts)
    cols = [
        split_rows(ops.column_step(take_columns(v, n1, n2, lo, hi), n, lo, inverse), rows)
        for lo, hi in block_ranges(n2, parts)
    ]
    out = [ops.row_ntts(join_columns([c[i] for c in cols]), n, inverse) for i in range(len(rows))]
    return natural_order(out)[0]
