"""CPU gather (DESIGN.md step 1): domain evaluations a, b and c = a*b from the CSR coefficients."""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np

from distprove.bn254 import FR_MONT2_INV, R, ints_from_limbs


def decode_coefficients(value: np.ndarray) -> list[int]:
    """Stored zkey coefficient values (coef*R^2 mod r, (nnz, 8) uint32) -> coef as Python ints."""
    return [v * FR_MONT2_INV % R for v in ints_from_limbs(value)]


def evaluate_rows(
    row_ptr: np.ndarray, signal: np.ndarray, coefs: Sequence[int], witness: Sequence[int]
) -> list[int]:
    """out[i] = sum over row i's terms of coef * witness[signal] (mod r), for every CSR row."""
    n_rows = len(row_ptr) - 1
    out = [0] * n_rows
    if len(coefs) == 0:
        return out
    products = np.array([c * witness[s] for c, s in zip(coefs, signal.tolist())], dtype=object)
    ptr = np.asarray(row_ptr, dtype=np.int64)
    nonempty = np.nonzero(ptr[1:] > ptr[:-1])[0]
    sums = np.add.reduceat(products, ptr[nonempty])
    for i, v in zip(nonempty.tolist(), sums.tolist()):
        out[i] = v % R
    return out


def pointwise_product(a: Sequence[int], b: Sequence[int]) -> list[int]:
    """c[i] = a[i] * b[i] mod r."""
    return [x * y % R for x, y in zip(a, b)]
