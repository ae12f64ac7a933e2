"""CI checks of the CUDA kernels on machines without a GPU.

1. Every module the GPU loader builds (``compile.MODULES``, concatenated exactly as the loader
   does) compiles with ``nvcc -arch=sm_90 -ptx``; skipped when nvcc is absent.
2. The NTT and gather kernel bodies, built as host C++ (g++) and run one block at a time with one
   "thread" (every kernel phase loops over its work with stride blockDim, so this is the same
   code), driven by the real planner in ``distprove/backends/gpu/ntt.py``, match the CPU
   reference (``distprove/backends/cpu``) on fresh random inputs, for each NTT build variant
   (``NTT_VARIANTS``) and pass plan (``PLANS``), and do as many Fr products as the planner's
   count (``gntt.plan_products``) says.
"""

from __future__ import annotations

import ctypes
import functools
import random
import shutil
import subprocess
from pathlib import Path
from typing import Any

import numpy as np
import pytest

from distprove import bn254
from distprove.backends.cpu import gather as cpu_gather
from distprove.backends.cpu import ntt as cpu_ntt
from distprove.backends.gpu import ntt as gntt
from distprove.backends.gpu.compile import BASE_OPTIONS, KERNEL_DIR, MODULE_OPTIONS, MODULES, module_source
from distprove.bn254 import FR_MONT, FR_MONT_INV, R

# --- 1. nvcc compile check ---------------------------------------------------------------


@pytest.mark.parametrize("name", sorted(MODULES))
def test_module_compiles_for_sm90(name: str, tmp_path: Path) -> None:
    nvcc = shutil.which("nvcc")
    if nvcc is None:
        pytest.skip("nvcc not installed")
    units = MODULES[name]
    missing = [u for u in units if not (KERNEL_DIR / u).is_file()]
    if missing:
        pytest.skip(f"module {name}: units not written yet: {missing}")
    src = tmp_path / f"{name}.cu"
    src.write_text(module_source(units))
    res = subprocess.run(
        [nvcc, "-arch=sm_90", "-ptx", *BASE_OPTIONS, *MODULE_OPTIONS.get(name, ()), "-o", str(tmp_path / f"{name}.ptx"), str(src)],
        capture_output=True, text=True, timeout=900,
    )
    assert res.returncode == 0, res.stderr[-4000:]
    ptx = (tmp_path / f"{name}.ptx").read_text()
    if name == "msm":  # the pair rounds' stage copies asynchronously here (see the sm_75 test below)
        assert "cp.async.ca.shared.global" in ptx
    # Two independent Fq products share a call in the MSM modules' point code; groupfft and
    # fixedbase keep one product a call (compile.MODULE_OPTIONS: measured slower there).
    assert ("fq_mul2_call" in ptx) == (name in ("msm", "msm_cw"))


@pytest.mark.parametrize("arch,f64", [("sm_89", False), ("sm_90", True), ("sm_100", True), ("sm_120", False)])
def test_device_product_follows_the_arch(arch: str, f64: bool, tmp_path: Path) -> None:
    """field.cuh takes the FP64-pipe product on sm_90 and sm_100 only (elsewhere the FP64 pipe is
    narrower than the integer one and CIOS stays): the PTX has round-toward-zero FP64 FMAs or none."""
    nvcc = shutil.which("nvcc")
    if nvcc is None:
        pytest.skip("nvcc not installed")
    src = tmp_path / "f.cu"
    src.write_text(module_source(("field.cuh",)) + 'extern "C" __global__ void k(Fq* x) { x[0] = fq_mul(x[0], x[1]); }\n')
    res = subprocess.run([nvcc, f"-arch={arch}", "-ptx", *BASE_OPTIONS, "-o", str(tmp_path / "f.ptx"), str(src)],
                         capture_output=True, text=True, timeout=300)
    if res.returncode != 0 and "Unsupported gpu architecture" in res.stderr:
        pytest.skip(f"this nvcc has no {arch}")
    assert res.returncode == 0, res.stderr[-4000:]
    assert ("fma.rz.f64" in (tmp_path / "f.ptx").read_text()) == f64


def test_pair_stage_copies_on_the_oldest_arch(tmp_path: Path) -> None:
    """The pair rounds' stage copies with cp.async from sm_80 and with plain loads and stores below
    (msm_affine.cu stage_copy16): the msm module compiles for sm_75, CUDA 13's oldest target, with
    no cp.async in its PTX."""
    nvcc = shutil.which("nvcc")
    if nvcc is None:
        pytest.skip("nvcc not installed")
    src = tmp_path / "msm.cu"
    src.write_text(module_source(MODULES["msm"]))
    ptx = tmp_path / "msm.ptx"
    res = subprocess.run([nvcc, "-arch=sm_75", "-ptx", *BASE_OPTIONS, *MODULE_OPTIONS.get("msm", ()), "-o", str(ptx), str(src)],
                         capture_output=True, text=True, timeout=900)
    if res.returncode != 0 and "Unsupported gpu architecture" in res.stderr:
        pytest.skip("this nvcc has no sm_75")
    assert res.returncode == 0, res.stderr[-4000:]
    text = ptx.read_text()
    assert "msm_pairs_g2" in text and "cp.async" not in text


# --- 2. host build of the kernel bodies --------------------------------------------------

HARNESS = r"""
extern "C" void host_ntt_pass(u32 blocks, const u32* src, u32* dst, const u32* tw_sub,
                              const u32* tw_pass, const u32* pre, const u32* post_tab,
                              const u32* post, u32 m, u32 log_t, u32 log_c, u32 log_s,
                              u32 last, u32 log_mp, u32 digits, u32 log_e) {
    static u32 sm[8u << NTT_BIG_LOG_E];
    NttPass a = {src, dst, tw_sub, tw_pass, pre, post_tab, post, m, log_t, log_c, log_s,
                 last, log_mp, digits};
    for (u32 b = 0; b < blocks; b++) {
        if (log_e == NTT_LOG_E) ntt_pass_body<NTT_LOG_E>(a, b, 0, 1, sm);
        else ntt_pass_body<NTT_BIG_LOG_E>(a, b, 0, 1, sm);
    }
}
extern "C" u32 host_ntt_tw_format(void) { return NTT_TW_FORMAT; }
extern "C" u64 host_ntt_mul_count(void) {  // products since the last call
    u64 c = ntt_mul_count;
    ntt_mul_count = 0;
    return c;
}
extern "C" void host_pow_table(u32* out, const u32* pows, const u32* scale, u64 count, u32 mode,
                               u32 log_c, u32 width, u32 col0, u32 emask, u32 multiply) {
    ntt_pow_body(out, pows, scale, count, mode, log_c, width, col0, emask, multiply, 0, 1);
}
extern "C" void host_scale(u32* x, const u32* c, u64 count) {
    ntt_scale_body(x, c, count, 0, 1);
}
extern "C" void host_h_combine(const u32* a, const u32* b, const u32* c, u32* out, u64 count) {
    ntt_hcombine_body(a, b, c, out, count, 0, 1);
}
extern "C" void host_gather(const u32* a_ptr, const u32* a_sig, const u32* a_val,
                            const u32* b_ptr, const u32* b_sig, const u32* b_val, const u32* w,
                            u32* out_a, u32* out_b, u32* out_c, u32 n_rows) {
    for (u32 r = 0; r < n_rows; r++)
        gather_body(a_ptr, a_sig, a_val, b_ptr, b_sig, b_val, w, out_a, out_b, out_c, r);
}
extern "C" void host_gather_group(const u32* a_ptr, const u32* a_sig, const u32* a_val,
                                  const u32* b_ptr, const u32* b_sig, const u32* b_val, const u32* w,
                                  u32* out_a, u32* out_b, u32* out_c, u32 n_vars, u32 n_rows,
                                  u32 proofs) {
    for (u32 p = 0; p < proofs; p++)
        for (u32 r = 0; r < n_rows; r++)
            gather_group_body(a_ptr, a_sig, a_val, b_ptr, b_sig, b_val, w, out_a, out_b, out_c,
                              n_vars, n_rows, p, r);
}
"""


NTT_VARIANTS: dict[str, tuple[str, ...]] = {
    "default": (), "f64": ("-DDP_F64_MUL",),
    **{name: opts if "-DDP_CIOS_MUL" in opts else (*opts, "-DDP_F64_MUL") for name, opts in gntt.BUILDS.items()},
}
"""Host builds of ntt.cu: the default (Montgomery butterflies; CIOS products on the host), the
device's FP64 product (butterfly twiddles split on the host, lazy butterflies, the first level
pair done by the load: the device default), and gntt.BUILDS (CIOS butterflies; Shoup-product
butterflies; FP64 products by unsplit twiddles; split twiddles without lazy butterflies; lazy
butterflies after the load's shared-memory round trip). The FP64 ones take -DDP_F64_MUL here, the device's own choice on sm_90."""
PLANS = (9, 12)
"""max_pass_log of the NttEngine plans tested: the default and the two-pass 2^24 plan."""


@pytest.fixture(scope="module")
def libs(tmp_path_factory: pytest.TempPathFactory) -> dict[str, ctypes.CDLL]:
    """One host build per NTT variant (products counted: -DNTT_COUNT_MULS)."""
    cxx = shutil.which("g++")
    if cxx is None:
        pytest.skip("g++ not installed")
    d = tmp_path_factory.mktemp("hostkernels")
    src = d / "host.cpp"
    src.write_text(module_source(("field.cuh", "ntt.cu", "gather.cu")) + HARNESS)
    out = {}
    for name, opts in NTT_VARIANTS.items():
        so = d / f"host-{name}.so"
        res = subprocess.run([cxx, "-O2", "-std=c++17", "-shared", "-fPIC", "-DNTT_COUNT_MULS", *opts,
                              "-o", str(so), str(src)], capture_output=True, text=True, timeout=600)
        assert res.returncode == 0, res.stderr[-4000:]
        out[name] = ctypes.CDLL(str(so))
        out[name].host_ntt_mul_count.restype = ctypes.c_uint64
        out[name].host_ntt_tw_format.restype = ctypes.c_uint32
        out[name].twiddles = gntt.TWIDDLE_FORMATS[out[name].host_ntt_tw_format()]
    return out


@pytest.fixture(scope="module")
def lib(libs: dict[str, ctypes.CDLL]) -> ctypes.CDLL:
    return libs["default"]


def _p(a: np.ndarray | None) -> Any:
    if a is None:
        return None
    assert a.dtype == np.uint32 and a.flags.c_contiguous
    return ctypes.c_void_p(a.ctypes.data)


class HostKernels:
    """The planner's kernel set on the host build (numpy arrays as 'device' memory)."""

    def __init__(self, lib: ctypes.CDLL) -> None:
        self.lib = lib
        self.twiddles = lib.twiddles  # the build's sub-NTT twiddle format (NttEngine.sub_twiddles)

    def upload(self, a: np.ndarray) -> np.ndarray:
        return np.ascontiguousarray(a, dtype=np.uint32).copy()

    def empty_like(self, x: np.ndarray) -> np.ndarray:
        return np.full_like(x, 0xDEADBEEF)  # poisoned: a slot nobody writes shows up

    def ntt_pass(self, spec: gntt.PassSpec, src, dst, tw_sub, tw_pass, pre, post_tab, post) -> None:
        u = ctypes.c_uint32
        self.lib.host_ntt_pass(u(spec.blocks), _p(src), _p(dst), _p(tw_sub), _p(tw_pass), _p(pre),
                               _p(post_tab), _p(post), u(spec.m), u(spec.log_t), u(spec.log_c),
                               u(spec.log_s), u(spec.last), u(spec.log_mp), u(spec.digits),
                               u(spec.log_e))

    def pow_table(self, out, pows, scale, count, mode, log_c, width, col0, emask, multiply) -> None:
        u = ctypes.c_uint32
        self.lib.host_pow_table(_p(out), _p(pows), _p(scale), ctypes.c_uint64(count), u(mode),
                                u(log_c), u(width), u(col0), u(emask), u(multiply))

    def scale(self, x, c) -> None:
        self.lib.host_scale(_p(x), _p(c), ctypes.c_uint64(x.size // 8))

    def h_combine(self, a, b, c, out) -> None:
        self.lib.host_h_combine(_p(a), _p(b), _p(c), _p(out), ctypes.c_uint64(a.size // 8))


@pytest.fixture(params=[(v, p) for v in NTT_VARIANTS for p in PLANS], ids=lambda vp: f"{vp[0]}-plan{vp[1]}")
def engine(request: pytest.FixtureRequest, libs: dict[str, ctypes.CDLL]) -> gntt.NttEngine:
    variant, max_pass_log = request.param
    return gntt.NttEngine(HostKernels(libs[variant]), max_pass_log)


def rand_fr(n: int, rng: random.Random) -> list[int]:
    edge = [0, 1, R - 1, R - 2]
    return [edge[i] if i < len(edge) and n > 8 else rng.randrange(R) for i in range(n)]


def to_mont(vals: list[int]) -> np.ndarray:
    return bn254.limbs_from_ints([v * FR_MONT % R for v in vals])


def from_mont(a: np.ndarray) -> list[int]:
    return [v * FR_MONT_INV % R for v in bn254.ints_from_limbs(a)]


@pytest.mark.parametrize("log_n", range(1, 14))
def test_ntt_matches_cpu(engine: gntt.NttEngine, log_n: int) -> None:
    rng = random.Random(1000 + log_n)
    vals = rand_fr(1 << log_n, rng)
    for inverse in (False, True):
        x = to_mont(vals)
        engine.ntt(x, inverse)
        assert from_mont(x) == cpu_ntt.ntt(vals, inverse)


@pytest.mark.parametrize("variant", sorted(NTT_VARIANTS))
@pytest.mark.parametrize("log_n", [2, 7, 11, 12, 13])
def test_ntt_many_passes(libs: dict[str, ctypes.CDLL], monkeypatch: pytest.MonkeyPatch, variant: str,
                         log_n: int) -> None:
    """Force 3-4 passes at small sizes: the digit-reversed last pass of 2^20+ transforms."""
    monkeypatch.setattr(gntt, "MAX_PASS_LOG", 4)
    monkeypatch.setattr(gntt, "MAX_SINGLE_LOG", 8)
    assert len(gntt.split(log_n)) == (1 if log_n <= 8 else -(-log_n // 4))
    engine = gntt.NttEngine(HostKernels(libs[variant]))  # the patched default plan
    assert len(gntt.plan(log_n, max_pass_log=engine.max_pass_log)) == len(gntt.split(log_n))
    rng = random.Random(2000 + log_n)
    vals = rand_fr(1 << log_n, rng)
    x = to_mont(vals)
    engine.ntt(x)
    assert from_mont(x) == cpu_ntt.ntt(vals)


@functools.lru_cache(maxsize=None)
def _standard_case(log_n: int, inverse: bool) -> tuple[list[int], list[int]]:
    """Random standard-form input of size 2^log_n and its CPU-reference NTT (shared by the engines)."""
    vals = rand_fr(1 << log_n, random.Random(7000 + log_n))
    return vals, cpu_ntt.ntt(vals, inverse)


@pytest.mark.parametrize("log_n", range(1, 15))
def test_ntt_standard_form(engine: gntt.NttEngine, log_n: int) -> None:
    """pre (R^2, to Montgomery) on the first pass, post (1/n and/or out of Montgomery) on the last."""
    for inverse in (False, True):
        vals, want = _standard_case(log_n, inverse)
        x = bn254.limbs_from_ints(vals)
        engine.ntt_standard(x, inverse)
        assert bn254.ints_from_limbs(x) == want, f"inverse={inverse}"


@pytest.mark.parametrize("log_n,max_pass_log", [(13, 12), (14, 12), (15, 8), (16, 12)])
def test_ntt_big_tile_passes(libs: dict[str, ctypes.CDLL], monkeypatch: pytest.MonkeyPatch,
                             log_n: int, max_pass_log: int) -> None:
    """Multi-pass plans on 2^12 tiles (dp_ntt_pass_big) at sizes the host affords: with the
    small tile taken as 2^6, passes of 7+ levels go to the big tile (2^24 in two passes of 12
    runs this code with the same digit reversal and strided views)."""
    monkeypatch.setattr(gntt, "LOG_E", 6)
    specs = gntt.plan(log_n, max_pass_log=max_pass_log)
    assert len(specs) == 2 and specs[0].log_e == gntt.BIG_LOG_E
    for variant, lib in libs.items():
        engine = gntt.NttEngine(HostKernels(lib), max_pass_log)
        for inverse in (False, True):
            vals, want = _standard_case(log_n, inverse)
            x = bn254.limbs_from_ints(vals)
            engine.ntt_standard(x, inverse)
            assert bn254.ints_from_limbs(x) == want, f"{variant} inverse={inverse}"


@pytest.mark.parametrize("variant", sorted(NTT_VARIANTS))
@pytest.mark.parametrize("log_n,log_s,outer,max_pass_log,extras", [
    (13, 0, 1, 9, ""), (13, 0, 1, 12, "pre post"), (12, 0, 1, 12, "post_tab"), (11, 2, 3, 9, "pre"),
    (9, 0, 1, 3, "post"), (14, 0, 1, 5, "pre post_tab post"), (7, 1, 2, 4, ""), (5, 3, 1, 2, "post"),
])
def test_ntt_product_count(libs: dict[str, ctypes.CDLL], variant: str, log_n: int, log_s: int,
                           outer: int, max_pass_log: int, extras: str) -> None:
    """The kernels do exactly the Fr products gntt.plan_products counts (thread-level)."""
    lib = libs[variant]
    engine = gntt.NttEngine(HostKernels(lib), max_pass_log)
    n = outer << (log_n + log_s)
    x = to_mont([random.Random(n).randrange(R) for _ in range(n)])
    tab = engine.coset_scale(log_n + log_s) if "post_tab" in extras else None
    const = gntt.mont(5)
    lib.host_ntt_mul_count()  # reset
    engine.transform(x, log_n, log_s=log_s, outer=outer, pre=const if "pre" in extras.split() else None,
                     post=const if "post" in extras.split() else None, post_tab=tab)
    got = lib.host_ntt_mul_count()
    want = gntt.plan_products(gntt.plan(log_n, log_s, outer, max_pass_log),
                              pre="pre" in extras.split(), post_tab=tab is not None,
                              post="post" in extras.split())
    assert got == want.thread


def test_from_montgomery(engine: gntt.NttEngine) -> None:
    vals = rand_fr(100, random.Random(5))
    assert bn254.ints_from_limbs(engine.from_montgomery(to_mont(vals))) == vals


@pytest.mark.parametrize("log_n,log_s,outer", [(3, 2, 3), (11, 1, 2), (5, 0, 6), (12, 3, 1)])
def test_batched_strided(engine: gntt.NttEngine, log_n: int, log_s: int, outer: int) -> None:
    rng = random.Random(log_n * 100 + log_s)
    n, s = 1 << log_n, 1 << log_s
    vals = [rng.randrange(R) for _ in range(outer * n * s)]
    x = to_mont(vals)
    engine.transform(x, log_n, log_s=log_s, outer=outer)
    got = np.array(from_mont(x), dtype=object).reshape(outer, n, s)
    ref = np.array(vals, dtype=object).reshape(outer, n, s)
    for o in range(outer):
        for i in range(s):
            assert got[o, :, i].tolist() == cpu_ntt.ntt(ref[o, :, i].tolist())


@pytest.mark.parametrize("log_n", [4, 9, 12])
def test_fourstep_equals_plain(engine: gntt.NttEngine, log_n: int) -> None:
    rng = random.Random(300 + log_n)
    vals = rand_fr(1 << log_n, rng)
    for inverse in (False, True):
        out = gntt.fourstep(engine, to_mont(vals),
                            lambda z: np.ascontiguousarray(z.transpose(1, 0, 2)), inverse)
        assert from_mont(out) == cpu_ntt.ntt(vals, inverse)


def test_fourstep_blocks_on_separate_workers(engine: gntt.NttEngine) -> None:
    """Columns and rows done block by block (as Dask workers would) give the plain NTT."""
    log_n = 10
    l1, l2 = gntt.fourstep_split(log_n)
    n1, n2 = 1 << l1, 1 << l2
    vals = rand_fr(1 << log_n, random.Random(99))
    m = to_mont(vals).reshape(n1, n2, 8)
    w = 8  # column block width
    cols = []
    for c0 in range(0, n2, w):
        blk = np.ascontiguousarray(m[:, c0:c0 + w])
        engine.columns(blk)
        engine.twiddle(blk, log_n, c0)
        cols.append(blk)
    y = np.concatenate(cols, axis=1)
    rows = []
    for r0 in range(0, n1, 5):  # uneven row blocks
        blk = np.ascontiguousarray(y[r0:r0 + 5])
        engine.rows(blk)
        rows.append(blk)
    z = np.concatenate(rows, axis=0)
    out = np.ascontiguousarray(z.transpose(1, 0, 2)).reshape(-1, 8)
    assert from_mont(out) == cpu_ntt.ntt(vals)


def test_gpu_fourstep_module_equals_cpu_blocks(lib: ctypes.CDLL, monkeypatch: pytest.MonkeyPatch) -> None:
    """backends/gpu/fourstep.py run on the host build (numpy as the device) gives the CPU block
    functions' blocks bit for bit: column widths that are not powers of two, offsets, several
    vectors, both directions, the coset powers of the power-table kernel's mode 3."""
    import types

    from distprove.backends.cpu import fourstep as cpu_fs
    from distprove.backends.gpu import fourstep as gpu_fs

    shim = types.SimpleNamespace(asarray=lambda a: np.array(a, dtype=np.uint32), ascontiguousarray=np.ascontiguousarray,
                                 asnumpy=np.asarray, empty_like=np.empty_like)
    host = gntt.NttEngine(HostKernels(lib))
    monkeypatch.setattr(gpu_fs, "_cp", lambda: shim)
    monkeypatch.setattr(gpu_fs, "_engine", lambda: host)
    rng = random.Random(7)
    for log_n in (7, 8):
        n = 1 << log_n
        n1, n2 = cpu_fs.split_sizes(n)
        v = bn254.limbs_from_ints(rand_fr(3 * n, rng)).reshape(3, n, 8)
        for inverse in (False, True):
            for lo, hi in [(0, n2), (3, 8)]:
                block = cpu_fs.take_columns(v, n1, n2, lo, hi)
                assert np.array_equal(gpu_fs.column_step(block, n, lo, inverse), cpu_fs.column_step(block, n, lo, inverse))
            rows = np.ascontiguousarray(v.reshape(3, n1, n2, 8)[:, 2:7])
            assert np.array_equal(gpu_fs.row_ntts(rows, n, inverse), cpu_fs.row_ntts(rows, n, inverse))
        assert np.array_equal(gpu_fs.coset_scale(rows, n, 2), cpu_fs.coset_scale(rows, n, 2))
        assert np.array_equal(gpu_fs.h_from_odd(rows), cpu_fs.h_from_odd(rows))
        assert np.array_equal(gpu_fs.ntt(v[0], True, 3), cpu_fs.ntt(v[0], True, 1))


@pytest.mark.parametrize("log_n", [1, 5, 11])
def test_h_scalars_matches_cpu(engine: gntt.NttEngine, log_n: int) -> None:
    rng = random.Random(500 + log_n)
    n = 1 << log_n
    a, b = rand_fr(n, rng), [rng.randrange(R) for _ in range(n)]
    c = [rng.randrange(R) for _ in range(n)]
    hs = engine.h_scalars(to_mont(a), to_mont(b), to_mont(c))
    assert bn254.ints_from_limbs(hs) == cpu_ntt.h_scalars(a, b, c)


@pytest.mark.parametrize("log_n,proofs", [(5, 1), (5, 3), (11, 2)])
def test_h_scalars_of_a_stack_equal_each_alone(engine: gntt.NttEngine, log_n: int, proofs: int) -> None:
    """h_scalars of (G, n, 8) stacks (each proof's NTTs in the same passes, outer = G) gives each
    proof's H scalars as h_scalars of its vectors alone does."""
    rng = random.Random(700 + log_n + proofs)
    n = 1 << log_n
    vecs = [[rand_fr(n, rng) for _ in range(3)] for _ in range(proofs)]
    stacks = [np.stack([to_mont(v[m]) for v in vecs]) for m in range(3)]
    hs = engine.h_scalars(*stacks)
    assert hs.shape == (proofs, n, 8)
    for p, (a, b, c) in enumerate(vecs):
        assert bn254.ints_from_limbs(hs[p]) == cpu_ntt.h_scalars(a, b, c)


def test_gather_group_matches_cpu(lib: ctypes.CDLL) -> None:
    """The group gather's per-thread code (gather_group_body: proof p's witness and outputs at its
    rows of the stacks) gives each witness's gather."""
    rng = random.Random(12)
    n_rows, n_vars, proofs = 120, 30, 3
    ws = [[1] + [rng.randrange(R) for _ in range(n_vars - 1)] for _ in range(proofs)]
    csr = {}
    for mat in "ab":
        lens = [0 if rng.random() < 0.4 else rng.randrange(1, 6) for _ in range(n_rows)]
        ptr = np.concatenate([[0], np.cumsum(lens)]).astype(np.uint32)
        sig = np.array([rng.randrange(n_vars) for _ in range(int(ptr[-1]))], dtype=np.uint32)
        val = bn254.limbs_from_ints([rng.randrange(R) for _ in range(len(sig))])
        csr[mat] = (ptr, sig, val)
    w = np.stack([bn254.limbs_from_ints(v) for v in ws])
    out = [np.full((proofs, n_rows, 8), 0xDEADBEEF, dtype=np.uint32) for _ in range(3)]
    u = ctypes.c_uint32
    lib.host_gather_group(*(_p(x) for x in csr["a"]), *(_p(x) for x in csr["b"]), _p(w),
                          *(_p(o) for o in out), u(n_vars), u(n_rows), u(proofs))
    for p, vals in enumerate(ws):
        ref = {m: cpu_gather.evaluate_rows(csr[m][0], csr[m][1], cpu_gather.decode_coefficients(csr[m][2]), vals)
               for m in "ab"}
        assert from_mont(out[0][p]) == ref["a"]
        assert from_mont(out[1][p]) == ref["b"]
        assert from_mont(out[2][p]) == cpu_gather.pointwise_product(ref["a"], ref["b"])


def test_gather_matches_cpu(lib: ctypes.CDLL) -> None:
    rng = random.Random(11)
    n_rows, n_vars = 300, 40
    w_vals = [1] + [rng.randrange(R) for _ in range(n_vars - 1)]
    w_vals[5] = R - 1
    csr = {}
    for mat in "ab":
        lens = [0 if rng.random() < 0.4 else rng.randrange(1, 6) for _ in range(n_rows)]
        ptr = np.concatenate([[0], np.cumsum(lens)]).astype(np.uint32)
        sig = np.array([rng.randrange(n_vars) for _ in range(int(ptr[-1]))], dtype=np.uint32)
        coefs = [rng.choice([1, R - 1, rng.randrange(R)]) for _ in range(len(sig))]
        val = bn254.limbs_from_ints([c * FR_MONT * FR_MONT % R for c in coefs])
        csr[mat] = (ptr, sig, val)
    w = bn254.limbs_from_ints(w_vals)
    out = [np.full((n_rows, 8), 0xDEADBEEF, dtype=np.uint32) for _ in range(3)]
    lib.host_gather(*(_p(x) for x in csr["a"]), *(_p(x) for x in csr["b"]), _p(w),
                    *(_p(o) for o in out), ctypes.c_uint32(n_rows))
    ref = {}
    for mat in "ab":
        ptr, sig, val = csr[mat]
        ref[mat] = cpu_gather.evaluate_rows(ptr, sig, cpu_gather.decode_coefficients(val), w_vals)
    assert from_mont(out[0]) == ref["a"]
    assert from_mont(out[1]) == ref["b"]
    assert from_mont(out[2]) == cpu_gather.pointwise_product(ref["a"], ref["b"])


# --- 3. shared-memory bank model of the pass kernel ---------------------------------------


def _ntt_slot(i: int) -> int:
    """ntt_slot in ntt.cu (the default build's swizzle)."""
    h = i >> 5
    x = h ^ (((h >> 5) & 1) * 11) ^ (((h >> 6) & 1) * 21)
    return i ^ (x & 31)


def _warp_slots(m: int, log_t: int) -> dict[str, list[list[int]]]:
    """Per phase of a full-tile pass (default build), the shared-memory slots each access of each
    warp touches: item q runs on lane q % 32 of warp q // 32, as ntt_pass_body assigns them."""
    n, lines = 1 << m, 1 << log_t
    cnt = lines << m
    brev = lambda j: int(f"{j:0{m}b}"[::-1], 2)  # noqa: E731
    phases: dict[str, tuple[int, Any]] = {
        "load_unit": (cnt, lambda q: [((q >> m) << m) | brev(q & (n - 1))]),
        "load_strided": (cnt, lambda q: [((q & (lines - 1)) << m) | brev(q >> log_t)]),
        "store_unit": (cnt, lambda q: [q]),
        "store_strided": (cnt, lambda q: [((q & (lines - 1)) << m) | (q >> log_t)]),
    }
    s = 0
    while s + 1 < m:
        def radix4(q: int, s: int = s, lg: int = m - 2 - s) -> list[int]:
            lo, r = q >> (log_t + lg), q & ((1 << (log_t + lg)) - 1)
            i = ((r >> lg) << m) | ((r & ((1 << lg) - 1)) << (s + 2)) | lo
            return [i + h * (1 << s) for h in range(4)]
        phases[f"radix4_s{s}"] = (cnt >> 2, radix4)
        s += 2
    if s < m:
        phases[f"radix2_s{s}"] = (cnt >> 1, lambda q, s=s: [((q & (lines - 1)) << m) | (q >> log_t),
                                                             (((q & (lines - 1)) << m) | (q >> log_t)) + (1 << s)])
    out = {}
    for name, (items, slots) in phases.items():
        per_item = [slots(q) for q in range(items)]
        out[name] = [[per_item[q][a] for q in range(w, w + 32)]
                     for w in range(0, items, 32) for a in range(len(per_item[0]))]
    return out


@pytest.mark.parametrize("log_e", [gntt.LOG_E, gntt.BIG_LOG_E])
def test_ntt_shared_memory_banks(log_e: int) -> None:
    """No warp access of any phase hits a bank twice (limb l adds l << log_e: same bank)."""
    for m in range(4, log_e + 1):
        for name, accesses in _warp_slots(m, log_e - m).items():
            for slots in accesses:
                banks = [_ntt_slot(i) & 31 for i in slots]
                assert len(set(banks)) == 32, f"tile 2^{log_e} m={m} {name}: {sorted(banks)}"
