"""GPU point validation: the host side of ``distprove/kernels/validate.cu``.

A key's point rows go up in chunks; one launch a chunk checks every row (coordinates < q, on the
curve, zero row = infinity) and leaves the lowest bad index in one u32, the only thing read back.
The reason for that row (>= q or off the curve) is then taken from the CPU check of that one row,
so both devices name the same point the same way.
"""

from __future__ import annotations

import numpy as np

from distprove import bn254

from .compile import get_module

BLOCK = 256
"""Threads per block (one row each)."""
CHUNK_BYTES = 256 << 20
"""Bytes of rows a launch checks: bounds the device memory the check takes."""


def first_bad_point(limbs: np.ndarray, group: bn254.Group, chunk_bytes: int = CHUNK_BYTES) -> tuple[int, int] | None:
    """(index, status) of the first point with a coordinate >= q or off its curve, or None
    (status codes of :mod:`distprove.formats.pointcheck`)."""
    import cupy

    if limbs.ndim != 2 or limbs.shape[1] != group.limbs:
        raise ValueError(f"expected (n, {group.limbs}) limbs for {group.name}, got {limbs.shape}")
    n = limbs.shape[0]
    if n == 0:
        return None
    fn = get_module("validate").get_function("dp_validate_points")
    rows = max(1, chunk_bytes // (4 * group.limbs))
    g2 = np.int32(group is bn254.G2)
    result = cupy.empty(1, dtype=cupy.uint32)
    dev = cupy.empty((min(n, rows), group.limbs), dtype=cupy.uint32)
    for lo in range(0, n, rows):
        blk = np.ascontiguousarray(limbs[lo : lo + rows], dtype=np.uint32)
        m = blk.shape[0]
        dev[:m].set(blk)
        result.fill(0xFFFFFFFF)
        fn(((m + BLOCK - 1) // BLOCK,), (BLOCK,), (dev, np.uint32(m), g2, result))
        i = int(result.get()[0])
        if i != 0xFFFFFFFF:
            from distprove.formats.pointcheck import point_status  # loads numba: only for a bad point

            return lo + i, int(point_status(limbs[lo + i : lo + i + 1], group)[0])
    return None
