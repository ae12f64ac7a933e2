"""Batches from inputs: every ``*.json`` of a folder becomes a witness on the workers' CPU cores,
then a proof on their GPUs (or CPUs), streamed.

Finding the inputs (:func:`discover_inputs`): the ``*.json`` files under the folder (recursively;
hidden entries, the output folder, key stores and ``verification_key.json`` left out), each
matched to its key as a witness folder's ``.wtns`` files are (the nearest folder with a key, up
to the input folder's parent; no key for any input is one error), and to the circuit's
``.wasm``: ``wasm=`` (``--wasm``), else the one ``*.wasm`` beside the key. A folder holding
``*.json`` and no ``*.wtns`` is an input folder (:func:`discover_any`).

Where witnesses are computed: :class:`WitnessPool`, a WorkerPlugin, registers a process pool on
each worker as ``worker.executors["wtns"]`` (``distprove.witness.processes`` processes, default
the worker's share of its host's cores, ``distprove.witness.niceness`` nicer than the worker so
that its own threads, which feed its GPU, never queue behind witnesses for a core), shut down
with the worker like its other executors; a worker killed outright shuts nothing down, so each
process also exits within :data:`PARENT_POLL_S` of its worker's end. A witness task (:func:`compute_witnesses`, ``("witness-gen", name, tag)``, metered as the
``witness-gen`` stage) computes a chunk of inputs (``distprove.witness.chunk``, default one proof
group of the planner's: a Dask task costs milliseconds of the worker's time, a small circuit's
witness about one), spreading the chunk over that pool's processes, and secedes from the
worker's thread pool while it waits: a task running under ``dask.annotate(executor="wtns")``
would still hold one of the worker's ``nthreads`` execution slots, and a GPU worker has one, so
its GPU would idle for every witness. Seceded, the proofs keep the slot and the pool's processes
compute witnesses beside them. A witness task queued on a worker starts only when its running
proof task ends (it takes priority over the queued proofs), so the default in-flight bound
holds :data:`GROUPS_IN_FLIGHT` proof groups per worker: one proving, one queued behind it, one
whose witnesses are computed while the queued one proves and one waiting for the next gap. A worker process that Dask starts as a daemon cannot have child
processes; there the pool is a thread pool (wasmtime runs the wasm with the GIL released).

How a batch starts (:func:`ramp_size`): a chunk's witnesses reach the client together, and a
proof group's task starts only once all of its witnesses exist, so a first chunk of a whole
group (150 inputs at 2^16 on one worker of 16 processes: ten witnesses in turn per process)
would hold the first proof back by that many witness calculations, the worker idle. With the
default chunk, the batch's first witness task for each worker therefore holds one input per
witness process of that worker, each round of them after it twice as many, up to the group
size: the first proofs start after about one witness calculation. Each witness task's priority
is above every proof's and below the task submitted before it, so a worker starts its witness
tasks, and its pool computes their inputs, in the order the proof groups need them.

How proof groups are cut: from the witnesses that exist, a whole group of the key's size
(the planner's, as a witness folder's proofs are grouped) whenever there is one, and a smaller
one only while the workers hold fewer than :data:`GROUPS_AHEAD` unfinished groups each (one
proving, one queued behind it), or for the key's last witnesses. Every task boundary costs a
GPU worker about one group's host work with its device idle, so where witnesses come faster
than proofs (a small circuit's) the groups are whole after the first one or two, as a witness
folder's are; where they come slower, each group takes what the pool made while the one
before it proved.

How witnesses reach the provers: a witness task writes a ``.wtns`` (``formats.wtns.write_wtns``,
atomic) and returns its path, so the proof tasks read it as they read any witness: into
``<out>/.witnesses/`` (removed once its proof's result is in; written without fsync, which took
longer than a 1,023-value witness's calculation), or with ``keep_witnesses`` beside the proof as
``<name>.wtns`` (fsynced). The client (:class:`InputFeed`, polled by
``batching._collect``) submits a witness task once its whole chunk fits under
``distprove.witness.in-flight`` inputs between their witness task and their proof's result, and
submits proofs in groups as their witnesses arrive, each with its ``proofs`` markers (so the
dashboard's proofs bar grows as inputs are fed): the witnesses never all exist at once, in memory or on
disk. A bad input fails alone with its one-line reason (``<input>: <problem>``) and never
reaches a prover.

Before any witness task, each (wasm, key) pair is checked once on a worker: a wasm whose
witness size is not the key's nVars (a wasm of another circuit) fails all of that key's inputs
with one reason naming the wasm. (A calculator exists only for BN254's prime, the prime of every
key, so the prime is checked when it is opened.)

A rerun skips an input whose proof and public files exist and verify (and, with a kept witness,
carry its public signals); an input replaced under the same name is proved again with
``--incremental``, which fingerprints the input file.
"""

from __future__ import annotations

import logging
import multiprocessing
import os
import threading
import time
from collections.abc import Callable, Iterator
from concurrent.futures import Executor, ProcessPoolExecutor, ThreadPoolExecutor
from dataclasses import dataclass
from pathlib import Path
from types import SimpleNamespace
from typing import Any

from distributed import WorkerPlugin, get_worker, secede
from distributed.metrics import context_meter

from distprove import config
from distprove.cluster.discovery import Job, batch_folders, discover, job_name, key_beside, key_label, listing
from distprove.cluster.tasks import failure_reason
from distprove.cluster.inputs import check_witness_entry, has_witness_entries, tree_order
from distprove.cluster.state import WITNESS_GEN
from distprove.cluster.tasks import Status
from distprove.errors import FormatError
from distprove.priority import nicer

log = logging.getLogger(__name__)

INPUT_SUFFIX = ".json"
SCRATCH_DIR = ".witnesses"
EXECUTOR = "wtns"
PLUGIN_NAME = "distprove-witness-pool"
GROUPS_IN_FLIGHT = 4
"""Proof groups per worker the default ``distprove.witness.in-flight`` leaves room for."""
GROUPS_AHEAD = 2
"""Proof groups per worker submitted and not done (one proving, one queued behind it) below which
the witnesses that exist go out as a group smaller than the key's."""
WITNESS_PRIORITY = 1 << 20
"""The first witness task's priority; each later one's is one less, all above the proofs'."""
NOT_INPUTS = ("verification_key.json",)
"""File names never taken as inputs (a key's companion that often sits beside it)."""


# --- discovery ---------------------------------------------------------------------------------


@dataclass(frozen=True)
class InputJob(Job):
    """A :class:`~distprove.cluster.discovery.Job` whose ``witness`` is an input file: its circuit's
    ``wasm`` and ``wtns``, the path its computed witness is written to."""

    wasm: str = ""
    wtns: str = ""
    keep: bool = False


def _skipped_dir(path: Path, skip: set[Path]) -> bool:
    return path.name.startswith(".") or path.resolve() in skip or (path / "zarr.json").is_file()


def _input_entries(input_dir: Path, skip: set[Path]) -> Iterator[str]:
    """The ``*.json`` entries under ``input_dir`` that may be inputs, in walk order."""
    settings = config.settings()
    outputs = (settings.proof_suffix, settings.public_suffix)
    for dirpath, dirnames, filenames in os.walk(input_dir, followlinks=False):
        for n in filenames:
            if n.endswith(INPUT_SUFFIX) and not n.startswith(".") and n not in NOT_INPUTS and not n.endswith(outputs):
                yield os.path.join(dirpath, n)
        dirnames[:] = sorted(d for d in dirnames if not _skipped_dir(Path(dirpath, d), skip))


def input_paths(input_dir: Path, exclude: list[Path]) -> tuple[list[Path], list[FormatError]]:
    """The ``*.json`` entries under ``input_dir`` (sorted), split into readable files and the
    refused ones (links out of the folder, FIFOs, ...: ``inputs.check_witness_entry``)."""
    skip = {p.resolve() for p in exclude}
    ok: list[Path] = []
    bad: list[FormatError] = []
    for p in sorted(_input_entries(input_dir, skip), key=tree_order):
        reason = check_witness_entry(p, input_dir)
        (ok.append(Path(p)) if reason is None else bad.append(FormatError(p, reason)))  # type: ignore[func-returns-value]
    return ok, bad


def holds_inputs(folder: str | os.PathLike[str], out_dir: str | os.PathLike[str] | None = None) -> bool:
    """Whether ``folder`` is an input folder: ``*.json`` inputs and no ``*.wtns`` witness (each
    looked for until the first one)."""
    root = Path(folder).resolve()
    if not root.is_dir():
        return False
    out = Path(out_dir).resolve() if out_dir is not None else root / config.settings().out_dir
    if has_witness_entries(root, exclude=[out]):
        return False
    return next(_input_entries(root, {out.resolve()}), None) is not None


def wasm_beside(key_path: str) -> tuple[str, str]:
    """(the one ``*.wasm`` in the key's folder, "") or ("", why there is none)."""
    folder = Path(key_path).parent
    found = sorted(p for p in folder.glob("*.wasm") if p.is_file())
    if len(found) == 1:
        return str(found[0]), ""
    if found:
        return "", f"{len(found)} .wasm files beside the key in {folder}; pass --wasm"
    return "", f"no circuit .wasm beside the key in {folder}; pass --wasm"


def discover_inputs(
    input_dir: str | os.PathLike[str],
    key: str | os.PathLike[str] | None = None,
    out_dir: str | os.PathLike[str] | None = None,
    wasm: str | os.PathLike[str] | None = None,
    keep_witnesses: bool = False,
) -> list[InputJob]:
    """The ``*.json`` inputs under ``input_dir``, each with its key, wasm and output paths (a job
    that cannot run has ``error`` set and is reported as failed)."""
    settings = config.settings()
    root, out, chosen = batch_folders(input_dir, key, out_dir, "inputs")
    if wasm is not None and not Path(wasm).is_file():
        raise FormatError(wasm, "no such circuit .wasm file")
    inputs, rejected = input_paths(root, [out])
    if not inputs and not rejected:
        raise FormatError(input_dir, "no *.json inputs found")
    cache: dict[Path, list[Path]] = {}
    searched: list[Path] = []
    keyed = False  # some readable input has a key
    chosen_key = str(Path(chosen).resolve()) if chosen is not None else None
    circuit_given = str(Path(wasm).resolve()) if wasm is not None else ""
    jobs = []
    root_s, out_s = str(root), str(out)
    beside: dict[str, tuple[str, str]] = {}  # key path -> wasm_beside(key path)
    for p, error in [(p, "") for p in inputs] + [(Path(e.path), e.problem) for e in rejected]:
        rel = str(p)[len(root_s) + 1 :]  # found under the folder: its path there
        rel_dir, stem = os.path.dirname(rel), os.path.basename(rel).removesuffix(INPUT_SUFFIX)
        name = job_name(rel, INPUT_SUFFIX)
        where = os.path.join(out_s, rel_dir)
        key_path: str | None = None
        if not error:
            if chosen_key is not None:
                key_path = chosen_key
            else:
                key_path, folders = key_beside(p.parent, root, cache)
                searched += folders
                if key_path is None:
                    error = f"no key store or .zkey found beside it (searched {listing(folders)}); pass key="
            keyed = keyed or key_path is not None
        circuit = circuit_given
        if key_path is not None and not circuit:
            if key_path not in beside:
                beside[key_path] = wasm_beside(key_path)
            circuit, why = beside[key_path]
            error = error or why
        wtns = os.path.join(where if keep_witnesses else os.path.join(out_s, SCRATCH_DIR, rel_dir), f"{stem}.wtns")
        jobs.append(InputJob(
            name, str(p), key_path if not error else None, os.path.join(where, f"{stem}{settings.proof_suffix}"),
            os.path.join(where, f"{stem}{settings.public_suffix}"), error, circuit, wtns, keep_witnesses,
        ))
    if inputs and not keyed:
        raise FormatError(
            input_dir,
            f"no key store or .zkey found for any input (searched {listing(searched)}); "
            "put the key in the input folder or its parent, or pass key=",
        )
    return sorted(jobs, key=lambda j: j.name)


def discover_any(
    folder: str | os.PathLike[str],
    key: str | os.PathLike[str] | None = None,
    out_dir: str | os.PathLike[str] | None = None,
    wasm: str | os.PathLike[str] | None = None,
    keep_witnesses: bool = False,
) -> list[Job]:
    """:func:`discover_inputs` for an input folder (or whenever ``wasm`` is given), else the
    witness folder's jobs (:func:`~distprove.cluster.discovery.discover`)."""
    if wasm is not None or holds_inputs(folder, out_dir):
        return list(discover_inputs(folder, key, out_dir, wasm, keep_witnesses))
    return discover(folder, key, out_dir)


def check_witness_path(job: Job) -> str:
    """The witness a rerun compares existing public signals with: a witness job's file, an input
    job's kept witness when it exists, else "" (the proof is checked against its public file)."""
    if isinstance(job, InputJob):
        return job.wtns if job.keep and os.path.isfile(job.wtns) else ""
    return job.witness


def witness_file(job: Job) -> str:
    """The .wtns a job's proof tasks read."""
    return job.wtns if isinstance(job, InputJob) else job.witness


# --- on the workers ------------------------------------------------------------------------------


def processes_for(nthreads: dict[str, int]) -> dict[str, int]:
    """Witness processes per worker address: ``distprove.witness.processes``, else the worker's
    share of its host's cores (the host's cores over its workers, at least 1)."""
    from distributed.comm.addressing import get_address_host

    fixed = config.get("witness.processes", None)
    if fixed is not None:
        return {w: max(1, int(fixed)) for w in nthreads}
    per_host: dict[str, int] = {}
    for w in nthreads:
        per_host[get_address_host(w)] = per_host.get(get_address_host(w), 0) + 1
    cores = os.cpu_count() or 1
    return {w: max(1, cores // per_host[get_address_host(w)]) for w in nthreads}


class WitnessPool(WorkerPlugin):
    """Registers ``worker.executors["wtns"]``: a process pool for witness calculation (a thread
    pool in a daemonic worker process, which may not have children)."""

    name = PLUGIN_NAME

    def __init__(self, processes: dict[str, int], niceness: int = 0) -> None:
        self.processes = processes
        self.niceness = niceness

    def setup(self, worker: Any) -> None:
        n = self.processes.get(worker.address, 1)
        pool: Executor
        if multiprocessing.current_process().daemon:
            log.info("daemonic worker process: witnesses in %d threads (distributed.worker.daemon: false for processes)", n)
            pool = ThreadPoolExecutor(n, thread_name_prefix="distprove-wtns", initializer=nicer,
                                      initargs=(self.niceness,))
        else:
            pool = ProcessPoolExecutor(n, mp_context=multiprocessing.get_context("spawn"), initializer=_pool_process,
                                       initargs=(self.niceness, os.getpid()))
        for _ in range(n):  # start the processes now, not under the batch's first witnesses
            pool.submit(_warm_up)
        old = worker.executors.get(EXECUTOR)
        worker.executors[EXECUTOR] = pool
        if old is not None:
            old.shutdown(wait=False)

    def teardown(self, worker: Any) -> None:
        pool = worker.executors.pop(EXECUTOR, None)
        if pool is not None:
            pool.shutdown(wait=False, cancel_futures=True)


def _calculate_into(wasm: str, input_path: str, wtns: str, keep: bool = False) -> str:
    """In a pool process: compute and write the witness; "" or the one-line reason it failed.
    A scratch witness (not ``keep``) is written without fsync: it lives until its proof is read
    on this host, and a crash loses the batch's progress on it anyway (the rerun computes it
    again); the two fsyncs cost more than a small circuit's witness."""
    from distprove.formats.wtns import write_wtns
    from distprove.witnessgen import calculate

    try:
        values = calculate(wasm, input_path)
        os.makedirs(os.path.dirname(wtns), exist_ok=True)
        write_wtns(wtns, values, durable=keep)
    except FormatError as exc:
        return str(exc)
    except OSError as exc:
        return f"{wtns}: cannot write the witness: {exc.strerror or exc}"
    return ""


def _calculate_chunk(wasm: str, items: list[tuple[str, str]], keep: bool = False) -> list[str]:
    """In a pool process: :func:`_calculate_into` for each (input, wtns) in turn."""
    return [_calculate_into(wasm, input_path, wtns, keep) for input_path, wtns in items]


PARENT_POLL_S = 1.0
"""How often a witness process looks whether its worker process is still there."""


def _pool_process(niceness: int, worker_pid: int) -> None:
    """In each witness process as it starts: run ``niceness`` nicer than the worker, and exit
    once the worker process (``worker_pid``) is gone. A worker killed outright (by its nanny, the
    OOM killer) never shuts its pool down, and its processes, blocked on the pool's queue, would
    stay. (``os.getppid`` cannot tell: in a Dask worker's pool it reads 1 from the start.)"""
    import psutil

    nicer(niceness)
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
    import distprove.formats.wtns  # noqa: F401
    import distprove.witnessgen  # noqa: F401


def compute_witnesses(wasm: str, items: list[tuple[str, str]], parts: int = 1, keep: bool = False) -> list[str]:
    """The witness task of a chunk of inputs: each (input, wtns) of ``items`` computed by the
    worker's witness pool in ``parts`` slices at once (here, in turn, where there is none) and
    written (durably only when ``keep``: kept witnesses); one "" or the one-line reason it failed
    per item. Secedes from the worker's thread pool while the pool computes, so the worker's
    proofs go on."""
    try:
        pool = get_worker().executors.get(EXECUTOR)
    except ValueError:  # not on a worker
        pool = None
    with context_meter.meter(WITNESS_GEN):
        if pool is None:
            return _calculate_chunk(wasm, items, keep)
        step = -(-len(items) // max(1, parts))
        futures = [pool.submit(_calculate_chunk, wasm, items[k : k + step], keep) for k in range(0, len(items), step)]
        secede()
        return [reason for fut in futures for reason in fut.result()]


def check_circuit(wasm: str, n_vars: int, key_path: str) -> None:
    """Raise FormatError(wasm, problem) unless the wasm computes witnesses of the key's size."""
    from distprove.witnessgen import calculator

    calculator(wasm).check_key(SimpleNamespace(n_vars=n_vars, path=key_path))


def ensure_witness_pool(client: Any, jobs: list[Job]) -> None:
    """Register :class:`WitnessPool` on the workers when the batch has inputs (once per cluster,
    again when the workers changed)."""
    if not any(isinstance(j, InputJob) for j in jobs):
        return
    procs = processes_for(client.nthreads())
    have = client.run(lambda dask_worker: EXECUTOR in dask_worker.executors)
    if not have or not all(have.values()):
        client.register_plugin(WitnessPool(procs, config.get_int("witness.niceness", 0)), name=PLUGIN_NAME)


# --- on the client -------------------------------------------------------------------------------


def ramp_size(index: int, first: int, workers: int, full: int) -> int:
    """The most inputs of a batch's ``index``-th witness task (from 0), as the batch starts:
    ``first`` (one input per witness process) for the first one of each of the ``workers``, twice
    as many for each round of them after, up to ``full`` (the key's proof group size)."""
    rounds = index // max(1, workers)
    return full if rounds >= full.bit_length() else min(full, max(1, first) << rounds)


class InputFeed:
    """Streams an input batch: witness tasks as room allows, proof groups as witnesses arrive.

    ``batching.run_jobs`` calls :meth:`start` with the planned jobs and a function submitting one
    group's proof tasks, ``batching._collect`` calls :meth:`poll` in its loop (new proof groups
    to watch) while :attr:`active`, and every result passes through :meth:`finished`.
    """

    def __init__(self, in_flight: int | None = None, chunk: int | None = None) -> None:
        self.in_flight = in_flight if in_flight is not None else config.get("witness.in-flight", None)
        self.chunk = chunk if chunk is not None else config.get("witness.chunk", None)
        self.opened: set[str] = set()
        """Inputs whose witness task was submitted and whose result is not in yet."""
        self.group_of: dict[str, int] = {}
        """The proof group of each proof submitted whose result is not in yet."""
        self.open_groups: dict[int, int] = {}
        """Proof groups submitted with some result not in yet: their proofs still out."""

    def start(
        self, client: Any, planned: list[tuple[Job, Any]], plan: Any, submit: Callable[[list[Job], Any, int], Any],
        emit: Callable[..., None], tag: str,
    ) -> None:
        """Check each (wasm, key) pair once, then hold the jobs to stream."""
        self.client, self.plan, self.submit, self.emit, self.tag = client, plan, submit, emit, tag
        self.workers = list(plan.workers) or sorted(client.nthreads())
        counts: dict[str, int] = {}
        infos: dict[Any, Any] = {}  # a job's key -> its KeyInfo
        pairs: dict[tuple[str, str], Any] = {}  # (wasm, key path) -> the key's KeyInfo, once each
        for job, info in planned:
            counts[info.path] = counts.get(info.path, 0) + 1
            infos[job.key] = info
            if isinstance(job, InputJob):
                pairs.setdefault((job.wasm, info.path), info)
        self.sizes = {k: plan.proofs_per_task(info, counts[info.path]) for k, info in infos.items()}
        checks = {
            (wasm, path): client.submit(
                check_circuit, wasm, info.n_vars, path, key=("check-circuit", key_label(wasm), key_label(path), tag), pure=False,
            )
            for (wasm, path), info in pairs.items()
        }
        refused: dict[tuple[str, str], str] = {}
        for pair, fut in checks.items():
            try:
                fut.result()
            except Exception as exc:  # one reason for all of that key's inputs, before any proof
                refused[pair] = failure_reason(exc)
        self.queue: list[tuple[InputJob, Any]] = []
        for job, info in planned:
            reason = refused.get((job.wasm, info.path)) if isinstance(job, InputJob) else None
            if reason:
                emit(job, Status.FAILED, reason)
            else:
                self.queue.append((job, info))  # type: ignore[arg-type]
        self.queue.reverse()  # popped from the end: the planned order
        self.left = {}
        for job, _ in self.queue:
            self.left[job.key] = self.left.get(job.key, 0) + 1
        self.procs = processes_for(client.nthreads())
        biggest = max(self.sizes.values(), default=1)
        self.bound = (
            int(self.in_flight) if self.in_flight
            else max(2 * sum(self.procs.values()), GROUPS_IN_FLIGHT * biggest * len(self.workers), 4)
        )
        self.computing: dict[Any, list[tuple[InputJob, Any]]] = {}
        self.ready: dict[str, list[tuple[InputJob, Any]]] = {}
        self.submitted = 0
        """Proofs submitted."""
        self.groups = 0
        """Proof groups submitted."""
        self.sent = 0
        """Witness tasks submitted."""

    def _next_chunk(self, worker: str) -> list[tuple[InputJob, Any]]:
        """The next witness task's inputs, for ``worker``: up to ``distprove.witness.chunk``
        (default: the key's proof group size, smaller as the batch starts: :func:`ramp_size` of
        the worker's witness processes; at most the in-flight bound) consecutive queued inputs of
        one key and wasm; none until the room left holds them all. A chunk cut to the room left
        would be one more witness task, whose start on a GPU worker waits for a gap between its
        proof tasks and holds the next one back."""
        job = self.queue[-1][0]
        full = self.sizes.get(job.key, 1)
        size = int(self.chunk) if self.chunk else ramp_size(self.sent, self.procs.get(worker, 1), len(self.workers), full)
        want, n = min(size, self.bound), 0
        for queued, _ in reversed(self.queue):  # the queue is taken from its end
            if n == want or (queued.key, queued.wasm) != (job.key, job.wasm):
                break
            n += 1
        if n > self.bound - len(self.opened):
            return []
        return [self.queue.pop() for _ in range(n)]

    @property
    def active(self) -> bool:
        """Whether proofs are still to come from this feed."""
        return bool(self.queue or self.computing or any(self.ready.values()))

    def finished(self, job: Job) -> None:
        """A job's result is in: its room is free, its scratch witness is removed."""
        if not isinstance(job, InputJob) or job.name not in self.opened:
            return
        self.opened.discard(job.name)
        if not job.keep:
            try:
                os.unlink(job.wtns)
                os.rmdir(os.path.dirname(job.wtns))  # the scratch folder goes with its last witness
            except OSError:
                pass

    def proof_done(self, job: Job) -> None:
        """One proof's result is in."""
        group = self.group_of.pop(job.name, None)
        if group is not None:
            self.open_groups[group] -= 1
            if not self.open_groups[group]:
                del self.open_groups[group]

    def poll(self) -> list[tuple[Any, list[tuple[Job, list[Any]]], bool]]:
        """Cut proof groups from the witnesses done, then start one round of witness tasks (one per
        worker) while there is room; return the proof groups submitted now as (reducer future,
        [(job, its futures)], whether the task writes its proofs). One round a call: a task's
        submission costs the client milliseconds, and submitting a batch's first witness tasks all
        at once (nine at mul_chain_1k x 3,000) held its first proof group back ~0.1 s after its
        witnesses were done."""
        for fut in [f for f in self.computing if f.done()]:
            chunk = self.computing.pop(fut)
            try:
                reasons = fut.result()
            except Exception as exc:  # the task itself failed (its worker died too often, ...)
                reasons = [failure_reason(exc)] * len(chunk)
            for (job, info), reason in zip(chunk, reasons):
                self.left[job.key] -= 1
                if reason:
                    self.emit(job, Status.FAILED, reason)
                else:
                    self.ready.setdefault(job.key or "", []).append((job, info))
        out = []
        for kp, items in self.ready.items():
            while items:
                size = self.sizes.get(kp, 1)
                if len(items) < size and self.left.get(kp, 0) and len(self.open_groups) >= GROUPS_AHEAD * len(self.workers):
                    break  # more witnesses of the key are coming and the workers have proofs queued
                chunk, items[:] = items[:size], items[size:]
                jobs = [j for j, _ in chunk]
                reducer, futures, writes = self.submit(jobs, chunk[0][1], self.submitted)
                self.submitted += len(jobs)
                self.open_groups[self.groups] = len(jobs)
                self.group_of.update((j.name, self.groups) for j in jobs)
                self.groups += 1
                out.append((reducer, [(j, futures) for j in jobs], writes))
        for _ in self.workers:  # one round a call: the client comes back for the witnesses done meanwhile
            if not self.queue or len(self.opened) >= self.bound:
                break
            worker = self.workers[self.sent % len(self.workers)]
            chunk = self._next_chunk(worker)
            if not chunk:
                break
            jobs = [job for job, _ in chunk]
            name = jobs[0].name if len(jobs) == 1 else f"{jobs[0].name}+{len(jobs) - 1}"
            fut = self.client.submit(
                compute_witnesses, jobs[0].wasm, [(j.witness, j.wtns) for j in jobs], self.procs.get(worker, 1), jobs[0].keep,
                key=(WITNESS_GEN, name, self.tag), pure=False, workers=[worker], allow_other_workers=True,
                priority=WITNESS_PRIORITY - self.sent,
            )
            self.sent += 1
            self.computing[fut] = chunk
            self.opened.update(j.name for j in jobs)
        return out
