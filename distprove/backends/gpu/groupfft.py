"""GPU group inverse DFT for ``ptau prepare`` (kernels/groupfft.cu, via NVRTC).

The host side of the GLV ladder: twiddles ω^-j (and s·ω^-j, s for the scaled last stage) are
reduced over the GLV lattice here (:func:`glv_pack`, vectorised over numpy object arrays) and
uploaded as (m, 9) uint32 rows |k1| ‖ |k2| ‖ signs. A level runs as: load (bit-reversed, to
XYZZ), log2(n) − 1 butterfly passes out of place, the scaled last pass, batch conversion to
affine; input and output are (n, 16|32) Montgomery limbs, infinity as zero rows.
"""

from __future__ import annotations

import functools
from typing import Any

import numpy as np

from distprove import bn254
from distprove.backends.cpu.groupfft import GLV_BASIS
from distprove.bn254 import G1, R, Group
from distprove.devsetup import powers

from .compile import get_module

GLV_WORDS = 9
"""u32 words per packed twiddle (GFFT_GLV_WORDS)."""
AFFINE_BATCH = 16
"""Points per thread of gfft_affine (FB_BATCH)."""
THREADS = {"g1": 128, "g2": 64}


def _module() -> Any:
    return get_module("groupfft")


def glv_pack(scalars: Any) -> np.ndarray:
    """(m, 9) uint32 rows for scalars k (reduced mod r): |k1| (4 words), |k2| (4 words), signs
    (bit 0: k1 < 0, bit 1: k2 < 0), k ≡ k1 + k2·λ (mod r). Vectorised over an object array."""
    (a1, b1), (a2, b2) = GLV_BASIS
    k = np.asarray(scalars, dtype=object).reshape(-1) % R
    det = a1 * b2 - a2 * b1
    c1 = (b2 * k * 2 + det) // (2 * det)
    c2 = (-b1 * k * 2 + det) // (2 * det)
    k1 = k - c1 * a1 - c2 * a2
    k2 = -c1 * b1 - c2 * b2
    out = np.zeros((k.shape[0], GLV_WORDS), dtype="<u4")
    if k.shape[0] == 0:
        return out
    for col, half in ((0, k1), (4, k2)):
        raw = b"".join(int(abs(v)).to_bytes(16, "little") for v in half)
        out[:, col : col + 4] = np.frombuffer(raw, dtype="<u4").reshape(-1, 4)
    out[:, 8] = (k1 < 0).astype(np.uint32) | ((k2 < 0).astype(np.uint32) << 1)
    return out


TWIDDLE_LEVELS_CACHED = 24
"""Levels whose packed twiddles stay cached: a prepare walks levels 0..power once per section (four
times), and the host GLV packing was ~40% of a power-20 prepare when only 4 levels were kept
(3.4 s per G1 top level on the H200 host). All levels of power ≤ 23 fit: ~72·2^power bytes."""


@functools.lru_cache(maxsize=TWIDDLE_LEVELS_CACHED)
def twiddles(p: int) -> tuple[np.ndarray, np.ndarray]:
    """Packed tables of level p (n = 2^p ≥ 2): ω^-j for j < n/2 (the passes), and s·ω^-j for
    j < n/2 followed by s = 1/n (the last pass), ω = Fr.w[p]."""
    n = 1 << p
    w_inv = pow(bn254.root_of_unity(p), -1, R)
    tw = powers(w_inv, n // 2)
    s = pow(n, -1, R)
    stw = np.append(tw * s % R, np.array([s], dtype=object))
    return glv_pack(tw), glv_pack(stw)


def _launch(mod: Any, name: str, count: int, threads: int, args: tuple) -> None:
    mod.get_function(name)((max(1, -(-count // threads)),), (threads,), args)


def _ifft_device(mod: Any, group: Group, d_aff: Any, n: int) -> Any:
    """The level's iFFT of device affine rows (n, 16|32); returns device affine rows."""
    import cupy as cp

    g = "g1" if group is G1 else "g2"
    th = THREADS[g]
    p = n.bit_length() - 1
    u32 = np.uint32
    if n == 1:
        return d_aff
    bufs = [cp.empty((n, 2 * group.limbs), dtype=cp.uint32) for _ in range(2)]
    _launch(mod, f"gfft_load_{g}", n, th, (d_aff, bufs[0], u32(n), u32(p), u32(1)))
    tw, stw = twiddles(p)
    d_tw, d_stw = cp.asarray(tw), cp.asarray(stw)
    src = 0
    for log_h in range(p - 1):
        groups = (n >> 1) >> log_h
        count = n >> 1 if log_h == 0 else (n >> 1) - groups
        _launch(mod, f"gfft_pass_{g}", count, th, (bufs[src], bufs[1 - src], d_tw, u32(n), u32(log_h), u32(p - 1 - log_h)))
        src = 1 - src
    _launch(mod, f"gfft_last_{g}", n >> 1, th, (bufs[src], bufs[1 - src], d_stw, u32(n)))
    out = cp.empty((n, group.limbs), dtype=cp.uint32)
    _launch(mod, f"gfft_affine_{g}", -(-n // AFFINE_BATCH), th, (bufs[1 - src], out, u32(n)))
    return out


def ifft_level_gpu(group: Group, limbs: np.ndarray) -> np.ndarray:
    """One ``prepare phase2`` level on the GPU: the size-2^p group inverse DFT (ω = Fr.w[p], scaled
    by 2^-p) of (2^p, 16|32) Montgomery limb rows, returned in the same layout."""
    import cupy as cp

    a = np.ascontiguousarray(limbs, dtype="<u4").reshape(-1, group.limbs)
    n = a.shape[0]
    if n == 0 or n & (n - 1):
        raise ValueError(f"level size {n} is not a power of two")
    return np.asarray(cp.asnumpy(_ifft_device(_module(), group, cp.asarray(a), n)))


def coset_level_gpu(group: Group, limbs: np.ndarray, k: int, g: int) -> np.ndarray:
    """The Lagrange points of ⟨Fr.w[k]⟩ ∪ g·⟨Fr.w[k]⟩ from 2^(k+1) power points (the level-29
    case of a power-28 file with k = 28, g = 25; same definition as the CPU ``coset_level``)."""
    import cupy as cp

    mod = _module()
    gname = "g1" if group is G1 else "g2"
    th = THREADS[gname]
    m = 1 << k
    a = np.ascontiguousarray(limbs, dtype="<u4").reshape(-1, group.limbs)
    if a.shape[0] != 2 * m:
        raise ValueError(f"coset level needs {2 * m} points, got {a.shape[0]}")
    u32 = np.uint32
    s = pow(g, m, R)
    kk = pow((1 - s) % R, -1, R)
    log_lo = (k + 1) // 2
    g_inv = pow(g, -1, R)
    cst = glv_pack([(-s) % R, kk])
    lo = glv_pack(powers(g_inv, 1 << log_lo) * kk % R)
    hi = glv_pack(powers(pow(g_inv, 1 << log_lo, R), m >> log_lo))
    halves = []
    for part in (a[:m], a[m:]):
        x = cp.empty((m, 2 * group.limbs), dtype=cp.uint32)
        _launch(mod, f"gfft_load_{gname}", m, th, (cp.asarray(part), x, u32(m), u32(k), u32(0)))
        halves.append(x)
    o0 = cp.empty((m, 2 * group.limbs), dtype=cp.uint32)
    o1 = cp.empty((m, 2 * group.limbs), dtype=cp.uint32)
    _launch(mod, f"gfft_coset_{gname}", m, th,
            (halves[0], halves[1], o0, o1, cp.asarray(cst), cp.asarray(lo), cp.asarray(hi), u32(m), u32(log_lo)))
    del halves
    out = []
    for o in (o0, o1):
        aff = cp.empty((m, group.limbs), dtype=cp.uint32)
        _launch(mod, f"gfft_affine_{gname}", -(-m // AFFINE_BATCH), th, (o, aff, u32(m)))
        out.append(np.asarray(cp.asnumpy(_ifft_device(mod, group, aff, m))))
    return np.concatenate(out)
