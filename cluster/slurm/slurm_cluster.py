#!/usr/bin/env python
"""distprove on SLURM GPU nodes through dask-jobqueue.

The process running this script hosts the Dask scheduler (and the dashboard); dask-jobqueue
submits GPU jobs, each running ``dask cuda worker`` (one worker process per GPU of the job, one
thread each), and the batch runs on them:

    python cluster/slurm/slurm_cluster.py KEY WITNESS_DIR OUT_DIR --jobs 2 --gpus-per-job 4 \\
        [--partition gpu] [--account proj] [--gres gpu:a100:{gpus}] [--incremental] [--dry-run] \\
        [--witness-jobs 4 --witness-cpus 32 [--witness-partition cpu]]

``--witness-jobs`` adds a CPU witness pool for batches from inputs: CPU-only jobs, each one
``dask worker`` with the Dask resource ``witness=<cores - 1>`` (:func:`add_witness_jobs`), which
compute every witness for the GPU workers and are never given a proof task.

``--dry-run`` prints the job script dask-jobqueue would submit and exits. Run it inside a small
CPU allocation (see distprove-cron.sbatch) or on a login node your site allows long processes
on; the GPU nodes must reach this host on the scheduler port (``--interface`` picks the network).
Needs ``pip install dask-jobqueue`` where this runs and ``distprove[gpu]`` on the GPU nodes.
"""

from __future__ import annotations

import argparse
import signal
import sys
from pathlib import Path
from typing import Any


def make_cluster(
    gpus_per_job: int = 1,
    *,
    backend: str = "gpu",
    gres: str | None = "gpu:{gpus}",
    cpus_per_gpu: int = 8,
    memory_per_gpu: str = "64GiB",
    walltime: str = "01:00:00",
    partition: str | None = None,
    account: str | None = None,
    interface: str | None = None,
    local_directory: str | None = None,
    prologue: list[str] | None = None,
    dashboard_address: str = ":8787",
    **kwargs: Any,
) -> Any:
    """A ``dask_jobqueue.SLURMCluster`` whose jobs hold ``gpus_per_job`` GPUs and run dask-cuda.

    dask-jobqueue renders ``python -m <worker_command> SCHEDULER --nthreads .. --memory-limit ..``;
    ``worker_command="dask cuda worker"`` makes that ``python -m dask cuda worker`` (the ``dask``
    command with dask-cuda's ``cuda`` subcommand). One job = ``gpus_per_job`` worker processes, so
    ``processes`` equals the GPU count (dask-cuda names them ``<name>-0 ..``, the names jobqueue
    expects), with one thread each; ``memory`` is the job's total so that each worker's
    ``--memory-limit`` is ``memory_per_gpu``. SLURM gets the GPUs through ``--gres=<gres>``
    (``gres`` with ``{gpus}`` replaced by ``gpus_per_job``: ``"gpu:a100:{gpus}"`` for a typed GPU,
    ``None`` where a partition gives its GPUs without a gres request) and ``cpus_per_gpu`` cores per
    GPU (``--cpus-per-task``) for the host-side work.

    ``backend="cpu"`` runs the same shape on CPU-only nodes: ``gpus_per_job`` plain ``dask worker``
    processes a job on the CPU backend and no gres request (a node without GPUs never satisfies
    one). Extra keyword arguments go to SLURMCluster unchanged.
    """
    from dask.utils import format_bytes, parse_bytes
    from dask_jobqueue import SLURMCluster

    if gpus_per_job < 1:
        raise ValueError("gpus_per_job must be at least 1")
    if backend not in ("gpu", "cpu"):
        raise ValueError(f"backend must be 'gpu' or 'cpu', not {backend!r}")
    gpu = backend == "gpu"
    directives = [f"--gres={gres.format(gpus=gpus_per_job)}"] if gpu and gres else []
    # Non-daemonic workers may start the process pools of the pre-write check and of witness
    # generation (daemonic ones run that work in their own thread).
    env = [f"export DASK_DISTPROVE__BACKEND={backend}", "export DASK_DISTRIBUTED__WORKER__DAEMON=False"]
    return SLURMCluster(
        cores=gpus_per_job,
        processes=gpus_per_job,
        memory=format_bytes(gpus_per_job * parse_bytes(memory_per_gpu)).replace(" ", ""),
        job_cpu=gpus_per_job * cpus_per_gpu,
        job_extra_directives=directives + list(kwargs.pop("job_extra_directives", [])),
        worker_command="dask cuda worker" if gpu else "dask worker",
        walltime=walltime,
        queue=partition,
        account=account,
        interface=interface,
        local_directory=local_directory,
        job_script_prologue=env + list(prologue or []),
        scheduler_options={"dashboard_address": dashboard_address},
        **kwargs,
    )


def witness_job_options(
    cluster: Any,
    cpus: int = 8,
    *,
    memory: str = "16GiB",
    walltime: str | None = None,
    partition: str | None = None,
    account: str | None = None,
) -> dict[str, Any]:
    """The job options of a CPU witness job of ``cluster`` (a :func:`make_cluster` cluster): its
    settings (Python, interface, scheduler, extra arguments) with one plain ``dask worker`` of one
    thread that carries the resource ``witness=<cpus - 1>`` (its witness processes: a core is left
    to the worker; one process with one core), ``cpus`` cores, ``memory``, no gres, the CPU backend."""
    if cpus < 1:
        raise ValueError("a witness job needs at least 1 cpu")
    options = dict(cluster._job_kwargs)  # dask-jobqueue's settings of the cluster's jobs
    prologue = [line for line in options.get("job_script_prologue") or [] if "DASK_DISTPROVE__BACKEND" not in line]
    options.update(
        cores=1,
        processes=1,
        memory=memory,
        job_cpu=cpus,
        job_extra_directives=[d for d in options.get("job_extra_directives") or [] if not d.startswith("--gres")],
        worker_command="dask worker",
        worker_extra_args=list(options.get("worker_extra_args") or []) + ["--resources", f"witness={max(1, cpus - 1)}"],
        job_script_prologue=["export DASK_DISTPROVE__BACKEND=cpu"] + prologue,
        job_name="distprove-witness",
    )
    for key, value in (("walltime", walltime), ("queue", partition), ("account", account)):
        if value is not None:
            options[key] = value
    return options


def add_witness_jobs(cluster: Any, jobs: int, **options: Any) -> None:
    """Submit ``jobs`` CPU witness jobs (:func:`witness_job_options`, ``options`` passed on) to
    ``cluster`` beside its GPU jobs, after ``cluster.scale(jobs=...)`` (a later scale counts them
    among its jobs)."""
    if jobs <= 0:
        return
    spec = {"cls": cluster.job_cls, "options": witness_job_options(cluster, **options)}
    for k in range(jobs):
        cluster.worker_spec[f"witness-{k}"] = spec
    cluster.scale(jobs=len(cluster.worker_spec))  # no new GPU job: it starts the added specs


def _exit_on_sigterm(signum: int, frame: object) -> None:
    raise SystemExit(128 + signum)


def main(argv: list[str] | None = None) -> int:
    """Start the cluster, scale it to ``--jobs`` GPU jobs, run one batch, shut everything down."""
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("key")
    p.add_argument("witness_dir")
    p.add_argument("out_dir")
    p.add_argument("--jobs", type=int, default=1, help="GPU jobs to start")
    p.add_argument("--gpus-per-job", type=int, default=1, help="GPU workers a job (--backend cpu: CPU worker processes)")
    p.add_argument("--backend", choices=["gpu", "cpu"], default="gpu", help="of the workers; cpu: dask worker, no gres")
    p.add_argument("--gres", default="gpu:{gpus}", help="the jobs' --gres, {gpus} = --gpus-per-job; '' for none")
    p.add_argument("--cpus-per-gpu", type=int, default=8)
    p.add_argument("--memory-per-gpu", default="64GiB", help="host memory per GPU worker")
    p.add_argument("--walltime", default="01:00:00", help="of each GPU job")
    p.add_argument("--partition")
    p.add_argument("--account")
    p.add_argument("--interface", help="network interface the workers reach the scheduler on, e.g. ib0")
    p.add_argument("--prologue", action="append", default=[], help="shell line run before the worker (repeatable)")
    p.add_argument("--worker-arg", action="append", default=[],
                   help="extra option of the worker command, e.g. --worker-arg=--dashboard-address=:8788 (repeatable)")
    p.add_argument("--python", help="Python on the GPU nodes (default: this one; a shared venv)")
    p.add_argument("--dashboard-address", default=":8787", help="of the scheduler, in this process")
    p.add_argument("--incremental", action="store_true", help="prove only witnesses without a verified proof yet")
    p.add_argument("--witness-jobs", type=int, default=0,
                   help="CPU witness jobs (batches from inputs): they compute the witnesses, the GPU jobs prove")
    p.add_argument("--witness-cpus", type=int, default=8, help="cores of each witness job (one for its worker)")
    p.add_argument("--witness-memory", default="16GiB", help="host memory of each witness job")
    p.add_argument("--witness-partition", help="of the witness jobs (default: --partition)")
    p.add_argument("--wait", type=float, default=1800, help="seconds to wait for the first GPU job to start")
    p.add_argument("--dry-run", action="store_true", help="print the job script and exit")
    args = p.parse_args(argv)
    # The workers open these paths from the jobs' working directory, which need not be this one.
    key, witness_dir, out_dir = (str(Path(a).absolute()) for a in (args.key, args.witness_dir, args.out_dir))

    from distprove.cluster import incremental

    if args.incremental and not args.dry_run and not incremental.pending(witness_dir, key, out_dir):
        print("nothing new to prove; no GPU job submitted", file=sys.stderr)
        return 0
    cluster = make_cluster(
        args.gpus_per_job,
        backend=args.backend,
        gres=args.gres or None,
        cpus_per_gpu=args.cpus_per_gpu,
        memory_per_gpu=args.memory_per_gpu,
        walltime=args.walltime,
        partition=args.partition,
        account=args.account,
        interface=args.interface,
        prologue=args.prologue,
        dashboard_address=args.dashboard_address,
        worker_extra_args=args.worker_arg,
        **({"python": args.python} if args.python else {}),
    )
    # scancel and the time limit send SIGTERM: leave through the context manager, which cancels the
    # worker jobs, instead of dying and leaving them to hold their nodes until --death-timeout.
    # The previous handler comes back on the way out, for a caller that runs main() in its process.
    previous = signal.signal(signal.SIGTERM, _exit_on_sigterm)
    try:
        with cluster:
            witness = {"cpus": args.witness_cpus, "memory": args.witness_memory, "partition": args.witness_partition}
            if args.dry_run:
                print(cluster.job_script())
                if args.witness_jobs:
                    job = cluster.job_cls(cluster.scheduler_address, name="witness-0", **witness_job_options(cluster, **witness))
                    print(job.job_script())
                return 0
            from distributed import Client

            import distprove

            cluster.scale(jobs=args.jobs)
            add_witness_jobs(cluster, args.witness_jobs, **witness)
            with Client(cluster) as client:
                print(f"dashboard: {client.dashboard_link}", file=sys.stderr)
                client.wait_for_workers(1, timeout=args.wait)  # start with whatever is running; more join later
                run = incremental.batch if args.incremental else distprove.batch
                report = run(witness_dir, key, out_dir, client=client)
                print(report)
                return 0 if report.ok else 1
    finally:
        signal.signal(signal.SIGTERM, previous)


if __name__ == "__main__":
    sys.exit(main())
