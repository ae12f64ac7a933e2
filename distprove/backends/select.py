"""Pick a backend by name: ``cpu``, ``gpu`` or ``auto`` (the GPU when CuPy sees a device)."""

from __future__ import annotations

from functools import lru_cache

from ..errors import BackendUnavailable
from . import BACKEND_NAMES
from .base import Backend


@lru_cache(maxsize=None)
def get_backend(name: str = "auto") -> Backend:
    """Return the process-wide backend instance for ``name`` (instances hold per-key state)."""
    if name not in BACKEND_NAMES:
        raise BackendUnavailable(f"unknown backend {name!r} (choose one of {', '.join(BACKEND_NAMES)})")
    if name in ("gpu", "auto"):
        from . import gpu

        if gpu.available():
            return gpu.GpuBackend()
        if name == "gpu":
            raise BackendUnavailable("backend 'gpu' requested but no CUDA device is visible to CuPy")
    from .cpu import CpuBackend

    return CpuBackend()
