"""Host-compiled checks of the CUDA field and curve code (distprove/kernels/field.cuh, curve.cuh).

The kernel headers compile as plain C++ (DP_INLINE is ``inline`` off the GPU), so a small
harness built with the system C++ compiler (or nvcc) runs the exact same arithmetic on the CPU
and is compared with distprove/bn254.py on fresh random inputs, edge values included. Skipped
when no compiler is found. (On the device the inline-PTX add/sub paths replace the portable
ones; tests/gpu/test_field_gpu.py covers those.)
"""

from __future__ import annotations

import ctypes
import dataclasses
import random
import shutil
import subprocess
from pathlib import Path

import numpy as np
import pytest

from distprove import bn254
from distprove.bn254 import Q, R

from conftest import HostStream, expected_digit_sort, host_cupy

KERNELS = Path(__file__).resolve().parents[1] / "distprove" / "kernels"

HARNESS = r"""
#include "field.cuh"
#include "curve.cuh"

template <typename T> static T ld(const u32* p) { T r; __builtin_memcpy(&r, p, sizeof(T)); return r; }
template <typename T> static void st(u32* p, const T& v) { __builtin_memcpy(p, &v, sizeof(T)); }

template <typename T, typename Ops>
static void run_field(int op, const u32* a, const u32* b, u32* out, int n, Ops ops) {
    const int w = sizeof(T) / 4;
    for (int i = 0; i < n; i++) {
        T x = ld<T>(a + w * i), y = ld<T>(b + w * i), r;
        switch (op) {
            case 0: r = ops.add(x, y); break;
            case 1: r = ops.sub(x, y); break;
            case 2: r = ops.neg(x); break;
            case 3: r = ops.mul(x, y); break;
            case 4: r = ops.sqr(x); break;
            case 5: r = ops.zero(); r.v_first() = ops.eq(x, y); break;
            case 6: r = ops.zero(); r.v_first() = ops.is_zero(x); break;
            case 7: r = ops.to_mont(x); break;
            case 8: r = ops.from_mont(x); break;
            default: r = ops.one(); break;
        }
        st(out + w * i, r);
    }
}
"""

# Field dispatch tables for the harness (one struct per field wraps its free functions).
HARNESS += r"""
struct FrW { Fr f; u32& v_first() { return f.v[0]; } };
struct FqW { Fq f; u32& v_first() { return f.v[0]; } };
struct Fq2W { Fq2 f; u32& v_first() { return f.c0.v[0]; } };
#define OPS(NAME, W, P)                                                                        \
    struct NAME {                                                                              \
        W add(W a, W b) { return W{P##_add(a.f, b.f)}; }                                       \
        W sub(W a, W b) { return W{P##_sub(a.f, b.f)}; }                                       \
        W neg(W a) { return W{P##_neg(a.f)}; }                                                 \
        W mul(W a, W b) { return W{P##_mul(a.f, b.f)}; }                                       \
        W sqr(W a) { return W{P##_sqr(a.f)}; }                                                 \
        bool eq(W a, W b) { return P##_eq(a.f, b.f); }                                         \
        bool is_zero(W a) { return P##_is_zero(a.f); }                                         \
        W zero() { return W{P##_zero()}; }                                                     \
        W one() { return W{P##_one()}; }                                                       \
        W to_mont(W a) { return W{to_mont_##P(a.f)}; }                                         \
        W from_mont(W a) { return W{from_mont_##P(a.f)}; }                                     \
    };
static Fr to_mont_fr(Fr a) { return fr_to_mont(a); }
static Fr from_mont_fr(Fr a) { return fr_from_mont(a); }
static Fq to_mont_fq(Fq a) { return fq_to_mont(a); }
static Fq from_mont_fq(Fq a) { return fq_from_mont(a); }
static Fq2 to_mont_fq2(Fq2 a) { Fq2 r; r.c0 = fq_to_mont(a.c0); r.c1 = fq_to_mont(a.c1); return r; }
static Fq2 from_mont_fq2(Fq2 a) { Fq2 r; r.c0 = fq_from_mont(a.c0); r.c1 = fq_from_mont(a.c1); return r; }
OPS(FrOps, FrW, fr)
OPS(FqOps, FqW, fq)
OPS(Fq2Ops, Fq2W, fq2)

extern "C" void fr_shoup(const u32* x, const u32* w, const u32* wq, u32* out, int n) {
    for (int i = 0; i < n; i++) st(out + 8 * i, fr_mul_shoup(ld<Fr>(x + 8 * i), ld<Fr>(w + 8 * i), ld<Fr>(wq + 8 * i)));
}

extern "C" void fr_lazy(const u32* a, const u32* b, u32* out, int n) {
    for (int i = 0; i < n; i++) st(out + 8 * i, fr_mul_lazy(ld<Fr>(a + 8 * i), ld<Fr>(b + 8 * i)));
}

extern "C" void fr_split(const u32* x, const FrSplit* w, u32* out, int n, int lazy) {
    for (int i = 0; i < n; i++)
        st(out + 8 * i, fr_mul_split(ld<Fr>(x + 8 * i), w[i], lazy == 0));
}

extern "C" void field_op(int field, int op, const u32* a, const u32* b, u32* out, int n) {
    if (field == 0) run_field<FrW>(op, a, b, out, n, FrOps());
    else if (field == 1) run_field<FqW>(op, a, b, out, n, FqOps());
    else run_field<Fq2W>(op, a, b, out, n, Fq2Ops());
}

template <typename F>
static void run_curve(int op, const u32* p, const u32* q, const u32* k, u32* out, int n) {
    const int wp = sizeof(Xyzz<F>) / 4, wa = sizeof(Aff<F>) / 4;
    for (int i = 0; i < n; i++) {
        Xyzz<F> x = ld<Xyzz<F>>(p + wp * i), r;
        switch (op) {
            case 0: r = pt_madd(x, ld<Aff<F>>(q + wa * i)); break;
            case 1: r = pt_add(x, ld<Xyzz<F>>(q + wp * i)); break;
            case 2: r = pt_dbl(x); break;
            case 3: r = pt_mul_u32(x, k[i]); break;
            case 4: r = pt_from_aff(aff_neg(ld<Aff<F>>(q + wa * i))); break;
            default: r = pt_neg(x); break;
        }
        st(out + wp * i, r);
    }
}

extern "C" void curve_op(int group, int op, const u32* p, const u32* q, const u32* k, u32* out, int n) {
    if (group == 1) run_curve<Fq>(op, p, q, k, out, n);
    else run_curve<Fq2>(op, p, q, k, out, n);
}
"""

FIELD_IDS = {"fr": 0, "fq": 1, "fq2": 2}
FIELD_OPS = {"add": 0, "sub": 1, "neg": 2, "mul": 3, "sqr": 4, "eq": 5, "is_zero": 6, "to_mont": 7,
             "from_mont": 8, "one": 9}
CURVE_OPS = {"madd": 0, "add": 1, "dbl": 2, "mul_u32": 3, "from_neg_aff": 4, "neg": 5}


def _compiler() -> list[str] | None:
    for cxx in ("c++", "g++", "clang++"):
        path = shutil.which(cxx)
        if path:
            return [path, "-O1", "-std=c++17", "-shared", "-fPIC"]
    nvcc = shutil.which("nvcc")
    if nvcc:
        return [nvcc, "-O1", "-std=c++17", "-shared", "-Xcompiler", "-fPIC", "-x", "cu"]
    return None


FIELD_BUILDS = {"default": [], "f64_mul": ["-DDP_F64_MUL"]}
"""Arithmetic builds of field.cuh the harness is made in: CIOS products, and products and squares
on the FP64 pipe (the host models its round-toward-zero product exactly with integers)."""


@pytest.fixture(scope="module", params=list(FIELD_BUILDS))
def lib(request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory) -> ctypes.CDLL:
    cmd = _compiler()
    if cmd is None:
        pytest.skip("no C++ compiler or nvcc to build the host harness")
    d = tmp_path_factory.mktemp("kernels_host")
    src = d / "harness.cpp"
    src.write_text(HARNESS)
    so = d / "harness.so"
    opts = FIELD_BUILDS[request.param]
    res = subprocess.run(cmd + opts + ["-I", str(KERNELS), str(src), "-o", str(so)], capture_output=True, text=True)
    assert res.returncode == 0, res.stderr
    return ctypes.CDLL(str(so))


def _ptr(a: np.ndarray) -> ctypes.c_void_p:
    return a.ctypes.data_as(ctypes.c_void_p)


# --- encoding helpers (Python ints <-> limb rows) -----------------------------------------


def _elem_words(field: str) -> int:
    return 16 if field == "fq2" else 8


def _enc(field: str, vals: list, mont: bool = True) -> np.ndarray:
    """Encode field values (ints or (c0, c1) tuples) as limb rows, in Montgomery form by default."""
    mod = R if field == "fr" else Q
    flat = [c for v in vals for c in (v if field == "fq2" else (v,))]
    if mont:
        flat = [c * (1 << 256) % mod for c in flat]
    return bn254.limbs_from_ints(flat).reshape(len(vals), _elem_words(field))


def _dec(field: str, rows: np.ndarray, mont: bool = True) -> list:
    mod = R if field == "fr" else Q
    inv = pow(1 << 256, -1, mod)
    flat = bn254.ints_from_limbs(rows.reshape(-1, 8))
    for c in flat:
        assert c < mod, "result not fully reduced"
    if mont:
        flat = [c * inv % mod for c in flat]
    if field == "fq2":
        return [(flat[2 * i], flat[2 * i + 1]) for i in range(len(flat) // 2)]
    return flat


def _field_op(lib: ctypes.CDLL, field: str, op: str, a: np.ndarray, b: np.ndarray) -> np.ndarray:
    out = np.full_like(a, 0xDEADBEEF)
    lib.field_op(FIELD_IDS[field], FIELD_OPS[op], _ptr(a), _ptr(b), _ptr(out), ctypes.c_int(a.shape[0]))
    return out


def _random_values(field: str, rng: random.Random, count: int) -> list:
    mod = R if field == "fr" else Q
    edge = [0, 1, 2, mod - 1, mod - 2, (mod - 1) // 2, (1 << 255) % mod, (1 << 254) % mod]
    base = edge + [rng.randrange(mod) for _ in range(count)]
    if field == "fq2":
        return [(x, base[(i * 7 + 3) % len(base)]) for i, x in enumerate(base)]
    return base


@pytest.mark.parametrize("field", ["fr", "fq", "fq2"])
def test_field_ops_match_python(lib: ctypes.CDLL, field: str) -> None:
    rng = random.Random()
    xs = _random_values(field, rng, 200)
    ys = list(reversed(xs))
    rng.shuffle(ys)
    ys[0] = xs[0]  # one equal pair for eq
    a, b = _enc(field, xs), _enc(field, ys)
    ops = bn254.FQ2_OPS if field == "fq2" else bn254.FQ_OPS
    if field == "fr":
        ops = dataclasses.replace(ops, add=lambda u, v: (u + v) % R, sub=lambda u, v: (u - v) % R,
                                  mul=lambda u, v: u * v % R, sqr=lambda u: u * u % R, neg=lambda u: -u % R)
    checks = {
        "add": lambda x, y: ops.add(x, y),
        "sub": lambda x, y: ops.sub(x, y),
        "neg": lambda x, y: ops.neg(x),
        "mul": lambda x, y: ops.mul(x, y),
        "sqr": lambda x, y: ops.sqr(x),
    }
    for op, ref in checks.items():
        got = _dec(field, _field_op(lib, field, op, a, b))
        assert got == [ref(x, y) for x, y in zip(xs, ys)], op
    eq = _field_op(lib, field, "eq", a, b)[:, 0]
    assert list(eq) == [int(x == y) for x, y in zip(xs, ys)]
    isz = _field_op(lib, field, "is_zero", a, b)[:, 0]
    assert list(isz) == [int(ops.is_zero(x)) for x in xs]
    one = _dec(field, _field_op(lib, field, "one", a, b))
    assert one == [ops.one] * len(xs)
    # Montgomery conversions: standard -> Montgomery and back, checked against Python.
    std = _enc(field, xs, mont=False)
    to_m = _field_op(lib, field, "to_mont", std, std)
    assert _dec(field, to_m) == xs
    back = _field_op(lib, field, "from_mont", to_m, to_m)
    assert _dec(field, back, mont=False) == xs


def _twiddle_product_pairs(rng: random.Random) -> tuple[list[tuple[int, int]], list[int]]:
    """(x, w) pairs below r for the NTT's twiddle products: edge values against each other, random
    pairs, and every value against w^0, w^1, w^2047 of a 2^12-th root of unity (the NTT's table);
    and the values."""
    vals = _random_values("fr", rng, 300)
    pairs = [(x, y) for x in vals[:8] for y in vals[:8]]
    pairs += [(rng.randrange(R), rng.randrange(R)) for _ in range(2000)]
    w = pow(5, (R - 1) >> 12, R)
    pairs += [(x, pow(w, e, R)) for x in vals for e in (0, 1, 2047)]
    return pairs, vals


def test_fr_mul_shoup_matches_python(lib: ctypes.CDLL) -> None:
    """fr_mul_shoup(x, w, floor(w 2^256 / r)) = x w mod r for x, w < r: edge values (0, 1, r - 1,
    values near 2^254, large quotients), random pairs, and every x against the twiddle-like w."""
    pairs, _ = _twiddle_product_pairs(random.Random())
    xs, ws = [x for x, _ in pairs], [y for _, y in pairs]
    enc = lambda v: bn254.limbs_from_ints(v)  # noqa: E731 (raw limbs: the product needs no Montgomery form)
    x, w_l, wq = enc(xs), enc(ws), enc([(y << 256) // R for y in ws])
    out = np.full_like(x, 0xDEADBEEF)
    lib.fr_shoup(_ptr(x), _ptr(w_l), _ptr(wq), _ptr(out), ctypes.c_int(len(pairs)))
    assert bn254.ints_from_limbs(out) == [a * b % R for a, b in pairs]


def test_fr_mul_split_matches_python(lib: ctypes.CDLL) -> None:
    """fr_mul_split(x, w split into 52-bit limbs) = x w 2^-256 mod r (the Montgomery product) for
    x, w < r: edge values, random pairs and the NTT's twiddles (gpu/ntt.py split_limbs); and
    without its final subtraction for x < 4r (ntt.cu's lazy butterflies): the same residue, below 2r."""
    from distprove.backends.gpu.ntt import split_limbs

    rng = random.Random()
    pairs, vals = _twiddle_product_pairs(rng)
    r_inv = pow(1 << 256, -1, R)
    wide = [4 * R - 1, 4 * R - 2, 3 * R, 2 * R, 2 * R - 1, R]
    lazy_pairs = pairs + [(x, y) for x in wide for y in vals[:8] + [R - 1]]
    lazy_pairs += [(rng.randrange(4 * R), rng.randrange(R)) for _ in range(2000)]
    for lazy, cases in ((0, pairs), (1, lazy_pairs)):
        x = bn254.limbs_from_ints([a for a, _ in cases])
        w_s = split_limbs([b for _, b in cases])
        out = np.full_like(x, 0xDEADBEEF)
        lib.fr_split(_ptr(x), _ptr(w_s), _ptr(out), ctypes.c_int(len(cases)), ctypes.c_int(lazy))
        got = bn254.ints_from_limbs(out)
        assert [g % R for g in got] == [a * b * r_inv % R for a, b in cases]
        assert max(got) < (2 * R if lazy else R)


def test_fr_mul_lazy_bound(lib: ctypes.CDLL) -> None:
    """fr_mul_lazy (each build's product without its final subtraction: ntt.cu's four-step
    products in the lazy NTT) returns a value below 2r congruent to a b 2^-256 for a, b < 2r and
    for a < 4r, b < r: edge values on both sides, and random ones."""
    rng = random.Random()
    vals = _random_values("fr", rng, 20)
    edge2 = [0, 1, R - 1, R, R + 1, 2 * R - 2, 2 * R - 1] + vals
    edge4 = [4 * R - 1, 4 * R - 2, 3 * R, 2 * R] + edge2
    pairs = [(a, b) for a in edge2 for b in edge2] + [(a, b) for a in edge4 for b in [0, 1, R - 1] + vals]
    pairs += [(rng.randrange(2 * R), rng.randrange(2 * R)) for _ in range(2000)]
    pairs += [(rng.randrange(4 * R), rng.randrange(R)) for _ in range(2000)]
    a = bn254.limbs_from_ints([x for x, _ in pairs])
    b = bn254.limbs_from_ints([y for _, y in pairs])
    out = np.full_like(a, 0xDEADBEEF)
    lib.fr_lazy(_ptr(a), _ptr(b), _ptr(out), ctypes.c_int(len(pairs)))
    got = bn254.ints_from_limbs(out)
    r_inv = pow(1 << 256, -1, R)
    assert [g % R for g in got] == [x * y * r_inv % R for x, y in pairs]
    assert max(got) < 2 * R


# --- curve ---------------------------------------------------------------------------------


def _rand_field(group: bn254.Group, rng: random.Random):
    if group is bn254.G1:
        return rng.randrange(1, Q)
    return (rng.randrange(Q), rng.randrange(1, Q))


def _points(group: bn254.Group, rng: random.Random, count: int) -> list:
    """count random points k_i*G (distinct, finite) built with a few ops."""
    g = group.generator
    step = bn254.mul(group, g, rng.randrange(1, R))
    acc = bn254.to_jacobian(group, bn254.mul(group, g, rng.randrange(1, R)))
    jac = []
    for _ in range(count):
        jac.append(acc)
        acc = bn254.jac_add_affine(group, acc, step)
    return bn254.batch_to_affine(group, jac)


def _fwords(group: bn254.Group, v) -> list[int]:
    return [bn254.fq_to_mont(v)] if group is bn254.G1 else [bn254.fq_to_mont(v[0]), bn254.fq_to_mont(v[1])]


def _enc_xyzz(group: bn254.Group, pts: list, rng: random.Random) -> np.ndarray:
    """Affine points as XYZZ with a random z (x z^2, y z^3, z^2, z^3); None -> all zero."""
    f = group.f
    words = []
    per = 4 if group is bn254.G1 else 8
    for p in pts:
        if p is None:
            words.extend([0] * per)
            continue
        z = _rand_field(group, rng)
        z2 = f.sqr(z)
        z3 = f.mul(z2, z)
        for v in (f.mul(p[0], z2), f.mul(p[1], z3), z2, z3):
            words.extend(_fwords(group, v))
    return bn254.limbs_from_ints(words).reshape(len(pts), 8 * per)


def _dec_xyzz(group: bn254.Group, rows: np.ndarray) -> list:
    from distprove.backends.gpu.msm import xyzz_to_affine

    for c in bn254.ints_from_limbs(rows.reshape(-1, 8)):
        assert c < Q, "coordinate not fully reduced"
    return xyzz_to_affine(group, rows)


def _curve_op(lib, group, op, p, q, k=None) -> np.ndarray:
    out = np.full((p.shape[0], 2 * group.limbs), 0xDEADBEEF, dtype=np.uint32)
    k = np.zeros(p.shape[0], dtype=np.uint32) if k is None else k
    gid = 1 if group is bn254.G1 else 2
    lib.curve_op(gid, CURVE_OPS[op], _ptr(p), _ptr(q), _ptr(k), _ptr(out), ctypes.c_int(p.shape[0]))
    return out


@pytest.mark.parametrize("group", [bn254.G1, bn254.G2], ids=["G1", "G2"])
def test_curve_ops_match_python(lib: ctypes.CDLL, group: bn254.Group) -> None:
    rng = random.Random()
    pts = _points(group, rng, 12)
    a, b = pts[:6], pts[6:]
    # Pairs covering: generic, P+P, P+(-P), infinity on either side, both infinity.
    lhs = a + [a[0], a[1], None, a[2], None]
    rhs = b + [a[0], bn254.neg(group, a[1]), b[0], None, None]
    expect = [bn254.add(group, x, y) for x, y in zip(lhs, rhs)]
    p = _enc_xyzz(group, lhs, rng)
    q_aff = bn254.points_to_limbs(group, rhs)
    assert _dec_xyzz(group, _curve_op(lib, group, "madd", p, q_aff)) == expect
    q_xyzz = _enc_xyzz(group, rhs, rng)
    assert _dec_xyzz(group, _curve_op(lib, group, "add", p, q_xyzz)) == expect
    assert _dec_xyzz(group, _curve_op(lib, group, "dbl", p, p)) == [bn254.add(group, x, x) for x in lhs]
    assert _dec_xyzz(group, _curve_op(lib, group, "neg", p, p)) == [bn254.neg(group, x) for x in lhs]
    assert _dec_xyzz(group, _curve_op(lib, group, "from_neg_aff", p, q_aff)) == [bn254.neg(group, y) for y in rhs]
    ks = [0, 1, 2, 3, (1 << 23) - 1, 1 << 21] + [rng.randrange(1 << 24) for _ in range(5)]
    k = np.array(ks, dtype=np.uint32)
    got = _dec_xyzz(group, _curve_op(lib, group, "mul_u32", p[: len(ks)], p[: len(ks)], k))
    assert got == [bn254.mul(group, x, kk) if x is not None else None for x, kk in zip(lhs, ks)]


# --- the whole MSM pipeline, emulated on the host ------------------------------------------
#
# msm.cu compiles as host C++ with a small shim (blocks run one after another; a block whose
# kernel uses __syncthreads runs its threads as OS threads with a std::barrier), and the real
# host driver distprove/backends/gpu/msm.py runs against it with numpy standing in for CuPy.
# This checks the counting sort, segmentation, fold, reduction and launch geometry in CI.

EMU_SHIM = r"""
#include <condition_variable>
#include <functional>
#include <mutex>
#include <thread>
#include <vector>
struct EmuDim { unsigned x, y, z; };
static thread_local EmuDim threadIdx, blockIdx;
static EmuDim blockDim, gridDim;
// A blocking (not spinning) barrier: the host may have far fewer cores than a block has threads.
struct EmuBarrier {
    std::mutex m;
    std::condition_variable cv;
    unsigned count, waiting = 0, phase = 0;
    explicit EmuBarrier(unsigned n) : count(n) {}
    void wait() {
        std::unique_lock<std::mutex> lock(m);
        unsigned my = phase;
        if (++waiting == count) { waiting = 0; phase++; cv.notify_all(); return; }
        cv.wait(lock, [&] { return phase != my; });
    }
};
static EmuBarrier* emu_barrier;
#define __global__
#define __shared__ static
inline void __syncthreads() { emu_barrier->wait(); }
inline unsigned atomicAdd(unsigned* p, unsigned v) { return __atomic_fetch_add(p, v, __ATOMIC_SEQ_CST); }
inline unsigned atomicSub(unsigned* p, unsigned v) { return __atomic_fetch_sub(p, v, __ATOMIC_SEQ_CST); }
#include "field.cuh"
#include "curve.cuh"
#include "msm.cu"
#include "msm_sort.cu"
#include "msm_affine.cu"
#include "msm_merged.cu"

static void emu_launch(unsigned gx, unsigned gy, unsigned bx, bool sync, const std::function<void()>& body) {
    gridDim = {gx, gy, 1};
    blockDim = {bx, 1, 1};
    for (unsigned y = 0; y < gy; y++)
        for (unsigned x = 0; x < gx; x++) {
            if (!sync) {
                blockIdx = {x, y, 0};
                for (unsigned t = 0; t < bx; t++) { threadIdx = {t, 0, 0}; body(); }
                continue;
            }
            EmuBarrier bar(bx);
            emu_barrier = &bar;
            std::vector<std::thread> threads;
            for (unsigned t = 0; t < bx; t++)
                threads.emplace_back([=, &body] { blockIdx = {x, y, 0}; threadIdx = {t, 0, 0}; body(); });
            for (auto& th : threads) th.join();
        }
}
#define EMU(name, sync, args, ...) \
    extern "C" void host_##name(unsigned gx, unsigned gy, unsigned bx, __VA_ARGS__) { \
        emu_launch(gx, gy, bx, sync, [&] { name args; }); }
EMU(msm_count, false, (s, cnt, n, c, lo, nw, nb), const u32* s, u32* cnt, u32 n, u32 c, u32 lo, u32 nw, u32 nb)
EMU(msm_scatter, false, (s, cur, e, n, c, lo, nw, nb), const u32* s, u32* cur, MsmEntry* e, u32 n, u32 c, u32 lo,
    u32 nw, u32 nb)
EMU(msm_sort_plan, true, (s, n, m, p), const u32* s, u32 n, u32 m, u32* p)
EMU(msm_count_sel, false, (p, s, cnt, n, c, lo, nw, nb), const u32* p, const u32* s, u32* cnt, u32 n, u32 c, u32 lo,
    u32 nw, u32 nb)
EMU(msm_scatter_sel, false, (p, s, cur, e, n, c, lo, nw, nb), const u32* p, const u32* s, u32* cur, MsmEntry* e,
    u32 n, u32 c, u32 lo, u32 nw, u32 nb)
EMU(msm_radix_digits, true, (pl, s, d, h, n, c, lo, nw, t, d1, ts, fl), const u32* pl, const u32* s, u32* d, u32* h,
    u32 n, u32 c, u32 lo, u32 nw, u32 t, u32 d1, u32 ts, u32 fl)
EMU(msm_radix_pass1, false, (pl, d, h, e, k, p, n, t, d1, ts), const u32* pl, const u32* d, const u32* h,
    const u32* e, u32* k, u32* p, u32 n, u32 t, u32 d1, u32 ts)
EMU(msm_radix_hist2, true, (pl, k, h1, e1, h2, t, d1, sh, d2, ts), const u32* pl, const u32* k, const u32* h1,
    const u32* e1, u32* h2, u32 t, u32 d1, u32 sh, u32 d2, u32 ts)
EMU(msm_radix_mid, false, (pl, k, p, h1, e1, hm, em, ko, po, t, d1, dm, ts), const u32* pl, const u32* k,
    const u32* p, const u32* h1, const u32* e1, const u32* hm, const u32* em, u32* ko, u32* po, u32 t, u32 d1,
    u32 dm, u32 ts)
EMU(msm_radix_pass2, false, (pl, k, p, h1, e1, h2, e2, en, cn, nb, t, d1, sh, d2, ts), const u32* pl, const u32* k,
    const u32* p, const u32* h1, const u32* e1, const u32* h2, const u32* e2, MsmEntry* en, u32* cn, u32 nb, u32 t,
    u32 d1, u32 sh, u32 d2, u32 ts)
EMU(msm_radix_flat_hist, true, (pl, d, tot, h, t, d1, ts), const u32* pl, const u32* d, u32 tot, u32* h, u32 t,
    u32 d1, u32 ts)
EMU(msm_radix_cursor, false, (pl, cn, cu, r), const u32* pl, const u32* cn, u32* cu, u32 r)
#define EMU_GROUP(G, F)                                                                                   \
    EMU(msm_precompute_##G, false, (b, n, c, w, t), const Aff<F>* b, u32 n, u32 c, u32 w, Aff<F>* t)       \
    EMU(msm_clear_##G, false, (b, rows), Xyzz<F>* b, u32 rows)                                            \
    EMU(msm_accumulate_##G, false, (e, bs, cur, cnt, rows, len, sl, b, sr, sp), const MsmEntry* e,        \
        const Aff<F>* bs, const u32* cur, const u32* cnt, u32 rows, u32 len, u32 sl, Xyzz<F>* b, u32* sr,  \
        Xyzz<F>* sp)                                                                                      \
    EMU(msm_fold_##G, false, (ir, ip, m, len, g, b, orr, op), const u32* ir, const Xyzz<F>* ip, u32 m,    \
        u32 len, u32 g, Xyzz<F>* b, u32* orr, Xyzz<F>* op)                                                \
    EMU(msm_reduce_seg_##G, false, (b, segs, seg, t, r), const Xyzz<F>* b, u32 segs, u32 seg, Xyzz<F>* t, \
        Xyzz<F>* r)                                                                                       \
    EMU(msm_reduce_win_##G, true, (t, r, nseg, sl, p), const Xyzz<F>* t, const Xyzz<F>* r, u32 nseg,       \
        u32 sl, Xyzz<F>* p)                                                                               \
    EMU(msm_ones_##G, true, (s, bs, n, o), const u32* s, const Aff<F>* bs, u32 n, Xyzz<F>* o)            \
    EMU(msm_sum_groups_##G, true, (i, cnt, o), const Xyzz<F>* i, u32 cnt, Xyzz<F>* o)                   \
    EMU(msm_combine_##G, false, (s, sp, c, g, wo, o), const Xyzz<F>* s, u32 sp, u32 c, u32 g, u32 wo,     \
        u32* o)                                                                                           \
    EMU(msm_pairs_##G, false, (pl, r, j, p, co, cn, rows, res, k0, k1, so), const u32* pl, u32 r,        \
        const PairJob* j, const Aff<F>* p, const u32* co, const u32* cn, u32 rows, u32 res, u32 k0, u32 k1, \
        Aff<F>* so)                                                                                       \
    EMU(msm_accumulate_sel_##G, false, (pl, s, rows, len, sl, res, tg, ml, b, sr, sp), const u32* pl,       \
        const PairSet* s, u32 rows, u32 len, u32 sl, u32 res, u32 tg, u32 ml, Xyzz<F>* b, u32* sr, Xyzz<F>* sp)
EMU(msm_pair_plan, false, (cu, cn, rows, mt, r, pl), const u32* cu, const u32* cn, u32 rows, const u32* mt, u32 r,
    u32* pl)
EMU(msm_pair_counts, false, (pl, r, ci, co, rows), const u32* pl, u32 r, const u32* ci, u32* co, u32 rows)
EMU(msm_pair_jobs, false, (pl, r, e, ci, cn, co, rows, j, eo), const u32* pl, u32 r, const MsmEntry* e,
    const u32* ci, const u32* cn, const u32* co, u32 rows, PairJob* j, MsmEntry* eo)
EMU_GROUP(g1, Fq)
EMU_GROUP(g2, Fq2)
"""


class _EmuModule:
    """Stands in for the cupy.RawModule of msm.cu: get_function returns a host launcher."""

    def __init__(self, lib: ctypes.CDLL) -> None:
        self.lib = lib

    def get_function(self, name: str):
        fn = getattr(self.lib, "host_" + name)

        def launch(grid: tuple, block: tuple, args: tuple, shared_mem: int = 0) -> None:
            gx, gy = grid[0], grid[1] if len(grid) > 1 else 1
            conv = [ctypes.c_void_p(a.ctypes.data) if isinstance(a, np.ndarray) else ctypes.c_uint32(int(a))
                    for a in args]
            fn(ctypes.c_uint32(gx), ctypes.c_uint32(gy), ctypes.c_uint32(block[0]), *conv)

        return launch


def _build_emu(tmp_path_factory: pytest.TempPathFactory, options: tuple[str, ...] = ()) -> "_EmuModule":
    """The MSM kernels built for the host emulation with extra preprocessor ``options``."""
    cxx = next((shutil.which(c) for c in ("c++", "g++", "clang++") if shutil.which(c)), None)
    if cxx is None:
        pytest.skip("no C++ compiler to build the MSM emulation")
    d = tmp_path_factory.mktemp("msm_emu")
    src = d / "emu.cpp"
    src.write_text(EMU_SHIM)
    so = d / "emu.so"
    cmd = [cxx, "-O1", "-std=c++17", "-shared", "-fPIC", "-pthread", *options, "-I", str(KERNELS), str(src),
           "-o", str(so)]
    res = subprocess.run(cmd, capture_output=True, text=True)
    assert res.returncode == 0, res.stderr
    return _EmuModule(ctypes.CDLL(str(so)))


@pytest.fixture(scope="module")
def emu(tmp_path_factory: pytest.TempPathFactory):
    return _build_emu(tmp_path_factory)


EMU_BUILDS = {"f64": ("-DDP_F64_MUL",)}
"""Builds of the MSM kernels that the pair-round emulations also run: the device's FP64 product
(the default emulation takes the host's CIOS)."""


@pytest.fixture(scope="module", params=list(EMU_BUILDS))
def emu_variant(request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory):
    return _build_emu(tmp_path_factory, EMU_BUILDS[request.param])


@pytest.fixture()
def emulated_msm(emu, monkeypatch: pytest.MonkeyPatch):
    """distprove.backends.gpu.msm with numpy as 'cupy' and the emulated kernels; small slices/folds."""
    return _emulate(emu, monkeypatch)


@pytest.fixture()
def emulated_msm_variant(emu_variant, monkeypatch: pytest.MonkeyPatch):
    """:func:`emulated_msm` on an EMU_BUILDS build."""
    return _emulate(emu_variant, monkeypatch)


def _emulate(emu, monkeypatch: pytest.MonkeyPatch):
    import sys

    import distprove.backends.gpu.msm as gm

    fake = host_cupy()
    monkeypatch.setitem(sys.modules, "cupy", fake)
    monkeypatch.setattr(gm, "_module", lambda: emu)
    monkeypatch.setattr(gm, "SLICE_LEN", {"G1": 4, "G2": 4})
    monkeypatch.setattr(gm, "FOLD_LEN", 4)
    monkeypatch.setattr(gm, "FOLD_MIN", 4)
    monkeypatch.setattr(gm, "TREE_THREADS", 8)
    monkeypatch.setattr(gm, "REDUCE_SEG", 2)
    monkeypatch.setattr(gm, "PAIR_THREADS", 4)
    monkeypatch.setattr(gm, "_sm_count", lambda: 1)
    monkeypatch.setattr(gm, "RADIX_THREADS", 1)  # host builds rank in thread 0, any tile size
    monkeypatch.setattr(gm, "RADIX_TILE", 7)
    return gm


def _emu_case(gm, group: bn254.Group, n: int, c: int, lo: int, hi: int, equal: bool, rng: random.Random) -> None:
    from distprove.stages.msm import combine, num_windows, signed_digits_array

    table = _points(group, rng, 16) + [None]
    idx = [rng.randrange(len(table)) for _ in range(n)]
    specials = [0, 1, R - 1, 2, rng.randrange(R)]
    if equal:
        scal = [specials[-1]] * n
    else:
        scal = [specials[i] if i < len(specials) else rng.choice(specials + [rng.randrange(R)] * 4)
                for i in range(n)]
    limbs = bn254.limbs_from_ints(scal)
    bases = bn254.points_to_limbs(group, [table[j] for j in idx])
    got = gm.msm_windows(group, bases, limbs, c, lo, hi, scratch=gm.MsmScratch())
    digits = signed_digits_array(limbs, c)
    expect = []
    for w in range(lo, hi):
        acc = bn254.to_jacobian(group, None)
        for i in range(n):
            d = int(digits[i, w])
            if d:
                acc = bn254.jac_add(group, acc, bn254.jac_mul(group, bn254.to_jacobian(group, table[idx[i]]), d))
        expect.append(bn254.to_affine(group, acc))
    assert got == expect
    if (lo, hi) == (0, num_windows(c)):
        total = bn254.to_jacobian(group, None)
        for i in range(n):
            total = bn254.jac_add(group, total, bn254.jac_mul(group, bn254.to_jacobian(group, table[idx[i]]), scal[i]))
        assert combine(group, dict(enumerate(got)), c) == bn254.to_affine(group, total)


@pytest.mark.parametrize(
    "group,n,c,lo,hi,equal",
    [
        (bn254.G1, 1, 5, 0, 52, False),
        (bn254.G1, 40, 4, 0, 64, False),
        (bn254.G1, 60, 2, 3, 9, False),
        (bn254.G1, 150, 6, 0, 5, True),
        (bn254.G1, 120, 10, 0, 26, False),
        (bn254.G2, 30, 7, 0, 37, False),
        (bn254.G2, 50, 5, 2, 6, True),
        (bn254.G2, 40, 9, 0, 29, False),
        (bn254.G1, 50, 21, 0, 2, False),  # the radix sort in three passes
    ],
    ids=lambda v: v.name if isinstance(v, bn254.Group) else str(v),
)
@pytest.mark.parametrize("sort", ["atomic", "radix"])
def test_msm_pipeline_emulated(emulated_msm, group, n, c, lo, hi, equal, sort) -> None:
    import dask

    with dask.config.set({"distprove.msm.sort": sort}):
        assert emulated_msm.sort_kind(n, c) == sort
        _emu_case(emulated_msm, group, n, c, lo, hi, equal, random.Random())


@pytest.mark.parametrize("n,c,lo,hi,tile,two_pass_bits", [
    (1, 3, 0, 85, 7, 18), (40, 4, 0, 64, 7, 18), (90, 7, 3, 20, 5, 18), (64, 11, 0, 24, 16, 18), (150, 19, 1, 14, 9, 18),
    (30, 2, 0, 127, 4, 18), (70, 21, 0, 3, 6, 18), (40, 24, 2, 5, 5, 18),  # three passes (keys of 20, 23 bits)
    (90, 7, 3, 20, 5, 1), (64, 11, 0, 24, 16, 1), (30, 3, 0, 85, 4, 1),  # three passes forced at narrow keys
])
def test_radix_sort_emulated(emulated_msm, monkeypatch: pytest.MonkeyPatch, n, c, lo, hi, tile, two_pass_bits) -> None:
    """msm_sort.cu's radix sort (host build, tiles of a few items so windows span several) leaves
    every row's entries in point order, and counts and cursor equal to the digits'; with the plan
    set to the counting sort, the same kernels queued give its entries (in some order in a row):
    all-equal, 0/1, r - 1 and random scalars. Keys wider than RADIX_MAX_KEY_BITS (here also
    lowered to force it) take three passes, the middle one as stable as the last."""
    gm = emulated_msm
    monkeypatch.setattr(gm, "RADIX_TILE", tile)
    monkeypatch.setattr(gm, "RADIX_MAX_KEY_BITS", two_pass_bits)
    rng = random.Random(n * c)
    same = rng.randrange(2, R)
    scal = [rng.choice([0, 1, R - 1, same, same, rng.randrange(R)]) for _ in range(n)]
    limbs = bn254.limbs_from_ints(scal)
    nw, rows = hi - lo, (hi - lo) << (c - 1)
    want_entries, want_counts, want_cursor = expected_digit_sort(limbs, c, lo, hi)
    for min_live, plan in ((0, 1), (1025, 0)):  # always the radix sort; never (no sample reaches 1025/1024)
        counts, cursor = np.zeros(rows, np.uint32), np.zeros(rows, np.uint32)
        entries = np.full(2 * nw * n, 0xDEADBEEF, np.uint32)
        bufs: dict = {}

        def take(name: str, count: int) -> np.ndarray:  # dirty scratch
            return bufs.setdefault(name, np.full(max(count, 1), 0xA5A5A5A5, np.uint32))

        gm._planned_sort(gm._module(), limbs, n, c, lo, nw, counts, cursor, entries, take, min_live)
        assert int(bufs["radix_plan"][0]) == plan
        assert ("radix_keysm" in bufs) == (c - 1 > two_pass_bits)
        got = entries.reshape(-1, 2)[: len(want_entries)]
        if not plan:
            got = got[np.lexsort((got[:, 1], got[:, 0]))]
        np.testing.assert_array_equal(got, want_entries)
        np.testing.assert_array_equal(counts, want_counts)
        np.testing.assert_array_equal(cursor, want_cursor)


@pytest.mark.parametrize("live,plan", [(0.1, 0), (0.9, 1)])
def test_sort_plan_emulated(emulated_msm, monkeypatch: pytest.MonkeyPatch, live: float, plan: int) -> None:
    """distprove.msm.sort: auto from RADIX_MIN_N points lets the device pick: the counting sort on
    scalars mostly 0 and 1, the radix sort on mostly live ones; the window sums are the counting
    sort's."""
    gm = emulated_msm
    monkeypatch.setattr(gm, "RADIX_MIN_N", 64)
    assert gm.sort_kind(63, 10) == "atomic" and gm.sort_kind(64, 10) == "planned"
    rng = random.Random(int(live * 10))
    n, c = 80, 10
    scal = [rng.randrange(2, R) if rng.random() < live else rng.randrange(2) for _ in range(n)]
    scratch = gm.MsmScratch()
    table = _points(bn254.G1, rng, 8) + [None]
    bases = bn254.points_to_limbs(bn254.G1, [rng.choice(table) for _ in range(n)])
    got = gm.msm_windows(bn254.G1, bases, bn254.limbs_from_ints(scal), c, 0, 26, scratch=scratch)
    assert int(scratch.take("radix_plan", 1)[0]) == plan
    import dask

    with dask.config.set({"distprove.msm.sort": "atomic"}):
        assert got == gm.msm_windows(bn254.G1, bases, bn254.limbs_from_ints(scal), c, 0, 26, scratch=gm.MsmScratch())


@pytest.mark.parametrize("n,c,lo,hi", [(90, 6, 0, 43), (40, 4, 5, 20)])
def test_shared_digit_sort_emulated(emulated_msm, monkeypatch: pytest.MonkeyPatch, n: int, c: int, lo: int, hi: int) -> None:
    """One sort_digits serves MSMs over G1 and G2 bases with the same scalars (as a proof's A, B1
    and B2 share it): each one's window sums equal its own msm_windows with a sort of its own."""
    import sys

    gm = emulated_msm
    fake = sys.modules["cupy"]
    monkeypatch.setattr(fake, "zeros", np.zeros, raising=False)
    monkeypatch.setattr(fake.cuda, "get_current_stream", lambda: HostStream())
    monkeypatch.setattr(fake.cuda, "Event", HostStream, raising=False)
    rng = random.Random(n)
    scal = [rng.choice([0, 1, R - 1, rng.randrange(R)]) for _ in range(n)]
    limbs = bn254.limbs_from_ints(scal)
    digits = gm.sort_digits(limbs, c, lo, hi, HostStream())
    for group in (bn254.G1, bn254.G2, bn254.G1):
        table = _points(group, rng, 8) + [None]
        bases = bn254.points_to_limbs(group, [rng.choice(table) for _ in range(n)])
        want = gm.msm_windows(group, bases, limbs, c, lo, hi, scratch=gm.MsmScratch())
        wait = gm.msm_windows_start(group, bases, limbs, c, lo, hi, gm.MsmScratch(), HostStream(), digits=digits)
        assert wait() == want
    # the sort given is the one used: another scalar vector's sort (same shape) gives its sums
    other = bn254.limbs_from_ints([rng.randrange(2, R) for _ in range(n)])
    swapped = gm.msm_windows_start(group, bases, limbs, c, lo, hi, gm.MsmScratch(), HostStream(),
                                   digits=gm.sort_digits(other, c, lo, hi, HostStream()))()
    assert swapped[1:] == gm.msm_windows(group, bases, other, c, lo, hi, scratch=gm.MsmScratch())[1:]
    with pytest.raises(ValueError, match="does not fit"):
        gm.msm_windows_start(group, bases, limbs, c + 1, 0, 1, gm.MsmScratch(), HostStream(), digits=digits)


# --- grouped MSMs (G proofs' scalar vectors against one set of bases), emulated --------------


def _group_scalars(rng: random.Random, proofs: int, n: int, kind: str) -> list[list[int]]:
    """``proofs`` scalar vectors of ``n``: "mixed" (0, 1, r - 1, 2, a repeated value, random), "bits"
    (0/1 only, as witnesses mostly are) or "equal" (every scalar of a vector the same)."""
    out = []
    for p in range(proofs):
        same = rng.randrange(2, R)
        if kind == "bits":
            out.append([rng.randrange(2) for _ in range(n)])
        elif kind == "equal":
            out.append([[same, 1, 0, R - 1][p % 4]] * n)
        else:
            out.append([rng.choice([0, 1, R - 1, 2, same, same, rng.randrange(R)]) for _ in range(n)])
    return out


@pytest.mark.parametrize("group,n,c,lo,hi,proofs,kind", [
    (bn254.G1, 33, 5, 0, 52, 1, "mixed"),
    (bn254.G1, 33, 5, 0, 52, 2, "mixed"),
    (bn254.G1, 41, 6, 0, 43, 3, "bits"),
    (bn254.G1, 27, 7, 3, 11, 5, "mixed"),  # a range without window 0: no ones path
    (bn254.G1, 20, 4, 0, 9, 5, "equal"),
    (bn254.G1, 31, 21, 0, 1, 2, "mixed"),  # the radix sort in three passes (2^21 rows: one window, two proofs)
    (bn254.G2, 19, 5, 0, 52, 3, "mixed"),
    (bn254.G2, 15, 6, 2, 7, 2, "equal"),
], ids=lambda v: v.name if isinstance(v, bn254.Group) else str(v))
@pytest.mark.parametrize("sort", ["atomic", "radix"])
def test_grouped_msm_emulated(emulated_msm, monkeypatch: pytest.MonkeyPatch, group, n, c, lo, hi, proofs, kind,
                              sort) -> None:
    """msm_windows_group of G vectors (one set of launches: G * (hi - lo) virtual windows) gives each
    proof the window sums of the CPU reference over its own vector, ones in its S_0: G of 1, 2, 3
    and 5, odd n, infinity bases, 0/1, all-equal, r - 1 and random scalars, both sorts, ranges with
    and without window 0; the pair rounds forced on (their thresholds count the virtual windows)."""
    import dask

    from distprove.backends.cpu.msm import msm_windows as cpu_msm_windows

    if c > 18 and sort == "atomic":
        pytest.skip("three passes are the radix sort's; the counting sort's c = 21 case costs 45 s and covers nothing new")
    gm = emulated_msm
    monkeypatch.setattr(gm, "AFFINE_ROUNDS", {"G1": ((0, 2),), "G2": ((0, 1),)})
    monkeypatch.setattr(gm, "PAIR_K", (2, 2))
    rng = random.Random(f"{group.name}{n}{c}{lo}{proofs}{kind}")
    table = _points(group, rng, 6) + [None]
    pts = [rng.choice(table) for _ in range(n)]
    vectors = _group_scalars(rng, proofs, n, kind)
    scalars = np.stack([bn254.limbs_from_ints(v) for v in vectors])
    bases = bn254.points_to_limbs(group, pts)
    with dask.config.set({"distprove.msm.sort": sort}):
        got = gm.msm_windows_group(group, bases, scalars, c, lo, hi, scratch=gm.MsmScratch())
        assert len(got) == proofs
        for p in range(proofs):
            assert got[p] == cpu_msm_windows(group, pts, scalars[p], c, lo, hi), p
        if proofs == 3:  # the per-proof device path agrees too, and a group run in parts of 2
            assert got[1] == gm.msm_windows(group, bases, scalars[1], c, lo, hi, scratch=gm.MsmScratch())
            assert gm.msm_windows_group(group, bases, scalars, c, lo, hi, scratch=gm.MsmScratch(), max_proofs=2) == got


@pytest.mark.parametrize("group,n,c,proofs,kind", [
    (bn254.G1, 33, 5, 1, "mixed"),
    (bn254.G1, 41, 6, 3, "bits"),  # ones-heavy
    (bn254.G1, 20, 4, 5, "equal"),  # one vector all zero: infinity; one all ones: ones only
    (bn254.G2, 19, 5, 3, "mixed"),
    (bn254.G2, 12, 6, 5, "equal"),
])
def test_combined_group_msm_emulated(emulated_msm, group, n, c, proofs, kind) -> None:
    """msm_combined_group (whole MSMs, each proof's windows and ones combined on the device by
    msm_combine and made affine there) gives each proof the Horner combine of its
    window sums (stages.msm.combine): G of 1, 3 and 5, vectors of 0/1 only, all-zero (infinity)
    and all-one (ones only) vectors; a group in parts of 2 gives the same points."""
    from distprove.stages.msm import combine, num_windows

    gm = emulated_msm
    rng = random.Random(f"combine{group.name}{n}{c}{proofs}{kind}")
    table = _points(group, rng, 6) + [None]
    pts = [rng.choice(table) for _ in range(n)]
    vectors = _group_scalars(rng, proofs, n, kind)
    if kind == "equal":
        vectors[0], vectors[1] = [0] * n, [1] * n
    scalars = np.stack([bn254.limbs_from_ints(v) for v in vectors])
    bases = bn254.points_to_limbs(group, pts)
    sums = gm.msm_windows_group(group, bases, scalars, c, 0, num_windows(c), scratch=gm.MsmScratch())
    want = [combine(group, dict(enumerate(s)), c) for s in sums]
    got = gm.msm_combined_group(group, bases, scalars, c, scratch=gm.MsmScratch())
    assert got == want
    if kind == "equal":
        assert got[0] is None and got[1] == combine(group, {0: _sum(group, pts)}, c, allow_missing=True)
    if proofs > 2:
        assert gm.msm_combined_group(group, bases, scalars, c, scratch=gm.MsmScratch(), max_proofs=2) == want
    with pytest.raises(ValueError, match="combined MSM is whole"):
        gm.msm_windows_group_start(group, bases, scalars, c, 1, num_windows(c), gm.MsmScratch(), None, combined=True)


def _sum(group: bn254.Group, pts: list) -> bn254.Affine:
    total = None
    for p in pts:
        total = bn254.add(group, total, p)
    return total


@pytest.mark.parametrize("sort", ["atomic", "radix"])
def test_grouped_digit_sort_emulated(emulated_msm, monkeypatch: pytest.MonkeyPatch, sort: str) -> None:
    """A grouped sort_digits is each proof's sort, rows offset by its virtual windows (radix: in point
    order), and serves grouped MSMs over G1 and G2 bases (a group's A, B1 and B2)."""
    import sys

    import dask

    gm = emulated_msm
    fake = sys.modules["cupy"]
    monkeypatch.setattr(fake, "zeros", np.zeros, raising=False)
    monkeypatch.setattr(fake.cuda, "get_current_stream", lambda: HostStream())
    monkeypatch.setattr(fake.cuda, "Event", HostStream, raising=False)
    rng = random.Random(sort)
    n, c, lo, hi, proofs = 23, 6, 0, 43, 3
    scalars = np.stack([bn254.limbs_from_ints(v) for v in _group_scalars(rng, proofs, n, "mixed")])
    nw, nb = hi - lo, 1 << (c - 1)
    with dask.config.set({"distprove.msm.sort": sort}):
        digits = gm.sort_digits(scalars, c, lo, hi, HostStream())
        assert digits.proofs == proofs and digits.key == (n, c, lo, hi)
        total = 0
        for p in range(proofs):
            want_entries, want_counts, want_cursor = expected_digit_sort(scalars[p], c, lo, hi)
            rows = slice(p * nw * nb, (p + 1) * nw * nb)
            np.testing.assert_array_equal(digits.counts[rows], want_counts)
            np.testing.assert_array_equal(digits.cursor[rows], want_cursor + total)
            got = digits.entries.reshape(-1, 2)[total: total + len(want_entries)].copy()
            got[:, 0] -= p * nw * nb
            if sort == "atomic":
                got = got[np.lexsort((got[:, 1], got[:, 0]))]
            np.testing.assert_array_equal(got, want_entries)
            total += len(want_entries)
        for group in (bn254.G1, bn254.G2, bn254.G1):
            table = _points(group, rng, 5) + [None]
            bases = bn254.points_to_limbs(group, [rng.choice(table) for _ in range(n)])
            want = gm.msm_windows_group(group, bases, scalars, c, lo, hi, scratch=gm.MsmScratch())
            wait = gm.msm_windows_group_start(group, bases, scalars, c, lo, hi, gm.MsmScratch(), HostStream(),
                                              digits=digits)
            assert wait() == want
        with pytest.raises(ValueError, match="does not fit"):
            gm.msm_windows_group_start(group, bases, scalars[:2].copy(), c, lo, hi, gm.MsmScratch(), HostStream(),
                                       digits=digits)
        with pytest.raises(ValueError, match="does not fit"):
            gm.msm_windows_start(group, bases, scalars[0], c, lo, hi, gm.MsmScratch(), HostStream(), digits=digits)


def test_group_size_limits() -> None:
    """proofs_that_fit keeps a group within the memory budget and the 31-bit entry and grid limits,
    splits it into about equal parts, and never goes below one proof."""
    from distprove.backends.gpu import msm as gm

    g1, g2 = bn254.G1, bn254.G2
    gib = 1 << 30
    assert gm.proofs_that_fit(g1, 1 << 12, 13, 0, 20, 100 * gib, 64) == 64
    small = gm.proofs_that_fit(g1, 1 << 20, 16, 0, 16, 16 * gib, 64)
    assert 1 < small < 64 and gm.group_bytes(g1, 1 << 20, 16, 0, 16, small) <= gm.GROUP_MEMORY_SHARE * 16 * gib
    parts = -(-64 // small)
    assert small == -(-64 // parts)  # equal parts, not a full one and a remainder
    assert gm.proofs_that_fit(g2, 1 << 24, 17, 0, 16, 1 << 20, 8) == 1  # nothing fits: one at a time
    assert gm.group_bytes(g2, 1 << 16, 13, 0, 20, 2) > gm.group_bytes(g1, 1 << 16, 13, 0, 20, 2)
    # 31-bit entries: 2^16 points x 16 windows x 2^15 proofs would be 2^35
    assert not gm.group_fits(1 << 16, 16, 0, 16, 1 << 15)
    big = gm.proofs_that_fit(g1, 1 << 16, 16, 0, 16, 1 << 50, 1 << 15)
    assert gm.group_fits(1 << 16, 16, 0, 16, big) and big * 16 * (1 << 16) < 1 << 31
    assert not gm.group_fits(4, 2, 0, 128, 600)  # 76,800 windows: over CUDA's 65,535 grid rows


# --- precomputed window multiples (msm_merged.cu), emulated ----------------------------------


@pytest.mark.parametrize("group", [bn254.G1, bn254.G2], ids=["G1", "G2"])
def test_precomputed_multiples_emulated(emulated_msm, group: bn254.Group) -> None:
    """Row w * n + i of the table is 2^(c w) P_i (infinity stays the all-zero row)."""
    gm = emulated_msm
    rng = random.Random(group.name)
    pts = _points(group, rng, 5) + [None]
    c = 9
    table = gm.precompute_multiples(group, bn254.points_to_limbs(group, pts), c)
    got = bn254.points_from_limbs(group, table)
    w_count = -(-256 // c)
    assert len(got) == w_count * len(pts)
    for w in range(w_count):
        for i, p in enumerate(pts):
            want = None if p is None else bn254.to_affine(group, bn254.jac_mul(group, bn254.to_jacobian(group, p), 1 << (c * w)))
            assert got[w * len(pts) + i] == want, (w, i)


@pytest.mark.parametrize("group,n,c,two_pass_bits", [
    (bn254.G1, 300, 6, 18), (bn254.G1, 90, 20, 18), (bn254.G1, 200, 7, 2),  # two passes; three (wide, forced)
    (bn254.G2, 120, 8, 18), (bn254.G2, 40, 5, 1),
    (bn254.G1, 301, 6, 18), (bn254.G2, 119, 20, 18),  # tiles of 7 dividing n: the digits' histogram is pass 1's
])
def test_merged_msm_emulated(emulated_msm, monkeypatch: pytest.MonkeyPatch, group: bn254.Group, n: int, c: int,
                             two_pass_bits: int) -> None:
    """msm_merged over a precomputed table (every window's digits in one set of buckets, sorted as
    one window of W n items, tiles across window boundaries) equals sum_i s_i P_i: 0/1, r - 1,
    repeated and random scalars, infinity bases, the pair rounds forced on."""
    gm = emulated_msm
    monkeypatch.setattr(gm, "RADIX_TILE", 7)
    monkeypatch.setattr(gm, "RADIX_MAX_KEY_BITS", two_pass_bits)
    monkeypatch.setattr(gm, "AFFINE_ROUNDS", {"G1": ((0, 2),), "G2": ((0, 2),)})
    rng = random.Random(n * c)
    table_pts = _points(group, rng, 8) + [None]
    pts = [rng.choice(table_pts) for _ in range(n)]
    same = rng.randrange(2, R)
    scal = [rng.choice([0, 1, R - 1, same, same, rng.randrange(R)]) for _ in range(n)]
    table = gm.precompute_multiples(group, bn254.points_to_limbs(group, pts), c)
    got = gm.msm_merged(group, table, bn254.limbs_from_ints(scal), c, scratch=gm.MsmScratch())
    want = bn254.to_jacobian(group, None)
    for p, s in zip(pts, scal):
        want = bn254.jac_add(group, want, bn254.jac_mul(group, bn254.to_jacobian(group, p), s))
    assert got == bn254.to_affine(group, want)
    with pytest.raises(ValueError, match="table must be"):
        gm.msm_merged(group, table[:-1], bn254.limbs_from_ints(scal), c)


def test_merged_width() -> None:
    """The table's width minimises W(c) n + k 2^(c-1): 22 for G1 2^24 (the measured best of
    22-24), wider with n, and its W(c) n rows fit msm_merged's 31-bit point indices to 2^26."""
    from distprove.backends.gpu import msm as gm
    from distprove.stages.msm import num_windows

    assert gm.merged_width(1 << 24, bn254.G1) == 22
    widths = [gm.merged_width(1 << lg, bn254.G1) for lg in range(1, 27)]
    assert widths == sorted(widths)
    assert all(num_windows(gm.merged_width(1 << lg, g)) << lg < 1 << 31 for lg in range(27) for g in (bn254.G1, bn254.G2))


# --- batch-affine pair rounds (msm_affine.cu), emulated -------------------------------------

# Rows of one pair round's input as (table index, negated) entries; table = [P, Q, S, None].
# Covered: P + P (doubling), P + (-P), infinity on either side and on both, odd last entries
# (negated too), empty rows, and a long row that K = 1..3 threads cut through.
PAIR_ROWS = [
    [],
    [(0, False), (0, False)],
    [(0, False), (0, True)],
    [(3, False), (1, False)],
    [(1, True), (3, False)],
    [(3, False), (3, False)],
    [(2, True)],
    [],
    [(0, False), (1, False), (2, True)],
    [(1, True), (1, True), (1, False), (0, False), (0, False), (3, False), (2, False), (2, False), (1, False)],
    [(2, False), (2, True), (2, False)],
]


def _point_sum(group: bn254.Group, pts: list) -> bn254.Affine:
    acc = bn254.to_jacobian(group, None)
    for p in pts:
        acc = bn254.jac_add(group, acc, bn254.to_jacobian(group, p))
    return bn254.to_affine(group, acc)


@pytest.mark.parametrize("group", [bn254.G1, bn254.G2], ids=["G1", "G2"])
@pytest.mark.parametrize("k", [1, 2, 3, 16])
def test_pair_rounds_emulated(emulated_msm, monkeypatch: pytest.MonkeyPatch, group: bn254.Group, k: int) -> None:
    """One round adds each row's entries two by two (the odd last one copied, negation applied)
    into slots cursor_out[row] + o/2, with entries (row, slot << 1) and counts ceil(count / 2);
    four rounds leave one point per row, its sum. One-thread blocks of k strided jobs cut through the rows."""
    _pair_rows_case(emulated_msm, monkeypatch, group, k)


@pytest.mark.parametrize("group", [bn254.G1, bn254.G2], ids=["G1", "G2"])
@pytest.mark.parametrize("k,sms", [(2, 1), (16, 1), (2, 3)])
def test_pair_rounds_builds_emulated(emulated_msm_variant, monkeypatch: pytest.MonkeyPatch, group: bn254.Group,
                                     k: int, sms: int) -> None:
    """The same rows through each build of EMU_BUILDS (the device's product in the pair rounds),
    on one resident thread or three (threads of unequal job counts)."""
    monkeypatch.setattr(emulated_msm_variant, "_sm_count", lambda: sms)
    _pair_rows_case(emulated_msm_variant, monkeypatch, group, k)


@pytest.mark.parametrize("group,n,c,window_range,scalars", [(bn254.G1, 1000, 6, "random", "mixed"),
                                                            (bn254.G1, 777, 4, "full", "equal"),
                                                            (bn254.G2, 300, 6, "random", "equal")],
                         ids=lambda v: v.name if isinstance(v, bn254.Group) else str(v))
def test_msm_pipeline_affine_builds_emulated(emulated_msm_variant, monkeypatch: pytest.MonkeyPatch, group, n, c,
                                             window_range, scalars) -> None:
    """The whole pipeline with 3 pair rounds through each build of EMU_BUILDS."""
    monkeypatch.setattr(emulated_msm_variant, "AFFINE_ROUNDS", {"G1": ((0, 3),), "G2": ((0, 3),)})
    monkeypatch.setattr(emulated_msm_variant, "PAIR_K", (2, 2))
    _affine_case(emulated_msm_variant, group, n, c, window_range, scalars, random.Random(n))


def _pair_rows_case(gm, monkeypatch: pytest.MonkeyPatch, group: bn254.Group, k: int) -> None:
    monkeypatch.setattr(gm, "PAIR_K", (k, k))
    monkeypatch.setattr(gm, "PAIR_THREADS", 1)
    rng = random.Random(k)
    table = _points(group, rng, 3) + [None]
    points = bn254.points_to_limbs(group, table)
    rows = len(PAIR_ROWS)
    counts = np.array([len(r) for r in PAIR_ROWS], dtype=np.uint32)
    cursor = (np.cumsum(counts) - counts).astype(np.uint32)
    entries = np.array([[row, idx << 1 | neg] for row, items in enumerate(PAIR_ROWS) for idx, neg in items],
                       dtype=np.uint32).reshape(-1)
    inputs = [[bn254.neg(group, table[i]) if neg else table[i] for i, neg in items] for items in PAIR_ROWS]

    total = int(counts.sum())
    scratch = gm.MsmScratch()
    plan, sets, _ = gm._pair_rounds(gm._module(), group, [0], entries, points, cursor, counts, rows, total, scratch)
    ent, pts, cur, cnt = _round_output(gm, scratch, group, rows, 0, plan, sets)
    want_counts = [(len(r) + 1) // 2 for r in PAIR_ROWS]
    assert cnt.tolist() == want_counts and cur.tolist() == (np.cumsum(want_counts) - want_counts).tolist()
    got = bn254.points_from_limbs(group, pts[: sum(want_counts) * group.limbs])
    for row, items in enumerate(inputs):
        slots = range(int(cur[row]), int(cur[row]) + want_counts[row])
        assert ent.reshape(-1, 2)[list(slots)].tolist() == [[row, j << 1] for j in slots]
        assert [got[j] for j in slots] == [_point_sum(group, items[o : o + 2]) for o in range(0, len(items), 2)]

    scratch = gm.MsmScratch()
    plan, sets, _ = gm._pair_rounds(gm._module(), group, [0] * 4, entries, points, cursor, counts, rows, total, scratch)
    ent, pts, cur, cnt = _round_output(gm, scratch, group, rows, 3, plan, sets)
    assert cnt.tolist() == [min(len(r), 1) for r in PAIR_ROWS]
    got = bn254.points_from_limbs(group, pts[: int(cnt.sum()) * group.limbs])
    for row, items in enumerate(inputs):
        if items:
            assert got[int(cur[row])] == _point_sum(group, items)


def _round_output(gm, scratch, group: bn254.Group, rows: int, r: int, plan, sets) -> tuple:
    """Round r's (entries, points, cursor, counts) from its scratch buffers, after checking that the
    plan ran rounds 0..r and that the accumulation's last pointer set names these buffers."""
    names = {"entries": r, "points": "ab"[r % 2], "cursor": r, "counts": r}
    bufs = {k: scratch._bufs[f"pair_{k}_{names[k]}"] for k in names}
    assert int(plan[0]) == r + 1 and len(sets) == 4 * (r + 2)
    assert sets[4 * (r + 1) :].tolist() == [b.ctypes.data for b in bufs.values()]
    return tuple(b.view(np.uint32) for b in bufs.values())


@pytest.mark.parametrize("need,ran", [([5], 0), ([0, 0, 10**6], 2), ([2, 3, 4], 3)])
def test_pair_plan_emulated(emulated_msm, need: list[int], ran: int) -> None:
    """msm_pair_plan runs the rounds whose threshold the sort's entry count (here 4) reaches, in
    order; skipped rounds write nothing, and the accumulation's set is the last round that ran."""
    gm = emulated_msm
    group = bn254.G1
    pts = bn254.points_to_limbs(group, _points(group, random.Random(1), 2))
    counts = np.array([3, 1], dtype=np.uint32)
    cursor = np.array([0, 3], dtype=np.uint32)
    entries = np.array([0, 0, 0, 2, 0, 3, 1, 0], dtype=np.uint32)
    scratch = gm.MsmScratch()
    for r in range(len(need)):  # poison the round buffers: a skipped round must leave them alone
        scratch.take(f"pair_counts_{r}", 2).fill(0xDEAD)
    plan, sets, _ = gm._pair_rounds(gm._module(), group, need, entries, pts, cursor, counts, 2, 4, scratch)
    assert int(plan[0]) == ran
    start = 4 * ran
    if ran == 0:
        assert sets[:4].tolist() == [a.ctypes.data for a in (entries, pts, cursor, counts)]
    else:
        assert sets[start + 3] == scratch._bufs[f"pair_counts_{ran - 1}"].ctypes.data
    for r in range(ran, len(need)):
        assert (scratch._bufs[f"pair_counts_{r}"].view(np.uint32)[:2] == 0xDEAD).all()


def _affine_case(gm, group: bn254.Group, n: int, c: int, window_range: str, scalars: str,
                 rng: random.Random) -> None:
    """msm_windows with pair rounds against window sums from the digits (per table point), on
    bases drawn from [P, Q, S, -P, infinity]: doublings, P + (-P) and infinity in the rounds."""
    from distprove.stages.msm import combine, num_windows, signed_digits_array

    pts = _points(group, rng, 3)
    table = pts + [bn254.neg(group, pts[0]), None]
    idx = [rng.randrange(len(table)) for _ in range(n)]
    if scalars == "equal":
        scal = [rng.randrange(2, R)] * n
    elif scalars == "01":
        scal = [rng.randrange(2) for _ in range(n)]
    else:
        scal = [rng.choice([0, 1, 2, R - 1, rng.randrange(R), rng.randrange(1 << 20)]) for _ in range(n)]
    w_count = num_windows(c)
    lo, hi = (0, w_count) if window_range == "full" else sorted(rng.sample(range(w_count + 1), 2))
    limbs = bn254.limbs_from_ints(scal)
    got = gm.msm_windows(group, bn254.points_to_limbs(group, [table[j] for j in idx]), limbs, c, lo, hi,
                         scratch=gm.MsmScratch())
    digits = signed_digits_array(limbs, c)
    want = []
    for w in range(lo, hi):
        coef = [0] * len(table)
        for i, j in enumerate(idx):
            coef[j] += int(digits[i, w])
        want.append(_point_sum(group, [bn254.mul(group, p, k % R) for p, k in zip(table, coef) if p is not None]))
    assert got == want
    if (lo, hi) == (0, w_count):
        per = [0] * len(table)
        for j, s in zip(idx, scal):
            per[j] += s
        expect = _point_sum(group, [bn254.mul(group, p, k % R) for p, k in zip(table, per) if p is not None])
        assert combine(group, dict(enumerate(got)), c) == expect


AFFINE_CASES = [
    (bn254.G1, 1, 5, "full", "mixed"),
    (bn254.G1, 2, 4, "full", "equal"),
    (bn254.G1, 3, 3, "random", "mixed"),
    (bn254.G1, 1000, 6, "random", "mixed"),
    (bn254.G1, 777, 4, "full", "equal"),
    (bn254.G1, 500, 7, "random", "01"),
    (bn254.G2, 3, 5, "full", "mixed"),
    (bn254.G2, 300, 6, "random", "equal"),
    (bn254.G2, 333, 7, "random", "mixed"),
]


@pytest.mark.parametrize("rounds", [1, 2, 3])
@pytest.mark.parametrize("group,n,c,window_range,scalars", AFFINE_CASES,
                         ids=lambda v: v.name if isinstance(v, bn254.Group) else str(v))
def test_msm_pipeline_affine_emulated(emulated_msm, monkeypatch: pytest.MonkeyPatch, group, n, c, window_range,
                                      scalars, rounds) -> None:
    """The whole pipeline with 1-3 pair rounds (2 pairs per thread) gives the digits' window sums."""
    monkeypatch.setattr(emulated_msm, "AFFINE_ROUNDS", {"G1": ((0, rounds),), "G2": ((0, rounds),)})
    monkeypatch.setattr(emulated_msm, "PAIR_K", (2, 2))
    _affine_case(emulated_msm, group, n, c, window_range, scalars, random.Random(n * 10 + rounds))


def test_affine_rounds_from_config_emulated(emulated_msm, monkeypatch: pytest.MonkeyPatch) -> None:
    """distprove.msm.affine-rounds reaches the pipeline (a mapping per group), and pair rounds
    leave a shared digit sort's buffers as they were (other MSMs read them)."""
    import sys

    import dask

    from distprove.stages.msm import num_windows

    gm = emulated_msm
    fake = sys.modules["cupy"]
    monkeypatch.setattr(fake, "zeros", np.zeros, raising=False)
    monkeypatch.setattr(fake.cuda, "get_current_stream", lambda: HostStream())
    monkeypatch.setattr(fake.cuda, "Event", HostStream, raising=False)
    rng = random.Random(7)
    n, c = 200, 5
    limbs = bn254.limbs_from_ints([rng.choice([0, 1, rng.randrange(R)]) for _ in range(n)])
    digits = gm.sort_digits(limbs, c, 0, num_windows(c), HostStream())
    before = [a.copy() for a in (digits.counts, digits.cursor, digits.entries)]
    with dask.config.set({"distprove.msm.affine-rounds": {"G1": 2, "G2": 3}}):
        assert (len(gm.round_thresholds(bn254.G1, n)), len(gm.round_thresholds(bn254.G2, n))) == (2, 3)
        for group in (bn254.G1, bn254.G2):
            table = _points(group, rng, 4) + [None]
            bases = bn254.points_to_limbs(group, [rng.choice(table) for _ in range(n)])
            with_rounds = gm.msm_windows_start(group, bases, limbs, c, 0, num_windows(c), gm.MsmScratch(),
                                               HostStream(), digits=digits)()
            assert all(np.array_equal(a, b) for a, b in zip(before, (digits.counts, digits.cursor, digits.entries)))
            with dask.config.set({"distprove.msm.affine-rounds": 0}):
                assert with_rounds == gm.msm_windows(group, bases, limbs, c, 0, num_windows(c),
                                                     scratch=gm.MsmScratch())


def test_resident_threads_count_registers_and_shared_memory(monkeypatch: pytest.MonkeyPatch) -> None:
    """Occupancy from a kernel's registers (per warp, in units of 256) and static shared memory
    (228 KiB an SM, 1 KiB reserved a block): G1's staged pair kernel, 166 registers and 32 KiB,
    fits 3 blocks of 128; with 100 KiB of stage only 2 would fit; unknown registers give None."""
    from types import SimpleNamespace

    from distprove.backends.gpu import msm as gm

    monkeypatch.setattr(gm, "_sm_count", lambda: 132)
    assert gm._resident_threads(SimpleNamespace(num_regs=166, shared_size_bytes=32768), 128) == 132 * 3 * 128
    assert gm._resident_threads(SimpleNamespace(num_regs=128, shared_size_bytes=0), 128) == 132 * 4 * 128
    assert gm._resident_threads(SimpleNamespace(num_regs=128, shared_size_bytes=100 * 1024), 128) == 132 * 2 * 128
    assert gm._resident_threads(SimpleNamespace(num_regs=32, shared_size_bytes=0), 64) == 132 * 32 * 64
    assert gm._resident_threads(SimpleNamespace(), 128) is None


def test_pair_block_follows_the_build(monkeypatch: pytest.MonkeyPatch) -> None:
    """The pair rounds launch blocks of the size their build laid the stage out for, with that
    stage's shared memory (none for a build without it)."""
    import dask

    from distprove.backends.gpu import msm as gm

    assert gm.pair_block() == gm.PAIR_THREADS
    assert (gm.pair_stage_bytes(bn254.G1), gm.pair_stage_bytes(bn254.G2)) == (32768, 65536)
    with dask.config.set({"distprove.msm.kernel-options": ["-DDP_PAIR_BLOCK=64"]}):
        assert gm.pair_block() == 64
        assert gm.pair_stage_bytes(bn254.G2) == 32768
    with dask.config.set({"distprove.msm.kernel-options": ["-DDP_G2_PAIR_STAGE=0"]}):
        assert (gm.pair_stage_bytes(bn254.G1), gm.pair_stage_bytes(bn254.G2)) == (32768, 0)


def test_pair_buffers_outlive_a_short_take_emulated(emulated_msm, monkeypatch: pytest.MonkeyPatch) -> None:
    """A take() after the pair rounds that runs out of memory drops the scratch's buffers and
    retries. The rounds' buffers, which the accumulation finds only by their addresses in the
    sets, must stay alive until it has run (on a GPU its launch is still queued: freed there,
    they faulted with an illegal address, bench_e2e --pool-caps 40 at 2^24), and the sums stay
    right."""
    import sys
    import types
    import weakref

    import dask

    from distprove.stages.msm import num_windows

    gm = emulated_msm
    fake = sys.modules["cupy"]
    emu = gm._module()

    class OutOfMemory(Exception):
        pass

    allocated: dict[int, weakref.ref] = {}
    armed = {"buckets": False, "raised": 0}

    def empty(count: int, dtype: type = np.uint8) -> np.ndarray:
        if armed["buckets"]:
            armed["buckets"] = False
            armed["raised"] += 1
            raise OutOfMemory
        a = np.empty(count, dtype=dtype)
        allocated[a.ctypes.data] = weakref.ref(a)
        return a

    monkeypatch.setattr(fake, "empty", empty)
    monkeypatch.setattr(fake.cuda, "memory", types.SimpleNamespace(OutOfMemoryError=OutOfMemory), raising=False)
    monkeypatch.setattr(fake, "get_default_memory_pool", lambda: types.SimpleNamespace(free_all_blocks=lambda: None),
                        raising=False)
    real_take = gm.MsmScratch.take

    def take(self, name: str, count: int, dtype: type = np.uint32):
        armed["buckets"] = name == "buckets" and armed["raised"] == 0
        return real_take(self, name, count, dtype)

    def accumulate_checked(name: str):
        launch = emu.get_function(name)

        def run(grid: tuple, block: tuple, args: tuple, shared_mem: int = 0) -> None:
            sets = args[1]
            dead = [p for p in map(int, sets.tolist()) if p in allocated and allocated[p]() is None]
            assert not dead, f"{len(dead)} buffers of the pair sets were freed before the accumulation"
            launch(grid, block, args, shared_mem)

        return run

    monkeypatch.setattr(gm.MsmScratch, "take", take)
    monkeypatch.setattr(gm, "_module", lambda: types.SimpleNamespace(
        get_function=lambda name: accumulate_checked(name) if name.startswith("msm_accumulate_sel") else emu.get_function(name)))
    rng = random.Random(11)
    n, c = 120, 4
    group = bn254.G1
    table = _points(group, rng, 6) + [None]
    bases = bn254.points_to_limbs(group, [rng.choice(table) for _ in range(n)])
    limbs = bn254.limbs_from_ints([rng.choice([0, 1, rng.randrange(R)]) for _ in range(n)])
    with dask.config.set({"distprove.msm.affine-rounds": 2}):
        got = gm.msm_windows(group, bases, limbs, c, 0, num_windows(c), scratch=gm.MsmScratch())
    assert armed["raised"] == 1
    monkeypatch.setattr(gm.MsmScratch, "take", real_take)
    with dask.config.set({"distprove.msm.affine-rounds": 0}):
        assert got == gm.msm_windows(group, bases, limbs, c, 0, num_windows(c), scratch=gm.MsmScratch())


# --- point validation (validate.cu) against the CPU check ------------------------------------

VALIDATE_HARNESS = r"""
#include "field.cuh"
#include "validate.cu"
extern "C" void point_status(const u32* rows, int n, int g2, unsigned char* out) {
    for (int i = 0; i < n; i++) out[i] = (unsigned char)dp_point_status(rows + (long)i * (g2 ? 32 : 16), g2);
}
"""


@pytest.mark.parametrize("build", list(FIELD_BUILDS))
def test_validate_kernel_matches_cpu_check(build: str, tmp_path: Path) -> None:
    """validate.cu's per-row decision equals pointcheck's on valid points, infinity, flipped
    bits and coordinates equal to or above q, G1 and G2, in both product builds."""
    from distprove.formats.pointcheck import point_status

    cmd = _compiler()
    if cmd is None:
        pytest.skip("no C++ compiler or nvcc to build the host harness")
    src = tmp_path / "validate.cpp"
    src.write_text(VALIDATE_HARNESS)
    so = tmp_path / "validate.so"
    res = subprocess.run(cmd + FIELD_BUILDS[build] + ["-I", str(KERNELS), str(src), "-o", str(so)],
                         capture_output=True, text=True)
    assert res.returncode == 0, res.stderr
    fn = ctypes.CDLL(str(so)).point_status
    rng = random.Random(21)
    for g in (bn254.G1, bn254.G2):
        p = bn254.mul(g, g.generator, rng.randrange(1, bn254.R))
        pts = []
        for i in range(48):
            pts.append(None if i % 7 == 3 else p)
            p = bn254.add(g, p, g.generator)
        rows = bn254.points_to_limbs(g, pts)
        for i in range(0, 48, 3):
            rows[i, rng.randrange(g.limbs)] ^= np.uint32(1 << rng.randrange(32))
        for i, v in ((10, bn254.Q), (11, bn254.Q + 1), (13, 2**256 - 1), (14, bn254.Q - 1)):
            c = 8 * rng.randrange(g.limbs // 8)
            rows[i, c : c + 8] = bn254.limbs_from_ints([v])[0]
        rows = np.ascontiguousarray(rows, dtype=np.uint32)
        out = np.zeros(rows.shape[0], dtype=np.uint8)
        fn(_ptr(rows), ctypes.c_int(rows.shape[0]), ctypes.c_int(g is bn254.G2), _ptr(out))
        want = point_status(rows, g)
        assert set(want.tolist()) == {0, 1, 2}
        assert out.tolist() == want.tolist()
