"""A fresh process pays only for what its command uses: module imports stay lazy."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
HEAVY = ("distributed", "dask", "numba", "zarr", "rich", "cupy", "bokeh")


def _loaded_after(code: str) -> set[str]:
    """Which of HEAVY a fresh interpreter has imported after running ``code``."""
    probe = f"{code}\nimport json, sys\nprint(json.dumps([m for m in {HEAVY!r} if m in sys.modules]))"
    env = {**os.environ, "PYTHONPATH": os.pathsep.join(filter(None, [str(ROOT), os.environ.get("PYTHONPATH")]))}
    res = subprocess.run([sys.executable, "-c", probe], capture_output=True, text=True, env=env, timeout=120, check=True)
    return set(json.loads(res.stdout.strip().splitlines()[-1]))


def test_cli_imports_no_heavy_package() -> None:
    assert _loaded_after("import distprove.cli") == set()


@pytest.mark.parametrize(
    "code",
    [
        # what `distprove prove` and `import-key` load: dask (for dask.config) but never distributed,
        # and numba only once a point check runs on the CPU
        "import distprove.cli, distprove.prover, distprove.keystore, distprove.formats.zkey, distprove.verifier",
        "import distprove.backends.gpu.validate, distprove.formats.container",
        # the GPU's ptau prepare: its GLV split comes from distprove.glv, not the numba CPU path
        "import distprove.backends.gpu.groupfft",
    ],
)
def test_prove_and_import_paths_leave_out_distributed_and_numba(code: str) -> None:
    loaded = _loaded_after(code)
    assert not loaded & {"distributed", "numba", "bokeh", "rich"}, loaded


def test_reading_a_zkey_without_point_checks_loads_no_numba() -> None:
    zkey = ROOT / "tests" / "data" / "mul_chain_1k" / "circuit_final.zkey"
    loaded = _loaded_after(f"from distprove.formats.zkey import read_zkey\nread_zkey({str(zkey)!r}, check_points=False)")
    assert "numba" not in loaded and "distributed" not in loaded
