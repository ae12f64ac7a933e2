"""pipelines/benchlib.py's GPU busy sampler, against a stand-in nvidia-smi."""

from __future__ import annotations

import os
import stat
import time
from pathlib import Path

import pytest

from conftest import load_script

BENCHLIB = Path(__file__).resolve().parents[1] / "pipelines" / "benchlib.py"


def _fake_smi(folder: Path, lines: list[str]) -> None:
    """An ``nvidia-smi`` that prints ``lines`` over and over until it is stopped, as
    ``nvidia-smi --query-gpu=... -lms=N`` does."""
    script = folder / "nvidia-smi"
    body = "\\n".join(lines)
    script.write_text(f"#!/bin/sh\nwhile true; do\nprintf '{body}\\n'\nsleep 0.01\ndone\n")
    script.chmod(script.stat().st_mode | stat.S_IEXEC)


@pytest.mark.skipif(os.name != "posix", reason="a shell-script stand-in")
def test_gpu_busy_means_each_gpus_samples(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """Each GPU's mean utilization over the block, by index, with unreadable samples left out."""
    bench = load_script(BENCHLIB)
    _fake_smi(tmp_path, ["0, 40", "1, 90", "0, 60", "1, [N/A]", "0, 50", "0, 50"])
    monkeypatch.setenv("PATH", f"{tmp_path}{os.pathsep}{os.environ['PATH']}")
    with bench.GpuBusy(period_ms=10) as busy:
        time.sleep(0.3)
    assert busy.percent == [50.0, 90.0]
    assert min(busy.samples) >= 2


def test_gpu_busy_without_nvidia_smi_is_empty(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    bench = load_script(BENCHLIB)
    monkeypatch.setenv("PATH", str(tmp_path))
    with bench.GpuBusy() as busy:
        pass
    assert busy.percent == [] and busy.samples == []
