"""Run-time compilation of the CUDA kernels (NVRTC through CuPy) with a cubin disk cache.

The kernel sources in ``distprove/kernels/`` carry no ``#include``: NVRTC has no file system, so a
*module* is the concatenation of its units in order (``field.cuh`` first, then what builds on it).
:data:`MODULES` lists every combination the backend loads; ``tests/test_kernels_compile.py`` builds
each one with ``nvcc -ptx`` so a kernel that does not compile fails CI, which has no GPU.

Compiled cubins are cached on disk under ``$DISTPROVE_CACHE_DIR`` (default
``~/.cache/distprove``), keyed by the SHA-256 of the source, the options, the target architecture
and the NVRTC version, so a second process loads a module without compiling it. Within a process a
module is compiled or loaded once (memoised). CuPy is imported lazily: the source helpers here work
on machines without CuPy or a GPU.
"""

from __future__ import annotations

import hashlib
import logging
import os
import re
import struct
import threading
import time
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any, Sequence
from dask.system import CPU_COUNT

from distprove.cachedir import cache_dir

if TYPE_CHECKING:  # pragma: no cover
    import cupy

log = logging.getLogger(__name__)

KERNEL_DIR = Path(__file__).resolve().parents[2] / "kernels"
"""``distprove/kernels``: where the ``.cu``/``.cuh`` units live."""

MODULES: dict[str, tuple[str, ...]] = {
    "gather": ("field.cuh", "gather.cu"),
    "witness": ("field.cuh", "witness.cu"),
    "ntt": ("field.cuh", "ntt.cu"),
    "msm": ("field.cuh", "curve.cuh", "msm.cu", "msm_sort.cu", "msm_affine.cu", "msm_merged.cu"),
    "msm_cw": ("field.cuh", "curve.cuh", "msm.cu", "msm_cw.cu"),
    "fixedbase": ("field.cuh", "curve.cuh", "fixedbase.cu"),
    "groupfft": ("field.cuh", "curve.cuh", "fixedbase.cu", "groupfft.cu"),
    "pairing": ("field.cuh", "curve.cuh", "pairing.cu", "batchcheck.cu"),
    "validate": ("field.cuh", "validate.cu"),
    "assemble": ("field.cuh", "curve.cuh", "assemble.cu"),
}
"""Every unit combination the GPU backend loads, by module name."""

MODULE_OPTIONS: dict[str, tuple[str, ...]] = {
    "msm": ("-DDP_G2_INLINE",),
    "msm_cw": ("-DDP_MSM_CW_ONLY",),
    "groupfft": ("-DDP_MUL_SINGLE",),
    "fixedbase": ("-DDP_MUL_SINGLE",),
    "pairing": ("-DDP_MUL_SINGLE",),
    "validate": ("-DDP_MUL_SINGLE",),
    "assemble": ("-DDP_MUL_SINGLE",),
}
"""NVRTC options a module always carries. msm inlines the G2 point operations of its per-entry
paths (2-3% faster G2 MSMs on an H200; the Fq products inside stay calls, field.cuh, and the
reductions' G2 additions too, curve.cuh, so the module compiles in about 15 s); msm_cw leaves out
msm.cu's default-only kernels. groupfft and fixedbase make each Fq product its own call
(field.cuh DP_MUL_SINGLE): with two products a call the group iFFT's levels take 6% longer on an
H200; fixedbase, pairing, validate and assemble (a few products a point, bound by the upload,
or a few dozen threads), not timed either way, keep the same build."""

BASE_OPTIONS: tuple[str, ...] = ("-std=c++17",)
"""Options common to NVRTC and the ``nvcc`` compile check."""

FIELD_BUILDS: dict[str, tuple[str, ...]] = {
    "default": (),
    "f64_mul": ("-DDP_F64_MUL",),
    "cios": ("-DDP_CIOS_MUL",),
    "portable": ("-DDP_CIOS_MUL", "-DDP_PORTABLE"),
    "ptx_mul": ("-DDP_CIOS_MUL", "-DDP_PTX_MUL"),
}
"""field.cuh's arithmetic builds, which the GPU field tests check and bench_field.py times: the
device's own choice (FP64-pipe products on sm_90/sm_100, CIOS elsewhere), FP64-pipe products on
any device, CIOS in C with PTX add/sub, CIOS in plain C, CIOS as PTX carry chains."""


def module_source(units: Sequence[str], kernel_dir: Path = KERNEL_DIR) -> str:
    """Concatenate kernel units in order, each preceded by a ``#line`` directive naming its file.

    The ``#line`` directives make NVRTC and nvcc report errors against the original unit and line.
    """
    parts = []
    for unit in units:
        path = kernel_dir / unit
        parts.append(f'#line 1 "{unit}"\n')
        parts.append(path.read_text())
        parts.append("\n")
    return "".join(parts)


def entry_points(src: str) -> list[str]:
    """Names of the ``extern "C" __global__`` kernels in a module source, in order."""
    return re.findall(r'extern\s+"C"\s+__global__\s+void\s+(?:__launch_bounds__\([^)]*\)\s*)?(\w+)\s*\(', src)


@dataclass
class LoadTiming:
    """How one module came to be loaded in this process."""

    name: str
    source: str  # "compile" (NVRTC ran) or "cache" (cubin read from disk)
    seconds: float


_lock = threading.Lock()
_modules: dict[tuple[str, tuple[str, ...], tuple[str, ...]], "cupy.RawModule"] = {}
_timings: list[LoadTiming] = []


def device_arch() -> str:
    """The current GPU's architecture, as NVRTC and ``distprove compile --arch`` name it (``sm_90``)."""
    import cupy

    return "sm_" + cupy.cuda.Device().compute_capability


def _nvrtc_compile(src: str, name: str, options: Sequence[str]) -> bytes:
    """Compile CUDA source to a cubin with NVRTC; raise RuntimeError with the log on failure."""
    from cupy.cuda import nvrtc

    prog = nvrtc.createProgram(src, name + ".cu", (), ())
    try:
        try:
            nvrtc.compileProgram(prog, list(options))
        except nvrtc.NVRTCError as exc:
            raise RuntimeError(f"NVRTC failed on module {name}:\n{nvrtc.getProgramLog(prog)}") from exc
        return elf_complete(bytes(nvrtc.getCUBIN(prog)))
    finally:
        nvrtc.destroyProgram(prog)


def elf_complete(image: bytes) -> bytes:
    """``image`` padded with zero bytes to the length its ELF header gives (the end of the program
    or section header table, whichever is later).

    CuPy's ``nvrtc.getCUBIN`` returns the cubin one byte short (NVRTC's size counts a byte that it
    drops as if it ended a string: 3439 of 3440 bytes for a one-line kernel under NVRTC 13.0).
    That byte is the last of the program header table, the top byte of the last header's
    alignment, so zero; the driver loads the short file, but ``cuobjdump`` and ``nvdisasm``
    reject it. Images that are not 64-bit little-endian ELF, or are long enough, come back as
    they are.
    """
    if len(image) < 64 or image[:6] != b"\x7fELF\x02\x01":
        return image
    phoff, shoff = struct.unpack_from("<QQ", image, 32)
    phentsize, phnum, shentsize, shnum = struct.unpack_from("<HHHH", image, 54)
    want = max(phoff + phentsize * phnum, shoff + shentsize * shnum)
    return image + bytes(want - len(image)) if want > len(image) else image


def _cubin(units: tuple[str, ...], name: str, options: tuple[str, ...], arch: str) -> tuple[str, tuple[str, ...], Path]:
    """Source, full option list and cache path of one module build."""
    from cupy.cuda import nvrtc

    src = module_source(units)
    opts = BASE_OPTIONS + (f"--gpu-architecture={arch}",) + options
    key = hashlib.sha256(
        "\0".join((src, *opts, arch, repr(nvrtc.getVersion()))).encode()
    ).hexdigest()[:32]
    return src, opts, cache_dir() / f"{name}-{arch}-{key}.cubin"


def _ensure_cubin(units: tuple[str, ...], name: str, options: tuple[str, ...], arch: str) -> tuple[str, Path, str]:
    """Compile one module into the disk cache unless it is there; return (source, path, how)."""
    src, opts, path = _cubin(units, name, options, arch)
    if path.is_file():
        return src, path, "cache"
    cubin = _nvrtc_compile(src, name, opts)
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_suffix(f".{os.getpid()}.tmp")
    tmp.write_bytes(cubin)
    os.replace(tmp, path)  # atomic: concurrent processes never read a half-written cubin
    return src, path, "compile"


def _load(units: tuple[str, ...], name: str, options: tuple[str, ...]) -> "cupy.RawModule":
    import cupy

    t0 = time.perf_counter()
    src, path, kind = _ensure_cubin(units, name, options, device_arch())
    module = cupy.RawModule(path=str(path))
    for fn in entry_points(src)[:1]:
        module.get_function(fn)  # CuPy loads lazily: make the load part of the timing
    dt = time.perf_counter() - t0
    _timings.append(LoadTiming(name, kind, dt))
    log.info("kernel module %s: %s in %.3f s (%s)", name, kind, dt, path)
    return module


def _build_one(name: str, options: tuple[str, ...], arch: str) -> LoadTiming:
    t0 = time.perf_counter()
    _, _, kind = _ensure_cubin(MODULES[name], name, MODULE_OPTIONS.get(name, ()) + options, arch)
    return LoadTiming(name, kind, time.perf_counter() - t0)


def build(names: Sequence[str] | None = None, options: Sequence[str] = (), arch: str | None = None,
          jobs: int | None = None) -> list[LoadTiming]:
    """Compile modules into the disk cache, in parallel processes, without loading them.

    ``names``: entries of :data:`MODULES` (default: all); ``options``: extra NVRTC options for
    each; ``arch``: e.g. ``"sm_90"`` (default: the current device's). NVRTC needs no GPU when
    ``arch`` is given, so a container image can be warmed at build time. Modules already cached
    return at once. Raises RuntimeError with NVRTC's log if one fails.
    """
    import multiprocessing
    from concurrent.futures import ProcessPoolExecutor

    names = list(names or MODULES)
    unknown = sorted(set(names) - set(MODULES))
    if unknown:
        raise ValueError(f"unknown kernel module(s) {', '.join(unknown)}; known: {', '.join(MODULES)}")
    arch = arch or device_arch()
    jobs = max(1, min(jobs or CPU_COUNT, len(names)))
    if jobs == 1:
        return [_build_one(n, tuple(options), arch) for n in names]
    # spawn: a forked child of a process that touched CUDA cannot use it; NVRTC is safe either way
    with ProcessPoolExecutor(jobs, mp_context=multiprocessing.get_context("spawn")) as pool:
        return list(pool.map(_build_one, names, [tuple(options)] * len(names), [arch] * len(names)))


def load_module(units: Sequence[str], name: str, options: Sequence[str] = ()) -> "cupy.RawModule":
    """Return the compiled ``cupy.RawModule`` of ``units`` (file names under ``distprove/kernels``).

    Compiled for the current device's architecture; memoised per process and cached on disk.
    """
    key = (name, tuple(units), tuple(options))
    with _lock:
        mod = _modules.get(key)
        if mod is None:
            mod = _load(tuple(units), name, tuple(options))
            _modules[key] = mod
        return mod


def get_module(name: str, options: Sequence[str] = ()) -> "cupy.RawModule":
    """Load one of the named :data:`MODULES` with its :data:`MODULE_OPTIONS` and ``options``."""
    return load_module(MODULES[name], name, MODULE_OPTIONS.get(name, ()) + tuple(options))


def load_timings() -> list[LoadTiming]:
    """The load events of this process so far (for the benchmark's cold/warm report)."""
    return list(_timings)


def measure_cold_warm(name: str) -> dict[str, Any]:
    """Compile module ``name`` cold (into a fresh cache dir) and load it warm; return both times.

    Runs in the current process with a private temporary cache, so the user's cache and the
    memoised modules are untouched.
    """
    import tempfile

    units, opts = MODULES[name], MODULE_OPTIONS.get(name, ())
    old = os.environ.get("DISTPROVE_CACHE_DIR")
    with tempfile.TemporaryDirectory() as tmp:
        os.environ["DISTPROVE_CACHE_DIR"] = tmp
        try:
            t0 = time.perf_counter()
            _load(units, name, opts)
            cold = time.perf_counter() - t0
            t0 = time.perf_counter()
            _load(units, name, opts)
            warm = time.perf_counter() - t0
        finally:
            if old is None:
                del os.environ["DISTPROVE_CACHE_DIR"]
            else:
                os.environ["DISTPROVE_CACHE_DIR"] = old
    return {"module": name, "cold_s": cold, "warm_s": warm}
