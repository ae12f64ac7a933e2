"""pipelines/ab_msm.py's reference: the known-discrete-log total of bench_msm's bases, checked
against sum_i s_i P_idx[i] computed point by point (host arrays; no GPU)."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

from conftest import load_script
from distprove import bn254

PIPELINES = Path(__file__).parents[1] / "pipelines"


def test_known_total_matches_the_points(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.syspath_prepend(str(PIPELINES))
    ab = load_script(PIPELINES / "ab_msm.py")
    bench = load_script(PIPELINES / "bench_msm.py")
    g = bn254.G1
    rng = np.random.default_rng(5)
    scalars = bench._uniform_scalars(rng, 40)
    scalars[3] = 0
    scalars[4] = [1, 0, 0, 0, 0, 0, 0, 0]
    idx = rng.integers(0, bench.TABLE, size=40)
    idx[5:9] = idx[0]  # a base used several times
    points = bn254.points_from_limbs(g, bench._table(g))
    want = None
    for s, j in zip(scalars, idx):
        want = bn254.add(g, want, bn254.mul(g, points[j], sum(int(w) << (32 * k) for k, w in enumerate(s))))
    assert ab.known_total(g, scalars, idx, bench.TABLE) == want
    scalars[7, 0] ^= 1
    assert ab.known_total(g, scalars, idx, bench.TABLE) != want
