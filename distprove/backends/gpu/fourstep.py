"""Four-step NTT blocks on the GPU: the block functions of ``backends/cpu/fourstep.py``, bit for bit.

The distributed H (``graph.submit_h_fourstep``) calls a backend's ``fourstep`` module on every
worker; this is the GPU's. Blocks arrive and leave as host ``(V, rows, cols, 8)`` uint32 arrays of
standard-form elements (they travel between workers through Dask), so each step uploads its block,
runs on the device and downloads the result; the cutting, joining and transposing between steps
are the CPU module's own numpy functions (no field arithmetic in them).

Device steps, all through the NTT engine (``gpu/ntt.py``) and its kernels:

* column step: the block transposed on the device so each column is contiguous (block widths need
  not be powers of two), NTTs of size ``rows`` with the conversion to Montgomery form fused in
  (``pre``), transposed back, then the twiddles w_n^(k1 (col_lo + j)) multiplied in by the
  power-table kernel, whose ``scale`` of raw 1 leaves Montgomery form in the same product;
* row step: NTTs along the rows with both conversions fused (and 1/n for the inverse);
* coset scaling: the power-table kernel's mode 3, g^(k1 + n1 k2) by each entry's natural index,
  multiplied into standard-form values (a Montgomery product by a Montgomery constant);
* hs = a b - c: a and b taken into Montgomery form, then the H step's own combine kernel.
"""

from __future__ import annotations

import sys
from typing import Any

import numpy as np

from distprove import bn254
from distprove.backends.cpu import fourstep as cpu_fourstep
from distprove.backends.cpu.fourstep import (  # noqa: F401  (re-exported: the steps without arithmetic)
    as_columns,
    block_ranges,
    join_columns,
    natural_order,
    split_rows,
    split_sizes,
    take_columns,
)
from distprove.bn254 import FR_MONT, R

from . import ntt as gpu_ntt
from .ntt import log2_exact, root

TO_MONT = FR_MONT * FR_MONT % R
"""Raw R^2 mod r: a Montgomery product by it takes a standard-form value into Montgomery form."""


def _check(block: np.ndarray) -> np.ndarray:
    b = np.asarray(block)
    if b.ndim != 4 or b.shape[-1] != 8:
        raise ValueError(f"expected a (V, rows, cols, 8) block, got shape {b.shape}")
    return b


def _engine() -> gpu_ntt.NttEngine:
    return gpu_ntt.engine()


def _cp() -> Any:
    import cupy

    return cupy


def column_step(block: np.ndarray, n: int, col_lo: int, inverse: bool = False) -> np.ndarray:
    """Steps 1 and 2: unscaled NTTs of size rows down every column, then the twiddles
    w_n^(±k1 (col_lo + j)); as ``cpu.fourstep.column_step``."""
    b = _check(block)
    v, rows, cols = b.shape[:3]
    cp, eng = _cp(), _engine()
    x = cp.ascontiguousarray(cp.asarray(b).transpose(0, 2, 1, 3))  # (V, cols, rows, 8): columns contiguous
    eng.transform(x.reshape(-1, 8), log2_exact(rows), inverse=inverse, outer=v * cols, pre=TO_MONT)
    y = cp.ascontiguousarray(x.transpose(0, 2, 1, 3))  # (V, rows, cols, 8), Montgomery form
    one = eng.const(1)
    powers = eng._powers(root(log2_exact(n), inverse))
    for i in range(v):
        eng.k.pow_table(y[i], powers, one, rows * cols, 2, 0, cols, col_lo, n - 1, True)
    return cp.asnumpy(y)


def row_ntts(block: np.ndarray, n: int, inverse: bool = False) -> np.ndarray:
    """Step 4: an NTT of size cols along every row; the inverse scales by 1/n. As the CPU's."""
    b = _check(block)
    v, rows, cols = b.shape[:3]
    cp, eng = _cp(), _engine()
    x = cp.asarray(np.ascontiguousarray(b, dtype=np.uint32))
    post = pow(n, -1, R) if inverse else 1  # raw: the product by it also leaves Montgomery form
    eng.transform(x.reshape(-1, 8), log2_exact(cols), inverse=inverse, outer=v * rows, pre=TO_MONT, post=post)
    return cp.asnumpy(x)


def coset_scale(block: np.ndarray, n: int, row_lo: int) -> np.ndarray:
    """Multiply X[k1 + n1 k2] (row k1 = row_lo + i of a row-step output) by g^(k1 + n1 k2),
    g = ``bn254.coset_generator(log2 n)``; as the CPU's."""
    b = _check(block)
    v, rows, n2 = b.shape[:3]
    log_n = log2_exact(n)
    log_n1 = log_n - log2_exact(n2)
    cp, eng = _cp(), _engine()
    x = cp.asarray(np.ascontiguousarray(b, dtype=np.uint32))
    powers = eng._powers(bn254.coset_generator(log_n))
    for i in range(v):
        eng.k.pow_table(x[i], powers, None, rows * n2, 3, log_n1, n2, row_lo, n - 1, True)
    return cp.asnumpy(x)


def h_from_odd(block: np.ndarray) -> np.ndarray:
    """hs = a b - c (mod r) from a (3, ...) block holding a, b, c on the odd coset; shape (1, ...)."""
    b = np.asarray(block)
    if b.shape[0] != 3:
        raise ValueError(f"expected the three vectors a, b, c, got {b.shape[0]}")
    cp, eng = _cp(), _engine()
    a, bb, c = (cp.asarray(np.ascontiguousarray(b[i], dtype=np.uint32)) for i in range(3))
    to_mont = eng.const(TO_MONT)
    for x in (a, bb, c):
        eng.k.scale(x, to_mont)
    out = cp.empty_like(c)
    eng.k.h_combine(a, bb, c, out)
    return cp.asnumpy(out)[None]


def ntt(values: np.ndarray, inverse: bool = False, parts: int = 1) -> np.ndarray:
    """The four-step NTT of (n, 8) standard-form values in ``parts`` blocks per step, on the GPU
    (the local composition the Dask graph distributes); equal to the plain NTT."""
    return cpu_fourstep.ntt(values, inverse, parts, ops=sys.modules[__name__])


__all__ = [
    "as_columns", "block_ranges", "column_step", "coset_scale", "h_from_odd", "join_columns",
    "natural_order", "ntt", "row_ntts", "split_rows", "split_sizes", "take_columns",
]
