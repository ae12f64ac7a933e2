"""Host-compiled checks of the GPU proof assembly (distprove/kernels/assemble.cu) against stages/assemble.py.

assemble.cu builds as plain C++ with field.cuh and curve.cuh (DP_INLINE is ``inline`` off the GPU),
so a harness runs each kernel's per-thread code on the CPU, in both product builds of field.cuh
(CIOS, and the FP64-pipe product the device uses on sm_90), and backends/gpu/assemble.py runs on
it with numpy for CuPy: its proof points must equal :func:`distprove.stages.assemble.assemble`'s
bit for bit on fresh random inputs, infinity MSM results and r, s = 0 and 1 among them. Skipped
when no C++ compiler is found.
"""

from __future__ import annotations

import ctypes
import random
import sys
import types

import numpy as np
import pytest

from distprove import bn254
from distprove.backends.gpu import assemble as ga
from distprove.groth16 import MSM_NAMES, msm_group
from distprove.stages.assemble import VK_POINTS, assemble

from hostbuild import BUILDS, build_harness, ptr

HARNESS = r"""
// The kernel as the host runs it: grid row 0's G1 threads, then row 1's G2 threads.
extern "C" void host_assemble_group(const u32* g1, const u32* g2, const u32* blind, const u32* vk, u32* out_a,
                                    u32* out_b, u32* out_c, int k) {
    for (int i = 0; i < k; i++)
        assemble_g1_one(g1 + 64 * i, blind + 16 * i, vk, out_a + 16 * i, out_c + 16 * i);
    for (int i = 0; i < k; i++) assemble_g2_one(g2 + 32 * i, blind + 16 * i, vk, out_b + 32 * i);
}
"""

@pytest.fixture(scope="module", params=list(BUILDS))
def lib(request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory) -> ctypes.CDLL:
    built = build_harness(tmp_path_factory.mktemp("assemble_host"), "assemble", HARNESS, request.param)
    if built is None:
        pytest.skip("no C++ compiler to build the host harness")
    return built


class _EmuModule:
    """assemble.cu's kernels as backends/gpu/assemble.py launches them, run by the host harness."""

    def __init__(self, lib: ctypes.CDLL) -> None:
        self.lib = lib
        self.launches: list[tuple[str, int]] = []

    def get_function(self, name: str):
        def launch(grid: tuple, block: tuple, args: tuple) -> None:
            self.launches.append((name, grid, block))
            for a in args[:-1]:
                assert a.flags.c_contiguous and a.dtype == np.uint32
            getattr(self.lib, f"host_{name}")(*[ptr(a) for a in args[:-1]], ctypes.c_int(int(args[-1])))
        return launch


@pytest.fixture
def emulated(lib: ctypes.CDLL, monkeypatch: pytest.MonkeyPatch) -> _EmuModule:
    """backends/gpu/assemble.py with numpy for CuPy and the host harness for the kernels."""
    from conftest import host_cupy

    fake = types.SimpleNamespace(**vars(host_cupy()), asarray=np.ascontiguousarray)
    monkeypatch.setitem(sys.modules, "cupy", fake)
    mod = _EmuModule(lib)
    monkeypatch.setattr(ga, "get_module", lambda name: mod)
    return mod


def _point(group: bn254.Group, rng: random.Random) -> bn254.Affine:
    gen = bn254.G1_GEN if group is bn254.G1 else bn254.G2_GEN
    return bn254.mul(group, gen, rng.randrange(1, bn254.R))


def _vk(rng: random.Random) -> dict[str, bn254.Affine]:
    return {name: _point(bn254.G2 if name.endswith("2") else bn254.G1, rng) for name in VK_POINTS}


def _msm(rng: random.Random, infinity: float = 0.0) -> dict[str, bn254.Affine]:
    return {w: None if rng.random() < infinity else _point(msm_group(w), rng) for w in MSM_NAMES}


def _device_vk(vk: dict[str, bn254.Affine]) -> np.ndarray:
    return np.ascontiguousarray(ga.vk_words(vk))


def _check(vk: dict[str, bn254.Affine], msm: list[dict[str, bn254.Affine]], blindings: list[tuple[int, int]],
           seed: int) -> None:
    got = ga.assemble_group(_device_vk(vk), msm, blindings)
    for i, (points, (r, s)) in enumerate(zip(msm, blindings)):
        assert got[i] == assemble(vk, points, r, s), f"proof {i} (r={r}, s={s}), seed {seed}"


@pytest.mark.parametrize("k", [1, 3, 33])
def test_group_equals_host_assembly(emulated: _EmuModule, k: int) -> None:
    """Fresh random groups (a group of 33: two blocks) with some MSM results at infinity, against
    the host's assembly proof by proof; one launch, a G1 and a G2 row of blocks."""
    rng = random.Random()
    seed = rng.randrange(1 << 32)
    rng.seed(seed)
    vk = _vk(rng)
    msm = [_msm(rng, infinity=0.2) for _ in range(k)]
    blindings = [(rng.randrange(bn254.R), rng.randrange(bn254.R)) for _ in range(k)]
    _check(vk, msm, blindings, seed)
    assert emulated.launches == [("assemble_group", (-(-k // ga.THREADS), 2), (ga.THREADS,))]


def test_edge_blindings_and_infinity(emulated: _EmuModule) -> None:
    """r, s in {0, 1, R - 1}, every MSM result at infinity, and sums that cancel to infinity:
    A = -alpha1 with r = 0 makes pi_a infinity (then pi_c = C + H + r b1), B2 = -beta2 with s = 0
    makes pi_b infinity, and C = -H with r = s = 0 makes pi_c infinity."""
    rng = random.Random()
    seed = rng.randrange(1 << 32)
    rng.seed(seed)
    vk = _vk(rng)
    msm, blindings = [], []
    for r in (0, 1, bn254.R - 1):
        for s in (0, 1, bn254.R - 1):
            msm.append(_msm(rng))
            blindings.append((r, s))
    msm.append({w: None for w in MSM_NAMES})
    blindings.append((0, 0))
    msm.append({w: None for w in MSM_NAMES})
    blindings.append((rng.randrange(bn254.R), rng.randrange(bn254.R)))
    cancel = _msm(rng)
    cancel["A"] = bn254.neg(bn254.G1, vk["alpha1"])
    cancel["B2"] = bn254.neg(bn254.G2, vk["beta2"])
    cancel["C"] = bn254.neg(bn254.G1, cancel["H"])
    msm += [cancel, dict(cancel)]
    blindings += [(0, 0), (0, 5)]
    for sign in (1, -1):  # b1 = pi_a, b1 = -pi_a: the chain's pi_a + b1 doubles, or cancels
        pair = _msm(rng)
        pi_a = bn254.add(bn254.G1, bn254.add(bn254.G1, pair["A"], vk["alpha1"]), bn254.mul(bn254.G1, vk["delta1"], 7))
        b1 = pi_a if sign == 1 else bn254.neg(bn254.G1, pi_a)
        pair["B1"] = bn254.add(bn254.G1, b1, bn254.neg(bn254.G1, vk["beta1"]))
        msm.append(pair)
        blindings.append((7, 7))
    _check(vk, msm, blindings, seed)
    got = ga.assemble_group(_device_vk(vk), msm[-4:-2], [(0, 0), (0, 5)])
    assert got[0] == (None, None, None)
    assert got[1][0] is None and got[1][1] is not None


def test_repeats_give_the_same_points(emulated: _EmuModule) -> None:
    """The same inputs twice in one group and in two calls: the same points."""
    rng = random.Random()
    vk = _vk(rng)
    msm = _msm(rng)
    rs = (rng.randrange(bn254.R), rng.randrange(bn254.R))
    once = ga.assemble_group(_device_vk(vk), [msm, msm], [rs, rs])
    assert once[0] == once[1] == ga.assemble_group(_device_vk(vk), [msm], [rs])[0] == assemble(vk, msm, *rs)


def test_bad_blinding_and_names_are_refused() -> None:
    vk = {name: None for name in VK_POINTS}
    msm = {w: None for w in MSM_NAMES}
    with pytest.raises(ValueError, match="not in"):
        ga.assemble_group(vk, [msm], [(bn254.R, 0)])
    with pytest.raises(ValueError, match="blindings"):
        ga.assemble_group(vk, [msm], [])
    with pytest.raises(ValueError, match="missing"):
        ga.assemble_group(vk, [{"A": None}], [(0, 0)])
    assert ga.assemble_group(vk, [], []) == []


def test_rows_layout() -> None:
    """MSM results and proof points travel as standard-form affine rows (G2: x.c0, x.c1, y.c0,
    y.c1), infinity all zero, both ways; the vk's 112 words are Montgomery, in VK_POINTS order."""
    rng = random.Random()
    p, q = _point(bn254.G1, rng), _point(bn254.G2, rng)
    rows = bn254.points_to_limbs(bn254.G1, [p, None], mont=False)
    assert bn254.ints_from_limbs(rows[0].reshape(-1, 8)) == [p[0], p[1]] and not rows[1].any()
    rows2 = bn254.points_to_limbs(bn254.G2, [q, None], mont=False)
    assert bn254.ints_from_limbs(rows2[0].reshape(-1, 8)) == [*q[0], *q[1]] and not rows2[1].any()
    assert bn254.points_from_limbs(bn254.G1, rows, mont=False) == [p, None]
    assert bn254.points_from_limbs(bn254.G2, rows2, mont=False) == [q, None]
    assert bn254.points_from_limbs(bn254.G1, bn254.points_to_limbs(bn254.G1, [], mont=False), mont=False) == []
    vk = _vk(rng)
    words = ga.vk_words(vk)
    assert words.shape == (832,)
    assert (words[:32] == bn254.points_to_limbs(bn254.G1, [vk["alpha1"], vk["beta1"]]).reshape(-1)).all()
    assert (words[32:64] == bn254.points_to_limbs(bn254.G2, [vk["beta2"]])[0]).all()
    assert (words[64:320] == bn254.points_to_limbs(bn254.G1, ga.comb_table(bn254.G1, vk["delta1"])).reshape(-1)).all()
    assert (words[320:] == bn254.points_to_limbs(bn254.G2, ga.comb_table(bn254.G2, vk["delta2"])).reshape(-1)).all()


@pytest.mark.parametrize("group", [bn254.G1, bn254.G2])
def test_comb_table(group: bn254.Group) -> None:
    """Entry m of a comb table is sum_j bit j of m times 2^(64 j) delta, by exact multiples (a
    point outside the prime-order subgroup too: the twist's); infinity gives a table of infinity."""
    from test_pairing import twist_point_outside_g2

    rng = random.Random()
    points = [_point(group, rng)] + ([twist_point_outside_g2(rng)] if group is bn254.G2 else [])
    for p in points:
        table = ga.comb_table(group, p)
        assert len(table) == 16 and table[0] is None
        for m in range(1, 16):
            want = None
            for j in range(4):
                if m >> j & 1:
                    q = bn254.to_jacobian(group, p)
                    for _ in range(64 * j):
                        q = bn254.jac_double(group, q)
                    want = bn254.add(group, want, bn254.batch_to_affine(group, [q])[0])
            assert table[m] == want, m
            if p is points[0]:  # in the prime-order group: k p by bn254's multiplication too
                assert table[m] == bn254.mul(group, p, sum(1 << (64 * j) for j in range(4) if m >> j & 1)), m
    assert ga.comb_table(group, None) == [None] * 16
