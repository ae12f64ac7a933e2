"""GPU backend (CuPy + NVRTC-compiled CUDA kernels). Importing this package never imports CuPy.

``available()`` says whether CuPy imports and sees a CUDA device; ``GpuBackend`` is loaded on
first access (``from distprove.backends.gpu import GpuBackend``).
"""

from __future__ import annotations

from functools import lru_cache
from typing import Any

__all__ = ["GpuBackend", "available"]


@lru_cache(maxsize=None)
def available() -> bool:
    """True when CuPy is importable and at least one CUDA device is visible to it."""
    try:
        import cupy

        return cupy.cuda.runtime.getDeviceCount() > 0
    except Exception:  # no CuPy, no driver, no device: all mean "not available"
        return False


def __getattr__(name: str) -> Any:
    if name == "GpuBackend":
        from .backend import GpuBackend

        return GpuBackend
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
