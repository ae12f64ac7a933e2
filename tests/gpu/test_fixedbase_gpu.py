"""GPU fixed-base scalar multiplication (kernels/fixedbase.cu) against the CPU reference."""

from __future__ import annotations

import random

import numpy as np
import pytest

from distprove import bn254
from distprove.devsetup import fixed_base_cpu

pytestmark = pytest.mark.gpu


def scalars(n: int, seed: int) -> np.ndarray:
    """Edge cases (0, 1, r-1, bytes of zeros and 0xff) then random scalars below r."""
    rng = random.Random(seed)
    edge = [0, 1, 2, bn254.R - 1, bn254.R - 2, 255, 256, 1 << 248, (1 << 64) - 1, int("ff" * 31, 16)]
    vals = edge + [rng.randrange(bn254.R) for _ in range(n - len(edge))]
    return bn254.limbs_from_ints(np.array(vals, dtype=object))


@pytest.mark.parametrize("affine", ["batch", "fermat"])
@pytest.mark.parametrize("group", [bn254.G1, bn254.G2], ids=["G1", "G2"])
def test_gpu_equals_cpu(group: bn254.Group, affine: str) -> None:
    from distprove.backends.gpu.fixedbase import fixed_base_gpu

    s = scalars(301 if group is bn254.G1 else 77, seed=7)  # not a multiple of the 16-point batch
    got = fixed_base_gpu(group, s, affine=affine)
    assert got.shape == (s.shape[0], group.limbs) and got.dtype == np.uint32
    assert np.array_equal(got, fixed_base_cpu(group, s))
    assert not got[0].any()  # [0]G is infinity, the all-zero row
    for i in (1, 3):  # G and -G against the plain double-and-add reference
        v = bn254.ints_from_limbs(s[i : i + 1])[0]
        assert np.array_equal(got[i], bn254.points_to_limbs(group, [bn254.mul(group, group.generator, v)])[0])


def test_gpu_chunks_and_modes_agree() -> None:
    from distprove.backends.gpu.fixedbase import fixed_base_gpu

    s = scalars(1 << 16, seed=8)
    whole = fixed_base_gpu(bn254.G1, s)
    assert np.array_equal(fixed_base_gpu(bn254.G1, s, chunk=5000, affine="fermat"), whole)
    pick = np.random.default_rng(1).choice(s.shape[0], 64, replace=False)
    assert np.array_equal(whole[pick], fixed_base_cpu(bn254.G1, s[pick]))


def test_empty() -> None:
    from distprove.backends.gpu.fixedbase import fixed_base_gpu

    assert fixed_base_gpu(bn254.G2, np.zeros((0, 8), np.uint32)).shape == (0, 32)
