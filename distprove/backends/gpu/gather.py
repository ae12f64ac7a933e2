"""GPU gather (DESIGN.md step 1): the host side of ``distprove/kernels/gather.cu``."""

from __future__ import annotations

from typing import TYPE_CHECKING, NamedTuple

import numpy as np

from .compile import get_module

if TYPE_CHECKING:  # pragma: no cover
    import cupy

BLOCK = 256
"""Threads per block (one constraint row each)."""


class DeviceCsr(NamedTuple):
    """One coefficient matrix on the device, exactly as stored in the key (DESIGN.md)."""

    row_ptr: "cupy.ndarray"  # (rows + 1,) uint32
    signal: "cupy.ndarray"  # (nnz,) uint32
    value: "cupy.ndarray"  # (nnz, 8) uint32, coef * R^2 mod r

    @property
    def rows(self) -> int:
        return self.row_ptr.shape[0] - 1


def gather(a: DeviceCsr, b: DeviceCsr, witness: "cupy.ndarray"
           ) -> tuple["cupy.ndarray", "cupy.ndarray", "cupy.ndarray"]:
    """a[i] = sum_row coef*w, b likewise, c = a*b for every row; (rows, 8) uint32 Montgomery.

    ``witness``: (n_vars, 8) uint32 standard form on the device. Every signal index of the CSR
    must be below n_vars (the key reader checks this).
    """
    import cupy

    if a.rows != b.rows:
        raise ValueError(f"A has {a.rows} rows but B has {b.rows}")
    if witness.ndim != 2 or witness.shape[1] != 8 or witness.dtype != np.uint32:
        raise ValueError(f"witness must be (n, 8) uint32, got {witness.shape} {witness.dtype}")
    n = a.rows
    out = [cupy.empty((n, 8), dtype=cupy.uint32) for _ in range(3)]
    if n:
        fn = get_module("gather").get_function("dp_gather_abc")
        fn(((n + BLOCK - 1) // BLOCK,), (BLOCK,),
           (a.row_ptr, a.signal, a.value, b.row_ptr, b.signal, b.value,
            cupy.ascontiguousarray(witness), *out, np.uint32(n)))
    return out[0], out[1], out[2]
