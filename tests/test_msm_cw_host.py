"""Host-compiled checks of the constant-work MSM kernels (curve.cuh Proj<F>, kernels/msm_cw.cu).

The same approach as tests/test_kernels_host.py, whose MSM emulation shim this file extends: the
kernel sources compile as host C++ with a small CUDA shim (blocks one after another, threads of
a block that synchronises as OS threads), and the real host driver
distprove/backends/gpu/msm.py runs against them with numpy standing in for CuPy, here with
``constant_work=True``. Checked against bn254.py (complete formulas), the CPU backend in both
modes and a brute-force sum of digit multiples, on fresh random inputs incl. 0, 1, r - 1, equal
scalars and infinity bases. Skipped when no C++ compiler is found.
"""

from __future__ import annotations

import ctypes
import random
import re
import shutil
import subprocess
import sys

import numpy as np
import pytest

from distprove import bn254
from distprove.backends.cpu.msm import msm_windows as cpu_msm_windows
from distprove.bn254 import R
from distprove.stages.msm import combine, num_windows, signed_digits_array
from conftest import host_cupy
from test_kernels_host import EMU_SHIM, KERNELS, _dec_xyzz, _EmuModule, _enc_xyzz, _points

CW_SHIM = EMU_SHIM + r"""
#include "msm_cw.cu"
EMU(msm_count_cw, false, (s, cnt, n, c, lo, nw, nb, d), const u32* s, u32* cnt, u32 n, u32 c, u32 lo, u32 nw,
    u32 nb, u32 d)
EMU(msm_scatter_cw, false, (s, cur, e, n, c, lo, nw, nb, d), const u32* s, u32* cur, MsmEntry* e, u32 n, u32 c,
    u32 lo, u32 nw, u32 nb, u32 d)
#define EMU_CW_GROUP(G, F)                                                                                \
    EMU(msm_clear_cw_##G, false, (b, rows), Xyzz<F>* b, u32 rows)                                         \
    EMU(msm_fold_cw_##G, false, (ir, ip, m, len, g, b, orr, op), const u32* ir, const Xyzz<F>* ip, u32 m, \
        u32 len, u32 g, Xyzz<F>* b, u32* orr, Xyzz<F>* op)                                                \
    EMU(msm_reduce_cw_##G, true, (b, nb, seg, p), const Xyzz<F>* b, u32 nb, u32 seg, Xyzz<F>* p)          \
    EMU(msm_sum_groups_cw_##G, true, (i, cnt, o), const Xyzz<F>* i, u32 cnt, Xyzz<F>* o)
EMU_CW_GROUP(g1, Fq)
EMU_CW_GROUP(g2, Fq2)

// Proj<F> point operations through XYZZ rows: 0 add, 1 dbl, 2 mul_u32, 3 xyzz -> proj -> xyzz.
template <typename F>
static void run_proj(int op, const Xyzz<F>* p, const Xyzz<F>* q, const u32* k, Xyzz<F>* out, int n) {
    for (int i = 0; i < n; i++) {
        Proj<F> a = proj_from_xyzz_t(p[i]), r;
        switch (op) {
            case 0: r = pt_add(a, proj_from_xyzz_t(q[i])); break;
            case 1: r = pt_dbl(a); break;
            case 2: r = pt_mul_u32(a, k[i]); break;
            default: r = a; break;
        }
        out[i] = xyzz_from_proj_t(r);
    }
}
// Raw projective coordinates in and out (for inputs that are no XYZZ image, e.g. (0 : Y : 0)).
template <typename F>
static void run_proj_raw(int op, const Proj<F>* p, const Proj<F>* q, Proj<F>* out, int n) {
    for (int i = 0; i < n; i++) out[i] = op == 0 ? pt_add(p[i], q[i]) : pt_dbl(p[i]);
}
extern "C" void proj_op(int group, int op, const void* p, const void* q, const u32* k, void* out, int n) {
    if (group == 1) run_proj<Fq>(op, (const XyzzG1*)p, (const XyzzG1*)q, k, (XyzzG1*)out, n);
    else run_proj<Fq2>(op, (const XyzzG2*)p, (const XyzzG2*)q, k, (XyzzG2*)out, n);
}
extern "C" void proj_raw_op(int group, int op, const void* p, const void* q, void* out, int n) {
    if (group == 1) run_proj_raw<Fq>(op, (const ProjG1*)p, (const ProjG1*)q, (ProjG1*)out, n);
    else run_proj_raw<Fq2>(op, (const ProjG2*)p, (const ProjG2*)q, (ProjG2*)out, n);
}
"""


@pytest.fixture(scope="module")
def cw_lib(tmp_path_factory: pytest.TempPathFactory) -> ctypes.CDLL:
    cxx = next((shutil.which(c) for c in ("c++", "g++", "clang++") if shutil.which(c)), None)
    if cxx is None:
        pytest.skip("no C++ compiler to build the constant-work emulation")
    d = tmp_path_factory.mktemp("msm_cw_emu")
    src = d / "emu_cw.cpp"
    src.write_text(CW_SHIM)
    so = d / "emu_cw.so"
    cmd = [cxx, "-O1", "-std=c++17", "-shared", "-fPIC", "-pthread", "-I", str(KERNELS), str(src), "-o", str(so)]
    res = subprocess.run(cmd, capture_output=True, text=True)
    assert res.returncode == 0, res.stderr[-4000:]
    return ctypes.CDLL(str(so))


def _ptr(a: np.ndarray) -> ctypes.c_void_p:
    return ctypes.c_void_p(a.ctypes.data)


# --- complete projective formulas of curve.cuh --------------------------------------------


def _proj_op(lib, group, op: int, p: np.ndarray, q: np.ndarray, k: np.ndarray | None = None) -> list:
    out = np.full_like(p, 0xDEADBEEF)
    k = np.zeros(p.shape[0], dtype=np.uint32) if k is None else k
    lib.proj_op(1 if group is bn254.G1 else 2, op, _ptr(p), _ptr(q), _ptr(k), _ptr(out), ctypes.c_int(p.shape[0]))
    return _dec_xyzz(group, out)


@pytest.mark.parametrize("group", [bn254.G1, bn254.G2], ids=["G1", "G2"])
def test_proj_ops_match_python(cw_lib, group: bn254.Group) -> None:
    rng = random.Random()
    pts = _points(group, rng, 12)
    a, b = pts[:6], pts[6:]
    lhs = a + [a[0], a[1], None, a[2], None]
    rhs = b + [a[0], bn254.neg(group, a[1]), b[0], None, None]
    p, q = _enc_xyzz(group, lhs, rng), _enc_xyzz(group, rhs, rng)
    assert _proj_op(cw_lib, group, 0, p, q) == [bn254.add(group, x, y) for x, y in zip(lhs, rhs)]
    assert _proj_op(cw_lib, group, 1, p, q) == [bn254.add(group, x, x) for x in lhs]
    assert _proj_op(cw_lib, group, 3, p, q) == lhs
    ks = [0, 1, 2, 3, (1 << 23) - 1, 1 << 21] + [rng.randrange(1 << 24) for _ in range(5)]
    got = _proj_op(cw_lib, group, 2, p, q, np.array(ks, dtype=np.uint32))
    assert got == [bn254.mul(group, x, kk) if x is not None else None for x, kk in zip(lhs, ks)]


def _enc_proj(group: bn254.Group, pts: list) -> np.ndarray:
    words: list[int] = []
    for p in pts:
        for v in p:
            words.extend([bn254.fq_to_mont(v)] if group is bn254.G1 else [bn254.fq_to_mont(v[0]), bn254.fq_to_mont(v[1])])
    return bn254.limbs_from_ints(words).reshape(len(pts), -1)


def _dec_proj(group: bn254.Group, rows: np.ndarray) -> list:
    vals = [bn254.fq_from_mont(v) for v in bn254.ints_from_limbs(rows.reshape(-1, 8))]
    if group is bn254.G2:
        vals = [(vals[i], vals[i + 1]) for i in range(0, len(vals), 2)]
    return [tuple(vals[i : i + 3]) for i in range(0, len(vals), 3)]


@pytest.mark.parametrize("group", [bn254.G1, bn254.G2], ids=["G1", "G2"])
def test_proj_raw_coordinates_match_bn254(cw_lib, group: bn254.Group) -> None:
    """Same coordinates as bn254.proj_add / proj_double on scaled inputs, identities (0 : Y : 0) included."""
    rng = random.Random()
    f = group.f
    pts = _points(group, rng, 6) + [None, None]

    def scaled(p) -> tuple:
        z = rng.randrange(1, bn254.Q) if group is bn254.G1 else (rng.randrange(bn254.Q), rng.randrange(1, bn254.Q))
        x, y, w = bn254.to_projective(group, p)
        return (f.mul(x, z), f.mul(y, z), f.mul(w, z))

    lhs = [scaled(p) for p in pts]
    rhs = [scaled(p) for p in reversed(pts)]
    rhs[0] = scaled(pts[0])  # P + P in other coordinates
    n = len(lhs)
    for op, ref in ((0, lambda x, y: bn254.proj_add(group, x, y)), (1, lambda x, y: bn254.proj_double(group, x))):
        p, q = _enc_proj(group, lhs), _enc_proj(group, rhs)
        out = np.full_like(p, 0xDEADBEEF)
        cw_lib.proj_raw_op(1 if group is bn254.G1 else 2, op, _ptr(p), _ptr(q), _ptr(out), ctypes.c_int(n))
        assert _dec_proj(group, out) == [ref(x, y) for x, y in zip(lhs, rhs)]


# --- the constant-work pipeline, emulated ----------------------------------------------------


@pytest.fixture()
def emulated_cw(cw_lib, monkeypatch: pytest.MonkeyPatch):
    """distprove.backends.gpu.msm with numpy as 'cupy' and the emulated kernels; small geometry."""
    import distprove.backends.gpu.msm as gm

    emu = _EmuModule(cw_lib)
    fake = host_cupy()
    monkeypatch.setitem(sys.modules, "cupy", fake)
    monkeypatch.setattr(gm, "_module", lambda: emu)
    monkeypatch.setattr(gm, "_cw_module", lambda: emu)
    monkeypatch.setattr(gm, "SLICE_LEN", {"G1": 4, "G2": 4})
    monkeypatch.setattr(gm, "FOLD_LEN", 4)
    monkeypatch.setattr(gm, "FOLD_MIN", 4)
    monkeypatch.setattr(gm, "TREE_THREADS", 8)
    monkeypatch.setattr(gm, "REDUCE_SEG", 2)
    return gm


def _case(group: bn254.Group, n: int, pattern: str, rng: random.Random) -> tuple[list, list, np.ndarray]:
    """(affine bases, scalars, limbs): bases from a 16-point table plus infinity, scalars by pattern."""
    table = _points(group, rng, 16) + [None]
    bases = [table[rng.randrange(len(table))] for _ in range(n)]
    specials = [0, 1, R - 1, 2, rng.randrange(R)]
    if pattern == "equal":
        scal = [specials[-1]] * n
    elif pattern == "bits":  # witness-like: mostly 0 and 1
        scal = [rng.choice([0, 0, 0, 1, 1, rng.randrange(R)]) for _ in range(n)]
    elif pattern == "zero":
        scal = [0] * n
    else:
        scal = [specials[i] if i < len(specials) else rng.choice(specials + [rng.randrange(R)] * 4)
                for i in range(n)]
    return bases, scal, bn254.limbs_from_ints(scal)


def _brute(group: bn254.Group, bases: list, limbs: np.ndarray, c: int, lo: int, hi: int) -> list:
    digits = signed_digits_array(limbs, c)
    out = []
    for w in range(lo, hi):
        acc = bn254.to_jacobian(group, None)
        for i, p in enumerate(bases):
            d = int(digits[i, w])
            if d:
                acc = bn254.jac_add(group, acc, bn254.jac_mul(group, bn254.to_jacobian(group, p), d))
        out.append(bn254.to_affine(group, acc))
    return out


@pytest.mark.parametrize(
    "group,n,c,lo,hi,pattern,dummy",
    [
        (bn254.G1, 1, 5, 0, 52, "mixed", 1),
        (bn254.G1, 40, 4, 0, 64, "mixed", 4),
        (bn254.G1, 60, 2, 3, 9, "bits", 32),
        (bn254.G1, 150, 6, 0, 5, "equal", 2),
        (bn254.G1, 120, 10, 0, 26, "bits", 8),
        (bn254.G1, 33, 3, 0, 86, "zero", 4),
        (bn254.G2, 30, 7, 0, 37, "mixed", 4),
        (bn254.G2, 50, 5, 2, 6, "bits", 1),
    ],
    ids=lambda v: v.name if isinstance(v, bn254.Group) else str(v),
)
def test_cw_pipeline_matches_cpu_and_brute_force(emulated_cw, monkeypatch, group, n, c, lo, hi, pattern, dummy):
    monkeypatch.setattr(emulated_cw, "DUMMY_ROWS", dummy)
    rng = random.Random()
    bases, scal, limbs = _case(group, n, pattern, rng)
    limb_bases = bn254.points_to_limbs(group, bases)
    got = emulated_cw.msm_windows(group, limb_bases, limbs, c, lo, hi, scratch=emulated_cw.MsmScratch(),
                                  constant_work=True)
    assert got == _brute(group, bases, limbs, c, lo, hi)
    assert got == cpu_msm_windows(group, bases, limbs, c, lo, hi, constant_work=True)
    assert got == cpu_msm_windows(group, bases, limbs, c, lo, hi)
    normal = emulated_cw.msm_windows(group, limb_bases, limbs, c, lo, hi, scratch=emulated_cw.MsmScratch())
    assert got == normal
    if (lo, hi) == (0, num_windows(c)):
        total = bn254.to_jacobian(group, None)
        for p, s in zip(bases, scal):
            total = bn254.jac_add(group, total, bn254.jac_mul(group, bn254.to_jacobian(group, p), s))
        assert combine(group, dict(enumerate(got)), c) == bn254.to_affine(group, total)


def test_cw_scratch_reuse_after_normal_call(emulated_cw) -> None:
    """Buffers left dirty by a normal-mode call (only ZZ of buckets cleared there) do not leak in."""
    rng = random.Random()
    group, c = bn254.G1, 4
    scratch = emulated_cw.MsmScratch()
    bases, _, limbs = _case(group, 70, "mixed", rng)
    limb_bases = bn254.points_to_limbs(group, bases)
    first = emulated_cw.msm_windows(group, limb_bases, limbs, c, 0, num_windows(c), scratch=scratch)
    bases2, _, limbs2 = _case(group, 70, "bits", rng)
    got = emulated_cw.msm_windows(group, bn254.points_to_limbs(group, bases2), limbs2, c, 0, num_windows(c),
                                  scratch=scratch, constant_work=True)
    assert got == cpu_msm_windows(group, bases2, limbs2, c, 0, num_windows(c))
    assert first == cpu_msm_windows(group, bases, limbs, c, 0, num_windows(c))


@pytest.mark.parametrize("pattern", ["zero", "bits", "mixed", "equal"])
def test_cw_emits_every_scalar_in_every_window(cw_lib, pattern: str) -> None:
    """msm_count_cw: each window gets exactly n entries whatever the scalars; nonzero digits land
    in the rows of msm.cu's msm_count, zero digits in the window's dummy rows (i mod dummy)."""
    rng = random.Random()
    n, c, lo, nw, dummy = 90, 5, 1, 40, 4
    nb = 1 << (c - 1)
    _, scal, limbs = _case(bn254.G1, n, pattern, rng)
    rows = nw * nb + nw * dummy
    counts = np.zeros(rows, dtype=np.uint32)
    u = ctypes.c_uint32
    cw_lib.host_msm_count_cw(u(1), u(1), u(n), _ptr(limbs), _ptr(counts), u(n), u(c), u(lo), u(nw), u(nb), u(dummy))
    digits = signed_digits_array(limbs, c)[:, lo : lo + nw]
    expect = np.zeros(rows, dtype=np.int64)
    for i in range(n):
        for wi in range(nw):
            d = int(digits[i, wi])
            expect[wi * nb + abs(d) - 1 if d else nw * nb + wi * dummy + i % dummy] += 1
    assert counts.tolist() == expect.tolist()
    per_window = counts[: nw * nb].reshape(nw, nb).sum(axis=1) + counts[nw * nb :].reshape(nw, dummy).sum(axis=1)
    assert per_window.tolist() == [n] * nw
    normal = np.zeros(nw * nb, dtype=np.uint32)
    cw_lib.host_msm_count(u(1), u(1), u(n), _ptr(limbs), _ptr(normal), u(n), u(c), u(lo), u(nw), u(nb))
    small = np.array([s in (0, 1) for s in scal])
    big = np.nonzero(~small)[0]
    ref = np.zeros(nw * nb, dtype=np.int64)
    for i in big:
        for wi in range(nw):
            d = int(digits[i, wi])
            if d:
                ref[wi * nb + abs(d) - 1] += 1
    assert normal.tolist() == ref.tolist()  # the normal mode still skips 0 and 1


class _Recorder(_EmuModule):
    """The emulated module, noting every kernel name the host driver asks for."""

    def __init__(self, lib: ctypes.CDLL) -> None:
        super().__init__(lib)
        self.names: set[str] = set()

    def get_function(self, name: str):
        self.names.add(name)
        return super().get_function(name)


def test_cw_module_build_has_every_kernel_the_host_launches(cw_lib, monkeypatch, tmp_path) -> None:
    """The msm_cw module as the loader builds it (compile.MODULES + MODULE_OPTIONS) compiles
    with nvcc -arch=sm_90 -ptx, exports every kernel the host driver launches in constant-work
    mode (recorded on the emulation, G1 and G2, lo = 0 and lo > 0), and leaves out the default
    mode's point kernels."""
    import distprove.backends.gpu.msm as gm
    from distprove.backends.gpu.compile import BASE_OPTIONS, MODULE_OPTIONS, MODULES, entry_points, module_source

    nvcc = shutil.which("nvcc")
    if nvcc is None:
        pytest.skip("nvcc not installed")
    rec = _Recorder(cw_lib)
    fake = host_cupy()
    monkeypatch.setitem(sys.modules, "cupy", fake)
    monkeypatch.setattr(gm, "_cw_module", lambda: rec)
    rng = random.Random()
    for group, lo in ((bn254.G1, 0), (bn254.G2, 1)):
        bases, _, limbs = _case(group, 9, "mixed", rng)
        gm.msm_windows(group, bn254.points_to_limbs(group, bases), limbs, 4, lo, 5, scratch=gm.MsmScratch(),
                       constant_work=True)
    src = tmp_path / "msm_cw.cu"
    src.write_text(module_source(MODULES["msm_cw"]))
    ptx = tmp_path / "msm_cw.ptx"
    res = subprocess.run([nvcc, "-arch=sm_90", "-ptx", *BASE_OPTIONS, *MODULE_OPTIONS["msm_cw"], "-o", str(ptx), str(src)],
                         capture_output=True, text=True, timeout=900)
    assert res.returncode == 0, res.stderr[-4000:]
    exported = set(re.findall(r"\.visible \.entry (\w+)\(", ptx.read_text()))
    assert rec.names <= exported, rec.names - exported
    assert entry_points(src.read_text())[0] in exported  # the loader probes the first one
    for g in ("g1", "g2"):
        assert not {f"msm_{k}_{g}" for k in ("fold", "reduce", "ones", "sum_groups", "clear")} & exported
