"""On the workers: the process pool that computes an input batch's witnesses (each process
through :func:`distprove.witness.generators.generator`, whatever the generator), and the
witnesses each worker process has started for the batch's proof tasks.

:class:`WitnessPool`, a WorkerPlugin, registers a process pool on each worker as
``worker.executors["wtns"]`` (``distprove.witness.processes`` processes, default the worker's
share of its host's cores, ``distprove.witness.niceness`` nicer than the worker so that its own
threads, which feed its GPU, never queue behind witnesses for a core), shut down with the worker
like its other executors; a worker killed outright shuts nothing down, so each process also exits
within :data:`PARENT_POLL_S` of its worker's end. A worker process that Dask starts as a daemon
cannot have child processes; there the pool is a thread pool (a generator runs with the GIL
released: wasmtime's wasm, a native binary's own process).

Witness workers: a worker started with the Dask resource :data:`WITNESS_RESOURCE`
(``--resources witness=N``) is a CPU-only worker that computes witnesses for the provers and
proves nothing; its pool has N processes. Its witness tasks return the values
(:func:`compute_values`: one array or one-line reason per input, no file written), which Dask
moves to the proof task that takes them as a dependency (:mod:`distprove.cluster.inputbatch`).

Claims (:func:`claim`): the first task of a worker process that needs an input's witness (the
batch's witness task, or the proof task itself when its witness task ran elsewhere or not yet)
sends it to the pool, in jobs of consecutive inputs (:func:`job_size`) so that the pool's
processes finish them about in order; every later task waits on the same job. A proof task that
streams (:func:`await_witness`) thus proves each witness as soon as it is written, and no task
waits on one that needs a worker slot to start. Claims are this process's only: a witness file of
an earlier run never counts as computed, since its input may have changed. A batch's claims are
dropped at its end (:func:`forget_batch`).

A process of the pool that dies (a crash, the OOM killer) breaks the whole pool and loses every
job on it: the next witnesses go to a new pool, and those lost are computed again one at a
time, each alone in a process of its own, so that an input that ends its process fails alone.
"""

from __future__ import annotations

import logging
import multiprocessing
import os
import threading
import time
from collections.abc import Callable
from concurrent.futures import BrokenExecutor, Executor, Future, ProcessPoolExecutor, ThreadPoolExecutor
from dataclasses import dataclass
from functools import partial
from types import SimpleNamespace
from typing import Any

import numpy as np
from distributed import WorkerPlugin, get_worker

from distprove import config
from distprove.errors import FormatError, one_line
from distprove.priority import nicer
from distprove.witness.slots import UNCAPPED, Ring, RingRef, ring_for, trim_rings, write_slot

log = logging.getLogger(__name__)

EXECUTOR = "wtns"
WITNESS_RESOURCE = "witness"
"""The Dask worker resource that makes a worker a witness worker; its amount is the worker's
witness processes."""
PLUGIN_NAME = "distprove-witness-pool"
PARENT_POLL_S = 1.0
"""How often a witness process looks whether its worker process is still there."""
JOB_VALUES = 1 << 16
"""Witness values a pool job holds at most (at least one input): an input of 2^16 values (~30 ms)
is a job of its own, so the processes finish a chunk's inputs about in the order the proofs take
them; 64 inputs of 1,024 values (~1 ms each) share one, so that a job's dispatch (~0.1 ms) stays
small against it."""


class WitnessFailed(FormatError):
    """An input whose witness could not be computed: ``reason`` as its calculation gave it (one
    line naming the input, or the witness file that could not be written)."""

    def __init__(self, reason: str) -> None:
        path, _, problem = reason.partition(": ")
        super().__init__(path, problem)
        self.args = (reason,)

    def __str__(self) -> str:
        return self.args[0]


@dataclass(frozen=True)
class WitnessSource:
    """Where a proof's witness comes from in an input batch: the circuit's witness ``generator``
    (its path: :mod:`distprove.witness.generators`) and the ``input`` file, written to the proof
    spec's witness path (durably when ``keep``), for the batch ``batch``; with ``shared`` (bytes),
    handed to the proof task in a shared-memory slot of its worker instead, the file written only
    when kept (a ring of at most that many bytes per witness size: :mod:`distprove.witness.slots`)."""

    generator: str
    input: str
    keep: bool = False
    batch: str = ""
    shared: int = 0


# --- the pool ----------------------------------------------------------------------------------


def witness_workers(client: Any) -> dict[str, int]:
    """The cluster's witness workers (address: the amount of their :data:`WITNESS_RESOURCE`)."""
    workers = client.scheduler_info(n_workers=-1)["workers"]
    return {a: int(w["resources"][WITNESS_RESOURCE]) for a, w in workers.items()
            if w.get("resources", {}).get(WITNESS_RESOURCE, 0) >= 1}


def _usable_cores() -> int:
    """This process's usable cores (affinity and cgroup quota: :data:`dask.system.CPU_COUNT`); run
    on a worker by reference, so that the worker reads its own host."""
    from dask.system import CPU_COUNT

    return CPU_COUNT


def _pool_state(dask_worker: Any) -> tuple[bool, int]:
    """On a worker: whether it has a witness pool, and its usable cores."""
    return EXECUTOR in dask_worker.executors, _usable_cores()


def host_cores(client: Any) -> dict[str, int]:
    """Each worker's usable cores, as the worker reads them on its own host, by worker address (a
    worker that does not answer, gone since the client listed it, is left out)."""
    return client.run(_usable_cores, on_error="ignore")


def processes_for(
    nthreads: dict[str, int], cores: dict[str, int], witness: dict[str, int] | None = None, provers: bool = True,
) -> dict[str, int]:
    """Witness processes per worker address: a witness worker's (of ``witness``) its resource's
    amount; a prover's 0 unless ``provers`` (their pools compute), else
    ``distprove.witness.processes``, else the worker's share of its host's cores (``cores``, of
    :func:`host_cores`, over the workers of that host, at least 1)."""
    from distributed.comm.addressing import get_address_host

    witness = witness or {}
    fixed = config.get_optional_int("witness.processes", 1)
    per_host: dict[str, int] = {}
    for w in nthreads:
        per_host[get_address_host(w)] = per_host.get(get_address_host(w), 0) + 1

    def share(w: str) -> int:
        if w in witness:
            return witness[w]
        if not provers:
            return 0
        return fixed if fixed is not None else max(1, cores.get(w, 1) // per_host[get_address_host(w)])

    return {w: share(w) for w in nthreads}


class WitnessPool(WorkerPlugin):
    """Registers ``worker.executors["wtns"]``: a process pool for witness calculation (a thread
    pool in a daemonic worker process, which may not have children)."""

    name = PLUGIN_NAME

    def __init__(self, processes: dict[str, int], niceness: int = 0) -> None:
        self.processes = processes
        self.niceness = niceness

    def setup(self, worker: Any) -> None:
        n = self.processes.get(worker.address, 1)
        if n < 1:  # a prover whose witnesses the witness workers compute
            self.teardown(worker)
            return
        pool: Executor
        if multiprocessing.current_process().daemon:
            log.info("daemonic worker process: witnesses in %d threads (distributed.worker.daemon: false for processes)", n)
            pool = ThreadPoolExecutor(n, thread_name_prefix="distprove-wtns", initializer=nicer,
                                      initargs=(self.niceness,))
        else:
            pool = _process_pool(n, self.niceness)
        for _ in range(n):  # start the processes now, not under the batch's first witnesses
            pool.submit(_warm_up)
        old = worker.executors.get(EXECUTOR)
        worker.executors[EXECUTOR] = pool
        worker.distprove_witness_processes = n
        if old is not None:
            old.shutdown(wait=False)

    def teardown(self, worker: Any) -> None:
        pool = worker.executors.pop(EXECUTOR, None)
        if pool is not None:
            pool.shutdown(wait=False, cancel_futures=True)
        with _isolation_lock:
            while _isolation:
                _isolation.pop().shutdown(wait=False)


def ensure_pool(client: Any, provers: bool = True, witness: dict[str, int] | None = None) -> None:
    """Register :class:`WitnessPool` on the workers (once per cluster, again when the workers
    changed): on the witness workers (``witness``, else :func:`witness_workers` asks the
    scheduler), and on the provers unless ``provers`` is false."""
    seen = client.run(_pool_state)
    have = {w: has for w, (has, _) in seen.items()}
    procs = processes_for(client.nthreads(), {w: cores for w, (_, cores) in seen.items()},
                          witness_workers(client) if witness is None else witness, provers)
    if not have or any(have.get(w, False) != (n > 0) for w, n in procs.items()):
        client.register_plugin(WitnessPool(procs, config.get_int("witness.niceness", 0)), name=PLUGIN_NAME)


def _process_pool(n: int, niceness: int) -> ProcessPoolExecutor:
    """``n`` spawned witness processes, each started by :func:`_pool_process` with the worker's
    allocator thresholds: they inherit Dask's ``MALLOC_TRIM_THRESHOLD_``, with which a 2^16
    witness took 5-10% longer (its arrays fresh mappings each time)."""
    from distprove.allocator import configured

    return ProcessPoolExecutor(n, mp_context=multiprocessing.get_context("spawn"), initializer=_pool_process,
                               initargs=(niceness, os.getpid(), configured()))


def _pool_process(niceness: int, worker_pid: int, malloc: tuple[int | None, int | None]) -> None:
    """In each witness process as it starts: run ``niceness`` nicer than the worker, with the
    worker's allocator thresholds ``malloc`` (:func:`distprove.allocator.tune_malloc`), and exit
    once the worker process (``worker_pid``) is gone. A worker killed outright (by its nanny, the
    OOM killer) never shuts its pool down, and its processes, blocked on the pool's queue, would
    stay. (``os.getppid`` cannot tell: in a Dask worker's pool it reads 1 from the start.)"""
    import psutil

    from distprove.allocator import tune_malloc

    nicer(niceness)
    tune_malloc(*malloc)
    try:
        worker = psutil.Process(worker_pid)  # is_running() also tells a reused pid from it
    except psutil.NoSuchProcess:
        os._exit(0)

    def exit_with_parent() -> None:
        while worker.is_running():
            time.sleep(PARENT_POLL_S)
        os._exit(0)

    threading.Thread(target=exit_with_parent, name="distprove-wtns-parent", daemon=True).start()


def _warm_up() -> None:
    """In a pool process: import the witness calculator before the first witness."""
    from distprove.formats import wtns
    from distprove.witness import generators, wasm

    del generators, wasm, wtns  # imported for their import's sake


IN_FILE = "\x00"
"""A witness's result when its slot had no room (a full /dev/shm) and it went to its file."""


def _calculate_into(gen: str, input_path: str, wtns: str, keep: bool = False, ring: RingRef | None = None,
                    slot: int = -1) -> str:
    """In a pool process: compute the witness by the generator ``gen`` and write it to ``wtns``, or into ``slot`` of the
    worker's ``ring`` (:mod:`~distprove.witness.slots`; the file too when ``keep``); ""
    (written as asked), :data:`IN_FILE` (into the file: the slot had no room) or the one-line
    reason it failed. A scratch witness (not ``keep``) is written without fsync: it
    lives until its proof is read on this host, and a crash loses the batch's progress on it
    anyway (the rerun computes it again); the two fsyncs cost more than a small circuit's witness."""
    from distprove.formats.wtns import write_wtns
    from distprove.witness.generators import calculate, failure_line

    try:
        values = calculate(gen, input_path)
        written = False  # into its slot (a slot comes only with a ring)
        if ring is not None and slot >= 0:
            if values.shape != (ring.n_vars, 8):
                return _wrong_size(input_path, values, ring.n_vars)
            written = write_slot(ring, slot, values)
        if keep or not written:
            os.makedirs(os.path.dirname(wtns), exist_ok=True)
            write_wtns(wtns, values, durable=keep)
        if slot >= 0 and not written:
            return IN_FILE
    except Exception as exc:  # fails this input alone, not the others of its job
        return failure_line(exc, input_path, wtns)
    return ""


def _wrong_size(input_path: str, values: np.ndarray, n_vars: int) -> str:
    """The reason a witness of the wrong size fails."""
    return f"{input_path}: the circuit gave {values.shape[0]} witness values, the key expects {n_vars}"


def _calculate_values(gen: str, inputs: list[str], n_vars: int) -> list[np.ndarray | str]:
    """In a pool process: each input's witness by the generator ``gen``, its (``n_vars``, 8)
    values, or the one-line reason it failed."""
    from distprove.witness.generators import calculate, failure_line

    out: list[np.ndarray | str] = []
    for input_path in inputs:
        try:
            values = calculate(gen, input_path)
            out.append(values if values.shape == (n_vars, 8) else _wrong_size(input_path, values, n_vars))
        except Exception as exc:  # fails this input alone, not the others of its job
            out.append(failure_line(exc, input_path, ""))
    return out


def _calculate_chunk(gen: str, items: list[tuple[str, str, int]], keep: bool = False, ring: RingRef | None = None) -> list[str]:
    """In a pool process: :func:`_calculate_into` for each (input, wtns, slot) in turn (slot -1:
    into the file)."""
    return [_calculate_into(gen, input_path, wtns, keep, ring, slot) for input_path, wtns, slot in items]


def shared_budget() -> int:
    """``distprove.witness.shared-memory``: the bytes of shared slots a worker may hold per
    witness size for its streamed proof tasks: :data:`~distprove.witness.slots.UNCAPPED`
    for auto (a slot per witness in flight, within /dev/shm's size on the worker's host), 0 when
    null (scratch files only)."""
    value = config.get("witness.shared-memory")
    if value == "auto":
        return UNCAPPED
    try:
        return config.get_bytes("witness.shared-memory") or 0
    except FormatError:
        raise FormatError(f"{config.NAMESPACE}.witness.shared-memory",
                          f"must be auto, a size like '8 GiB', or null (got {value!r})") from None


def check_circuit(gen: str, n_vars: int, key_path: str) -> None:
    """Raise FormatError(generator path, problem) unless the generator ``gen`` computes witnesses
    of the key's size (and prime: :meth:`~distprove.witness.generators.Generator.check_key`)."""
    from distprove.witness.generators import generator

    generator(gen).check_key(SimpleNamespace(n_vars=n_vars, path=key_path))


# --- claims ------------------------------------------------------------------------------------

@dataclass
class _Claim:
    """A witness sent to the pool: its job, its place in the job's results, and the shared slot
    it is written into (``ring`` None: into its file)."""

    job: Future
    index: int
    ring: Ring | None = None
    slot: int = -1


_claims: dict[str, dict[str, _Claim | None]] = {}
"""Per batch, per witness path: its claim, or None once a proof task took it."""
_claims_lock = threading.Lock()
_pool_lock = threading.Lock()


def job_size(inputs: int, n_vars: int, processes: int) -> int:
    """Inputs per pool job: at most :data:`JOB_VALUES` values, and no more than an equal share of
    the ``inputs`` over the ``processes``."""
    return max(1, min(-(-inputs // max(1, processes)), JOB_VALUES // max(1, n_vars)))


def _same_job(a: WitnessSource, b: WitnessSource) -> bool:
    """Whether two inputs' witnesses can share a pool job (one generator, durability, batch and slots)."""
    return (a.generator, a.keep, a.batch, a.shared) == (b.generator, b.keep, b.batch, b.shared)


def _pool() -> tuple[Executor | None, int]:
    """This worker's witness pool and its processes (None, 1 off a worker or without one)."""
    try:
        worker = get_worker()
    except ValueError:  # not on a worker
        return None, 1
    return worker.executors.get(EXECUTOR), getattr(worker, "distprove_witness_processes", 1)


def _replace_pool(broken: Executor) -> None:
    """A new witness pool on this worker in place of ``broken`` (one of its processes died: a
    crash, the OOM killer), made by the worker's :class:`WitnessPool` plugin; once, however many
    tasks saw it broken."""
    worker = get_worker()
    with _pool_lock:
        if worker.executors.get(EXECUTOR) is broken:
            log.warning("witness pool broken (a process died); starting a new one")
            plugin = worker.plugins.get(PLUGIN_NAME)
            if plugin is not None:
                plugin.setup(worker)
            else:
                worker.executors.pop(EXECUTOR, None)


def _submit(pool: Executor | None, src: WitnessSource, items: list[tuple[str, str, int]],
            ring: Ring | None) -> tuple[Future, Executor | None]:
    """``_calculate_chunk`` of ``items`` (inputs that share ``src``'s job, :func:`_same_job`) on
    ``pool`` (on its replacement when it is broken; here, in turn, without one): its future and
    the pool it went to, for the next job."""
    return _submit_job(pool, partial(_calculate_chunk, src.generator, items, src.keep, None if ring is None else ring.ref))


def _submit_job(pool: Executor | None, job: Callable[[], Any]) -> tuple[Future, Executor | None]:
    """``job`` on ``pool`` (on its replacement when it is broken; here, in turn, without one):
    its future and the pool it went to, for the next job."""
    if pool is not None:
        try:
            return pool.submit(job), pool
        except BrokenExecutor:
            _replace_pool(pool)
            pool = _pool()[0]
            if pool is not None:
                return pool.submit(job), pool
    fut: Future = Future()
    fut.set_result(job())
    return fut, None


def claim(sources: list[tuple[WitnessSource, str]], n_vars: int, again: bool = False) -> list[_Claim | None]:
    """Each (source, witness path)'s claim, sending the unclaimed ones to this worker's pool in
    order (in turn here, without one), each into a shared slot when its source allows
    (``WitnessSource.shared``) and one is free. One a proof task already took is None, or
    (``again``) claimed anew."""
    pool, processes = _pool()
    with _claims_lock:
        def claimed(src: WitnessSource, wtns: str) -> bool:
            batch = _claims.get(src.batch, {})
            return wtns in batch and not (again and batch[wtns] is None)

        todo = [(src, wtns) for src, wtns in sources if not claimed(src, wtns)]
        step = job_size(len(todo), n_vars, processes)
        k = 0
        while k < len(todo):
            src = todo[k][0]
            job = [todo[k]]
            while len(job) < step and k + len(job) < len(todo) and _same_job(todo[k + len(job)][0], src):
                job.append(todo[k + len(job)])
            ring = ring_for(n_vars, src.shared, len(todo)) if src.shared else None
            slots = [-1 if ring is None else _or_file(ring.reserve()) for _ in job]
            fut, pool = _submit(pool, src, [(s.input, w, slot) for (s, w), slot in zip(job, slots)], ring)
            batch = _claims.setdefault(src.batch, {})
            for i, ((_, wtns), slot) in enumerate(zip(job, slots)):
                batch[wtns] = _Claim(fut, i, ring if slot >= 0 else None, slot)
            k += len(job)
        return [_claims[src.batch][wtns] for src, wtns in sources]


def _or_file(slot: int | None) -> int:
    """A reserved slot, or -1 (into the file) when none was free."""
    return -1 if slot is None else slot


def _reason(entry: _Claim | None, src: WitnessSource, wtns: str) -> str:
    """The one-line reason a claimed witness failed, "" once written as claimed, :data:`IN_FILE`
    once written to its file instead of its slot (waits for its job). A job
    lost with its pool (one of the pool's processes died: a crash, the OOM killer) leaves its
    witnesses to be computed again one at a time, each alone in a process of its own
    (:func:`_isolated`), by the first task that waits for each: the input that ends its process
    fails alone, and the others of the lost jobs are written."""
    while entry is not None:
        fut = entry.job
        try:
            return fut.result()[entry.index]
        except BrokenExecutor:
            with _claims_lock:
                batch = _claims.setdefault(src.batch, {})
                entry = batch.get(wtns)
                mine = entry is not None and entry.job is fut
                if mine:
                    alone: Future = Future()
                    batch[wtns] = entry = _Claim(alone, 0, entry.ring, entry.slot)
            if mine:
                try:
                    alone.set_result([_isolated(src, wtns, entry)])
                except Exception as exc:  # no process for it: its waiters must not wait forever
                    alone.set_result([f"{src.input}: the witness calculation failed: {one_line(exc)}"])
        except Exception as exc:  # the job itself failed otherwise
            return f"{src.input}: the witness calculation failed: {one_line(exc)}"
    return ""


_isolation: list[ProcessPoolExecutor] = []
_isolation_lock = threading.Lock()


def _isolated(src: WitnessSource, wtns: str, where: _Claim) -> str:
    """One witness computed alone, into ``where``'s slot or its file, in a one-process pool of
    its own (one witness at a time, the pool kept for the next): "" or its one-line reason, the
    input named as the cause when its process dies. Where a worker may have no child processes
    (a daemonic one), here in turn."""
    items, ref = [(src.input, wtns, where.slot)], None if where.ring is None else where.ring.ref
    return _alone(partial(_calculate_chunk, src.generator, items, src.keep, ref), src.input)


def _alone(job: Callable[[], list[Any]], input_path: str) -> Any:
    """The one result of ``job`` (one input's chunk) computed alone in a one-process pool of its
    own (kept for the next), or the reason naming ``input_path`` when its process dies; in a
    daemonic worker process, here."""
    if multiprocessing.current_process().daemon:
        return job()[0]
    with _isolation_lock:
        if not _isolation:
            _isolation.append(_process_pool(1, config.get_int("witness.niceness", 0)))
        try:
            return _isolation[0].submit(job).result()[0]
        except BrokenExecutor as exc:
            _isolation.pop().shutdown(wait=False)
            return f"{input_path}: the witness calculation ended its process ({one_line(exc)})"


def compute_values(gen: str, inputs: list[str], n_vars: int, pooled: Callable[[], Any] = lambda: None) -> list[np.ndarray | str]:
    """On a witness worker: each input's witness computed by the generator ``gen`` in the
    worker's pool (in turn here, without one), in jobs of :func:`job_size` inputs; its
    (``n_vars``, 8) values or the one-line reason it failed. Nothing is claimed or written: the
    values are the task's result. ``pooled`` is called once the jobs are in the pool. The inputs
    of a job lost with its pool (a process died) are computed again each alone, so that an input
    that ends its process fails alone."""
    pool, processes = _pool()
    step = job_size(len(inputs), n_vars, processes)
    jobs: list[tuple[list[str], Future]] = []
    for k in range(0, len(inputs), step):
        part = inputs[k:k + step]
        fut, pool = _submit_job(pool, partial(_calculate_values, gen, part, n_vars))
        jobs.append((part, fut))
    if pool is not None:
        pooled()
    out: list[np.ndarray | str] = []
    for part, fut in jobs:
        try:
            out += fut.result()
        except BrokenExecutor:
            out += [_alone(partial(_calculate_values, gen, [p], n_vars), p) for p in part]
    return out


def compute(sources: list[tuple[WitnessSource, str]], n_vars: int, pooled: Callable[[], Any] = lambda: None) -> list[str]:
    """Each (source, witness path) claimed (:func:`claim`: sent to the worker's pool unless a task
    of this process already did; into shared slots as its source allows) and waited for; one ""
    or the one-line reason it failed per item. ``pooled`` is called once they are in the pool,
    before the wait (the witness task secedes from its worker's thread pool there)."""
    entries = claim(sources, n_vars)
    if _pool()[0] is not None:
        pooled()
    reasons = [_reason(entry, src, wtns) for entry, (src, wtns) in zip(entries, sources)]
    return ["" if r == IN_FILE else r for r in reasons]


def await_witness(src: WitnessSource, wtns: str, n_vars: int) -> np.ndarray | None:
    """In a proof task: wait until the witness is computed (claimed here if no task of this
    process has claimed it), and take it: its (n_vars, 8) values copied out of its shared slot,
    else None once written at ``wtns``; raise :class:`WitnessFailed` when its calculation failed.
    A witness is taken once: a task that needs it again computes it again."""
    while True:
        entry = claim([(src, wtns)], n_vars, again=True)[0]
        assert entry is not None
        reason = _reason(entry, src, wtns)
        with _claims_lock:
            batch = _claims.get(src.batch, {})
            current = batch.get(wtns)
            mine = current is not None and current.ring is entry.ring and current.slot == entry.slot
            if wtns in batch:
                batch[wtns] = None
        if mine or entry.ring is None:
            break
        # another task of this process took it (and its slot) meanwhile: computed again for this one
    if entry.ring is None:
        values = None
    elif reason:  # failed, or written to its file (IN_FILE): the slot was not used
        entry.ring.release(entry.slot)
        values = None
    else:
        values = entry.ring.take(entry.slot)
    if reason and reason != IN_FILE:
        raise WitnessFailed(reason)
    return values


TRIM_AFTER_S = 5.0
"""The shared rings' pages go back to /dev/shm this long after a batch's end, unless another batch
of this process is on by then: giving back a GiB takes ~0.16 s, which the batch's end would
otherwise wait for, and a batch right after it reuses the pages instead of allocating them again."""


def forget_batch(batch: str) -> None:
    """Drop a batch's claims in this worker process (at the batch's end); the slots of witnesses
    no task took are freed once their jobs are done, and the shared rings' pages given back
    :data:`TRIM_AFTER_S` later (:func:`_trim_when_quiet`)."""
    with _claims_lock:
        claims = _claims.pop(batch, {})
    for entry in claims.values():
        if entry is not None and entry.ring is not None:
            entry.job.add_done_callback(partial(_release, entry.ring, entry.slot))
    timer = threading.Timer(TRIM_AFTER_S, _trim_when_quiet)
    timer.daemon = True
    timer.start()


def _trim_when_quiet() -> None:
    """Give back the pages of this process's rings unless a batch's witness still waits here for
    its proof task (that batch is on and uses them); a ring with a reserved slot keeps its pages
    in any case (:meth:`Ring.trim`)."""
    with _claims_lock:
        if any(entry is not None for claims in _claims.values() for entry in claims.values()):
            return
    trim_rings()


def _release(ring: Ring, slot: int, _job: Future) -> None:
    """Free ``slot`` of ``ring`` (its job done)."""
    ring.release(slot)
