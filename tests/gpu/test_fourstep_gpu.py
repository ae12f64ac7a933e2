"""The GPU's four-step block functions (``backends/gpu/fourstep.py``) against the CPU's, bit for bit.

Each block function on fresh random blocks (with 0, 1 and r - 1 among the values) of several
vectors, column widths that are not powers of two and non-zero offsets, forward and inverse;
the local composition against the GPU's plain NTT at sizes the CPU reference cannot reach; and
the distributed H on two GPU-backend worker processes (sharing whatever GPUs there are) against
the GPU backend's own H scalars, then a split-mode batch using it whose proofs pass the pairing
check.
"""

from __future__ import annotations

import secrets
from pathlib import Path

import numpy as np
import pytest

from distprove import bn254
from distprove.backends.cpu import fourstep as cpu
from distprove.bn254 import R

pytestmark = pytest.mark.gpu

EDGES = [0, 1, R - 1]
DATA = Path(__file__).resolve().parents[1] / "data"


@pytest.fixture(scope="module")
def gpu():
    pytest.importorskip("cupy")
    from distprove.backends.gpu import fourstep

    return fourstep


def random_values(n: int, count: int = 1) -> np.ndarray:
    vals = [secrets.randbelow(R) for _ in range(count * n)]
    vals[: len(EDGES)] = EDGES
    return bn254.limbs_from_ints(vals).reshape(count, n, 8)


@pytest.mark.parametrize("k", [9, 10])
@pytest.mark.parametrize("inverse", [False, True])
def test_column_and_row_steps_equal_cpu(gpu, k: int, inverse: bool) -> None:
    n = 1 << k
    n1, n2 = cpu.split_sizes(n)
    v = random_values(n, 3)
    for lo, hi in [(0, n2), (3, 8), (n2 - 5, n2)]:  # whole, 5 columns from 3, the last 5
        block = cpu.take_columns(v, n1, n2, lo, hi)
        assert np.array_equal(gpu.column_step(block, n, lo, inverse), cpu.column_step(block, n, lo, inverse))
    rows = random_values(n, 3).reshape(3, n1, n2, 8)[:, 5:16]
    assert np.array_equal(gpu.row_ntts(rows, n, inverse), cpu.row_ntts(rows, n, inverse))


@pytest.mark.parametrize("k", [9, 10])
def test_coset_scale_and_h_equal_cpu(gpu, k: int) -> None:
    n = 1 << k
    n1, n2 = cpu.split_sizes(n)
    block = random_values(n, 3).reshape(3, n1, n2, 8)[:, 7:19]
    assert np.array_equal(gpu.coset_scale(block, n, 7), cpu.coset_scale(block, n, 7))
    assert np.array_equal(gpu.h_from_odd(block), cpu.h_from_odd(block))


@pytest.mark.parametrize("k", [16, 17])
@pytest.mark.parametrize("parts", [2, 3])
def test_local_composition_equals_gpu_ntt(gpu, k: int, parts: int) -> None:
    from distprove.backends.gpu.backend import GpuBackend

    be = GpuBackend()
    v = random_values(1 << k)[0]
    for inverse in (False, True):
        assert np.array_equal(gpu.ntt(v, inverse, parts), be.ntt(v, inverse))


@pytest.fixture(scope="module")
def client():
    """Two worker processes with the GPU backend's state (on one GPU, both use it)."""
    pytest.importorskip("cupy")
    from distributed import Client, LocalCluster

    from distprove.cluster.state import PLUGIN_NAME, ProverState

    with LocalCluster(n_workers=2, threads_per_worker=1, processes=True, dashboard_address=None) as cluster:
        with Client(cluster) as c:
            c.wait_for_workers(2)
            c.register_plugin(ProverState("gpu"), name=PLUGIN_NAME)
            yield c


def test_distributed_h_on_gpu_workers_equals_gpu_h_scalars(client) -> None:
    from distributed import wait

    from distprove.backends.gpu.backend import GpuBackend
    from distprove.cluster.graph import submit_h_fourstep
    from distprove.cluster.tasks import Prepared

    n = 1 << 12
    evals = random_values(n, 3)
    prepared = client.scatter(Prepared(None, evals))
    hs, futures = submit_h_fourstep(client, "h", prepared, n, sorted(client.nthreads()), tag="gpu")
    wait(futures)
    assert len({w for f in futures for w in client.who_has([f])[f.key]}) > 1
    assert set(client.run(lambda dask_worker: type(dask_worker.plugins["distprove"].backend).__name__).values()) == {"GpuBackend"}
    be = GpuBackend()
    to_mont = be.engine.const(bn254.FR_MONT * bn254.FR_MONT % R)
    mont = []
    for i in range(3):
        x = be.cp.asarray(evals[i])
        be.engine.k.scale(x, to_mont)
        mont.append(x)
    expect = be.cp.asnumpy(be.engine.h_scalars(*mont))
    assert np.array_equal(hs.result().reshape(n, 8), expect)


def test_split_batch_with_gpu_fourstep_proves(client, tmp_path: Path) -> None:
    import shutil

    import distprove

    key = DATA / "mul_chain_1k" / "circuit_final.zkey"
    wdir = tmp_path / "w"
    wdir.mkdir()
    for w in sorted((DATA / "mul_chain_1k" / "witnesses").glob("*.wtns"))[:2]:
        shutil.copy(w, wdir / w.name)
    report = distprove.batch(wdir, key=key, out_dir=tmp_path / "out", client=client, mode="split", backend="gpu",
                             fourstep_min_domain=4, verify=True, echo=None)
    assert not report.failed and len(report.proved) == 2
    assert "ntt-rows-forward" in report.stage_seconds  # H went through the distributed four-step


def test_split_batch_recomputes_h_on_the_other_gpu_worker(client, tmp_path: Path) -> None:
    """Split mode without the four-step: the prepare keeps H on its device (GPU keys do not hand it
    over), so the H window tasks that run on the other worker recompute it from the witness; the
    proofs still pass the pairing check."""
    import ast
    import shutil

    from distributed import get_task_stream

    import distprove

    key = DATA / "mul_chain_1k" / "circuit_final.zkey"
    wdir = tmp_path / "w"
    wdir.mkdir()
    for w in sorted((DATA / "mul_chain_1k" / "witnesses").glob("*.wtns"))[:2]:
        shutil.copy(w, wdir / w.name)
    with get_task_stream(client) as ts:
        report = distprove.batch(wdir, key=key, out_dir=tmp_path / "out", client=client, mode="split", backend="gpu",
                                 verify=True, echo=None)
    assert not report.failed and len(report.proved) == 2
    assert "ntt-rows-forward" not in report.stage_seconds  # H computed whole by the prepare
    keys = [(ast.literal_eval(t["key"]) if isinstance(t["key"], str) else t["key"], t["worker"]) for t in ts.data]
    prepared_on = {k[1]: w for k, w in keys if k[0] == "prove-prepare"}
    away = [k for k, w in keys if k[0] == "msm-windows" and k[2] == "H" and w != prepared_on[k[1]]]
    assert away  # H window tasks ran on the worker that did not prepare their proof
