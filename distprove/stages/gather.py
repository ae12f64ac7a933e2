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
    sel = np.nonzero(np.asarray(matrix) == which)[0]
    rows = np.asarray(row)[sel].astype(np.int64)
    if rows.size and (rows.min() < 0 or rows.max() >= domain_size):
        bad = int(rows[(rows < 0) | (rows >= domain_size)][0])
        raise FormatError(path, f"coefficient row {bad} outside the domain of size {domain_size}")
    order = np.argsort(rows, kind="stable")
    counts = np.bincount(rows, minlength=domain_size)
    row_ptr = np.zeros(domain_size + 1, dtype=np.uint32)
    row_ptr[1:] = np.cumsum(counts)
    out_signal = np.asarray(signal)[sel][order].astype(np.uint32)
    out_value = np.ascontiguousarray(np.asarray(value).reshape(-1, 8)[sel][order], dtype="<u4")
    return row_ptr, out_signal, out_value
