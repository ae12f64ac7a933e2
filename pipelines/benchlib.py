"""What the benchmark scripts share: MSM inputs of known result, device timing, run metadata.

* MSM inputs: a table of :data:`TABLE` bases of known discrete logarithm (:func:`base_table`)
  indexed at random, as a real key's bases are read, and uniform scalars below r
  (:func:`msm_inputs`); :func:`known_total` is their MSM from the logarithms alone, the reference
  a device sum is checked against.
* :func:`wall_ms`: wall-clock milliseconds of synchronised calls (bench_ntt times device work by
  CUDA events instead).
* :func:`git_commit` and :func:`device_info`: what a results file records about its run.
* :class:`GpuBusy`: the GPUs' busy share while a block runs (``nvidia-smi``'s utilization.gpu,
  the share of each sample period in which a kernel was running).

Imported by the scripts in this folder as ``benchlib`` (a script's own folder is on its path).
"""

from __future__ import annotations

import functools
import os
import shutil
import subprocess
import threading
import time
from pathlib import Path
from typing import Any

import numpy as np

HERE = Path(__file__).resolve().parent
TABLE = 1024
"""Distinct bases of :func:`base_table`."""
TABLE_STEP = 0x1234567
"""Point j of :func:`base_table` is (1 + TABLE_STEP j) G: bases of known discrete logarithm."""


def groups() -> dict[str, Any]:
    """The groups by name, as the cases and command lines spell them."""
    from distprove import bn254

    return {"G1": bn254.G1, "G2": bn254.G2}


@functools.cache
def base_table(group: Any) -> np.ndarray:
    """The :data:`TABLE` bases (1 + TABLE_STEP j) G of ``group`` as Montgomery limbs (host)."""
    from distprove import bn254

    step = bn254.mul(group, group.generator, TABLE_STEP)
    acc = bn254.to_jacobian(group, group.generator)
    jac = []
    for _ in range(TABLE):
        jac.append(acc)
        acc = bn254.jac_add_affine(group, acc, step)
    return bn254.points_to_limbs(group, bn254.batch_to_affine(group, jac))


def known_total(group: Any, scalars: Any, idx: Any) -> Any:
    """sum_i s_i P_idx[i] over :func:`base_table`'s points, from their discrete logarithms: the scalars'
    limbs summed per base on the host (float64 sums of < 2^32 words over <= 2^21 scalars a base are
    exact); device arrays are copied back, host arrays taken as they are."""
    from distprove import bn254

    host = np.asarray(scalars.get() if hasattr(scalars, "get") else scalars).astype(np.float64)
    ix = np.asarray(idx.get() if hasattr(idx, "get") else idx)
    per = [np.bincount(ix, weights=host[:, limb], minlength=TABLE) for limb in range(8)]
    total = 0
    for j in range(TABLE):
        total += sum(int(per[limb][j]) << (32 * limb) for limb in range(8)) * (1 + j * TABLE_STEP)
    return bn254.mul(group, group.generator, total % bn254.R)


def uniform_scalars(rng: np.random.Generator, count: int) -> np.ndarray:
    """``count`` (n, 8) uint32 scalar limbs, uniform below 2^253.6 (< r: the top limb reduced)."""
    host = rng.integers(0, 1 << 32, size=(count, 8), dtype=np.uint32)
    host[:, 7] %= 0x30644E72
    return host


def msm_inputs(named_groups: dict, max_log: int, seed: int) -> tuple[np.ndarray, Any, Any, dict]:
    """2^max_log uniform scalars below r (host and device), random indices into the base tables,
    and the tables of ``named_groups`` ({name: group}) on the device."""
    import cupy

    rng = np.random.default_rng(seed)
    host = uniform_scalars(rng, 1 << max_log)
    idx = cupy.asarray(rng.integers(0, TABLE, size=1 << max_log))
    tables = {name: cupy.asarray(base_table(g)) for name, g in named_groups.items()}
    return host, cupy.asarray(host), idx, tables


def wall_ms(fn: Any, reps: int, warm: bool = True) -> list[float]:
    """Milliseconds of ``reps`` calls of ``fn``, each synchronised, after one untimed call unless
    not ``warm``."""
    import cupy

    if warm:
        fn()
    cupy.cuda.Device().synchronize()
    out = []
    for _ in range(reps):
        t0 = time.perf_counter()
        fn()
        cupy.cuda.Device().synchronize()
        out.append((time.perf_counter() - t0) * 1e3)
    return out


def git_commit() -> str:
    """The commit measured: ``$DISTPROVE_GIT_COMMIT`` (the device copy of the tree may have no
    .git), else ``git rev-parse HEAD``, else "unknown"."""
    env = os.environ.get("DISTPROVE_GIT_COMMIT")
    if env:
        return env
    try:
        return subprocess.run(["git", "rev-parse", "HEAD"], cwd=HERE, capture_output=True,
                              text=True, timeout=10).stdout.strip() or "unknown"
    except (OSError, subprocess.SubprocessError):
        return "unknown"


def device_info() -> dict:
    """The GPU's name and SM count, CuPy's version and the CUDA runtime's."""
    import cupy

    props = cupy.cuda.runtime.getDeviceProperties(cupy.cuda.Device().id)
    name = props["name"]
    return {"gpu": name.decode() if isinstance(name, bytes) else name,
            "sm_count": props["multiProcessorCount"], "cupy": cupy.__version__,
            "cuda_runtime": cupy.cuda.runtime.runtimeGetVersion()}


class GpuBusy:
    """``with GpuBusy() as busy: ...``: ``busy.percent`` is then each GPU's mean utilization.gpu
    over the block (``nvidia-smi`` sampled every ``period_ms``; the share of each of the driver's
    sample periods in which one or more kernels ran), ``busy.samples`` how many samples each
    mean has; both empty where there is no ``nvidia-smi``."""

    def __init__(self, period_ms: int = 100, command: str = "nvidia-smi") -> None:
        self.period_ms, self.command = period_ms, command
        self.percent: list[float] = []
        self.samples: list[int] = []
        self._proc: subprocess.Popen[str] | None = None
        self._lines: list[str] = []
        self._reader: threading.Thread | None = None

    def __enter__(self) -> GpuBusy:
        exe = shutil.which(self.command)
        if exe is not None:
            self._proc = subprocess.Popen(
                [exe, "--query-gpu=index,utilization.gpu", "--format=csv,noheader,nounits", f"--loop-ms={self.period_ms}"],
                stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True)
            self._reader = threading.Thread(target=lambda: self._lines.extend(self._proc.stdout), daemon=True)
            self._reader.start()
        return self

    def __exit__(self, *exc: object) -> None:
        if self._proc is None:
            return
        self._proc.terminate()
        self._proc.wait(timeout=10)
        self._reader.join(timeout=10)
        per: dict[int, list[float]] = {}
        for line in self._lines:
            parts = [p.strip() for p in line.split(",")]
            if len(parts) == 2 and parts[0].isdigit():
                try:
                    per.setdefault(int(parts[0]), []).append(float(parts[1]))
                except ValueError:
                    continue  # "[N/A]" and the like
        self.percent = [sum(v) / len(v) for _, v in sorted(per.items())]
        self.samples = [len(v) for _, v in sorted(per.items())]
