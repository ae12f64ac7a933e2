"""GPU fixed-base scalar multiplication [s]·G for the dev setup (kernels/fixedbase.cu, via NVRTC).

The 8-bit window table of the generator (32 × 256 affine points, built once on the host by
:func:`distprove.stages.fixedbase.window_table_limbs`) is uploaded once per group and process;
scalars go up in chunks and come back as affine Montgomery limbs, (n, 16) for G1 and (n, 32) for
G2, the key-store layout.
"""

from __future__ import annotations

import functools
from typing import Any

import numpy as np

from distprove.bn254 import G1, G2, Group
from distprove.stages.fixedbase import window_table_limbs

from .compile import get_module

BATCH = 16
"""Points per thread of the affine kernel (FB_BATCH in fixedbase.cu)."""
AFFINE_MODES = ("batch", "fermat")


@functools.cache
def _table(group_name: str) -> Any:
    import cupy as cp

    return cp.asarray(window_table_limbs(G1 if group_name == "G1" else G2))


def fixed_base_gpu(group: Group, scalars: np.ndarray, *, chunk: int = 1 << 22, affine: str = "batch") -> np.ndarray:
    """[s]·G for each standard-form scalar row ((n, 8) uint32) as (n, 16|32) Montgomery limbs.

    ``affine`` picks the conversion: "batch" (accumulate, then Montgomery batch inversion over
    16 points per thread) or "fermat" (one fused kernel, a Fermat inversion per point).
    """
    import cupy as cp

    if affine not in AFFINE_MODES:
        raise ValueError(f"affine must be one of {AFFINE_MODES}, not {affine!r}")
    a = np.ascontiguousarray(scalars, dtype="<u4").reshape(-1, 8)
    n, width = a.shape[0], group.limbs
    out = np.empty((n, width), dtype="<u4")
    if n == 0:
        return out
    g = "g1" if group is G1 else "g2"
    mod = get_module("fixedbase")
    table = _table(group.name)
    threads = 128 if group is G1 else 64
    for lo in range(0, n, chunk):
        m = min(chunk, n - lo)
        d_s = cp.asarray(a[lo : lo + m])
        d_o = cp.empty((m, width), dtype=cp.uint32)
        if affine == "fermat":
            mod.get_function(f"fixedbase_{g}")(((m + threads - 1) // threads,), (threads,), (table, d_s, d_o, np.uint32(m)))
        else:
            d_x = cp.empty((m, 2 * width), dtype=cp.uint32)
            mod.get_function(f"fixedbase_acc_{g}")(((m + threads - 1) // threads,), (threads,), (table, d_s, d_x, np.uint32(m)))
            t = (m + BATCH - 1) // BATCH
            mod.get_function(f"fixedbase_affine_{g}")(((t + threads - 1) // threads,), (threads,), (d_x, d_o, np.uint32(m)))
            del d_x
        out[lo : lo + m] = d_o.get()
    return out
