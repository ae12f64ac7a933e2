"""The workers' host allocator (distprove.allocator): glibc's thresholds set by the worker
state's setup, so that a worker's large blocks come from its heap instead of fresh mappings."""

from __future__ import annotations

import multiprocessing
import sys
from concurrent.futures import ProcessPoolExecutor

import dask
import pytest

from distprove.allocator import tune_malloc

pytestmark = pytest.mark.skipif(sys.platform != "linux", reason="glibc's mallopt")


def _faults_per_block(nbytes: int = 2 << 20, blocks: int = 20) -> int:
    """Minor page faults per block of ``nbytes`` allocated, filled and freed in this process."""
    import resource

    import numpy as np

    before = resource.getrusage(resource.RUSAGE_SELF).ru_minflt
    for _ in range(blocks):
        a = np.empty(nbytes, np.uint8)
        a.fill(1)
        del a
    return (resource.getrusage(resource.RUSAGE_SELF).ru_minflt - before) // blocks


def _tuned(mmap_threshold: int | None, trim_threshold: int | None) -> tuple[bool, int]:
    return tune_malloc(mmap_threshold, trim_threshold), _faults_per_block()


def test_tune_malloc_sets_what_glibc_takes() -> None:
    """In a fresh process with Dask's MALLOC_TRIM_THRESHOLD_ behaviour (a trim threshold set):
    the thresholds are taken and a 2 MiB block is then reused, not faulted in again; nothing
    given changes nothing."""
    with ProcessPoolExecutor(1, mp_context=multiprocessing.get_context("spawn")) as pool:
        assert pool.submit(_tuned, None, 1 << 16).result()[1] > 400  # Dask's setting: fresh mappings
    with ProcessPoolExecutor(1, mp_context=multiprocessing.get_context("spawn")) as pool:
        ok, faults = pool.submit(_tuned, 32 << 20, 256 << 20).result()
        assert ok and faults < 100
        assert pool.submit(tune_malloc, None, None).result() is False


def _worker_faults(dask_worker: object) -> int:
    return _faults_per_block()


@pytest.mark.parametrize("tuned", [True, False])
def test_worker_state_tunes_the_workers_allocator(tuned: bool) -> None:
    """A batch's worker state sets the thresholds in each worker process (Dask's nanny started it
    with MALLOC_TRIM_THRESHOLD_): a 2 MiB block is reused; with the settings null, every such
    block is faulted in afresh."""
    from distributed import Client, LocalCluster

    from distprove.cluster.batching import ensure_worker_state

    settings = {} if tuned else {"distprove.cluster.malloc-mmap-threshold": None, "distprove.cluster.malloc-trim-threshold": None}
    with dask.config.set(settings):
        with LocalCluster(n_workers=1, threads_per_worker=1, processes=True, dashboard_address=None) as cluster, Client(cluster) as client:
            ensure_worker_state(client, "cpu", 2, None)
            faults = list(client.run(_worker_faults).values())[0]
    assert (faults < 100) if tuned else (faults > 400), faults


def _pool_faults(dask_worker: object) -> int:
    from distprove.witness.pool import EXECUTOR

    return dask_worker.executors[EXECUTOR].submit(_faults_per_block).result()  # type: ignore[attr-defined]


@pytest.mark.parametrize("tuned", [True, False])
def test_witness_processes_get_the_workers_allocator_thresholds(tuned: bool) -> None:
    """A worker's witness processes, which inherit Dask's MALLOC_TRIM_THRESHOLD_, set the
    worker's thresholds as they start (a 2 MiB block reused), unless the settings are null."""
    from distributed import Client, LocalCluster

    from distprove.witness.pool import ensure_pool

    settings = {"distributed.worker.daemon": False, "distprove.witness.processes": 1}
    if not tuned:
        settings.update({"distprove.cluster.malloc-mmap-threshold": None, "distprove.cluster.malloc-trim-threshold": None})
    with dask.config.set(settings):
        with LocalCluster(n_workers=1, threads_per_worker=1, processes=True, dashboard_address=None) as cluster, Client(cluster) as client:
            ensure_pool(client)
            faults = list(client.run(_pool_faults).values())[0]
    assert (faults < 100) if tuned else (faults > 400), faults
