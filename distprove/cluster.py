"""Get a Dask client for a batch: the caller's, a scheduler's address, or a local cluster.

Order: ``client=`` given; else ``scheduler=`` or the ``scheduler-address`` config
(``DASK_SCHEDULER_ADDRESS``); else a ``LocalCUDACluster`` (one worker per GPU, one thread each)
when dask-cuda is importable and GPUs are visible (unless the CPU backend was asked for); else a
``LocalCluster`` of single-threaded worker processes for the CPU backend. Local schedulers and
dashboards bind to 127.0.0.1 unless ``host`` says otherwise.
"""

from __future__ import annotations

import contextlib
import logging
import os
from collections.abc import Iterator
from typing import Any

import dask
from distributed import Client, LocalCluster

from distprove.errors import BackendUnavailable

log = logging.getLogger(__name__)

DEFAULT_HOST = "127.0.0.1"
DEFAULT_DASHBOARD = "127.0.0.1:8787"


def visible_gpus() -> int:
    """How many CUDA devices dask-cuda would use here (0 without dask-cuda, NVML or a device)."""
    try:
        from dask_cuda.utils import get_n_gpus
    except ImportError:
        return 0
    try:
        return int(get_n_gpus())
    except Exception:  # NVML missing or no driver: dask-cuda raises several types
        return 0


def local_cluster(
    backend: str = "auto",
    n_workers: int | None = None,
    host: str = DEFAULT_HOST,
    dashboard_address: str | None = DEFAULT_DASHBOARD,
) -> Any:
    """A local cluster for ``backend``: LocalCUDACluster when GPUs are usable, else CPU worker processes.

    The workers' statistical profiler follows ``distprove.cluster.worker-profile`` (default on).
    """
    from distprove import config

    with dask.config.set({"distributed.worker.profile.enabled": config.get_bool("cluster.worker-profile")}):
        return _start_local(backend, n_workers, host, dashboard_address)


def _start_local(backend: str, n_workers: int | None, host: str, dashboard_address: str | None) -> Any:
    if backend != "cpu" and visible_gpus() > 0:
        from dask_cuda import LocalCUDACluster

        kwargs: dict[str, Any] = {}
        if n_workers:
            kwargs["n_workers"] = n_workers
        return LocalCUDACluster(threads_per_worker=1, host=host, dashboard_address=dashboard_address, **kwargs)
    if backend == "gpu":
        raise BackendUnavailable("backend 'gpu' requested but dask-cuda sees no GPU (install distprove[gpu])")
    return LocalCluster(
        n_workers=n_workers or os.cpu_count() or 1,
        threads_per_worker=1,
        processes=True,
        host=host,
        dashboard_address=dashboard_address,
    )


@contextlib.contextmanager
def connect(
    client: Client | None = None,
    *,
    scheduler: str | None = None,
    backend: str = "auto",
    n_workers: int | None = None,
    host: str = DEFAULT_HOST,
    dashboard_address: str | None = DEFAULT_DASHBOARD,
) -> Iterator[Client]:
    """Yield a client (see the module doc for the order); close only what this call created."""
    if client is not None:
        yield client
        return
    address = scheduler or dask.config.get("scheduler-address", None)
    if address:
        with Client(address) as c:
            yield c
        return
    cluster = local_cluster(backend, n_workers, host, dashboard_address)
    try:
        with Client(cluster) as c:
            log.info("started %s, dashboard %s", type(cluster).__name__, c.dashboard_link)
            yield c
    finally:
        cluster.close()
