"""GPU group inverse DFT for ``ptau prepare`` (kernels/groupfft.cu, via NVRTC).

The GLV ladder's twiddles ω^-j (and s·ω^-j, s for the scaled last stage) are packed as (m, 9)
uint32 rows |k1| ‖ |k2| ‖ signs with k ≡ k1 + k2·λ. The tables of a level are made on the device
(gfft_twiddles, from two short Fr tables built here: :func:`twiddle_tables`), so neither a level
nor a Dask worker packs scalars on the host (that was ~40% of a power-20 prepare); :func:`glv_pack`
packs the few scalars of the coset pre-step and the appended s. A level runs as: load
(bit-reversed, to XYZZ), log2(n) − 1 butterfly passes out of place, the scaled last pass, batch
conversion to affine; input and output are (n, 16|32) Montgomery limbs, infinity as zero rows.
A blocked level (``distprove.ptau``) runs the same passes on each half without the scaled last
pass (:func:`half_level_gpu`), and that last pass on column ranges (:func:`column_stage_gpu`).
"""

from __future__ import annotations

from typing import Any

import numpy as np

from distprove import bn254, glv
from distprove.bn254 import G1, R, Group

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
    k = np.asarray(scalars, dtype=object).reshape(-1) % R
    k1, k2 = glv.split(k)
    out = np.zeros((k.shape[0], GLV_WORDS), dtype="<u4")
    if k.shape[0] == 0:
        return out
    for col, half in ((0, k1), (4, k2)):
        raw = b"".join(int(abs(v)).to_bytes(16, "little") for v in half)
        out[:, col : col + 4] = np.frombuffer(raw, dtype="<u4").reshape(-1, 4)
    out[:, 8] = (k1 < 0).astype(np.uint32) | ((k2 < 0).astype(np.uint32) << 1)
    return out


FR_MONT = (1 << 256) % R
"""The Montgomery factor of Fr (2^256 mod r)."""


def twiddle_tables(p: int, first: int, count: int, scale: int = 1) -> tuple[np.ndarray, np.ndarray, int]:
    """Inputs of gfft_twiddles: (lo, hi, log_lo) with lo (2^log_lo rows, Montgomery limbs) and hi
    (ceil(count / 2^log_lo) rows, standard limbs) such that lo[j mod 2^log_lo]·hi[j >> log_lo] =
    scale·ω^-(first + j) for j < count, ω = Fr.w[p]."""
    w_inv = pow(bn254.root_of_unity(p), -1, R)
    log_lo = ((max(count, 1) - 1).bit_length() + 1) // 2
    lead = scale * pow(w_inv, first, R) % R * FR_MONT % R
    lo = bn254.powers(w_inv, 1 << log_lo) * lead % R
    hi = bn254.powers(pow(w_inv, 1 << log_lo, R), max(1, -(-count >> log_lo)))
    return bn254.limbs_from_ints(lo), bn254.limbs_from_ints(hi), log_lo


def device_twiddles(p: int, first: int, count: int, scale: int | None = None) -> Any:
    """Device (count, 9) packed rows of ω^-(first + j), j < count (ω = Fr.w[p]); with ``scale`` s:
    s·ω^-(first + j), then s itself as row ``count`` (the layout gfft_last reads)."""
    import cupy as cp

    mod = _module()
    lo, hi, log_lo = twiddle_tables(p, first, count, 1 if scale is None else scale)
    out = cp.empty((count + (scale is not None), GLV_WORDS), dtype=cp.uint32)
    _launch(mod, "gfft_twiddles", count, 256, (out, cp.asarray(lo), cp.asarray(hi), np.uint32(log_lo), np.uint32(count)))
    if scale is not None:
        out[count] = cp.asarray(glv_pack([scale])[0])
    return out


def _launch(mod: Any, name: str, count: int, threads: int, args: tuple) -> None:
    mod.get_function(name)((max(1, -(-count // threads)),), (threads,), args)


def _ifft_device(mod: Any, group: Group, d_aff: Any, n: int, scaled: bool = True) -> Any:
    """The level's iFFT of device affine rows (n, 16|32), scaled by 1/n unless ``scaled`` is False;
    returns device affine rows."""
    import cupy as cp

    g = "g1" if group is G1 else "g2"
    th = THREADS[g]
    p = n.bit_length() - 1
    u32 = np.uint32
    if n == 1:
        return d_aff
    bufs = [cp.empty((n, 2 * group.limbs), dtype=cp.uint32) for _ in range(2)]
    _launch(mod, f"gfft_load_{g}", n, th, (d_aff, bufs[0], u32(n), u32(p), u32(1)))
    d_tw = device_twiddles(p, 0, n >> 1)
    src = 0
    for log_h in range(p - 1 if scaled else p):
        groups = (n >> 1) >> log_h
        count = n >> 1 if log_h == 0 else (n >> 1) - groups
        _launch(mod, f"gfft_pass_{g}", count, th, (bufs[src], bufs[1 - src], d_tw, u32(n), u32(log_h), u32(p - 1 - log_h)))
        src = 1 - src
    if scaled:
        d_stw = device_twiddles(p, 0, n >> 1, pow(n, -1, R))
        _launch(mod, f"gfft_last_{g}", n >> 1, th, (bufs[src], bufs[1 - src], d_stw, u32(n)))
        src = 1 - src
    out = cp.empty((n, group.limbs), dtype=cp.uint32)
    _launch(mod, f"gfft_affine_{g}", -(-n // AFFINE_BATCH), th, (bufs[src], out, u32(n)))
    return out


def _rows(group: Group, limbs: np.ndarray) -> np.ndarray:
    a = np.ascontiguousarray(limbs, dtype="<u4").reshape(-1, group.limbs)
    n = a.shape[0]
    if n == 0 or n & (n - 1):
        raise ValueError(f"level size {n} is not a power of two")
    return a


def ifft_level_gpu(group: Group, limbs: np.ndarray) -> np.ndarray:
    """One ``prepare phase2`` level on the GPU: the size-2^p group inverse DFT (ω = Fr.w[p], scaled
    by 2^-p) of (2^p, 16|32) Montgomery limb rows, returned in the same layout."""
    import cupy as cp

    a = _rows(group, limbs)
    return np.asarray(cp.asnumpy(_ifft_device(_module(), group, cp.asarray(a), a.shape[0])))


def half_level_gpu(group: Group, limbs: np.ndarray) -> np.ndarray:
    """The unscaled size-m group inverse DFT (ω = Fr.w[log2 m]) of (m, 16|32) limb rows: one half's
    sub-FFT of a blocked level (same definition as the CPU ``half_level``)."""
    import cupy as cp

    a = _rows(group, limbs)
    return np.asarray(cp.asnumpy(_ifft_device(_module(), group, cp.asarray(a), a.shape[0], scaled=False)))


def column_stage_gpu(group: Group, a0: np.ndarray, a1: np.ndarray, p: int, first: int) -> np.ndarray:
    """The scaled last stage of level p on columns first … first+w−1 of its halves' sub-FFTs (same
    definition as the CPU ``column_stage``): gfft_last on the w rows of each half side by side,
    with the twiddles s·ω^-(first + i) and s."""
    import cupy as cp

    mod = _module()
    g = "g1" if group is G1 else "g2"
    th = THREADS[g]
    u32 = np.uint32
    halves = [np.ascontiguousarray(a, dtype="<u4").reshape(-1, group.limbs) for a in (a0, a1)]
    w = halves[0].shape[0]
    if w == 0 or halves[1].shape[0] != w:
        raise ValueError(f"column stage needs two equal non-empty halves, got {w} and {halves[1].shape[0]} rows")
    buf = cp.empty((2 * w, 2 * group.limbs), dtype=cp.uint32)
    for i, half in enumerate(halves):
        _launch(mod, f"gfft_load_{g}", w, th, (cp.asarray(half), buf[i * w :], u32(w), u32(0), u32(0)))
    d_stw = device_twiddles(p, first, w, pow(1 << p, -1, R))
    xyzz = cp.empty((2 * w, 2 * group.limbs), dtype=cp.uint32)
    _launch(mod, f"gfft_last_{g}", w, th, (buf, xyzz, d_stw, u32(2 * w)))
    out = cp.empty((2 * w, group.limbs), dtype=cp.uint32)
    _launch(mod, f"gfft_affine_{g}", -(-2 * w // AFFINE_BATCH), th, (xyzz, out, u32(2 * w)))
    return np.asarray(cp.asnumpy(out))


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
    lo = glv_pack(bn254.powers(g_inv, 1 << log_lo) * kk % R)
    hi = glv_pack(bn254.powers(pow(g_inv, 1 << log_lo, R), m >> log_lo))
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
