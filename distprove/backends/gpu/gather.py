"""GPU gather (DESIGN.md step 1): the host side of ``distprove/kernels/gather.cu``."""

from __future__ import annotations

from typing import TYPE_CHECKING, NamedTuple

import numpy as np

from .compile import get_module

if TYPE_CHECKING:  # pragma: no cover
    import cupy

BLOCK = 256
"""Threads per block (one constraint row each)."""
MAX_GRID_Y = 65535
"""Most proofs of one group launch (CUDA's grid y limit); larger groups take several."""


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


def gather_group(a: DeviceCsr, b: DeviceCsr, witnesses: "cupy.ndarray"
                 ) -> tuple["cupy.ndarray", "cupy.ndarray", "cupy.ndarray"]:
    """:func:`gather` of each witness of the (G, n_vars, 8) stack ``witnesses`` in one launch
    (``dp_gather_abc_group``): three (G, rows, 8) uint32 Montgomery stacks, row g proof g's."""
    import cupy

    if a.rows != b.rows:
        raise ValueError(f"A has {a.rows} rows but B has {b.rows}")
    if witnesses.ndim != 3 or witnesses.shape[2] != 8 or witnesses.dtype != np.uint32:
        raise ValueError(f"witnesses must be (G, n, 8) uint32, got {witnesses.shape} {witnesses.dtype}")
    g, n_vars, n = witnesses.shape[0], witnesses.shape[1], a.rows
    w = cupy.ascontiguousarray(witnesses)
    out = [cupy.empty((g, n, 8), dtype=cupy.uint32) for _ in range(3)]
    if n and g:
        fn = get_module("gather").get_function("dp_gather_abc_group")
        for lo in range(0, g, MAX_GRID_Y):
            hi = min(g, lo + MAX_GRID_Y)
            fn(((n + BLOCK - 1) // BLOCK, hi - lo), (BLOCK,),
               (a.row_ptr, a.signal, a.value, b.row_ptr, b.signal, b.value,
                w[lo:hi], *(o[lo:hi] for o in out), np.uint32(n_vars), np.uint32(n)))
    return out[0], out[1], out[2]
