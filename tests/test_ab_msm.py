"""pipelines/benchlib.py's known_total (the reference pipelines/ab_msm.py and bench_msm.py check
their sums against): the known-discrete-log total of benchlib's bases, checked against
sum_i s_i P_idx[i] computed point by point (host arrays; no GPU); and ab_msm's arm parsing."""

from __future__ import annotations

import re
from pathlib import Path

import numpy as np
import pytest

from conftest import load_script
from distprove import bn254

PIPELINES = Path(__file__).parents[1] / "pipelines"


def test_known_total_matches_the_points() -> None:
    bench = load_script(PIPELINES / "benchlib.py")
    g = bn254.G1
    rng = np.random.default_rng(5)
    scalars = bench.uniform_scalars(rng, 40)
    scalars[3] = 0
    scalars[4] = [1, 0, 0, 0, 0, 0, 0, 0]
    idx = rng.integers(0, bench.TABLE, size=40)
    idx[5:9] = idx[0]  # a base used several times
    points = bn254.points_from_limbs(g, bench.base_table(g))
    want = None
    for s, j in zip(scalars, idx):
        want = bn254.add(g, want, bn254.mul(g, points[j], sum(int(w) << (32 * k) for k, w in enumerate(s))))
    assert bench.known_total(g, scalars, idx) == want
    scalars[7, 0] ^= 1
    assert bench.known_total(g, scalars, idx) != want


def test_arm_settings_parse_and_reject_malformed_items() -> None:
    ab = load_script(PIPELINES / "ab_msm.py")
    assert ab.parse_arm(".") == (".", {})
    assert ab.parse_arm("/tmp/b+A=1+B=x=y") == ("/tmp/b", {"A": "1", "B": "x=y"})
    for bad in (".+A", ".+=1"):
        with pytest.raises(SystemExit, match=re.escape(bad)):
            ab.parse_arm(bad)


def test_arms_from_trees_and_whole_arms() -> None:
    ab = load_script(PIPELINES / "ab_msm.py")
    assert ab.arm_list("", []) == ["."]
    opts = '.+DASK_DISTPROVE__MSM__KERNEL_OPTIONS=["-DA=1","-DB"]'
    assert ab.arm_list(".,/tmp/b", [opts]) == [".", "/tmp/b", opts]
    assert ab.parse_arm(opts)[1] == {"DASK_DISTPROVE__MSM__KERNEL_OPTIONS": '["-DA=1","-DB"]'}


def test_msm_scripts_share_benchlib() -> None:
    """The MSM scripts take their inputs, timing and run metadata from benchlib alone: none defines
    them again or reaches into another script's private helpers."""
    shared = ("def groups(", "def base_table(", "def known_total(", "def uniform_scalars(", "def msm_inputs(",
              "def wall_ms(", "def git_commit(", "def device_info(")
    for path in PIPELINES.glob("*.py"):
        text = path.read_text()
        if path.name != "benchlib.py":
            assert not [d for d in shared if d in text], path.name
        assert not re.search(r"\bbench_\w+\._", text), path.name
