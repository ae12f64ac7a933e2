"""Batches from inputs: every ``*.json`` of a folder becomes a witness on the workers' CPU cores,
then a proof on their GPUs (or CPUs), streamed.

Finding the inputs (:func:`discover_inputs`): the ``*.json`` files under the folder (recursively;
hidden entries, the output folder, key stores and ``verification_key.json`` left out), each
matched to its key as a witness folder's ``.wtns`` files are (the nearest folder with a key, up
to the input folder's parent; no key for any input is one error), and to the circuit's
``.wasm``: ``wasm=`` (``--wasm``), else the one ``*.wasm`` beside the key. A folder holding
``*.json`` and no ``*.wtns`` is an input folder (:func:`discover_any`).

Where witnesses are computed: in each worker's witness pool
(:mod:`distprove.cluster.witnesspool`: one process per core of the worker's share, nicer than
the worker). A witness task (:func:`~distprove.cluster.witnesspool.compute_witnesses`,
``("witness-gen", name, tag)``, metered as the ``witness-gen`` stage) sends a chunk of inputs to
its worker's pool and secedes from the worker's thread pool while the pool computes: a task
running under ``dask.annotate(executor="wtns")`` would still hold one of the worker's
``nthreads`` execution slots, and a GPU worker has one, so its GPU would idle for every witness.
A witness task queued on a worker starts only when the running proof task leaves its slot (it
takes priority over the queued proofs). Each witness task's priority is above every proof's and
below the task submitted before it, so a worker starts them in the order the proofs need them.

How proofs stream (every key in data mode, whose proof groups are one task each): each proof
group of the key's size (the planner's, as a witness folder's proofs are grouped) is one witness
task and one proof task, both on the same worker. The proof task (its specs carry the input, a
:class:`~distprove.cluster.tasks.WitnessSource`) waits for each witness in turn as the pool
writes it (:func:`~distprove.cluster.witnesspool.await_witness`) and proves it, so a batch has as
many proof tasks as the same batch from witness files, and its first proofs start after about
one witness calculation. An input that fails fails its proof alone, with its one-line reason.
The client keeps :data:`WITNESS_LEAD` witness tasks per worker ahead of the proof tasks, and
submits a group's proof task once that lead is out and the worker holds fewer than
:data:`GROUPS_AHEAD` open groups (one proving, one queued behind it): the witness tasks of the
next groups thus reach the worker before its queued proof task, and its pool computes them while
the group before proves. (mul_chain_64k x 600 on one H200: 0.97 of the witness files' proofs a
second, where proof groups cut from finished witness chunks, with their ramp, gave 0.88.) A
proof task stolen by another worker computes its witnesses there.

Where the proofs wait for whole chunks (split mode: a proof's tasks spread over the workers): a
group's proofs are submitted once its witnesses exist, so the batch's first witness task for
each worker holds one input per witness process of that worker (:func:`ramp_size`), each round
of them after it twice as many, up to the group size (``distprove.witness.chunk`` sets it), and
proof groups are cut from the witnesses that exist: a whole group whenever there is one, a
smaller one only while the workers hold fewer than :data:`GROUPS_AHEAD` unfinished groups each,
or for the key's last witnesses. A bad input fails alone and never reaches a prover.

How witnesses reach the provers: a ``.wtns`` (``formats.wtns.write_wtns``, atomic) that the
proof tasks read as they read any witness: into ``<out>/.witnesses/`` (removed once its proof's
result is in, and at the batch's end any left by a witness computed twice; written without
fsync, which took longer than a 1,023-value witness's calculation), or with ``keep_witnesses``
beside the proof as ``<name>.wtns`` (fsynced). The client (:class:`InputFeed`, polled by
``batching._collect``) submits a witness task once its whole chunk fits under
``distprove.witness.in-flight`` inputs between their witness task and their proof's result (by
default :data:`GROUPS_IN_FLIGHT` proof groups per worker): the witnesses never all exist
at once, in memory or on disk.

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
import os
from collections import deque
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from distprove import config
from distprove.cluster.discovery import Job, batch_folders, discover, job_name, key_beside, key_label, listing
from distprove.cluster.inputs import check_witness_entry, has_witness_entries, tree_order
from distprove.cluster.state import WITNESS_GEN
from distprove.cluster.tasks import Status, WitnessSource, failure_reason
from distprove.cluster.witnesspool import check_circuit, compute_witnesses, ensure_pool, forget_batch, processes_for, shared_budget
from distprove.errors import FormatError

log = logging.getLogger(__name__)

INPUT_SUFFIX = ".json"
SCRATCH_DIR = ".witnesses"
GROUPS_IN_FLIGHT = 4
"""Proof groups per worker the default ``distprove.witness.in-flight`` leaves room for."""
GROUPS_AHEAD = 2
"""Proof groups per worker submitted and not done (one proving, one queued behind it): below it a
streamed group's proof task goes out, and the witnesses that exist go out as a group smaller
than the key's."""
WITNESS_LEAD = 2
"""Streamed groups per worker whose witness task is out ahead of their proof task: the worker
starts a witness task before its queued proofs, so the pool computes the next groups' witnesses
while a group proves."""
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


def witness_source(job: Job, batch: str, shared: int) -> WitnessSource | None:
    """What computes an input job's witness for a proof task that waits for it, handing it over
    in its worker's shared slots within ``shared`` bytes (:attr:`InputFeed.shared`); None for a
    witness job."""
    return WitnessSource(job.wasm, job.witness, job.keep, batch, shared) if isinstance(job, InputJob) else None


def ensure_witness_pool(client: Any, jobs: list[Job]) -> None:
    """The workers' witness pools (:func:`~distprove.cluster.witnesspool.ensure_pool`) when the
    batch has inputs."""
    if any(isinstance(j, InputJob) for j in jobs):
        ensure_pool(client)


# --- on the client -------------------------------------------------------------------------------


def ramp_size(index: int, first: int, workers: int, full: int) -> int:
    """The most inputs of a batch's ``index``-th witness task (from 0), as the batch starts:
    ``first`` (one input per witness process) for the first one of each of the ``workers``, twice
    as many for each round of them after, up to ``full`` (the key's proof group size)."""
    rounds = index // max(1, workers)
    return full if rounds >= full.bit_length() else min(full, max(1, first) << rounds)


class InputFeed:
    """Streams an input batch: witness tasks as room allows, each proof group's task beside its
    witness task (data mode) or once its witnesses exist (split mode).

    ``batching.run_jobs`` calls :meth:`start` with the planned jobs and a function submitting one
    group's proof tasks, ``batching._collect`` calls :meth:`poll` in its loop (new proof groups
    to watch) while :attr:`active`, every result passes through :meth:`finished` (and each
    proof's through :meth:`proof_done`), and :meth:`close` ends the batch.
    """

    def __init__(self, in_flight: int | None = None, chunk: int | None = None) -> None:
        self.in_flight = in_flight if in_flight is not None else config.get("witness.in-flight", None)
        self.chunk = chunk if chunk is not None else config.get("witness.chunk", None)
        self.shared = shared_budget()
        """The bytes of shared witness slots a streamed key's witnesses may use per worker and size
        (its witness tasks and proof tasks must agree: one read for the batch)."""
        self.opened: set[str] = set()
        """Inputs whose witness task was submitted and whose result is not in yet."""
        self.group_of: dict[str, int] = {}
        """The proof group of each proof submitted whose result is not in yet."""
        self.open_groups: dict[int, int] = {}
        """Proof groups submitted with some result not in yet: their proofs still out."""

    def start(
        self, client: Any, planned: list[tuple[Job, Any]], plan: Any, submit: Callable[..., Any],
        emit: Callable[..., None], tag: str,
    ) -> None:
        """Check each (wasm, key) pair once, then hold the jobs to stream. ``submit(jobs, info, i,
        worker=None, stream=False)`` submits one proof group (``stream``: its task waits for the
        witnesses, on ``worker``)."""
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
        self.streams = {k: plan.fuses(info) for k, info in infos.items()}
        """Per key, whether its proof tasks stream (one task per group: :func:`graph.submit_group`)."""
        self.n_vars = {k: info.n_vars for k, info in infos.items()}
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
        self.scratch = {job.wtns for job, _ in self.queue if isinstance(job, InputJob) and not job.keep}
        """The batch's scratch witness paths."""
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
        self.lead: dict[str, deque[list[tuple[InputJob, Any]]]] = {w: deque() for w in self.workers}
        """Per worker, the streamed groups whose witness task is out and whose proof task is not."""
        self.worker_of: dict[int, str] = {}
        """The worker of each streamed proof group still open."""
        self.submitted = 0
        """Proofs submitted."""
        self.groups = 0
        """Proof groups submitted."""
        self.sent = 0
        """Witness tasks submitted."""

    def _next_chunk(self, worker: str) -> list[tuple[InputJob, Any]]:
        """The next witness task's inputs, for ``worker``: consecutive queued inputs of one key and
        wasm, none until the room left holds them all (a chunk cut to the room left would be one
        more witness task, whose start on a GPU worker waits for a gap between its proof tasks and
        holds the next one back). A streamed key's: one proof group of the key's size. Others':
        up to ``distprove.witness.chunk`` (default: the key's proof group size, smaller as the
        batch starts: :func:`ramp_size` of the worker's witness processes), at most the in-flight
        bound."""
        job = self.queue[-1][0]
        full = self.sizes.get(job.key, 1)
        if self.streams.get(job.key):
            size = full
        elif self.chunk:
            size = int(self.chunk)
        else:
            size = ramp_size(self.sent, self.procs.get(worker, 1), len(self.workers), full)
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
        return bool(self.queue or self.computing or any(self.ready.values()) or any(self.lead.values()))

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
                self.worker_of.pop(group, None)

    def close(self) -> None:
        """At the batch's end: the workers drop the batch's witness claims, and a scratch witness
        written after its proof's result (computed twice: by its witness task, and where a proof
        task was stolen to another worker) is removed."""
        try:
            self.client.run(forget_batch, self.tag)
        except Exception as exc:  # a worker gone: its claims went with it
            log.debug("forgetting the batch's witness claims: %s", exc)
        for folder in {os.path.dirname(w) for w in self.scratch}:
            try:
                left = [e.path for e in os.scandir(folder) if e.path in self.scratch]
            except OSError:
                continue
            for path in left:
                try:
                    os.unlink(path)
                except OSError:
                    pass
            try:
                os.rmdir(folder)
            except OSError:
                pass

    def poll(self) -> list[tuple[Any, list[tuple[Job, list[Any]]], bool]]:
        """Submit what is due and return the proof groups submitted now as (reducer future, [(job,
        its futures)], whether the task writes its proofs).

        A key whose proof tasks stream: per worker, a witness task for each of the next
        :data:`WITNESS_LEAD` groups, and each group's proof task, on the same worker, once the
        worker holds fewer than :data:`GROUPS_AHEAD` open groups (the task proves each witness as
        it is written and reports a failed input as its proof's failure). Other keys: proof groups
        cut from the witnesses done, then one round of witness tasks (one per worker) while there
        is room. One round a call: a task's submission costs the client milliseconds, and
        submitting a batch's first witness tasks all at once (nine at mul_chain_1k x 3,000) held
        its first proof group back ~0.1 s after its witnesses were done."""
        for fut in [f for f in self.computing if f.done()]:
            chunk = self.computing.pop(fut)
            if self.streams.get(chunk[0][0].key):
                continue  # its proof task reports the inputs that failed
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
                out.append(self._submit_proofs(chunk))
        first = self.sent
        for k in range(len(self.workers)):  # one round a call: the client comes back for the witnesses done meanwhile
            worker = self.workers[(first + k) % len(self.workers)]
            lead = self.lead[worker]
            led = False  # a streamed group's witness task went out now
            if self.queue and len(self.opened) < self.bound and not (self.streams.get(self.queue[-1][0].key) and len(lead) >= WITNESS_LEAD):
                chunk = self._next_chunk(worker)
                if chunk:
                    self._submit_witnesses(worker, chunk)
                    if self.streams.get(chunk[0][0].key):
                        lead.append(chunk)
                        led = True
            # a group's proof task waits for a full lead, so that the next groups' witness tasks
            # reach the worker before it (and run first): the pool then never idles while it proves
            if lead and (len(lead) >= WITNESS_LEAD or not led) and sum(w == worker for w in self.worker_of.values()) < GROUPS_AHEAD:
                out.append(self._submit_proofs(lead.popleft(), worker))
        return out

    def _submit_witnesses(self, worker: str, chunk: list[tuple[InputJob, Any]]) -> None:
        """One witness task for ``chunk``, on ``worker`` (another one if it is gone)."""
        jobs = [job for job, _ in chunk]
        name = jobs[0].name if len(jobs) == 1 else f"{jobs[0].name}+{len(jobs) - 1}"
        shared = self.shared if self.streams.get(jobs[0].key) else 0
        fut = self.client.submit(
            compute_witnesses, jobs[0].wasm, [(j.witness, j.wtns) for j in jobs], self.n_vars.get(jobs[0].key, 0),
            jobs[0].keep, self.tag, shared, key=(WITNESS_GEN, name, self.tag), pure=False, workers=[worker],
            allow_other_workers=True, priority=WITNESS_PRIORITY - self.sent,
        )
        self.sent += 1
        self.computing[fut] = chunk
        self.opened.update(j.name for j in jobs)

    def _submit_proofs(self, chunk: list[tuple[InputJob, Any]], worker: str | None = None) -> tuple[Any, list[tuple[Job, list[Any]]], bool]:
        """One proof group (streamed on ``worker``, or of witnesses done), with its bookkeeping."""
        jobs = [j for j, _ in chunk]
        if worker is None:
            reducer, futures, writes = self.submit(jobs, chunk[0][1], self.submitted)
        else:
            reducer, futures, writes = self.submit(jobs, chunk[0][1], self.submitted, worker=worker, stream=True)
            self.worker_of[self.groups] = worker
        self.submitted += len(jobs)
        self.open_groups[self.groups] = len(jobs)
        self.group_of.update((j.name, self.groups) for j in jobs)
        self.groups += 1
        return reducer, [(j, futures) for j in jobs], writes
