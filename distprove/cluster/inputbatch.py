"""Batches from inputs: every ``*.json`` of a folder becomes a witness on the workers' CPU cores,
then a proof on their GPUs (or CPUs), streamed.

The inputs, their keys and circuits are found by :func:`distprove.witness.discovery.discover_inputs`.

Where witnesses are computed: in each worker's witness pool
(:mod:`distprove.witness.pool`: one process per core of the worker's share, nicer than
the worker). A witness task (:func:`compute_witnesses`,
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
writes it (:func:`~distprove.witness.pool.await_witness`) and proves it, so a batch has as
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

With witness workers (CPU-only workers that carry the Dask resource
:data:`~distprove.witness.pool.WITNESS_RESOURCE`, ``witness=N``): every witness task goes to them
(``resources={"witness": 1}``; to any worker, in turn, with ``distprove.witness.on-provers: true``),
and no proof task does (:meth:`~distprove.cluster.planner.Plan.place` holds them to the provers,
and :mod:`distprove.cluster.provers` keeps that true while provers come and go). A streamed key's
proof group is one witness task (:func:`witness_values`) that returns the group's witness values
(or each failed input's one-line reason) and one proof task that takes that result as a Dask
dependency, submitted together: Dask moves the values from the witness worker to the prover, the
proof task starts once they are all there, and a kept witness is written by the proof task. The
witness workers write nothing, so their tasks are pure: one killed mid-batch loses only values,
which the scheduler computes again on another witness worker (or the restarted one), and only the
proof tasks write outputs, exactly once as always. Memory: the witnesses between their witness
task and their proof's result stay under the in-flight bound (by default
:data:`GROUPS_IN_FLIGHT` proof groups per prover). This is chosen over the provers' claims and
shared slots, which only see their own host, and over scratch files on a shared file system,
which would cost a write and a read per witness and leave files behind a killed worker. A key
whose proofs do not stream (split mode, or not fused) keeps its scratch files (``<out>/.witnesses/``,
on the shared file system every worker already needs), written by the witness workers.

Before the cluster starts, discovery checks each (generator, key) pair once in the client
(:func:`~distprove.witness.discovery.check_generators`): a generator that does not open, or
whose witnesses are not of the key's size and prime (a generator of another circuit), fails all
of that key's inputs with one reason naming it, and is the batch's one error when no input is
left.

A rerun skips an input whose proof and public files exist and verify (and, with a kept witness,
carry its public signals); an input replaced under the same name is proved again with
``--incremental``, which fingerprints the input file.
"""

from __future__ import annotations

import logging
import os
from collections import deque
from collections.abc import Callable
from typing import Any

from distributed import secede
from distributed.metrics import context_meter

from distprove import config
from distprove.cluster.state import WITNESS_GEN
from distprove.cluster.tasks import Status, failure_reason
from distprove.witness.discovery import InputJob, Job
from distprove.errors import FormatError
from distprove.witness.pool import (
    WITNESS_RESOURCE,
    WitnessSource,
    compute,
    compute_values,
    ensure_pool,
    forget_batch,
    host_cores,
    processes_for,
    shared_budget,
    witness_workers,
)

log = logging.getLogger(__name__)

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


def witness_source(job: Job, batch: str, shared: int) -> WitnessSource | None:
    """What computes an input job's witness for a proof task that waits for it, handing it over
    in its worker's shared slots within ``shared`` bytes (:attr:`InputFeed.shared`); None for a
    witness job."""
    return WitnessSource(job.generator, job.witness, job.keep, batch, shared) if isinstance(job, InputJob) else None


def compute_witnesses(gen: str, items: list[tuple[str, str]], n_vars: int = 0, keep: bool = False,
                      batch: str = "", shared: int = 0) -> list[str]:
    """The witness task of a chunk of inputs, on a worker: each (input, wtns) of ``items``
    computed by the generator ``gen`` in the worker's witness pool
    (:func:`~distprove.witness.pool.compute`; into shared slots as ``shared`` allows, see
    :class:`~distprove.witness.pool.WitnessSource`); one "" or the one-line reason it failed per
    item. Metered as the ``witness-gen`` stage; secedes from the worker's thread pool while the
    pool computes, so the worker's proofs go on."""
    sources = [(WitnessSource(gen, inp, keep, batch, shared), wtns) for inp, wtns in items]
    with context_meter.meter(WITNESS_GEN):
        return compute(sources, n_vars, secede)


def witness_values(gen: str, inputs: list[str], n_vars: int) -> list[Any]:
    """The witness task of a chunk of inputs on a witness worker (a streamed key's proof group,
    in a cluster with witness workers): each input's witness values computed by the generator
    ``gen`` in the worker's pool (:func:`~distprove.witness.pool.compute_values`), or the
    one-line reason it failed; the result, which Dask moves to the group's proof task. Writes
    nothing. Metered as the ``witness-gen`` stage; secedes while the pool computes."""
    with context_meter.meter(WITNESS_GEN):
        return compute_values(gen, inputs, n_vars, secede)


def on_provers(witness: dict[str, int]) -> bool:
    """Whether the provers' own pools compute witnesses, in a cluster whose witness workers are
    ``witness``: ``distprove.witness.on-provers``, by default (null) only when there are none.
    FormatError when false and there are none (no worker would compute the witnesses)."""
    value = config.get("witness.on-provers", None)
    if value is None or (isinstance(value, str) and value.strip().lower() in ("null", "none")):
        return not witness
    provers = config.get_bool("witness.on-provers")
    if not provers and not witness:
        raise FormatError(f"{config.NAMESPACE}.witness.on-provers",
                          "is false but the cluster has no witness workers (workers with the 'witness' resource)")
    return provers


def ensure_witness_pool(client: Any, jobs: list[Job]) -> None:
    """The workers' witness pools (:func:`~distprove.witness.pool.ensure_pool`) when the
    batch has inputs: the witness workers', and the provers' as :func:`on_provers` says."""
    if any(isinstance(j, InputJob) for j in jobs):
        witness = witness_workers(client)
        ensure_pool(client, on_provers(witness), witness)


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

    def __init__(self, in_flight: int | None = None, chunk: int | None = None, witness: dict[str, int] | None = None) -> None:
        self.witness = witness or {}
        """The cluster's witness workers (address: witness processes)."""
        self.on_provers = on_provers(self.witness)
        """Whether the provers compute witnesses too."""
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
        """Hold the jobs to stream (each generator checked against its key by discovery:
        :func:`~distprove.witness.discovery.check_generators`). ``submit(jobs, info, i, worker=None,
        stream=False)`` submits one proof group (``stream``: its task waits for the witnesses, on
        ``worker``)."""
        self.client, self.plan, self.submit, self.emit, self.tag = client, plan, submit, emit, tag
        self.provers = list(plan.workers) or sorted(set(client.nthreads()) - set(self.witness))
        self.workers = self.provers
        """The workers that compute witnesses, taken in turn: the provers, or in a cluster with
        witness workers those (and the provers too with :attr:`on_provers`)."""
        if self.witness:
            self.workers = sorted(self.witness) + (self.provers if self.on_provers else [])
        counts: dict[str, int] = {}
        infos: dict[Any, Any] = {}  # a job's key -> its KeyInfo
        for job, info in planned:
            counts[info.path] = counts.get(info.path, 0) + 1
            infos[job.key] = info
        self.sizes = {k: plan.proofs_per_task(info, counts[info.path]) for k, info in infos.items()}
        self.streams = {k: plan.fuses(info) for k, info in infos.items()}
        """Per key, whether its proof tasks stream (one task per group: :func:`graph.submit_group`)."""
        self.n_vars = {k: info.n_vars for k, info in infos.items()}
        self.queue: list[tuple[InputJob, Any]] = list(reversed(planned))  # type: ignore[arg-type]  # popped from the end: the planned order
        self.scratch = {job.wtns for job, _ in self.queue if isinstance(job, InputJob) and not job.keep}
        """The batch's scratch witness paths."""
        self.left = {}
        for job, _ in self.queue:
            self.left[job.key] = self.left.get(job.key, 0) + 1
        self.procs = processes_for(client.nthreads(), host_cores(client), self.witness, self.on_provers)
        biggest = max(self.sizes.values(), default=1)
        self.bound = (
            int(self.in_flight) if self.in_flight
            else max(2 * sum(self.procs.values()), GROUPS_IN_FLIGHT * biggest * len(self.provers), 4)
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
        generator, none until the room left holds them all (a chunk cut to the room left would be one
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
            if n == want or (queued.key, queued.generator) != (job.key, job.generator):
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
                if len(items) < size and self.left.get(kp, 0) and len(self.open_groups) >= GROUPS_AHEAD * len(self.provers):
                    break  # more witnesses of the key are coming and the workers have proofs queued
                chunk, items[:] = items[:size], items[size:]
                out.append(self._submit_proofs(chunk))
        first = self.sent
        for k in range(len(self.workers)):  # one round a call: the client comes back for the witnesses done meanwhile
            worker = self.workers[(first + k) % len(self.workers)]
            if self.witness:
                if self.queue and len(self.opened) < self.bound:
                    chunk = self._next_chunk(worker)
                    if chunk:
                        witnesses = self._submit_witnesses(worker, chunk)
                        if self.streams.get(chunk[0][0].key):  # its proof task takes the witness task's values
                            out.append(self._submit_proofs(chunk, witnesses=witnesses))
                continue
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

    def _submit_witnesses(self, worker: str, chunk: list[tuple[InputJob, Any]]) -> Any:
        """One witness task for ``chunk`` (its future), on ``worker`` (another one if it is gone);
        in a cluster with witness workers, on any of them (by their resource: a worker lost
        mid-batch leaves its tasks to the others) unless the provers compute too, and for a
        streamed key the task returns the values (:func:`witness_values`)."""
        jobs = [job for job, _ in chunk]
        name = jobs[0].name if len(jobs) == 1 else f"{jobs[0].name}+{len(jobs) - 1}"
        shared = self.shared if self.streams.get(jobs[0].key) else 0
        n_vars = self.n_vars.get(jobs[0].key, 0)
        placed: dict[str, Any] = {"workers": [worker], "allow_other_workers": True}
        if self.witness and not self.on_provers:
            placed = {"resources": {WITNESS_RESOURCE: 1}}
        common = {"key": (WITNESS_GEN, name, self.tag), "pure": False, "priority": WITNESS_PRIORITY - self.sent, **placed}
        if self.witness and self.streams.get(jobs[0].key):
            fut = self.client.submit(witness_values, jobs[0].generator, [j.witness for j in jobs], n_vars, **common)
        else:
            fut = self.client.submit(compute_witnesses, jobs[0].generator, [(j.witness, j.wtns) for j in jobs], n_vars,
                                     jobs[0].keep, self.tag, shared, **common)
        self.sent += 1
        self.computing[fut] = chunk
        self.opened.update(j.name for j in jobs)
        return fut

    def _submit_proofs(self, chunk: list[tuple[InputJob, Any]], worker: str | None = None,
                       witnesses: Any = None) -> tuple[Any, list[tuple[Job, list[Any]]], bool]:
        """One proof group (streamed on ``worker``, given the values of the witness task
        ``witnesses``, or of witnesses done), with its bookkeeping."""
        jobs = [j for j, _ in chunk]
        if witnesses is not None:
            reducer, futures, writes = self.submit(jobs, chunk[0][1], self.submitted, stream=True, witnesses=witnesses)
        elif worker is None:
            reducer, futures, writes = self.submit(jobs, chunk[0][1], self.submitted)
        else:
            reducer, futures, writes = self.submit(jobs, chunk[0][1], self.submitted, worker=worker, stream=True)
            self.worker_of[self.groups] = worker
        self.submitted += len(jobs)
        self.open_groups[self.groups] = len(jobs)
        self.group_of.update((j.name, self.groups) for j in jobs)
        self.groups += 1
        return reducer, [(j, futures) for j in jobs], writes
