"""The GPU's group assembly (kernels/assemble.cu through GpuBackend.assemble_group) against the host's
stages.assemble.assemble, bit for bit."""

from __future__ import annotations

import random
import types

import pytest

from distprove import bn254
from distprove.groth16 import MSM_NAMES, msm_group
from distprove.stages.assemble import VK_POINTS, assemble

pytestmark = pytest.mark.gpu


@pytest.fixture(scope="module")
def gpu():
    pytest.importorskip("cupy")
    from distprove.backends.gpu import GpuBackend

    return GpuBackend()


def _walk(group: bn254.Group, rng: random.Random, k: int) -> list[bn254.Affine]:
    """k points of ``group``: a random start walked by a random step (additions are cheap on the
    host, scalar products are not)."""
    gen = bn254.G1_GEN if group is bn254.G1 else bn254.G2_GEN
    p, dp = (bn254.mul(group, gen, rng.randrange(1, bn254.R)) for _ in range(2))
    out = []
    for _ in range(k):
        out.append(p)
        p = bn254.add(group, p, dp)
    return out


@pytest.mark.parametrize("k", [1, 2, 7, 33, 64])
def test_group_assembly_equals_the_host(gpu, k: int) -> None:
    """Groups of 1, 2, 7, 33 (two blocks) and 64 proofs with fresh random inputs, some MSM results
    at infinity and r, s in {0, 1} for some proofs; twice, the second from the key's resident
    copy of its points."""
    rng = random.Random()
    seed = rng.randrange(1 << 32)
    rng.seed(seed)
    vk = {name: _walk(bn254.G2 if name.endswith("2") else bn254.G1, rng, 1)[0] for name in VK_POINTS}
    points = {which: _walk(msm_group(which), rng, k) for which in MSM_NAMES}
    msm = [{which: None if rng.random() < 0.1 else points[which][i] for which in MSM_NAMES} for i in range(k)]
    blindings = [(rng.choice([0, 1, rng.randrange(bn254.R)]), rng.choice([0, 1, rng.randrange(bn254.R)]))
                 for _ in range(k)]
    key = types.SimpleNamespace(content_hash=f"assemble-test-{seed}", points=vk)
    want = [assemble(vk, m, r, s) for m, (r, s) in zip(msm, blindings)]
    for _ in range(2):
        got = gpu.assemble_group(key, msm, blindings)
        for i in range(k):
            assert got[i] == want[i], f"proof {i} of {k}, blinding {blindings[i]}, seed {seed}"
    gpu.evict(key.content_hash)
