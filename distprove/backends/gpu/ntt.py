"""GPU NTT over Fr (driver of ``distprove/kernels/ntt.cu``): plain, coset (H scalars) and staged four-step.

Conventions (ffjavascript's, DESIGN.md): natural order in and out, ``ntt(a)[k] = sum_j a[j] w^(jk)``
with ``w = bn254.root_of_unity(log2 n)``; the inverse uses ``w^-1`` and scales by ``1/n``. Device
vectors are ``(n, 8)`` uint32 arrays in Montgomery form unless a function says otherwise.

The planning here (how a size splits into shared-memory passes, each pass's launch parameters,
which twiddle tables exist) is plain Python; the launches go through a *kernel set*
(:class:`CupyKernels` on a GPU). ``tests/test_kernels_compile.py`` drives the same planner with a
host build of the kernels, so this module's logic is checked on machines without a GPU.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any, Protocol

import numpy as np

from distprove import bn254
from distprove.bn254 import FR_MONT, R

LOG_E = 10
"""log2 of the ``dp_ntt_pass`` tile (NTT_LOG_E in ntt.cu): passes of up to 2^10 elements."""
BIG_LOG_E = 12
"""log2 of the ``dp_ntt_pass_big`` tile (NTT_BIG_LOG_E): passes of 2^11 and 2^12 elements."""
TW_LOG = 12
"""The sub-twiddle table holds powers of w_{2^TW_LOG} (NTT_TW_LOG)."""
MAX_SINGLE_LOG = 10
"""Sizes up to 2^max(MAX_SINGLE_LOG, max_pass_log) are one pass (one shared-memory tile)."""
MAX_PASS_LOG = 9
"""Default plan: larger sizes split into passes of at most this many levels (keeps >= 2 lines
per block). ``max_pass_log=12`` (NttEngine) is the two-pass 2^24 plan on 2^12 tiles."""
THREADS = 256
"""Threads per ``dp_ntt_pass`` block (NTT_THREADS in ntt.cu)."""
BIG_THREADS = 1024
"""Threads per ``dp_ntt_pass_big`` block (NTT_BIG_THREADS; CupyKernels can build other counts)."""
MAX_LOG_N = 28
"""Largest supported size (Fr's 2-adicity)."""


def log2_exact(n: int) -> int:
    """log2 of a power of two, else ValueError."""
    k = n.bit_length() - 1
    if n < 1 or 1 << k != n:
        raise ValueError(f"NTT size {n} is not a power of two")
    return k


def split(log_n: int, max_pass_log: int | None = None) -> list[int]:
    """Levels per pass for a transform of size 2^log_n (largest first, each <= max_pass_log,
    default MAX_PASS_LOG; one pass up to 2^max(MAX_SINGLE_LOG, max_pass_log))."""
    mp = MAX_PASS_LOG if max_pass_log is None else max_pass_log
    if not 1 <= mp <= BIG_LOG_E:
        raise ValueError(f"NTT pass size 2^{mp} outside 2^1 .. 2^{BIG_LOG_E}")
    if not 1 <= log_n <= MAX_LOG_N:
        raise ValueError(f"NTT size 2^{log_n} outside 2^1 .. 2^{MAX_LOG_N}")
    if log_n <= max(MAX_SINGLE_LOG, mp):
        return [log_n]
    passes = -(-log_n // mp)
    base, extra = divmod(log_n, passes)
    return [base + 1] * extra + [base] * (passes - extra)


@dataclass(frozen=True)
class PassSpec:
    """Launch parameters of one ``dp_ntt_pass`` (see ``NttPass`` in ntt.cu)."""

    m: int
    log_t: int
    log_c: int
    log_s: int
    last: bool
    log_mp: int
    digits: int
    blocks: int
    table: tuple[int, int] | None  # (log N_p, log N_{p+1}) of the pass twiddle table, or None
    log_e: int = LOG_E  # tile: LOG_E (dp_ntt_pass) or BIG_LOG_E (dp_ntt_pass_big)


def plan(log_n: int, log_s: int = 0, outer: int = 1, max_pass_log: int | None = None) -> list[PassSpec]:
    """The passes of ``outer`` transforms of size 2^log_n along an axis of stride 2^log_s."""
    ms = split(log_n, max_pass_log)
    specs = []
    done = 0
    total = outer << (log_n + log_s)
    for p, m in enumerate(ms):
        lines = total >> m
        log_e = LOG_E if m <= LOG_E else BIG_LOG_E
        log_t = min(log_e - m, (lines & -lines).bit_length() - 1)
        last = p == len(ms) - 1
        log_np = log_n - done
        if last:
            digits = len(ms) - 1
            for q, mq in enumerate(ms[:-1]):
                digits |= mq << (3 + 5 * q)
            spec = PassSpec(m, log_t, log_s, log_s, True, log_n - m, digits, lines >> log_t, None,
                            log_e)
        else:
            log_next = log_np - m
            spec = PassSpec(m, log_t, log_next + log_s, log_s, False, 0, 0, lines >> log_t,
                            (log_np, log_next), log_e)
        specs.append(spec)
        done += m
    return specs


@dataclass(frozen=True)
class Products:
    """Fr products of NTT passes: ``thread`` sums every thread's ``fr_mul`` calls (what a host
    build counts); ``warp`` is the device's cost, 32 per product a warp issues, so a lane that
    skips a product its warp still does counts as doing it; ``butterfly``: the part of ``warp``
    done by the butterflies (Shoup products in an NTT_SHOUP build, the rest Montgomery)."""

    thread: int
    warp: int
    butterfly: int = 0

    def __add__(self, other: "Products") -> "Products":
        return Products(self.thread + other.thread, self.warp + other.warp, self.butterfly + other.butterfly)


def pass_products(spec: PassSpec, *, pre: bool = False, post_tab: bool = False,
                  post: bool = False) -> Products:
    """Fr products of one ``dp_ntt_pass`` as ntt.cu does them.

    Butterflies: the first radix-4 level pair multiplies one element of four (by w_4), later
    pairs all four, and the radix-2 level of an odd m half the elements; a group whose
    twiddles are w^0 = 1 (lo = 0, 2^-s of the groups at level s) skips them, which
    the warp cost counts only where whole warps have lo = 0 (32+ items per twiddle). Non-last
    passes multiply by the four-step twiddle except at k = 0 or column 0 (lane skips; whole
    warps only where 32 lanes share them); the last pass by ``post_tab`` and ``post``; the
    first by ``pre``. tests/test_kernels_compile.py checks ``thread`` against a counting build.
    """
    m, log_t = spec.m, spec.log_t
    total = spec.blocks << (log_t + m)
    thread = warp = total if pre else 0
    s = 0
    while s + 1 < m:  # radix-4 level pairs
        if s == 0:
            t = w = total // 4
        else:
            t = total - 3 * (total >> (s + 2))
            w = t if log_t + m - 2 - s >= 5 else total
        thread, warp, s = thread + t, warp + w, s + 2
    if 0 < s < m:  # radix-2 level s = m - 1
        half = total // 2
        t = half - (half >> s)
        thread, warp = thread + t, warp + (t if log_t >= 5 else half)
    butterfly = warp - (total if pre else 0)
    if spec.last:
        extra = (total if post_tab else 0) + (total if post else 0)
        return Products(thread + extra, warp + extra, butterfly)
    if spec.table is not None:
        lines, n = total >> m, 1 << m
        col0 = lines >> (spec.log_c - spec.log_s)  # lines of column 0
        thread += (lines - col0) * (n - 1)
        if log_t >= 5:  # a warp: one k, 32 lines
            skipped = lines + (col0 * (n - 1) if spec.log_s >= 5 else 0)
        else:  # a warp: every line of its block, several k
            skipped = col0 * n if spec.log_s >= log_t else 0
        warp += total - skipped
    return Products(thread, warp, butterfly)


def plan_products(specs: list[PassSpec], *, pre: bool = False, post_tab: bool = False,
                  post: bool = False) -> Products:
    """:func:`pass_products` summed over a plan (``pre`` on its first pass, the rest on its last)."""
    out = Products(0, 0)
    for p, spec in enumerate(specs):
        out += pass_products(spec, pre=pre and p == 0,
                             post_tab=post_tab and spec.last, post=post and spec.last)
    return out


def mont(x: int) -> int:
    """Montgomery form of an Fr element."""
    return x % R * FR_MONT % R


def fr_limbs(values: list[int]) -> np.ndarray:
    """(len, 8) uint32 limbs of raw 256-bit values (no Montgomery step)."""
    return bn254.limbs_from_ints(values)


POW_LOG_H = 14
"""NTT_POW_LOG_H in ntt.cu: exponents below 2^28 split into two 14-bit halves."""


def two_level_powers(base: int) -> np.ndarray:
    """(2^15, 8) Montgomery limbs: base^i, then base^(i * 2^14), i < 2^14 (``dp_ntt_pow_table``'s table)."""
    h = 1 << POW_LOG_H
    out = np.concatenate([bn254.powers(base, h), bn254.powers(pow(base, h, R), h)])
    return fr_limbs([v * FR_MONT % R for v in out])


def shoup_table(base: int, count: int) -> np.ndarray:
    """(count, 16) uint32: base^e mod r (plain) and floor(base^e 2^256 / r) for e < count, the
    sub-NTT twiddles of an NTT_SHOUP build (ntt.cu's fr_mul_shoup)."""
    pows = bn254.powers(base, count)
    return np.concatenate([fr_limbs(pows), fr_limbs([(w << 256) // R for w in pows])], axis=1)


def split_limbs(values: list[int]) -> np.ndarray:
    """(len, 12) uint32: each value (< 2^260) as field.cuh's FrSplit, its five 52-bit limbs held
    exactly in doubles and a zero double."""
    mask = (1 << 52) - 1
    limbs = [[float((v >> (52 * k)) & mask) for k in range(5)] + [0.0] for v in values]
    return np.ascontiguousarray(np.array(limbs, dtype=np.float64).reshape(-1, 6).view(np.uint32))


def split_table(base: int, count: int) -> np.ndarray:
    """:func:`split_limbs` of base^e mod r (Montgomery) for e < count: the sub-NTT twiddles of an
    NTT_SPLIT build (ntt.cu's fr_mul_split)."""
    return split_limbs([mont(w) for w in bn254.powers(base, count)])


def root(log_n: int, inverse: bool) -> int:
    """w_{2^log_n} (or its inverse) as ffjavascript defines it."""
    w = bn254.root_of_unity(log_n)
    return pow(w, -1, R) if inverse else w


BUILDS: dict[str, tuple[str, ...]] = {
    "montgomery": ("-DDP_CIOS_MUL", "-DNTT_MIN_BLOCKS=4"),
    "shoup": ("-DNTT_SHOUP=1", "-DDP_CIOS_MUL"),
    "unsplit": ("-DNTT_SPLIT=0",),
    "eager": ("-DNTT_LAZY=0",),
    "unfused": ("-DNTT_FUSE_LOAD=0",),
}
"""Other builds of ntt.cu, each the alternative to one of the default's choices: the tests check
them against the default, pipelines/bench_ntt.py times them beside it. montgomery: CIOS-product
butterflies (what a GPU without the FP64 product runs, field.cuh); shoup: Shoup-product
butterflies and CIOS elsewhere (an option for such GPUs); unsplit: FP64 products by Montgomery
twiddles converted in every product (NTT_SPLIT=0); eager: split twiddles with every value reduced
below r after each butterfly level (NTT_LAZY=0); unfused: lazy butterflies with the first level
pair done after the load's shared-memory round trip (NTT_FUSE_LOAD=0)."""

TWIDDLE_FORMATS = ("mont", "shoup", "split")
"""The sub-NTT twiddle tables a build of ntt.cu may take, by its NTT_TW_FORMAT: Montgomery values
(made on the device), :func:`shoup_table` pairs or :func:`split_table` limbs (made on the host)."""


class Kernels(Protocol):
    """What the planner needs from a device (CuPy) or a host build of ntt.cu. ``twiddles``: the
    format of the build's sub-NTT twiddle table (one of :data:`TWIDDLE_FORMATS`, as the build
    reports it)."""

    twiddles: str

    def upload(self, a: np.ndarray) -> Any: ...
    def empty_like(self, x: Any) -> Any: ...
    def ntt_pass(self, spec: PassSpec, src: Any, dst: Any, tw_sub: Any, tw_pass: Any,
                 pre: Any, post_tab: Any, post: Any) -> None: ...
    def pow_table(self, out: Any, pows: Any, scale: Any, count: int, mode: int, log_c: int,
                  width: int, col0: int, emask: int, multiply: bool) -> None: ...
    def scale(self, x: Any, c: Any) -> None: ...
    def h_combine(self, a: Any, b: Any, c: Any, out: Any) -> None: ...


class NttEngine:
    """Plans and runs NTTs through a kernel set; caches twiddle tables and constants per size.

    ``max_pass_log``: the largest sub-NTT of one pass (default MAX_PASS_LOG; 12 plans 2^24 as two
    passes on 2^12 tiles). Every plan gives the same outputs, bit for bit.
    """

    def __init__(self, kernels: Kernels, max_pass_log: int | None = None) -> None:
        self.k = kernels
        self.max_pass_log = MAX_PASS_LOG if max_pass_log is None else max_pass_log
        split(1, self.max_pass_log)  # validates it
        self._cache: dict[tuple, Any] = {}

    # -- cached device constants and tables ---------------------------------------------

    def clear(self) -> None:
        """Drop the cached tables (device memory); later transforms rebuild what they need."""
        self._cache.clear()

    def _cached(self, key: tuple, make: Callable[[], Any]) -> Any:
        """The device array cached under ``key``, made by ``make()`` the first time."""
        if key not in self._cache:
            self._cache[key] = make()
        return self._cache[key]

    def const(self, raw: int) -> Any:
        """A device (1, 8) array holding the raw 256-bit value ``raw`` (cached)."""
        return self._cached(("const", raw), lambda: self.k.upload(fr_limbs([raw])))

    def _powers(self, base: int) -> Any:
        return self._cached(("powers", base), lambda: self.k.upload(two_level_powers(base)))

    def _pow_table(self, key: tuple, base: int, count: int, mode: int, log_c: int = 0,
                   scale: int | None = None) -> Any:
        def make() -> Any:
            out = self.k.upload(np.zeros((count, 8), dtype=np.uint32))
            sc = None if scale is None else self.const(mont(scale))
            self.k.pow_table(out, self._powers(base), sc, count, mode, log_c, 1, 0, 0, False)
            return out

        return self._cached(key, make)

    def sub_twiddles(self, inverse: bool) -> Any:
        """w_{2^12}^e for e < 2^11, the sub-NTT twiddles of every pass, in the kernel set's format
        (``twiddles``): :func:`shoup_table` pairs or :func:`split_table` limbs, made on the host,
        or Montgomery values made on the device."""
        tables = {"shoup": shoup_table, "split": split_table}
        if self.k.twiddles in tables:
            make = tables[self.k.twiddles]
            return self._cached((f"sub-{self.k.twiddles}", inverse),
                                lambda: self.k.upload(make(root(TW_LOG, inverse), 1 << (TW_LOG - 1))))
        return self._pow_table(("sub", inverse), root(TW_LOG, inverse), 1 << (TW_LOG - 1), 0)

    def pass_twiddles(self, log_np: int, log_next: int, inverse: bool) -> Any:
        """w_{N_p}^(k*c) at k*N_{p+1} + c: the four-step twiddles of a non-last pass."""
        return self._pow_table(("pass", log_np, log_next, inverse), root(log_np, inverse),
                               1 << log_np, 1, log_next)

    def coset_scale(self, log_n: int) -> Any:
        """g^i / n (Montgomery), g = bn254.coset_generator(log_n): the fused iNTT + coset factor."""
        return self._pow_table(("coset", log_n), bn254.coset_generator(log_n), 1 << log_n, 0,
                               scale=pow(1 << log_n, -1, R))

    # -- transforms ------------------------------------------------------------------------

    def transform(self, x: Any, log_n: int, *, inverse: bool = False, log_s: int = 0,
                  outer: int = 1, pre: int | None = None, post: int | None = None,
                  post_tab: Any = None, scratch: Any = None) -> Any:
        """In-place NTTs of size 2^log_n of ``x`` viewed as [outer][2^log_n][2^log_s] elements.

        Montgomery in and out, unscaled: the inverse is sum_j x_j w^(-jk) (callers fold 1/n into
        ``post`` or ``post_tab``). ``pre``/``post`` are raw constants Montgomery-multiplied into
        every input/output; ``post_tab`` is a device table multiplied in by natural output index.
        ``scratch`` (same shape as x) is allocated when needed and not given. Returns x.
        """
        specs = plan(log_n, log_s, outer, self.max_pass_log)
        tw_sub = self.sub_twiddles(inverse)
        pre_d = None if pre is None else self.const(pre)
        post_d = None if post is None else self.const(post)
        if len(specs) > 1 and scratch is None:
            scratch = self.k.empty_like(x)
        for p, spec in enumerate(specs):
            src = x if p == 0 else scratch
            dst = x if spec.last else scratch
            tw_pass = None if spec.table is None else self.pass_twiddles(*spec.table, inverse)
            self.k.ntt_pass(spec, src, dst, tw_sub, tw_pass, pre_d if p == 0 else None,
                            post_tab if spec.last else None, post_d if spec.last else None)
        return x

    def ntt(self, x: Any, inverse: bool = False, scratch: Any = None) -> Any:
        """In-place NTT of Montgomery (n, 8) values (inverse scaled by 1/n), Montgomery out."""
        log_n = log2_exact(x.shape[0])
        post = mont(pow(1 << log_n, -1, R)) if inverse else None
        return self.transform(x, log_n, inverse=inverse, post=post, scratch=scratch)

    def ntt_standard(self, x: Any, inverse: bool = False) -> Any:
        """In-place NTT of standard-form (n, 8) values, standard form out (conversions fused)."""
        log_n = log2_exact(x.shape[0])
        post = pow(1 << log_n, -1, R) if inverse else 1  # raw: Montgomery-multiplying leaves mont form
        return self.transform(x, log_n, inverse=inverse, pre=FR_MONT * FR_MONT % R, post=post)

    def from_montgomery(self, x: Any) -> Any:
        """In place: Montgomery (n, 8) values to standard form."""
        self.k.scale(x, self.const(1))
        return x

    def h_tables(self, log_n: int) -> None:
        """Build every table :meth:`h_scalars` of size 2^log_n reads, before it overwrites its
        inputs: running out of device memory then leaves them as they were."""
        self.coset_scale(log_n)
        for inverse in (True, False):
            self.sub_twiddles(inverse)
            for spec in plan(log_n, 0, 1, self.max_pass_log):
                if spec.table is not None:
                    self.pass_twiddles(*spec.table, inverse)

    def h_scalars(self, a: Any, b: Any, c: Any, out: Any = None) -> Any:
        """DESIGN.md steps 2-3 on Montgomery evaluations a, b, c (overwritten): hs, standard form.

        Each vector: iNTT with the 1/n scale and the odd-coset shift g^i fused into its last pass,
        then a forward NTT; then hs = a*b - c out of Montgomery form, written to ``out`` (default c).
        a, b, c are (n, 8) vectors or (G, n, 8) stacks of G proofs' vectors: a stack's transforms
        are the same launches as one vector's (``outer`` = G), so a group costs what one proof does
        in launches (the coset table is indexed within each transform).
        """
        log_n = log2_exact(a.shape[-2])
        outer = a.size // (8 << log_n)
        self.h_tables(log_n)
        tab = self.coset_scale(log_n)
        scratch = self.k.empty_like(a) if len(split(log_n, self.max_pass_log)) > 1 else None
        for v in (a, b, c):
            self.transform(v, log_n, inverse=True, post_tab=tab, scratch=scratch, outer=outer)
            self.transform(v, log_n, scratch=scratch, outer=outer)
        out = c if out is None else out
        self.k.h_combine(a, b, c, out)
        return out

    # -- staged four-step (n = n1 * n2), each step callable on its own block ------------------

    def columns(self, block: Any, inverse: bool = False) -> Any:
        """Step 1: size-n1 NTTs down each column of a (n1, w, 8) block (w a power of two), in place."""
        n1, w = block.shape[0], block.shape[1]
        return self.transform(block, log2_exact(n1), inverse=inverse, log_s=log2_exact(w))

    def twiddle(self, block: Any, log_n: int, col0: int, inverse: bool = False) -> Any:
        """Step 2: block[k1, j] *= w_n^((col0 + j) * k1) (w^-1 and the 1/n scale for an inverse)."""
        n1, w = block.shape[0], block.shape[1]
        scale = self.const(mont(pow(1 << log_n, -1, R))) if inverse else None
        self.k.pow_table(block, self._powers(root(log_n, inverse)), scale, n1 * w, 2, 0, w, col0,
                         (1 << log_n) - 1, True)
        return block

    def rows(self, block: Any, inverse: bool = False) -> Any:
        """Step 3: size-n2 NTTs along each row of a (h, n2, 8) block, in place."""
        h, n2 = block.shape[0], block.shape[1]
        return self.transform(block, log2_exact(n2), inverse=inverse, outer=h)


def fourstep_split(log_n: int) -> tuple[int, int]:
    """(log n1, log n2) of the staged four-step form: n1 = 2^(log_n // 2) rows, n2 the rest."""
    return log_n // 2, log_n - log_n // 2


def fourstep(engine: NttEngine, x: Any, transpose: Any, inverse: bool = False) -> Any:
    """The plain NTT of Montgomery (n, 8) ``x`` composed from the staged steps (for tests/benches).

    ``transpose(z)`` turns a (h, n2, 8) block into its (n2, h, 8) transpose (the explicit
    all-to-all step). Returns the (n, 8) result; ``x`` is overwritten.
    """
    log_n = log2_exact(x.shape[0])
    l1, l2 = fourstep_split(log_n)
    z = x.reshape(1 << l1, 1 << l2, 8)
    engine.columns(z, inverse)
    engine.twiddle(z, log_n, 0, inverse)
    engine.rows(z, inverse)
    return transpose(z).reshape(1 << log_n, 8)


class CupyKernels:
    """:class:`Kernels` on the current CUDA device (CuPy + the NVRTC-compiled ntt module).

    ``options``: extra NVRTC options (benchmark variants, e.g. ``("-DNTT_MIN_BLOCKS=1",)``);
    ``big_threads``: threads per ``dp_ntt_pass_big`` block (built into its launch bounds).
    """

    def __init__(self, options: tuple[str, ...] = (), big_threads: int = BIG_THREADS) -> None:
        import cupy

        from .compile import MODULES, load_module

        self.cp = cupy
        if big_threads != BIG_THREADS:
            options = (*options, f"-DNTT_BIG_THREADS={big_threads}")
        self.big_threads = big_threads
        mod = load_module(MODULES["ntt"], "ntt", options)
        self._pass = mod.get_function("dp_ntt_pass")
        self._pass_big = mod.get_function("dp_ntt_pass_big")
        self._big_smem = 8 * 4 << BIG_LOG_E  # 128 KiB: above the 48 KiB default, so opt in
        self._pass_big.max_dynamic_shared_size_bytes = self._big_smem
        self._pow = mod.get_function("dp_ntt_pow_table")
        self._hcomb = mod.get_function("dp_h_combine")
        self._scale = mod.get_function("dp_fr_scale")
        fmt = cupy.zeros(1, dtype=cupy.uint32)
        mod.get_function("dp_ntt_tw_format")((1,), (1,), (fmt,))
        self.twiddles = TWIDDLE_FORMATS[int(fmt.get()[0])]
        """The format of the sub-NTT twiddle table the build takes (the engine makes it)."""

    @staticmethod
    def _ptr(a: Any) -> Any:
        return np.uint64(0) if a is None else a

    def _grid(self, count: int) -> tuple[int]:
        return (max(1, min(-(-count // 256), 132 * 32)),)

    def upload(self, a: np.ndarray) -> Any:
        return self.cp.asarray(np.ascontiguousarray(a, dtype=np.uint32))

    def empty_like(self, x: Any) -> Any:
        return self.cp.empty_like(x)

    def ntt_pass(self, spec: PassSpec, src: Any, dst: Any, tw_sub: Any, tw_pass: Any,
                 pre: Any, post_tab: Any, post: Any) -> None:
        u = np.uint32
        p = self._ptr
        args = (src, dst, tw_sub, p(tw_pass), p(pre), p(post_tab), p(post), u(spec.m),
                u(spec.log_t), u(spec.log_c), u(spec.log_s), u(spec.last), u(spec.log_mp),
                u(spec.digits))
        if spec.log_e == LOG_E:
            self._pass((spec.blocks,), (THREADS,), args)
        else:
            self._pass_big((spec.blocks,), (self.big_threads,), args, shared_mem=self._big_smem)

    def pow_table(self, out: Any, pows: Any, scale: Any, count: int, mode: int, log_c: int,
                  width: int, col0: int, emask: int, multiply: bool) -> None:
        u = np.uint32
        self._pow(self._grid(count), (256,),
                  (out, pows, self._ptr(scale), np.uint64(count), u(mode), u(log_c), u(width),
                   u(col0), u(emask), u(multiply)))

    def scale(self, x: Any, c: Any) -> None:
        n = x.size // 8
        self._scale(self._grid(n), (256,), (x, c, np.uint64(n)))

    def h_combine(self, a: Any, b: Any, c: Any, out: Any) -> None:
        n = a.size // 8
        self._hcomb(self._grid(n), (256,), (a, b, c, out, np.uint64(n)))


_engine: NttEngine | None = None


def engine() -> NttEngine:
    """The process-wide GPU NTT engine (compiles/loads the module on first use)."""
    global _engine
    if _engine is None:
        _engine = NttEngine(CupyKernels())
    return _engine
