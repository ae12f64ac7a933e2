"""The generator's window table of fixed-base scalar multiplication [s]·G.

Shared by the two fixed-base multiplications of the setup: the CPU one
(:func:`distprove.devsetup.fixed_base_cpu`, Python-int points) and the GPU one
(:mod:`distprove.backends.gpu.fixedbase`, which uploads :func:`window_table_limbs` for
``kernels/fixedbase.cu``). A scalar's byte ``d`` of window ``w`` selects ``table[w][d]``, so
[s]·G is one mixed addition per nonzero byte and no doublings.
"""

from __future__ import annotations

from functools import cache

import numpy as np

from distprove import bn254
from distprove.bn254 import Affine, Group

WINDOW_BITS = 8
"""Bits of a scalar per window: one byte (FB_ENTRIES = 256 entries a window in fixedbase.cu)."""
WINDOWS = 256 // WINDOW_BITS
"""Windows of a 256-bit scalar (FB_WINDOWS in fixedbase.cu)."""


@cache
def window_table(group: Group) -> tuple[tuple[Affine, ...], ...]:
    """table[w][d] = d·2^(8w)·G (affine, d = 0 is infinity) for w < 32: 32 × 256 points."""
    rows = []
    base = bn254.to_jacobian(group, group.generator)
    for _ in range(WINDOWS):
        jac = [bn254.to_jacobian(group, None), base]
        for _ in range(2, 1 << WINDOW_BITS):
            jac.append(bn254.jac_add(group, jac[-1], base))
        rows.append(tuple(bn254.batch_to_affine(group, jac)))
        base = bn254.jac_add(group, jac[-1], base)  # 256 · base
    return tuple(rows)


def window_table_limbs(group: Group) -> np.ndarray:
    """The window table as (32·256, 16|32) Montgomery limbs (row w·256 + d), for the GPU."""
    return bn254.points_to_limbs(group, [p for row in window_table(group) for p in row])
