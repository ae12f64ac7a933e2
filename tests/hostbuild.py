"""Kernel modules built as host libraries for the host-compiled kernel tests.

A kernel module's source (field.cuh, curve.cuh and its .cu files, as the loader concatenates them)
builds as plain C++ (DP_INLINE is ``inline`` off the GPU); a test appends a harness of
``extern "C"`` functions that run the per-thread code and calls them through ctypes.
"""

from __future__ import annotations

import ctypes
import shutil
import subprocess
from pathlib import Path

import numpy as np

from distprove.backends.gpu.compile import MODULES, module_source

BUILDS = {"cios": [], "f64_mul": ["-DDP_F64_MUL"]}
"""field.cuh's two products: CIOS, and the FP64-pipe product the device uses on sm_90."""


def build_harness(directory: Path, module: str, harness: str, build: str) -> ctypes.CDLL | None:
    """Kernel module ``module`` with ``harness`` appended, as a host library in ``directory``
    (field.cuh's product ``build``, a key of :data:`BUILDS`); None when no C++ compiler is found."""
    cxx = shutil.which("g++") or shutil.which("c++") or shutil.which("clang++")
    if cxx is None:
        return None
    src, so = directory / f"{module}.cpp", directory / f"{module}.so"
    src.write_text(module_source(MODULES[module]) + harness)
    res = subprocess.run([cxx, "-O1", "-std=c++17", "-shared", "-fPIC", *BUILDS[build], "-o", str(so), str(src)],
                         capture_output=True, text=True, timeout=600)
    assert res.returncode == 0, res.stderr[-4000:]
    return ctypes.CDLL(str(so))


def ptr(a: np.ndarray) -> ctypes.c_void_p:
    """A NumPy array's data as a C pointer argument."""
    return a.ctypes.data_as(ctypes.c_void_p)
