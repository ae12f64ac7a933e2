"""Shared test helpers: the snarkjs oracle, the fixture data folder, and the gpu/slow markers.

* ``snarkjs`` fixture: the snarkjs command (env ``SNARKJS``, else the repo's
  ``node_modules/.bin/snarkjs``, else ``snarkjs`` on PATH). Tests using it are skipped when it is
  absent, unless ``DISTPROVE_REQUIRE_SNARKJS=1`` (CI), in which case they fail.
* ``native_toolchain`` fixture: the same for the tools that build circom's native witness
  generators (g++, nasm, make, libgmp-dev, nlohmann-json3-dev; ``DISTPROVE_REQUIRE_NATIVE=1``).
* :func:`snarkjs_verify`: run ``snarkjs groth16 verify`` on three files.
* ``data_dir`` fixture: ``tests/data``.
* markers ``gpu`` (needs a CUDA device that CuPy sees; skipped otherwise) and ``slow``.
* :func:`load_script`: a script that is not a package module (``pipelines/``, ``cluster/``).
* every test must leave the process's SIGTERM handler as it found it: forked workers (the dev
  setup's pool) inherit it, and a pool ends its workers with SIGTERM.
"""

from __future__ import annotations

import functools
import importlib.util
import os
import shutil
import signal
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path
from types import ModuleType
from typing import TYPE_CHECKING, Any

import pytest

if TYPE_CHECKING:
    import numpy as np

REPO_ROOT = Path(__file__).parents[1]
DATA_DIR = Path(__file__).parent / "data"
SNARKJS_TIMEOUT_S = 300


@pytest.fixture(autouse=True)
def _signal_handlers_kept() -> Iterator[None]:
    before = {s: signal.getsignal(s) for s in (signal.SIGTERM, signal.SIGINT)}
    yield
    leaked = signal.getsignal(signal.SIGTERM) is not before[signal.SIGTERM]
    for s, h in before.items():  # one leak fails one test, not the ones after it; SIGINT is put back
        signal.signal(s, h)      # only (importing dask_jobqueue.runner installs a handler for it)
    assert not leaked, "the test left its own SIGTERM handler installed"


def load_script(path: Path, register: bool = False) -> ModuleType:
    """The Python file at ``path`` as a module named after its stem. ``register``: also put it in
    sys.modules, which dataclasses need (they look their module up while being made); left out,
    the module's functions travel to Dask workers by value (cloudpickle pickles a registered
    module's functions by name, which the workers cannot import)."""
    spec = importlib.util.spec_from_file_location(path.stem, path)
    module = importlib.util.module_from_spec(spec)
    if register:
        sys.modules[spec.name] = module
    spec.loader.exec_module(module)
    return module


def _drop_stale_numba_caches() -> None:
    """Numba keys a cached kernel on its own file only: kernels that inline distprove/fqlimbs.py
    would keep their old machine code after an edit of it. Their cache files older than it go."""
    package = REPO_ROOT / "distprove"
    limbs = (package / "fqlimbs.py").stat().st_mtime
    caches = (package / "__pycache__", package / "formats" / "__pycache__", package / "backends" / "cpu" / "__pycache__")
    for cache in caches:
        for f in [*cache.glob("*.nbi"), *cache.glob("*.nbc")] if cache.is_dir() else ():
            if f.stat().st_mtime < limbs:
                f.unlink(missing_ok=True)


_drop_stale_numba_caches()


def find_snarkjs() -> str | None:
    """The snarkjs command to run: $SNARKJS, the repo's node_modules/.bin/snarkjs, or PATH; None if absent."""
    env = os.environ.get("SNARKJS")
    if env:
        return env
    local = REPO_ROOT / "node_modules" / ".bin" / "snarkjs"
    if local.is_file() and os.access(local, os.X_OK):
        return str(local)
    return shutil.which("snarkjs")


def snarkjs_verify(
    vk_path: str | os.PathLike[str],
    public_path: str | os.PathLike[str],
    proof_path: str | os.PathLike[str],
    snarkjs: str | None = None,
) -> bool:
    """True when ``snarkjs groth16 verify vk public proof`` exits 0 and prints OK.

    ``snarkjs`` defaults to :func:`find_snarkjs`; raises FileNotFoundError if there is none
    (tests should request the ``snarkjs`` fixture to be skipped instead).
    """
    cmd = snarkjs or find_snarkjs()
    if cmd is None:
        raise FileNotFoundError("snarkjs not found (set SNARKJS or install node_modules/.bin/snarkjs)")
    res = subprocess.run(
        [cmd, "groth16", "verify", os.fspath(vk_path), os.fspath(public_path), os.fspath(proof_path)],
        capture_output=True,
        text=True,
        timeout=SNARKJS_TIMEOUT_S,
    )
    return res.returncode == 0 and "OK" in res.stdout + res.stderr


@pytest.fixture(scope="session")
def snarkjs() -> str:
    """The snarkjs command; skips the test when absent unless DISTPROVE_REQUIRE_SNARKJS=1 (then fails)."""
    cmd = find_snarkjs()
    if cmd is None:
        message = "snarkjs not found (set SNARKJS, or npm install snarkjs@0.7.6 in the repo root)"
        if os.environ.get("DISTPROVE_REQUIRE_SNARKJS") == "1":
            pytest.fail(message)
        pytest.skip(message)
    return cmd


def missing_native_tools() -> list[str]:
    """What building circom's native witness generators needs and this machine lacks: g++, nasm,
    make, gmp.h (libgmp-dev), nlohmann/json.hpp (nlohmann-json3-dev)."""
    missing = [tool for tool in ("g++", "nasm", "make") if shutil.which(tool) is None]
    if "g++" not in missing:
        for header in ("gmp.h", "nlohmann/json.hpp"):
            res = subprocess.run(["g++", "-x", "c++", "-E", "-o", os.devnull, "-"], input=f"#include <{header}>\n",
                                 capture_output=True, text=True, timeout=60)
            if res.returncode != 0:
                missing.append(header)
    return missing


@pytest.fixture(scope="session")
def native_toolchain() -> None:
    """Skips the test when a native witness generator cannot be built here (the missing tools
    named), unless DISTPROVE_REQUIRE_NATIVE=1 (CI), in which case it fails."""
    missing = missing_native_tools()
    if missing:
        message = f"cannot build native witness generators: {', '.join(missing)} missing"
        if os.environ.get("DISTPROVE_REQUIRE_NATIVE") == "1":
            pytest.fail(message)
        pytest.skip(message)


@pytest.fixture(scope="session")
def data_dir() -> Path:
    """The folder of test fixtures (tests/data)."""
    return DATA_DIR


@functools.cache
def cuda_device_available() -> bool:
    """True when CuPy is importable and sees at least one CUDA device."""
    try:
        import cupy

        return cupy.cuda.runtime.getDeviceCount() > 0
    except (ImportError, RuntimeError):  # no CuPy, or no driver / device (CUDARuntimeError)
        return False


def pytest_configure(config: pytest.Config) -> None:
    config.addinivalue_line("markers", "gpu: needs a CUDA GPU that CuPy can see (skipped otherwise)")
    config.addinivalue_line("markers", "slow: takes long on the CPU reference; deselect with -m 'not slow'")


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    gpu_items = [item for item in items if item.get_closest_marker("gpu")]
    if gpu_items and not cuda_device_available():
        skip = pytest.mark.skip(reason="no CUDA device visible to CuPy")
        for item in gpu_items:
            item.add_marker(skip)


def patched_wtns(tmp_path: Path, src: Path, bad: dict[int, int]) -> Path:
    """A copy of the .wtns ``src`` whose witness values ``i`` are replaced by ``bad[i]`` (256-bit ints)."""
    from distprove.formats.wtns import read_wtns

    out = tmp_path / f"bad_{'_'.join(map(str, bad))}.wtns"
    shutil.copy(src, out)
    offset = read_wtns(src).offset
    with open(out, "r+b") as f:
        for i, v in bad.items():
            f.seek(offset + 32 * i)
            f.write(v.to_bytes(32, "little"))
    return out


def local_client(n_workers: int, processes: bool = True) -> Iterator[Any]:
    """A distributed Client on a fresh CPU LocalCluster of ``n_workers`` one-thread workers, for a
    module-scoped ``client`` fixture to ``yield from``; closed after."""
    from distributed import Client, LocalCluster

    with LocalCluster(n_workers=n_workers, threads_per_worker=1, processes=processes, dashboard_address=None) as cluster:
        with Client(cluster) as c:
            c.wait_for_workers(n_workers)
            yield c


def expected_digit_sort(limbs: np.ndarray, c: int, lo: int, hi: int) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """(entries as (row, point word) pairs sorted by row, then point index; counts; cursor) of the
    scalars' signed digits: what msm_sort.cu must produce."""
    import numpy as np

    from distprove.stages.msm import is_live, signed_digits_array

    nb = 1 << (c - 1)
    digits = signed_digits_array(limbs, c)[:, lo:hi].astype(np.int64)
    i, w = np.nonzero((digits != 0) & is_live(limbs)[:, None])
    d = digits[i, w]
    rows = w * nb + np.abs(d) - 1
    order = np.lexsort((i, rows))
    entries = np.stack([rows[order], (i[order] << 1) | (d[order] < 0)], axis=1).astype(np.uint32)
    counts = np.bincount(rows, minlength=(hi - lo) * nb).astype(np.uint32)
    return entries, counts, (np.cumsum(counts) - counts).astype(np.uint32)


class HostStream:
    """A stand-in CUDA stream/event for the kernels' host emulation: ordering is trivial there."""

    def __init__(self, non_blocking: bool = False, disable_timing: bool = False) -> None:
        return None

    def __enter__(self) -> "HostStream":
        return self

    def __exit__(self, *exc: object) -> None:
        return None

    def wait_event(self, event: object) -> None:
        return None

    def record(self, stream: object = None) -> None:
        return None

    def synchronize(self) -> None:
        return None


def host_cupy() -> Any:
    """The ``cupy`` that the kernels' host emulations put in sys.modules: numpy's arrays, and
    streams and events that order nothing."""
    import types

    import numpy as np

    def asnumpy(a: Any, stream: object = None, out: Any = None, blocking: bool = True) -> Any:
        if out is None:
            return np.asarray(a)
        out[...] = a
        return out

    cuda = types.SimpleNamespace(get_current_stream=HostStream, Event=HostStream, Stream=HostStream,
                                 runtime=types.SimpleNamespace(getDevice=lambda: 0),
                                 alloc_pinned_memory=lambda nbytes: bytearray(nbytes))
    return types.SimpleNamespace(empty=np.empty, uint8=np.uint8, uint32=np.uint32, cumsum=np.cumsum,
                                 asnumpy=asnumpy, ndarray=np.ndarray, cuda=cuda)
