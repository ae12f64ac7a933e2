"""Device checks of distprove/kernels/field.cuh: Fr, Fq, Fq2 operations against Python ints.

The kernels here are test-only: each thread applies one operation to one pair of elements. The
module is built in each arithmetic variant (default: the device's own choice, FP64-pipe products
on sm_90/sm_100 and CIOS elsewhere, PTX add/sub; f64_mul: FP64-pipe products on any device; cios:
CIOS products; portable: CIOS and add/sub in plain C; ptx_mul: CIOS as PTX carry chains), each
checked on fresh random inputs with 0, 1, p-1.
"""

from __future__ import annotations

import dataclasses
import random

import numpy as np
import pytest

from distprove import bn254
from distprove.backends.gpu.compile import FIELD_BUILDS
from distprove.bn254 import Q, R

cupy = pytest.importorskip("cupy")
pytestmark = pytest.mark.gpu

TEST_KERNELS = r"""
template <typename T, typename Op>
__device__ void apply(const u32* a, const u32* b, u32* out, u32 n, u32 w, Op op) {
    u32 i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n) op(a + w * i, b + w * i, out + w * i);
}
#define FIELD_KERNELS(P, T, W, LD, ST)                                                             \
    extern "C" __global__ void t_##P##_op(u32 op, const u32* a, const u32* b, u32* out, u32 n) {    \
        apply<T>(a, b, out, n, W, [op](const u32* x, const u32* y, u32* o) {                        \
            T u = LD(x), v = LD(y), r;                                                              \
            switch (op) {                                                                           \
                case 0: r = P##_add(u, v); break;                                                   \
                case 1: r = P##_sub(u, v); break;                                                   \
                case 2: r = P##_neg(u); break;                                                      \
                case 3: r = P##_mul(u, v); break;                                                   \
                case 4: r = P##_sqr(u); break;                                                      \
                case 5: r = P##_zero(); ST(o, r); o[0] = P##_eq(u, v); return;                      \
                case 6: r = P##_zero(); ST(o, r); o[0] = P##_is_zero(u); return;                    \
                default: r = P##_one(); break;                                                      \
            }                                                                                       \
            ST(o, r);                                                                               \
        });                                                                                         \
    }
FIELD_KERNELS(fr, Fr, 8, fr_load, fr_store)
FIELD_KERNELS(fq, Fq, 8, fq_load, fq_store)
FIELD_KERNELS(fq2, Fq2, 16, fq2_load, fq2_store)
extern "C" __global__ void t_conv(u32 field, u32 to, const u32* a, u32* out, u32 n) {
    u32 i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i >= n) return;
    if (field == 0) fr_store(out + 8 * i, to ? fr_to_mont(fr_load(a + 8 * i)) : fr_from_mont(fr_load(a + 8 * i)));
    else fq_store(out + 8 * i, to ? fq_to_mont(fq_load(a + 8 * i)) : fq_from_mont(fq_load(a + 8 * i)));
}
"""
OPS = {"add": 0, "sub": 1, "neg": 2, "mul": 3, "sqr": 4, "eq": 5, "is_zero": 6, "one": 7}




def _build(options: tuple[str, ...]):
    """The test kernels on field.cuh, built with ``options``."""
    from distprove.backends.gpu.compile import BASE_OPTIONS, module_source

    return cupy.RawModule(code=module_source(["field.cuh"]) + TEST_KERNELS, options=(*BASE_OPTIONS, *options))


@pytest.fixture(scope="module", params=list(FIELD_BUILDS))
def module(request: pytest.FixtureRequest):
    return _build(FIELD_BUILDS[request.param])


def _mod(field: str) -> int:
    return R if field == "fr" else Q


def _values(field: str, rng: random.Random, count: int) -> list:
    m = _mod(field)
    base = [0, 1, 2, m - 1, m - 2, (1 << 255) % m] + [rng.randrange(m) for _ in range(count)]
    if field == "fq2":
        return [(x, base[(5 * i + 1) % len(base)]) for i, x in enumerate(base)]
    return base


def _enc(field: str, vals: list, mont: bool = True) -> np.ndarray:
    m = _mod(field)
    flat = [c for v in vals for c in (v if field == "fq2" else (v,))]
    if mont:
        flat = [c * (1 << 256) % m for c in flat]
    return bn254.limbs_from_ints(flat).reshape(len(vals), -1)


def _dec(field: str, rows: np.ndarray, mont: bool = True) -> list:
    m = _mod(field)
    flat = bn254.ints_from_limbs(rows.reshape(-1, 8))
    assert all(c < m for c in flat), "result not fully reduced"
    if mont:
        inv = pow(1 << 256, -1, m)
        flat = [c * inv % m for c in flat]
    if field == "fq2":
        return list(zip(flat[0::2], flat[1::2]))
    return flat


def _run(module, name: str, args: tuple, a: np.ndarray) -> np.ndarray:
    out = cupy.full(a.shape, 0xDEADBEEF, dtype=cupy.uint32)
    n = a.shape[0]
    module.get_function(name)(((n + 127) // 128,), (128,), args + (out, np.uint32(n)))
    return cupy.asnumpy(out)


@pytest.mark.parametrize("field", ["fr", "fq", "fq2"])
def test_field_ops_on_device(module, field: str) -> None:
    rng = random.Random()
    m = _mod(field)
    xs = _values(field, rng, 3000)
    ys = xs[:]
    rng.shuffle(ys)
    ys[0] = xs[0]
    ref = bn254.FQ2_OPS if field == "fq2" else bn254.FQ_OPS
    if field == "fr":
        ref = dataclasses.replace(ref, add=lambda u, v: (u + v) % m, sub=lambda u, v: (u - v) % m,
                                  mul=lambda u, v: u * v % m, sqr=lambda u: u * u % m, neg=lambda u: -u % m)
    a, b = cupy.asarray(_enc(field, xs)), cupy.asarray(_enc(field, ys))
    expect = {
        "add": [ref.add(x, y) for x, y in zip(xs, ys)],
        "sub": [ref.sub(x, y) for x, y in zip(xs, ys)],
        "neg": [ref.neg(x) for x in xs],
        "mul": [ref.mul(x, y) for x, y in zip(xs, ys)],
        "sqr": [ref.sqr(x) for x in xs],
        "one": [ref.one] * len(xs),
    }
    for op, want in expect.items():
        got = _dec(field, _run(module, f"t_{field}_op", (np.uint32(OPS[op]), a, b), a))
        assert got == want, op
    eq = _run(module, f"t_{field}_op", (np.uint32(OPS["eq"]), a, b), a)[:, 0]
    assert eq.tolist() == [int(x == y) for x, y in zip(xs, ys)]
    isz = _run(module, f"t_{field}_op", (np.uint32(OPS["is_zero"]), a, b), a)[:, 0]
    assert isz.tolist() == [int(ref.is_zero(x)) for x in xs]


@pytest.mark.parametrize("field", ["fr", "fq"])
def test_montgomery_conversion_on_device(module, field: str) -> None:
    rng = random.Random()
    xs = _values(field, rng, 1000)
    std = cupy.asarray(_enc(field, xs, mont=False))
    fid = np.uint32(0 if field == "fr" else 1)
    to_m = _run(module, "t_conv", (fid, np.uint32(1), std), std)
    assert _dec(field, to_m) == xs
    back = _run(module, "t_conv", (fid, np.uint32(0), cupy.asarray(to_m)), std)
    assert _dec(field, back, mont=False) == xs


@pytest.mark.parametrize("field", ["fr", "fq"])
def test_f64_products_equal_cios(field: str) -> None:
    """The FP64-pipe products and squares equal CIOS's limb for limb on 2^17 fresh values below p
    (edge values, values near 2^254 and random ones)."""
    mods = [_build(FIELD_BUILDS["cios"]), _build(FIELD_BUILDS["f64_mul"])]
    m = _mod(field)
    rng = np.random.default_rng()
    n = 1 << 17
    words = rng.integers(0, 1 << 32, size=(2, n, 8), dtype=np.uint32)
    words[:, :, 7] %= np.uint32(m >> 224)
    edge = bn254.limbs_from_ints([0, 1, 2, m - 1, m - 2, (m - 1) // 2, (1 << 253) % m, m - (1 << 200)])
    words[0, : len(edge)] = edge
    words[1, : len(edge)] = edge[::-1]
    a, b = cupy.asarray(words[0]), cupy.asarray(words[1])
    for op in ("mul", "sqr"):
        args = (np.uint32(OPS[op]), a, b)
        got = [_run(mod, f"t_{field}_op", args, words[0]) for mod in mods]
        assert np.array_equal(got[0], got[1]), f"{field} {op}: FP64 product differs from CIOS"
