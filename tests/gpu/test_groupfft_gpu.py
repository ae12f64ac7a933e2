"""GPU group iFFT (kernels/groupfft.cu) on the device against the CPU reference and snarkjs's files."""

from __future__ import annotations

import random
from pathlib import Path

import numpy as np
import pytest

from distprove import bn254, glv
from distprove.backends.cpu import groupfft as cpu_gf
from distprove.bn254 import G1, G2, R
from distprove.formats.ptau import lagrange_level, read_ptau
from distprove.ptau import LAGRANGE_SECTIONS, level_points, prepare

pytestmark = pytest.mark.gpu

DATA = Path(__file__).resolve().parents[1] / "data"
GROUPS = [pytest.param(G1, id="G1"), pytest.param(G2, id="G2")]


def _random_points(group: bn254.Group, rng: random.Random, count: int) -> list:
    step = bn254.mul(group, group.generator, rng.randrange(1, R))
    acc = bn254.to_jacobian(group, bn254.mul(group, group.generator, rng.randrange(1, R)))
    jac = []
    for _ in range(count):
        jac.append(acc)
        acc = bn254.jac_add_affine(group, acc, step)
    return bn254.batch_to_affine(group, jac)


@pytest.mark.parametrize("group", GROUPS)
def test_small_levels_match_cpu(group: bn254.Group) -> None:
    from distprove.backends.gpu.groupfft import ifft_level_gpu

    rng = random.Random()
    for p in range(0, 8):
        n = 1 << p
        pts = _random_points(group, rng, n)
        if n >= 8:
            pts[3] = None
            pts[5] = pts[4]
            pts[n - 1] = None
        limbs = bn254.points_to_limbs(group, pts)
        assert np.array_equal(ifft_level_gpu(group, limbs), cpu_gf.ifft_level(group, limbs)), p


@pytest.mark.parametrize("group", GROUPS)
def test_coset_level_matches_cpu(group: bn254.Group) -> None:
    from distprove.backends.gpu.groupfft import coset_level_gpu

    rng = random.Random()
    for k in (1, 3, 5):
        limbs = bn254.points_to_limbs(group, _random_points(group, rng, (2 << k) - 1) + [None])
        got = coset_level_gpu(group, limbs, k, bn254.FR_SHIFT)
        assert np.array_equal(got, cpu_gf.coset_level(group, limbs, k, bn254.FR_SHIFT)), k


def test_prepare_pot4_byte_identical(tmp_path: Path) -> None:
    out = tmp_path / "pot4.ptau"
    prepare(DATA / "mini" / "pot4_0002.ptau", out, backend="gpu")
    assert out.read_bytes() == (DATA / "mini" / "pot4_final.ptau").read_bytes()


def test_prepare_pot12_byte_identical(tmp_path: Path) -> None:
    """All levels of all four sections of a real power-12 ceremony file (levels up to 13)."""
    from distprove.formats.ptau import PtauHeader, write_ptau

    final = DATA / "ptau" / "pot12_final.ptau"
    f = read_ptau(final)
    src = tmp_path / "pot12_unprepared.ptau"
    write_ptau(src, PtauHeader(12, 12), {2: f.tau_g1, 3: f.tau_g2, 4: f.alpha_tau_g1, 5: f.beta_tau_g1,
                                         6: f.beta_g2.reshape(1, -1), 7: f.contributions})
    out = tmp_path / "pot12.ptau"
    prepare(src, out, backend="gpu")
    assert out.read_bytes() == final.read_bytes()


@pytest.mark.parametrize("sid,lid,group,extra", LAGRANGE_SECTIONS, ids=["tauG1", "tauG2", "alphaTauG1", "betaTauG1"])
def test_pot12_top_level_sections(sid: int, lid: int, group: bn254.Group, extra: bool) -> None:
    """Each section's top level on its own (the per-level function a Dask task would call)."""
    f = read_ptau(DATA / "ptau" / "pot12_final.ptau")
    src = {2: f.tau_g1, 3: f.tau_g2, 4: f.alpha_tau_g1, 5: f.beta_tau_g1}[sid]
    lag = {12: f.lagrange_tau_g1, 13: f.lagrange_tau_g2, 14: f.lagrange_alpha_tau_g1, 15: f.lagrange_beta_tau_g1}[lid]
    top = 13 if extra else 12
    assert np.array_equal(level_points(group, src, top, backend="gpu"), lagrange_level(lag, top))


def test_device_twiddles_split() -> None:
    """gfft_twiddles on the device: every row splits scale·ω^-(first + j) with halves below 2^127."""
    import cupy as cp

    from distprove.backends.gpu.groupfft import device_twiddles

    lam = glv.LAMBDA
    for p, first, count, scale in ((1, 0, 1, None), (12, 0, 2048, None), (13, 77, 1000, pow(1 << 13, -1, R)), (20, 0, 1 << 19, None)):
        rows = cp.asnumpy(device_twiddles(p, first, count, scale))
        w_inv = pow(bn254.root_of_unity(p), -1, R)
        s = 1 if scale is None else scale
        picks = sorted({0, min(1, count - 1), count - 1, *random.Random(p).sample(range(count), min(count, 200))})
        for j in picks + ([count] if scale is not None else []):
            k = s if j == count else s * pow(w_inv, first + j, R) % R
            row = rows[j]
            k1 = int.from_bytes(row[0:4].tobytes(), "little")
            k2 = int.from_bytes(row[4:8].tobytes(), "little")
            assert k1 < 1 << 127 and k2 < 1 << 127 and int(row[8]) <= 3
            assert ((-k1 if row[8] & 1 else k1) + (-k2 if row[8] & 2 else k2) * lam - k) % R == 0, (p, j)


@pytest.mark.parametrize("group", GROUPS)
def test_blocked_level_matches_cpu(group: bn254.Group) -> None:
    """Halves and column stages on the device (as a blocked Dask level runs them) assemble the level
    the CPU computes whole, tauG1's extra level (last input infinity) included."""
    from distprove.ptau import column_points, half_points

    rng = random.Random()
    for p in (1, 4, 7):
        n = 1 << p
        section = bn254.points_to_limbs(group, _random_points(group, rng, n - 1))
        halves = [half_points(group, section, p, b, "gpu") for b in (0, 1)]
        half = n // 2
        level = np.zeros((n, group.limbs), dtype=np.uint32)
        bounds = [0, half // 3, half] if half >= 3 else [0, half]
        for first, end in zip(bounds, bounds[1:]):
            rows = column_points(group, p, first, halves[0][first:end], halves[1][first:end], "gpu")
            level[first:end], level[half + first : half + end] = rows[: end - first], rows[end - first :]
        assert np.array_equal(level, level_points(group, section, p)), p
