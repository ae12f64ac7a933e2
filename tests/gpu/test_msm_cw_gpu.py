"""Device checks of the constant-work MSM mode (kernels/msm_cw.cu, gpu/msm.py constant_work=True).

Same method as tests/gpu/test_msm_gpu.py, whose known-discrete-log tables and expectations this
file reuses: every window sum must equal sum_i d_{i,w} k_{idx_i} * G, and the normal mode's sum
on the same inputs. Patterns include all-zero and all-one scalars (the zero digits all go to
dummy rows; every one lands in bucket (0, 0)), bits-heavy witnesses, equal scalars and infinity
bases. Also: every window receives exactly n entries, dirty scratch buffers shared with the
normal mode, and whole proofs equal to the CPU's.
"""

from __future__ import annotations

import random
from pathlib import Path

import numpy as np
import pytest

cupy = pytest.importorskip("cupy")

from distprove import bn254  # noqa: E402
from distprove.bn254 import R  # noqa: E402
from distprove.stages.msm import combine, num_windows, signed_digits_array  # noqa: E402
from test_msm_gpu import R_LIMBS, _expected_total, _expected_windows, _indices, _scalars, _table  # noqa: E402

pytestmark = pytest.mark.gpu
DATA = Path(__file__).parents[1] / "data"


def _cw_scalars(n: int, pattern: str, rng: np.random.Generator) -> np.ndarray:
    if pattern in ("random", "mixed", "equal"):
        return _scalars(n, pattern, rng)
    s = np.zeros((n, 8), dtype=np.uint32)
    if pattern == "one":
        s[:, 0] = 1
    elif pattern == "bits":  # witness-like: ~45% zero, ~45% one, the rest random
        kind = rng.integers(0, 20, size=n)
        s[kind >= 9, 0] = 1
        s[kind >= 18] = _scalars(int((kind >= 18).sum()), "random", rng)
    return s


def _run(group, n, c, lo, hi, pattern, scratch=None, seed=None):
    from distprove.backends.gpu.msm import msm_windows

    rng = np.random.default_rng(seed)
    ks, table = _table(group)
    scal = _cw_scalars(n, pattern, rng)
    if n >= 2 and pattern not in ("zero", "one"):
        scal[1] = R_LIMBS
    idx = _indices(n, rng)
    bases = cupy.asarray(table[idx])
    s = cupy.asarray(scal)
    got = msm_windows(group, bases, s, c, lo, hi, scratch=scratch, constant_work=True)
    assert got == _expected_windows(group, ks, idx, scal, c, lo, hi)
    assert got == msm_windows(group, bases, s, c, lo, hi, scratch=scratch)
    if (lo, hi) == (0, num_windows(c)):
        assert combine(group, dict(enumerate(got)), c) == _expected_total(group, ks, idx, scal)


CASES = [
    (bn254.G1, 1, 5, "full", "random"),
    (bn254.G1, 3, 2, "full", "mixed"),
    (bn254.G1, 1000, 8, "upper", "mixed"),
    (bn254.G1, 1000, 10, "full", "zero"),
    (bn254.G1, 4000, 12, "full", "one"),
    (bn254.G1, (1 << 16) + 7, 13, "full", "bits"),
    (bn254.G1, 1 << 16, 12, "full", "equal"),
    (bn254.G1, 1 << 20, 16, "full", "bits"),
    (bn254.G2, 2, 4, "full", "random"),
    (bn254.G2, 1000, 11, "full", "bits"),
    (bn254.G2, (1 << 16) + 7, 13, "lower", "mixed"),
    (bn254.G2, 1 << 18, 15, "full", "one"),
]


@pytest.mark.parametrize("group,n,c,window_range,pattern", CASES,
                         ids=lambda v: v.name if isinstance(v, bn254.Group) else str(v))
def test_cw_window_sums(group, n, c, window_range, pattern) -> None:
    w = num_windows(c)
    rng = random.Random()
    lo, hi = {"full": (0, w), "lower": (0, rng.randrange(1, w + 1))}.get(window_range, (None, None))
    if lo is None:
        lo = rng.randrange(1, w)
        hi = rng.randrange(lo + 1, w + 1)
    _run(group, n, c, lo, hi, pattern)


@pytest.mark.parametrize("dummy", [1, 2, 32, 256])
def test_cw_dummy_row_counts(monkeypatch: pytest.MonkeyPatch, dummy: int) -> None:
    import distprove.backends.gpu.msm as gm

    monkeypatch.setattr(gm, "DUMMY_ROWS", dummy)
    _run(bn254.G1, 5000, 9, 0, num_windows(9), "bits")


def test_cw_every_window_gets_n_entries() -> None:
    import distprove.backends.gpu.msm as gm

    rng = np.random.default_rng()
    n, c, lo, nw, dummy = 3001, 9, 2, 20, 8
    nb = 1 << (c - 1)
    for pattern in ("zero", "one", "bits", "random"):
        scal = _cw_scalars(n, pattern, rng)
        counts = cupy.zeros(nw * nb + nw * dummy, dtype=cupy.uint32)
        u = np.uint32
        gm._cw_module().get_function("msm_count_cw")(
            (-(-n // 256),), (256,), (cupy.asarray(scal), counts, u(n), u(c), u(lo), u(nw), u(nb), u(dummy)))
        host = cupy.asnumpy(counts).astype(np.int64)
        per_window = host[: nw * nb].reshape(nw, nb).sum(axis=1) + host[nw * nb :].reshape(nw, dummy).sum(axis=1)
        assert per_window.tolist() == [n] * nw, pattern
        digits = signed_digits_array(scal, c)[:, lo : lo + nw]
        assert host[nw * nb :].reshape(nw, dummy).sum(axis=1).tolist() == (digits == 0).sum(axis=0).tolist()


def test_cw_scratch_shared_with_normal_mode() -> None:
    from distprove.backends.gpu.msm import MsmScratch

    scratch = MsmScratch()
    _run(bn254.G1, 1 << 15, 11, 0, num_windows(11), "mixed", scratch=scratch)
    _run(bn254.G1, 777, 11, 0, num_windows(11), "bits", scratch=scratch)
    _run(bn254.G2, 5000, 9, 3, 20, "random", scratch=scratch)


def test_cw_proofs_equal_cpu() -> None:
    from distprove.backends.cpu import CpuBackend
    from distprove.backends.gpu import GpuBackend
    from distprove.keystore import open_key
    from distprove.prover import prove

    gpu, cpu = GpuBackend(), CpuBackend()
    rng = random.Random()
    for zkey, wtns in [(DATA / "mini" / "mini_0001.zkey", DATA / "mini" / "witness.wtns"),
                       (DATA / "mul_chain_1k" / "circuit_final.zkey", DATA / "mul_chain_1k" / "witnesses" / "witness_0.wtns")]:
        key = open_key(zkey)
        rs = (rng.randrange(R), rng.randrange(R))
        want = prove(key, wtns, backend=cpu, blinding=rs).to_json()
        assert prove(key, wtns, backend=gpu, blinding=rs, constant_work=True).to_json() == want
        assert prove(key, wtns, backend=gpu, blinding=rs).to_json() == want
