"""The GPU group iFFT (distprove/kernels/groupfft.cu) built as host C++ and driven by the real host
driver (distprove/backends/gpu/groupfft.py) with numpy standing in for CuPy: every "thread" of a
launch runs in turn, so the pass geometry, the dense j != 0 thread map, the GLV ladder with its
Booth digits and endomorphism, the fused scaling and the batch conversion are all exercised in CI,
against the CPU reference (backends/cpu/groupfft.py, itself checked against the definition and
against snarkjs's files) and bn254.mul, on fresh random inputs. Skipped without a C++ compiler.
"""

from __future__ import annotations

import ctypes
import random
import shutil
import subprocess
import sys
import types
from pathlib import Path

import numpy as np
import pytest

from distprove import bn254, glv
from distprove.backends.cpu import groupfft as cpu_gf
from distprove.bn254 import G1, G2, R

KERNELS = Path(__file__).resolve().parents[1] / "distprove" / "kernels"
MINI = Path(__file__).parent / "data" / "mini"
GROUPS = [pytest.param(G1, id="G1"), pytest.param(G2, id="G2")]

HARNESS = r"""
#include "field.cuh"
#include "curve.cuh"
#include "fixedbase.cu"
#include "groupfft.cu"
#define LOOP(...) for (u32 tid = 0; tid < threads; tid++) { __VA_ARGS__; }
#define HOST(G, F, W)                                                                                     \
    extern "C" void host_gfft_load_##G(u32 threads, const u32* aff, Xyzz<F>* out, u32 n, u32 log_n,      \
                                       u32 bitrev) {                                                      \
        LOOP(gfft_load_body<F, W>(aff, out, n, log_n, bitrev, tid))                                       \
    }                                                                                                     \
    extern "C" void host_gfft_pass_##G(u32 threads, const Xyzz<F>* in, Xyzz<F>* out, const u32* tw,      \
                                       u32 n, u32 log_h, u32 tw_shift) {                                  \
        LOOP(gfft_pass_body<F>(in, out, tw, n, log_h, tw_shift, tid))                                     \
    }                                                                                                     \
    extern "C" void host_gfft_last_##G(u32 threads, const Xyzz<F>* in, Xyzz<F>* out, const u32* stw,     \
                                       u32 n) {                                                           \
        LOOP(gfft_last_body<F>(in, out, stw, n, tid))                                                     \
    }                                                                                                     \
    extern "C" void host_gfft_coset_##G(u32 threads, const Xyzz<F>* t0, const Xyzz<F>* t1, Xyzz<F>* o0,  \
                                        Xyzz<F>* o1, const u32* cst, const u32* lo, const u32* hi, u32 m, \
                                        u32 log_lo) {                                                     \
        LOOP(gfft_coset_body<F>(t0, t1, o0, o1, cst, lo, hi, m, log_lo, tid))                             \
    }                                                                                                     \
    extern "C" void host_gfft_affine_##G(u32 threads, const u32* xyzz, u32* out, u32 n) {                \
        LOOP(u32 first = tid * FB_BATCH;                                                                  \
             if (first < n) fb_batch_affine<F, W>(xyzz, out, first, n - first < FB_BATCH ? n - first : FB_BATCH)) \
    }                                                                                                     \
    extern "C" void host_mul_##G(const u32* aff, const u32* k, Xyzz<F>* out, u32 n) {                     \
        for (u32 i = 0; i < n; i++) {                                                                     \
            Aff<F> a;                                                                                     \
            gfft_load_aff(a, aff + (u64)i * W);                                                           \
            out[i] = gfft_mul<F, GFFT_WINDOW>(pt_from_aff(a), k + (u64)i * GFFT_GLV_WORDS);               \
        }                                                                                                 \
    }
HOST(g1, Fq, 16)
HOST(g2, Fq2, 32)
extern "C" void host_gfft_twiddles(u32 threads, u32* out, const u32* lo, const u32* hi, u32 log_lo, u32 m) {
    LOOP(gfft_twiddles_body(out, lo, hi, log_lo, m, tid))
}
extern "C" void host_glv_split(const u32* k, u32* out, u32 n) {
    for (u32 i = 0; i < n; i++) gfft_glv_split(k + 8 * i, out + (u64)i * GFFT_GLV_WORDS);
}
"""


@pytest.fixture(scope="module")
def lib(tmp_path_factory: pytest.TempPathFactory) -> ctypes.CDLL:
    cxx = next((shutil.which(c) for c in ("c++", "g++", "clang++") if shutil.which(c)), None)
    if cxx is None:
        pytest.skip("no C++ compiler to build the group iFFT harness")
    d = tmp_path_factory.mktemp("groupfft_host")
    src = d / "harness.cpp"
    src.write_text(HARNESS)
    so = d / "harness.so"
    cmd = [cxx, "-O1", "-std=c++17", "-shared", "-fPIC", "-I", str(KERNELS), str(src), "-o", str(so)]
    res = subprocess.run(cmd, capture_output=True, text=True)
    assert res.returncode == 0, res.stderr[-4000:]
    return ctypes.CDLL(str(so))


def _arg(a: object) -> object:
    return ctypes.c_void_p(a.ctypes.data) if isinstance(a, np.ndarray) else ctypes.c_uint32(int(a))


class _EmuModule:
    """Stands in for the cupy.RawModule of groupfft: get_function returns a host launcher."""

    def __init__(self, lib: ctypes.CDLL) -> None:
        self.lib = lib

    def get_function(self, name: str):
        fn = getattr(self.lib, "host_" + name)

        def launch(grid: tuple, block: tuple, args: tuple) -> None:
            fn(ctypes.c_uint32(grid[0] * block[0]), *[_arg(a) for a in args])

        return launch


@pytest.fixture()
def gpu_gf(lib: ctypes.CDLL, monkeypatch: pytest.MonkeyPatch):
    """distprove.backends.gpu.groupfft with numpy as 'cupy' (fresh buffers hold a sentinel, so an
    output a kernel fails to write shows) and the host-built kernels as the module."""
    import distprove.backends.gpu.groupfft as gg

    fake = types.SimpleNamespace(
        asarray=np.ascontiguousarray, asnumpy=np.asarray, uint32=np.uint32,
        empty=lambda shape, dtype: np.full(shape, 0xDEADBEEF, dtype=dtype),
    )
    monkeypatch.setitem(sys.modules, "cupy", fake)
    monkeypatch.setattr(gg, "_module", lambda: _EmuModule(lib))
    return gg


def _random_points(group: bn254.Group, rng: random.Random, count: int) -> list:
    return [bn254.mul(group, group.generator, rng.randrange(1, R)) for _ in range(count)]


def test_glv_pack_matches_split() -> None:
    from distprove.backends.gpu.groupfft import glv_pack

    rng = random.Random()
    ks = [0, 1, R - 1, glv.LAMBDA, R + 3] + [rng.randrange(R) for _ in range(300)]
    rows = glv_pack(np.array(ks, dtype=object))
    for k, row in zip(ks, rows):
        k1, k2 = glv.split(k)
        mag1 = int.from_bytes(row[0:4].tobytes(), "little")
        mag2 = int.from_bytes(row[4:8].tobytes(), "little")
        assert (mag1, mag2) == (abs(k1), abs(k2))
        assert int(row[8]) == (k1 < 0) | ((k2 < 0) << 1)


def _unpack(rows: np.ndarray) -> list[tuple[int, int]]:
    """Signed (k1, k2) of packed GLV rows."""
    out = []
    for row in rows:
        k1 = int.from_bytes(row[0:4].tobytes(), "little")
        k2 = int.from_bytes(row[4:8].tobytes(), "little")
        out.append((-k1 if row[8] & 1 else k1, -k2 if row[8] & 2 else k2))
    return out


def _check_split(ks: list[int], rows: np.ndarray) -> None:
    assert rows.shape == (len(ks), 9) and int(rows[:, 8].max(initial=0)) <= 3
    for k, (k1, k2) in zip(ks, _unpack(rows)):
        assert (k1 + k2 * glv.LAMBDA - k) % R == 0, k
        assert abs(k1) < 1 << 127 and abs(k2) < 1 << 127, k


def test_device_glv_split(lib: ctypes.CDLL) -> None:
    """gfft_glv_split (rounded by 2^256-scaled constants): k ≡ k1 + k2·λ, halves below 2^127, also
    where k·|b2|/r and k·b1/r sit next to a half-integer (the rounding's worst case)."""

    rng = random.Random()
    (a1, b1), (a2, b2) = glv.BASIS
    ks = [0, 1, 2, R - 1, R - 2, glv.LAMBDA, (1 << 253) + 5, (1 << 127) - 1] + [rng.randrange(R) for _ in range(400)]
    for num in (-b2, b1):  # k with k·num/r just below and above m + 1/2
        for _ in range(50):
            m = rng.randrange(num)
            k = ((2 * m + 1) * R) // (2 * num)
            ks += [k % R, (k + 1) % R]
    k = bn254.limbs_from_ints(np.array(ks, dtype=object))
    out = np.zeros((len(ks), 9), dtype=np.uint32)
    lib.host_glv_split(_arg(k), _arg(out), _arg(len(ks)))
    _check_split(ks, out)


def test_device_twiddles(gpu_gf) -> None:
    """gfft_twiddles rows (via the host driver) split scale·ω^-(first + j), j < count, ω = Fr.w[p];
    with a scale the last row splits the scale itself (gfft_last's layout)."""
    for p, first, count, scale in ((1, 0, 1, None), (5, 0, 16, None), (6, 3, 13, None), (7, 0, 64, pow(128, -1, R)),
                                   (9, 100, 37, pow(512, -1, R)), (4, 0, 8, 1)):
        rows = gpu_gf.device_twiddles(p, first, count, scale)
        w_inv = pow(bn254.root_of_unity(p), -1, R)
        s = 1 if scale is None else scale
        ks = [s * pow(w_inv, first + j, R) % R for j in range(count)] + ([] if scale is None else [scale])
        _check_split(ks, rows)


@pytest.mark.parametrize("group", GROUPS)
def test_ladder_matches_reference(lib: ctypes.CDLL, group: bn254.Group) -> None:
    from distprove.backends.gpu.groupfft import glv_pack

    rng = random.Random()
    pts = _random_points(group, rng, 10) + [None, group.generator]
    lam = glv.LAMBDA
    ks = [0, 1, R - 1, lam, R - lam, 2, 16, 17, rng.randrange(1 << 128), rng.randrange(R), rng.randrange(R), 5]
    aff = bn254.points_to_limbs(group, pts)
    k = glv_pack(np.array(ks, dtype=object))
    n = len(pts)
    xyzz = np.zeros((n, 2 * group.limbs), dtype=np.uint32)
    g = "g1" if group is G1 else "g2"
    getattr(lib, f"host_mul_{g}")(_arg(aff), _arg(k), _arg(xyzz), _arg(n))
    out = np.full((n, group.limbs), 0xDEADBEEF, dtype=np.uint32)
    getattr(lib, f"host_gfft_affine_{g}")(_arg(-(-n // 16)), _arg(xyzz), _arg(out), _arg(n))
    assert bn254.points_from_limbs(group, out) == [bn254.mul(group, p, kk) if p is not None else None for p, kk in zip(pts, ks)]


@pytest.mark.parametrize("group", GROUPS)
def test_ifft_level_matches_cpu(gpu_gf, group: bn254.Group) -> None:
    rng = random.Random()
    sizes = [1, 2, 4, 8, 16, 32] if group is G1 else [1, 2, 4, 8, 16]
    for n in sizes:
        pts = _random_points(group, rng, n)
        if n >= 8:
            pts[5] = None
            pts[6] = pts[4]  # P + P in the first stage
            pts[n - 1] = None  # as tauG1's extra level
        limbs = bn254.points_to_limbs(group, pts)
        got = gpu_gf.ifft_level_gpu(group, limbs)
        assert np.array_equal(got, cpu_gf.ifft_level(group, limbs)), n


@pytest.mark.parametrize("group", GROUPS)
def test_blocked_level_matches_cpu(gpu_gf, group: bn254.Group) -> None:
    """The GPU halves and column stage (emulated) equal the CPU ones, and assemble the level."""
    from distprove.ptau import level_input

    rng = random.Random()
    for p in (1, 3, 4) if group is G1 else (1, 3):
        n = 1 << p
        pts = _random_points(group, rng, n - 1)
        if n >= 8:
            pts[1] = None
            pts[4] = pts[0]  # P + P in the first stage of the even half
        section = bn254.points_to_limbs(group, pts)  # the last input missing, as tauG1's extra level
        inp = level_input(section, p, group)
        halves = []
        for b in (0, 1):
            got = gpu_gf.half_level_gpu(group, inp[b::2])
            assert np.array_equal(got, cpu_gf.half_level(group, inp[b::2])), (p, b)
            halves.append(got)
        half = n // 2
        level = np.zeros((n, group.limbs), dtype=np.uint32)
        for first, end in ((0, half), (0, half // 2 or 1), (half // 2, half)):
            if first == end:
                continue
            got = gpu_gf.column_stage_gpu(group, halves[0][first:end], halves[1][first:end], p, first)
            assert np.array_equal(got, cpu_gf.column_stage(group, halves[0][first:end], halves[1][first:end], p, first)), (p, first)
            level[first:end], level[half + first : half + end] = got[: end - first], got[end - first :]
        assert np.array_equal(level, cpu_gf.ifft_level(group, inp)), p


@pytest.mark.parametrize("group", GROUPS)
def test_ifft_of_constant_sequence(gpu_gf, group: bn254.Group) -> None:
    """τ = 1: all inputs G, outputs G then infinities (infinity-producing additions everywhere)."""
    got = bn254.points_from_limbs(group, gpu_gf.ifft_level_gpu(group, bn254.points_to_limbs(group, [group.generator] * 8)))
    assert got == [group.generator] + [None] * 7


@pytest.mark.parametrize("group", GROUPS)
def test_coset_level_matches_cpu(gpu_gf, group: bn254.Group) -> None:
    rng = random.Random()
    for k in (1, 2, 3):
        pts = _random_points(group, rng, (2 << k) - 1) + [None]
        limbs = bn254.points_to_limbs(group, pts)
        got = gpu_gf.coset_level_gpu(group, limbs, k, bn254.FR_SHIFT)
        assert np.array_equal(got, cpu_gf.coset_level(group, limbs, k, bn254.FR_SHIFT)), k


def test_prepare_pot4_through_emulated_gpu(gpu_gf, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """The whole prepare with backend='gpu' (emulated kernels): byte-identical to snarkjs's file."""
    import distprove.backends.gpu
    from distprove.ptau import prepare

    monkeypatch.setattr(distprove.backends.gpu, "available", lambda: True)

    out = tmp_path / "pot4_gpu.ptau"
    prepare(MINI / "pot4_0002.ptau", out, backend="gpu")
    assert out.read_bytes() == (MINI / "pot4_final.ptau").read_bytes()


def test_blocked_prepare_pot4_through_emulated_gpu(gpu_gf, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """A Dask prepare (in-process workers) with backend='gpu' and every level from 4 points blocked:
    halves and column stages on the emulated kernels, byte-identical to snarkjs's file."""
    import dask.config
    from distributed import Client, LocalCluster

    import distprove.backends.gpu
    from distprove.ptau import prepare

    monkeypatch.setattr(distprove.backends.gpu, "available", lambda: True)
    calls: list[str] = []
    for name in ("half_level_gpu", "column_stage_gpu"):
        real = getattr(gpu_gf, name)
        monkeypatch.setattr(gpu_gf, name, lambda *a, _real=real, _name=name: calls.append(_name) or _real(*a))
    out = tmp_path / "pot4_gpu_blocked.ptau"
    with LocalCluster(n_workers=2, threads_per_worker=1, processes=False, dashboard_address=None) as cluster, \
            Client(cluster) as client, dask.config.set({"distprove.ptau.block-points": 4}):
        prepare(MINI / "pot4_0002.ptau", out, backend="gpu", client=client)
    assert out.read_bytes() == (MINI / "pot4_final.ptau").read_bytes()
    assert calls.count("half_level_gpu") == 2 * 13  # tauG1 levels 2..5, the other sections 2..4
    assert calls.count("column_stage_gpu") >= 13
