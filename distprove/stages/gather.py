"""Coefficient layout shared by the key store and the backends: CSR by constraint row."""

from __future__ import annotations

import numpy as np

from distprove.errors import FormatError

MATRIX_A = 0
MATRIX_B = 1


def csr_from_coefficients(
    matrix: np.ndarray,
    row: np.ndarray,
    signal: np.ndarray,
    value: np.ndarray,
    which: int,
    domain_size: int,
    path: str = "coefficients",
) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Build the CSR of matrix ``which`` (0 = A, 1 = B) from zkey coefficient records.

    Inputs are the record columns (matrix, row, signal: (m,) integers; value: (m, 8) uint32,
    coef*R^2 mod r as stored). Returns ``(row_ptr (domain_size+1,) uint32, signal (nnz,) uint32,
    value (nnz, 8) uint32)``; records keep their file order within a row (stable sort).
    Raises FormatError (naming ``path``) if a selected record's row is >= domain_size.
    """
    if which not in (MATRIX_A, MATRIX_B):
        raise ValueError(f"which must be 0 (A) or 1 (B), not {which!r}")
    matrix, row = np.asarray(matrix), np.asarray(row)
    sel: slice | np.ndarray = np.flatnonzero(matrix == which)
    if sel.size == 0 or int(sel[-1]) - int(sel[0]) + 1 == sel.size:
        # snarkjs writes all of A, then all of B: the selection is one block, taken without a copy
        sel = slice(int(sel[0]), int(sel[-1]) + 1) if sel.size else slice(0, 0)
    rows = row[sel]
    if rows.size and (rows.min() < 0 or rows.max() >= domain_size):
        bad = int(rows[(rows < 0) | (rows >= domain_size)][0])
        raise FormatError(path, f"coefficient row {bad} outside the domain of size {domain_size}")
    counts = np.bincount(rows, minlength=domain_size)
    row_ptr = np.zeros(domain_size + 1, dtype=np.uint32)
    row_ptr[1:] = np.cumsum(counts)
    signal, value = np.asarray(signal)[sel], np.asarray(value).reshape(-1, 8)[sel]
    if rows.size > 1 and not np.all(rows[1:] >= rows[:-1]):  # records out of row order: a stable sort
        order = np.argsort(rows, kind="stable")
        signal, value = signal[order], value[order]
    return row_ptr, np.array(signal, dtype=np.uint32), np.array(value, dtype="<u4", order="C")
