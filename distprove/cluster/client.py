"""Get a Dask client for a batch: the caller's, a scheduler's address, or a local cluster.

Order: ``client=`` given; else ``scheduler=`` or the ``scheduler-address`` config
(``DASK_SCHEDULER_ADDRESS``); else a ``LocalCUDACluster`` (``distprove.cluster.workers-per-gpu``
workers per GPU, default one, one thread each) when dask-cuda is importable and GPUs are visible
(unless the CPU backend was asked for); else a ``LocalCluster`` of single-threaded worker
processes for the CPU backend. Local schedulers and
dashboards bind to 127.0.0.1 unless ``host`` says otherwise. ``witness_workers=N`` adds N CPU-only
witness worker processes to a local cluster (:func:`add_witness_workers`): they compute an input
batch's witnesses for the provers and prove nothing.

The workers of a local cluster are not daemonic processes (:func:`worker_config`), so each may
start child processes: its witness pool (``distprove/witness/pool.py``) and its pre-write check pool
(:meth:`distprove.cluster.state.ProverState.check_executor`). Workers of a cluster joined by address
decide that themselves (``DASK_DISTRIBUTED__WORKER__DAEMON=False``); daemonic ones do both in
threads instead.
"""

from __future__ import annotations

import ast
import contextlib
import copy
import inspect
import logging
import sys
from collections.abc import Iterable, Iterator
from pathlib import Path
from typing import Any

import dask
from distributed import Client, LocalCluster, SpecCluster
from dask.system import CPU_COUNT

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


def _is_main_guard(stmt: ast.stmt, line: int) -> bool:
    """Whether ``line`` lies in the body of ``stmt`` and ``stmt`` is ``if __name__ == "__main__":``."""
    if not isinstance(stmt, ast.If) or not stmt.body[0].lineno <= line <= (stmt.body[-1].end_lineno or line):
        return False
    for node in ast.walk(stmt.test):
        if isinstance(node, ast.Compare) and all(isinstance(op, ast.Eq) for op in node.ops):
            operands = [node.left, *node.comparators]
            names = {o.id for o in operands if isinstance(o, ast.Name)}
            consts = {o.value for o in operands if isinstance(o, ast.Constant)}
            if "__name__" in names and "__main__" in consts:
                return True
    return False


def unguarded_script_call() -> tuple[str, int] | None:
    """(script, line) when this call runs in a script's top-level code outside
    ``if __name__ == "__main__":``, else None.

    Worker processes are spawned, and a spawned process runs the parent's script again from
    the top (as ``__mp_main__``): an unguarded call there starts workers while the process is
    still starting, which multiprocessing refuses with a long traceback from every worker. Found
    from the stack (the script's module-level frame and its line) and the script's syntax tree.
    """
    main = sys.modules.get("__main__")
    path = getattr(main, "__file__", None)
    spec_name = getattr(getattr(main, "__spec__", None), "name", None) or ""
    if main is None or path is None or spec_name == "__main__" or spec_name.endswith(".__main__"):
        return None  # a REPL, a notebook, `python -c`, a package's __main__: not run again by spawn
    frame = inspect.currentframe()
    while frame is not None and not (frame.f_globals is vars(main) and frame.f_code.co_name == "<module>"):
        frame = frame.f_back
    if frame is None:
        return None
    line = frame.f_lineno
    try:
        tree = ast.parse(Path(path).read_text(encoding="utf-8"))
    except (OSError, SyntaxError, ValueError):
        return None
    for stmt in tree.body:
        if stmt.lineno <= line <= (stmt.end_lineno or stmt.lineno):
            return None if _is_main_guard(stmt, line) else (path, line)
    return None


def require_main_guard() -> None:
    """Exit with one line naming the script and the guard to add when :func:`unguarded_script_call`
    finds one; call before starting worker processes.

    SystemExit rather than an exception: the script cannot work as written, and its top level
    is where the call came from, so the user sees the line alone instead of a traceback.
    """
    where = unguarded_script_call()
    if where is not None:
        script, line = where
        raise SystemExit(
            f'error: {script}, line {line}: distprove starts worker processes, which run this script again; '
            f'put the code that starts the work under `if __name__ == "__main__":`'
        )


def worker_config() -> dict[str, Any]:
    """The dask configuration the nannies of a local cluster start their workers with: not
    daemonic (a daemonic process may not have children, and the witness and check pools are
    processes), the statistical profiler as ``distprove.cluster.worker-profile`` says. A nanny
    reads it again when it restarts a worker, so it holds for the cluster's life (:func:`connect`)."""
    from distprove import config

    return {"distributed.worker.daemon": False, "distributed.worker.profile.enabled": config.get_bool("cluster.worker-profile")}


SMALL_KEY_DOMAIN = 1 << 14
"""Keys below this many domain points are small: one process's host work, not the GPU, bounds
their proofs a second (on an H200 at 2^12 the GPU is busy 35-47% of a batch in one process)."""
SMALL_KEY_WORKERS_PER_GPU = 2
"""Worker processes per GPU when every key of a batch is small (:func:`processes_per_gpu`): at 2^12
on an H200 two gave 1,484 against 1,265 and 1,293 against 982 proofs/s (two units), at 2^16 no
gain."""


def processes_per_gpu(keys: Iterable[str | None] = (), given: int | None = None) -> int:
    """Worker processes per GPU of a local cluster proving with ``keys`` (paths; None for a job
    without one): ``given``, else ``distprove.cluster.workers-per-gpu``, else (null)
    :data:`SMALL_KEY_WORKERS_PER_GPU` when every key has fewer than :data:`SMALL_KEY_DOMAIN`
    domain points and 1 otherwise, also when a key cannot be read (its jobs fail on their own)."""
    from distprove import config
    from distprove.errors import FormatError
    from distprove.keystore import key_domain_size

    if given is not None:
        return given
    configured = config.get_optional_int("cluster.workers-per-gpu", 1)
    if configured is not None:
        return configured
    paths = {k for k in keys if k}
    try:
        small = bool(paths) and all(key_domain_size(p) < SMALL_KEY_DOMAIN for p in paths)
    except FormatError:
        return 1
    return SMALL_KEY_WORKERS_PER_GPU if small else 1


def local_cluster(
    backend: str = "auto",
    n_workers: int | None = None,
    host: str = DEFAULT_HOST,
    dashboard_address: str | None = DEFAULT_DASHBOARD,
    workers_per_gpu: int | None = None,
    witness_workers: int = 0,
) -> Any:
    """A local cluster for ``backend``: LocalCUDACluster when GPUs are usable (``n_workers`` GPUs,
    default all, each with ``workers_per_gpu`` worker processes, default
    ``distprove.cluster.workers-per-gpu`` or 1), else ``n_workers`` CPU worker processes; and
    ``witness_workers`` CPU-only witness workers (:func:`add_witness_workers`).

    The workers start with :func:`worker_config` (not daemonic; the profiler per
    ``distprove.cluster.worker-profile``, default on). Called from a script's unguarded top level,
    exits with one line (see :func:`require_main_guard`).
    """
    require_main_guard()
    per_gpu = processes_per_gpu(given=workers_per_gpu)
    if per_gpu < 1:
        raise ValueError(f"workers_per_gpu must be >= 1 (got {per_gpu})")
    if witness_workers < 0:
        raise ValueError(f"witness_workers must be >= 0 (got {witness_workers})")
    with dask.config.set(worker_config()):
        cluster = _start_local(backend, n_workers, host, dashboard_address, per_gpu)
        try:
            add_witness_workers(cluster, witness_workers, host)
        except BaseException:
            cluster.close()
            raise
        return cluster


WITNESS_WORKER_PREFIX = "witness-"
"""The names of a local cluster's witness workers: witness-0, witness-1, ..."""


def add_witness_workers(cluster: SpecCluster, n: int, host: str = DEFAULT_HOST) -> None:
    """Add ``n`` witness workers to a local ``cluster`` (named ``witness-0`` ...): one-thread
    worker processes that see no GPU and carry the ``witness`` resource
    (:data:`~distprove.witness.pool.WITNESS_RESOURCE`) with their witness processes as its amount
    (``distprove.witness.processes``, else an equal share of this host's cores); returns once
    they have been asked to start. The batch sends them witness tasks and never a proof task."""
    from distributed import Nanny

    from distprove import config
    from distprove.witness.pool import WITNESS_RESOURCE

    if n <= 0:
        return
    fixed = config.get_optional_int("witness.processes", 1)
    processes = fixed if fixed is not None else max(1, CPU_COUNT // n)
    for k in range(n):
        cluster.worker_spec[f"{WITNESS_WORKER_PREFIX}{k}"] = {
            "cls": Nanny,
            "options": {"nthreads": 1, "host": host, "resources": {WITNESS_RESOURCE: processes},
                        "env": {"CUDA_VISIBLE_DEVICES": ""}},
        }
    cluster.scale(len(cluster.worker_spec))  # starts the added specs


def _start_local(backend: str, n_workers: int | None, host: str, dashboard_address: str | None, per_gpu: int) -> Any:
    if backend != "cpu" and visible_gpus() > 0:
        from dask_cuda import LocalCUDACluster

        kwargs: dict[str, Any] = {}
        if n_workers:
            kwargs["n_workers"] = n_workers
        cluster = LocalCUDACluster(threads_per_worker=1, host=host, dashboard_address=dashboard_address, **kwargs)
        try:
            share_devices(cluster, per_gpu)
        except BaseException:
            cluster.close()
            raise
        return cluster
    if backend == "gpu":
        raise BackendUnavailable("backend 'gpu' requested but dask-cuda sees no GPU (install distprove[gpu])")
    return LocalCluster(
        n_workers=n_workers or CPU_COUNT,
        threads_per_worker=1,
        processes=True,
        host=host,
        dashboard_address=dashboard_address,
    )


def share_devices(cluster: SpecCluster, per_device: int) -> None:
    """Give every worker of ``cluster`` ``per_device - 1`` companions started from a copy of its
    spec (``<name>-1``, ``<name>-2``, ...): on a LocalCUDACluster the same CUDA_VISIBLE_DEVICES,
    so the same GPU; returns once they have been asked to start (``Client.wait_for_workers``
    waits for them).

    dask-cuda names its workers after their devices and starts one per device; several processes
    a GPU let the host work of small circuits' proofs run on several cores while the GPU, idle
    most of the time for one such process, runs their kernels in turn.
    """
    if per_device <= 1:
        return
    for name, spec in list(cluster.worker_spec.items()):
        for k in range(1, per_device):
            cluster.worker_spec[f"{name}-{k}"] = copy.deepcopy(spec)
    cluster.scale(len(cluster.worker_spec))  # starts the added specs


@contextlib.contextmanager
def connect(
    client: Client | None = None,
    *,
    scheduler: str | None = None,
    backend: str = "auto",
    n_workers: int | None = None,
    workers_per_gpu: int | None = None,
    witness_workers: int = 0,
    host: str = DEFAULT_HOST,
    dashboard_address: str | None = DEFAULT_DASHBOARD,
    keys: Iterable[str | None] = (),
) -> Iterator[Client]:
    """Yield a client (see the module doc for the order); close only what this call created.
    A local cluster's client comes once all its workers are there, ``workers_per_gpu`` of them a
    GPU (default :func:`processes_per_gpu` of the batch's ``keys``, read only for a local cluster),
    and ``witness_workers`` CPU-only witness workers beside them."""
    if client is not None:
        yield client
        return
    address = scheduler or dask.config.get("scheduler-address", None)
    if address:
        with Client(address) as c:
            yield c
        return
    cluster = local_cluster(backend, n_workers, host, dashboard_address, processes_per_gpu(keys, workers_per_gpu),
                            witness_workers)
    try:
        with dask.config.set(worker_config()), Client(cluster) as c:  # a restarted worker starts as the first did
            c.wait_for_workers(len(cluster.worker_spec))  # those share_devices added start after the cluster
            log.info("started %s, dashboard %s", type(cluster).__name__, c.dashboard_link)
            yield c
    finally:
        cluster.close()
