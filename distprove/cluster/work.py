"""The task bodies: what :mod:`distprove.cluster.graph` submits to the workers.

They read witnesses and keys from their paths on the worker, call backend and stage functions
(no field arithmetic here), and only small results (window sums, proofs, :class:`Outcome`
lists) need to reach the client. A small proof's one task, :func:`prove_whole`, runs what
:func:`prepare`, :func:`msm_proof` and :func:`reduce_assemble` run, in turn, with the vectors
in its locals instead of the proof cache. The worker's state is :mod:`distprove.cluster.state`;
checking and writing the proofs is :mod:`distprove.cluster.output`.
"""

from __future__ import annotations

import contextvars
import os
import time
import uuid
from collections import deque
from collections.abc import Callable, Iterator, Mapping, Sequence
from concurrent.futures import Executor, Future, ThreadPoolExecutor
from contextlib import AbstractContextManager, contextmanager, nullcontext
from functools import partial
from dataclasses import replace
from itertools import islice
from types import ModuleType
from typing import TYPE_CHECKING, Any

import numpy as np
from distributed.metrics import context_meter

from distprove import bn254
from distprove.groth16 import MSM_NAMES
from distprove.backends.cpu import fourstep as cpu_fourstep
from distprove.cluster import metrics, progress
from distprove.cluster import state as worker_state
from distprove.cluster.output import WRITTEN_BEFORE, check_and_write, failed_outcomes, public_signals, verify_write
from distprove.cluster.state import WITNESS_WAIT, MeteredBackend, ProverState, ResidentKey
from distprove.cluster.tasks import Assembled, Collected, Failed, KeyInfo, MsmPart, Outcome, Prepared, ProofSpec, Status, flatten
from distprove.keyrange import KeyShare
from distprove.errors import FormatError, one_line
from distprove.witness.pool import WitnessFailed, await_witness, claim

if TYPE_CHECKING:  # pragma: no cover
    from distprove.prover import WindowSums

def plan_key(path: str, with_vk: bool = False) -> KeyInfo:
    """Open (and keep resident) a key on this worker and describe it for the planner, with this
    worker's memory budget (:meth:`ProverState.key_info`: cached while the key stays resident
    and the budget holds). ``with_vk``: include the
    verification key (checks made off the workers need it; a .zkey's costs a pairing, ~0.4 s,
    on a worker's first use)."""
    st = worker_state.state()
    info = st.key_info(st.key(path), with_vk)
    return info if info.path == path else replace(info, path=path)  # the same key read from another path


def prepare(spec: ProofSpec, local_h: bool, host_h: bool = True, host_witness: bool = False) -> Prepared:
    """Read the witness from its path, gather, and (``local_h``) compute the H scalars here.

    The backend-side witness (and H scalars) stay in this worker's :class:`ProverState` for the
    proof's MSM tasks. ``host_h``: also download the H scalars into the result (split mode, where
    H tasks run on other workers); without it an MSM task elsewhere recomputes them from the
    witness. ``host_witness`` (points mode, with ``local_h`` and ``host_h``): the witness values
    travel in the result too, for the range tasks on every worker, and nothing is kept here.
    Without ``local_h`` the evaluations a, b, c are returned as a (3, n, 8) array for
    the distributed four-step NTT. The stage seconds travel with the result (recorded in the
    metrics once per proof, where it ends).
    """
    from distprove.prover import h_scalars, load_and_gather

    st = worker_state.state()
    key = st.key(spec.key_path, spec.content_hash)
    be = st.backend
    g = _counting_bad_witness(spec, lambda st, key, witness: load_and_gather(key, witness, MeteredBackend(be)))
    seconds, token = g.timings, uuid.uuid4().hex
    if local_h:
        hs = h_scalars(key, g, MeteredBackend(be))
        if not host_witness:
            st.keep_proof(token, key.content_hash, g.witness, hs)
        if not host_h:
            return Prepared(None, None, seconds, token, g.public, g.live)
        t = time.perf_counter()
        with context_meter.meter("ntt"):
            host = be.to_host(hs)
        seconds["ntt"] += time.perf_counter() - t  # the download, timed with the NTTs
        witness = None
        if host_witness:
            t = time.perf_counter()
            with context_meter.meter("witness"):
                witness = be.to_host(g.witness)
            seconds["witness"] = seconds.get("witness", 0.0) + time.perf_counter() - t
        return Prepared(host, None, seconds, token, g.public, g.live, witness)
    with context_meter.meter("gather"):
        stacked = np.stack([be.to_host(v) for v in g.evals])
    st.keep_proof(token, key.content_hash, g.witness, None)
    return Prepared(None, stacked, seconds, token, g.public, g.live)


def _msm_scalars(st: ProverState, key: ResidentKey, spec: ProofSpec, which: str, source: Prepared | np.ndarray) -> Any:
    """The scalars of MSM ``which`` in the backend's representation: kept on this worker by the
    prepare task when it ran here, else made again (the witness file read and uploaded once and
    kept for the proof's other tasks on this worker; the H scalars as downloaded, or recomputed
    from the witness when the prepare kept them on its device)."""
    be = st.backend
    if which == "H" and not isinstance(source, Prepared):  # from the four-step NTT tasks
        return np.asarray(source).reshape(-1, 8)
    entry = st.proof(source.token)
    if which == "H":
        if entry is not None and entry.hs is not None:
            return entry.hs
        if source.hs is not None:
            return source.hs
    if entry is None:
        with context_meter.meter("witness"):
            entry = st.keep_proof(source.token, key.content_hash, be.load_witness_file(key, spec.witness).vector, None)
    if which != "H":
        return entry.witness
    with context_meter.meter("gather"):
        evals = be.gather(key, entry.witness)
    with context_meter.meter("ntt"):
        entry.hs = be.h_scalars(key, evals)
    return entry.hs


def msm_windows(spec: ProofSpec, which: str, source: Prepared | np.ndarray, c: int, lo: int, hi: int) -> MsmPart:
    """Window sums [lo, hi) of MSM ``which``; ``source`` is the prepare result, or the H scalars."""
    t0 = time.perf_counter()
    st = worker_state.state()
    key = st.key(spec.key_path, spec.content_hash)
    scalars = _msm_scalars(st, key, spec, which, source)
    with context_meter.meter("msm"):
        sums = st.backend.msm_windows(key, which, scalars, c, lo, hi)
    prepared = isinstance(source, Prepared)
    carrier = prepared and which == "A" and lo == 0  # the one part that carries the prepare's results
    upstream = source.seconds if carrier else {}
    token = source.token if prepared else ""
    public = source.public if carrier else None
    return MsmPart(which, c, {lo + i: s for i, s in enumerate(sums)}, time.perf_counter() - t0, dict(upstream), token, public)


def msm_share(spec: ProofSpec, source: Prepared, share: KeyShare) -> list[MsmPart]:
    """Points mode: the proof's five partial MSMs over this worker's ``share`` of the key's points
    (the key's share kept resident here, :meth:`ResidentKey.share`; the rest of its points never
    read), started together, from the witness and H scalars the prepare handed over. One part per
    MSM, its partial point as window sums (:func:`~distprove.stages.msm.as_window_sums`) of the
    width chosen for the range; the reducer adds the shares' parts (:func:`add_shares`). The
    parts of share 0 carry the prepare's stage seconds and the public signals; every share's A
    part carries the task's seconds."""
    from distprove.backends.base import MsmJob
    from distprove.prover import msm_widths
    from distprove.stages.msm import as_window_sums, num_windows

    t0 = time.perf_counter()
    if source.witness is None or source.hs is None:
        raise ValueError("a points-mode range task needs the prepare's witness and H scalars (prepare(host_witness=True))")
    st = worker_state.state()
    view = st.key(spec.key_path, spec.content_hash).share(share)
    be = st.backend
    lengths = {which: hi - lo for which, lo, hi in share.ranges}
    widths = msm_widths(be, lengths, source.live)
    jobs = {which: MsmJob(view.scalars(which, source.witness, source.hs), widths[which], 0, num_windows(widths[which]))
            for which, n in lengths.items() if n > 0}
    with context_meter.meter("msm"):
        points = be.msm_start_combined(view, [jobs])()[0] if jobs else {}
    seconds = time.perf_counter() - t0
    carrier = share.index == 0
    return [
        MsmPart(which, widths[which], as_window_sums(points.get(which), widths[which]), seconds if which == "A" else 0.0,
                dict(source.seconds) if carrier and which == "A" else {}, source.token,
                source.public if carrier and which == "A" else None)
        for which in MSM_NAMES
    ]


def add_shares(parts: Sequence[MsmPart]) -> list[MsmPart]:
    """Points mode: the shares' parts of one proof (:func:`msm_share`) added into one part per MSM,
    the whole MSM's point as its window sums, for :func:`assemble_proof`. The stage seconds: the
    prepare's, and ``msm`` the range tasks' seconds summed over the shares."""
    from distprove.groth16 import msm_group
    from distprove.stages.msm import add_partials, as_window_sums, combine

    upstream: dict[str, float] = {}
    for p in parts:
        upstream.update(p.upstream)
    upstream["msm"] = sum(p.seconds for p in parts)
    public = next((p.public for p in parts if p.public is not None), None)
    token = next((p.token for p in parts if p.token), "")
    out: list[MsmPart] = []
    for i, which in enumerate(MSM_NAMES):
        mine = [p for p in parts if p.which == which]
        group = msm_group(which)
        total = add_partials(group, [combine(group, p.sums, p.c) for p in mine])
        c = mine[0].c if mine else 2
        out.append(MsmPart(which, c, as_window_sums(total, c), 0.0, upstream if i == 0 else {}, token,
                           public if i == 0 else None))
    return out


def msm_proof(spec: ProofSpec, source: Prepared, widths: Mapping[str, int] | None = None) -> list[MsmPart]:
    """Every window of the proof's five MSMs in one task (data mode), started together as
    :func:`distprove.prover.prove` starts them (the GPU overlaps them) with widths ``widths``
    (None: the backend's choice for this witness, :func:`distprove.prover.witness_widths`).

    One task instead of five saves four task round trips per proof; the parts carry no
    per-MSM seconds (the MSMs overlap), the first carries the prepare's stages and ``msm``.
    """
    from distprove.prover import witness_widths

    st = worker_state.state()
    key = st.key(spec.key_path, spec.content_hash)
    if widths is None:
        widths = witness_widths(st.backend, key, source.live)
    return _msm_parts(
        st, key, lambda which: _msm_scalars(st, key, spec, which, source), widths, source.seconds, source.token, source.public
    )


def _msm_parts(
    st: ProverState,
    key: ResidentKey,
    scalars: Callable[[str], Any],
    widths: Mapping[str, int],
    upstream: Mapping[str, float],
    token: str,
    public: list[int] | None,
) -> list[MsmPart]:
    """The five MSMs whole, started together (:func:`distprove.prover.start_msms`), as one part
    each; the first carries ``upstream`` seconds with ``msm`` added, and the public signals."""
    from distprove.prover import start_msms

    t0 = time.perf_counter()
    with context_meter.meter("msm"):
        sums = start_msms(st.backend, key, scalars, dict(widths))()
    return _whole_parts(sums, widths, {**upstream, "msm": time.perf_counter() - t0}, token, public)


def _whole_parts(
    sums: Mapping[str, dict[int, bn254.Affine]],
    widths: Mapping[str, int],
    seconds: dict[str, float],
    token: str,
    public: list[int] | None,
) -> list[MsmPart]:
    """Every window of the five MSMs as one part each; the first carries the proof's stage
    ``seconds`` and its public signals."""
    return [
        MsmPart(which, widths[which], sums[which], 0.0, seconds if i == 0 else {}, token, public if i == 0 else None)
        for i, which in enumerate(MSM_NAMES)
    ]


def prove_whole(
    spec: ProofSpec, widths: Mapping[str, int] | None = None, assemble: bool = True,
    blinding: tuple[int, int] | None = None,
) -> Assembled | Collected:
    """A small proof in one task (data mode below ``distprove.planner.fuse-below``): what the
    prepare, msm-windows and reducer tasks do, without their round trips or the proof cache, as
    :func:`distprove.prover.prove` does it (H computed beside the witness MSMs).

    Returns the :class:`Assembled` proof for :func:`verify_write` (``assemble``), else the
    :class:`Collected` window sums for the client's pool. Stage seconds: witness, gather, msm
    (with the NTTs), assemble. ``widths``: fixed window widths, else (None) the backend's
    choice for each witness. ``blinding`` = (r, s) is for tests.
    """
    return _finish_whole(spec, _start_whole(spec, widths)(), assemble, blinding)


def _counting_bad_witness(spec: ProofSpec, step: Callable[[ProverState, ResidentKey, Any], Any], witness: Any = None) -> Any:
    """``step(state, key, witness)`` for the spec's resident key and its witness: ``witness``
    when given (prefetched: an input's was waited for and taken there), else the spec's witness
    file, or an input's witness computed on this worker
    (:func:`~distprove.witness.pool.await_witness`), once written, or its values as they
    came out of a shared slot (:func:`_taken`); a bad witness or input (FormatError) is counted
    as a failed proof in the worker's metrics and raised."""
    st = worker_state.state()
    key = st.key(spec.key_path, spec.content_hash)
    try:
        handed = _handed.get()
        if witness is None and spec.source is not None and handed is not None and spec.name in handed:
            witness = _handed_witness(spec, handed.pop(spec.name))
        if witness is None:
            witness = spec.witness
            if spec.source is not None:
                with context_meter.meter(WITNESS_WAIT) as waited:
                    values = await_witness(spec.source, spec.witness, key.n_vars)
                waits = _waits.get()
                if waits is not None:
                    waits[spec.name] = waited.delta
                if values is not None:
                    witness = _taken(spec.source.input, values)
        return step(st, key, witness)
    except FormatError:
        metrics.record_proof(key, False)
        raise


_handed: contextvars.ContextVar[dict[str, Any] | None] = contextvars.ContextVar("distprove_handed_witnesses", default=None)
"""While a :func:`prove_group` task given its witnesses runs: each proof's witness values (or the
one-line reason its input failed) by proof name, as its witness task returned them."""


def _handed_witness(spec: ProofSpec, item: np.ndarray | str) -> Any:
    """A proof's witness handed over by a witness task (:func:`~distprove.witness.pool.compute_values`
    on a witness worker), as a read witness file comes (:func:`_taken`), kept beside the proof
    when its source says so (written here: the witness worker writes nothing); raise
    :class:`~distprove.witness.pool.WitnessFailed` when its input failed."""
    assert spec.source is not None
    if isinstance(item, str):
        raise WitnessFailed(item)
    if spec.source.keep:
        from distprove.formats.wtns import write_wtns

        os.makedirs(os.path.dirname(spec.witness), exist_ok=True)
        write_wtns(spec.witness, item, durable=True)
    return _taken(spec.source.input, item)


_waits: contextvars.ContextVar[dict[str, float] | None] = contextvars.ContextVar("distprove_witness_waits", default=None)
"""While a :func:`prove_group` task runs: the seconds each of its proofs waited for its input's
witness, by proof name (its ``witness-wait`` stage seconds)."""


def _with_waits(proofs: Iterator[Any], waits: dict[str, float]) -> Iterator[Any]:
    """``proofs`` as they come, each assembled one with the seconds it waited for its witness
    among its stage seconds (``witness-wait``), which the batch report sums."""
    for item in proofs:
        waited = waits.pop(item.spec.name, None)
        if waited is not None and isinstance(item, Assembled):
            item.seconds[WITNESS_WAIT] = waited
        yield item


def _taken(name: str, values: np.ndarray) -> Any:
    """An input's witness values taken out of a shared slot, as a read witness file comes
    (``prover.Prefetched``, left for its group's one load and range check); ``name`` (the input)
    names its errors."""
    from distprove.backends.base import LoadedWitness
    from distprove.prover import Prefetched

    return Prefetched(LoadedWitness(values, None), 0.0, name)


def _start_whole(spec: ProofSpec, widths: Mapping[str, int] | None, witness: Any = None) -> Callable[[], WindowSums]:
    """:func:`prove_whole` up to its MSMs queued on the device; the waiter of their sums.
    ``witness``: the spec's witness already loaded (:func:`_prefetch`, which waited for an input's
    witness and took it: waiting again would compute it again), else read here. A bad witness
    raises here (and counts as a failed proof in the worker's metrics)."""
    from distprove.prover import start_window_sums

    return _counting_bad_witness(
        spec, lambda st, key, source: start_window_sums(key, source, MeteredBackend(st.backend), widths=widths), witness)


def _prefetch(spec: ProofSpec) -> tuple[ProofSpec, Any]:
    """The spec and its witness loaded into the backend (``prover.prefetch_witness``), for a
    group's next proof while the current one's MSMs run. A bad witness raises here (counted as a
    failed proof)."""
    from distprove.prover import prefetch_witness

    return spec, _counting_bad_witness(spec, lambda st, key, witness: prefetch_witness(key, witness, MeteredBackend(st.backend)))


def _finish_whole(
    spec: ProofSpec, ws: WindowSums, assemble: bool, blinding: tuple[int, int] | None = None
) -> Assembled | Collected:
    """:func:`prove_whole` after its MSMs: the proof assembled here from its window sums, or
    its sums collected (as parts, for the client's pool)."""
    if not assemble:
        return collect_parts(spec, _whole_parts(ws.sums, ws.widths, ws.timings, "", ws.public))
    key = worker_state.state().key(spec.key_path, spec.content_hash)
    return _assembled(spec, key.points, ws.sums, ws.widths, ws.public, dict(ws.timings), blinding)


def prove_group(
    specs: Sequence[ProofSpec], widths: Mapping[str, int] | None = None, assemble: bool = True, write: bool = False,
    check: bool = False, blindings: Sequence[tuple[int, int]] | None = None,
    witnesses: Sequence[np.ndarray | str] | None = None,
) -> list[Assembled | Collected | Failed] | list[Outcome]:
    """Fused proofs of one key in one task (data mode, see
    :meth:`distprove.cluster.planner.Plan.proofs_per_task`); a proof that raises becomes a
    :class:`Failed` item with its one-line reason and the others go on.

    In groups of :func:`distprove.prover.group_size` proofs (``distprove.msm.group-proofs`` or the
    worker's backend's choice; ``widths`` as for :func:`prove_whole`): each proof's witness,
    gather and H, then the group's MSMs in one grouped call, and the group assembled while the
    next group's MSMs run and its witnesses load (:func:`distprove.prover.pipelined_groups`): on
    the device where the backend assembles there (the GPU), else in the worker's process pool
    when it has one.
    With groups of one, or unassembled (the client's pool takes window sums): :func:`prove_whole`
    each, pipelined proof by proof (:func:`distprove.prover.pipelined`). ``blindings``: (r, s)
    for each spec in order, for tests only.

    ``write``: the task checks and writes its proofs itself and returns their outcomes, as a
    verify-write task would: first those an earlier attempt of the task wrote (not proved again),
    then the others in order. The proofs
    stream out: each group's proofs (with groups of one, every :data:`SOLO_BATCH` proofs) go, as
    they come out of the pipeline, to the task's finisher thread (:class:`_Finisher`), which
    checks them (``check``: the group's own :class:`distprove.verifier.BatchCheck`, on a GPU
    worker one device step and one final exponentiation, on a CPU worker each proof's share in the
    worker's process pool) and writes them in one group write, while this thread queues the next
    groups' device work. Nothing is written before its check, a proof that fails it is not
    written, and a group whose check or write raises fails alone.

    A proof of an input batch counts the seconds it waited for its witness among its stage
    seconds (``witness-wait``): the batch report tells from them when witnesses bound a batch.
    ``witnesses``: each spec's witness values or the one-line reason its input failed, in order,
    as a witness task on a witness worker returned them (Dask moved them here: the task's
    dependency); the proofs take them instead of computing or reading their witnesses.
    """
    waits: dict[str, float] = {}
    token = _waits.set(waits)
    handed = _handed.set(None if witnesses is None else {sp.name: w for sp, w in zip(specs, witnesses)})
    try:
        with progress.in_task_batch():  # the finisher reports its groups for this task's batch
            return _prove_group(specs, widths, assemble, write, check, blindings, waits)
    finally:
        _handed.reset(handed)
        _waits.reset(token)


def _prove_group(
    specs: Sequence[ProofSpec], widths: Mapping[str, int] | None, assemble: bool, write: bool, check: bool,
    blindings: Sequence[tuple[int, int]] | None, waits: dict[str, float],
) -> list[Assembled | Collected | Failed] | list[Outcome]:
    """:func:`prove_group`'s body; ``waits``: the seconds its proofs wait for their witnesses (:data:`_waits`)."""
    from distprove.prover import pipelined, pipelined_groups

    def failed(spec: ProofSpec, exc: Exception) -> Failed:  # one bad witness fails alone
        return Failed(spec, one_line(exc))

    order = {sp.name: i for i, sp in enumerate(specs)}

    def blind(spec: ProofSpec) -> tuple[int, int] | None:
        return None if blindings is None else blindings[order[spec.name]]

    earlier: list[Outcome] = []
    if write:  # a rerun of this task (its worker died after it ended) proves nothing again
        where = worker_state.worker_address()
        earlier = [Outcome(sp.name, Status.PROVED, WRITTEN_BEFORE, {}, where, written_before=True) for sp in specs if os.path.exists(sp.proof_path)]
        specs = [sp for sp in specs if not os.path.exists(sp.proof_path)]
    size = _group_size(specs) if assemble else 1
    st = worker_state.state()
    streamed = [(sp.source, sp.witness) for sp in specs if sp.source is not None]
    if streamed and _handed.get() is None:  # an input batch's: every witness of the task sent to the pool now, in order
        claim(streamed, st.key(specs[0].key_path, specs[0].content_hash).n_vars)
    # a backend that assembles on the host does it in the pool, beside the next group's work
    pool = st.check_executor() if size > 1 and not st.backend.device_assembly else None
    if size > 1 and pool is not None:
        deferred = pipelined_groups(specs, size, _prefetch, lambda ready: _start_group(specs[0], ready, widths),
                                    lambda group, results: _assemble_in_pool(pool, group, results, blind),
                                    lambda spec, exc: partial(failed, spec, exc))
        proofs = _resolved(deferred, size)
    elif size > 1:
        proofs = pipelined_groups(specs, size, _prefetch, lambda ready: _start_group(specs[0], ready, widths),
                                  lambda group, results: _assembled_group(group, results, blind, recheck=not write),
                                  failed)
    else:
        proofs = pipelined(specs, lambda ready: _start_whole(ready[0], widths, ready[1]),
                           lambda spec, ws: _finish_whole(spec, ws, assemble, blind(spec)),
                           failed, _prefetch)
    if streamed:
        proofs = _with_waits(proofs, waits)
    if not write:
        return list(proofs)
    finish = _check_write_group if check else _write_group
    with _Finisher(finish, where, st.check_device() if check else "cpu") as finisher:
        made = iter(proofs)
        while batch := list(islice(made, size if size > 1 else SOLO_BATCH)):
            finisher.submit(batch)
        _leave_slot_while_draining()
        return earlier + finisher.outcomes()


def _leave_slot_while_draining() -> None:
    """Give the task's execution slot back to its worker (:func:`distributed.secede`) once every
    proof is handed to the finisher: the worker's next task then reads and starts its first
    groups while this one's last groups are checked and written, instead of the device idling
    through that drain at every task boundary. The task still returns its outcomes only once its
    proofs are on disk. Outside a worker's task (a test calling the task function, the bare
    loop): nothing."""
    from distributed.worker import secede, thread_state

    if getattr(thread_state, "key", None) is not None:
        secede()


SOLO_BATCH = 8
"""Proofs a task proving one at a time (groups of one: the CPU backend) hands its finisher
together: one batched check's fixed part (G1 sums, three Miller loops, a final exponentiation)
and one group write per this many proofs."""

FINISHER_BEHIND = 2
"""Groups a task's finisher (:class:`_Finisher`) holds at most, the one it is checking and
writing included: handing it another waits for the oldest, so a task holds at most this many
groups of finished proofs beyond its pipeline's own."""


def _check_write_group(items: list[Assembled | Failed]) -> list[Outcome]:
    """One group's batched pairing check (its own :class:`distprove.verifier.BatchCheck`, each
    proof added as ``check``) and the group write of the proofs that pass (:func:`verify_write`):
    a proof the check cannot read (FormatError) fails alone, the check goes on without it.
    A lone proof (a request to an idle service) is checked in this thread: the worker's check
    process would add its hand-over to the request's latency (~4 ms on two cores) and has nothing
    to overlap."""
    from distprove.verifier import BatchCheck

    st = worker_state.state()
    batch = BatchCheck(executor=st.check_executor() if len(items) > 1 else None, device=st.check_device())
    checked: list[Assembled | Failed] = []
    for item in items:
        if isinstance(item, Assembled) and not item.done_before:
            try:
                vk = st.vk(st.key(item.spec.key_path, item.spec.content_hash))
                with context_meter.meter("check"):
                    batch.add(vk, item.proof.public, item.proof.points)
            except FormatError as exc:
                item = Failed(item.spec, one_line(exc))
        checked.append(item)
    return verify_write(checked, batch=batch)


def _write_group(items: list[Assembled | Failed]) -> list[Outcome]:
    """One group's proofs written unchecked, in one group write (:func:`verify_write`)."""
    return verify_write(items, check=False)


class _Finisher:
    """A prove task's finisher: one thread that runs ``finish(items)`` (the outcomes of a group's
    proofs: :func:`_check_write_group` or :func:`_write_group`) for each group handed to it, in
    order, while the task's thread proves the next groups; at most :data:`FINISHER_BEHIND` groups
    held (:meth:`submit` waits for the oldest).

    Each group runs in a copy of the task's context (taken when it is handed over, outside any
    stage's meter), so its ``check`` and ``write`` seconds reach the task's fine performance
    metrics as they would from the task's thread. On a GPU worker (``device`` "gpu") its device
    step runs on the finisher's own non-blocking CUDA stream (:func:`_device_context`). A group
    whose ``finish`` raises fails alone (:meth:`_failed`); the outcomes come in the task's order.
    """

    def __init__(self, finish: Callable[[list[Any]], list[Outcome]], where: str, device: str = "cpu",
                 behind: int = FINISHER_BEHIND) -> None:
        self._finish, self._where, self._behind = finish, where, max(1, behind)
        self._context = _device_context(device)
        self._thread = ThreadPoolExecutor(1, thread_name_prefix="distprove-finisher")
        self._groups: list[Future] = []

    def __enter__(self) -> _Finisher:
        return self

    def __exit__(self, *exc: object) -> None:
        self._thread.shutdown(wait=True)  # groups handed over are checked and written, whatever happens here

    def submit(self, items: list[Any]) -> None:
        """Hand over a group's proofs (:class:`Assembled` or :class:`Failed`, in order), first
        waiting while the finisher already holds ``behind`` groups."""
        if len(self._groups) >= self._behind:
            self._groups[-self._behind].result()
        self._groups.append(self._thread.submit(contextvars.copy_context().run, self._run, items))

    def outcomes(self) -> list[Outcome]:
        """Every group's outcomes, in the order the groups and their proofs were handed over,
        once the finisher has run them all."""
        return [o for group in self._groups for o in group.result()]

    def _run(self, items: list[Any]) -> list[Outcome]:
        try:
            with self._context():
                outcomes = self._finish(items)
        except Exception as exc:
            return self._failed(items, exc)
        at = {item.spec.name: i for i, item in enumerate(items)}
        return sorted(outcomes, key=lambda o: at[o.name])  # verify_write puts the Failed items last

    def _failed(self, items: list[Any], exc: Exception) -> list[Outcome]:
        """The outcomes of a group whose ``finish`` raised: a proof whose file is in place was
        checked and written before it did (files appear only after their check) or by an earlier
        attempt; every other proof fails with the exception's one line (counted once in the
        metrics), a :class:`Failed` one with its own reason."""
        reason = f"check and write failed: {one_line(exc)}"
        out: list[Outcome] = []
        for item in items:
            name = item.spec.name
            if isinstance(item, Failed):
                out.append(Outcome(name, Status.FAILED, item.reason, {}, self._where))
            elif item.done_before:
                out.append(Outcome(name, Status.PROVED, WRITTEN_BEFORE, dict(item.seconds), self._where, written_before=True))
            elif os.path.exists(item.spec.proof_path):
                out.append(Outcome(name, Status.PROVED, "", dict(item.seconds), self._where))
            else:
                metrics.record_proof(item.spec.key_path, False)
                out.append(Outcome(name, Status.FAILED, reason, dict(item.seconds), self._where))
        progress.report_outcomes(out)
        return out


def _device_context(device: str) -> Callable[[], AbstractContextManager[Any]]:
    """What a finisher thread runs each group under. On a GPU worker (``device`` "gpu"): the task
    thread's CUDA device and one non-blocking stream of the finisher's own, so the batched check's
    uploads, kernels and reads neither queue behind the task thread's work on the legacy default
    stream nor hold it up (the MSM lanes have their own non-blocking streams too); the check reads
    only the buffers it uploads itself from the proofs' host points, and CuPy's memory pool reuses
    a freed block only on the stream that freed it. On the host: nothing."""
    if device != "gpu":
        return nullcontext
    import cupy

    gpu = cupy.cuda.Device()  # the current device of the task's thread
    stream = cupy.cuda.Stream(non_blocking=True)

    @contextmanager
    def on_stream() -> Iterator[None]:
        with gpu, stream:
            yield

    return on_stream


def _group_size(specs: Sequence[ProofSpec]) -> int:
    """Proofs per group for this task's specs on this worker (:func:`distprove.prover.group_size`)."""
    from distprove.prover import group_size

    if len(specs) <= 1:
        return 1
    st = worker_state.state()
    return min(len(specs), group_size(st.backend, st.key(specs[0].key_path, specs[0].content_hash), None))


def _start_group(spec: ProofSpec, ready: Sequence[Any], widths: Mapping[str, int] | None) -> Callable[[], list[Any]]:
    """A group's device work queued (:func:`distprove.prover.start_group`, through the metered
    backend: its grouped MSMs count as ``msm``): ``ready`` holds what :func:`_prefetch` gave for
    each spec (or its exception: a bad witness, counted there); its waiter gives each proof's MSM
    points or exception. A bad witness found by the group's load (a GPU checks small witnesses'
    values there, not in the prefetch) is counted as a failed proof too."""
    from distprove.prover import start_group

    st = worker_state.state()
    key = st.key(spec.key_path, spec.content_hash)
    given = {id(r) for r in ready if isinstance(r, Exception)}  # counted by _prefetch
    wait = start_group(key, [r if isinstance(r, Exception) else r[1] for r in ready], MeteredBackend(st.backend),
                       widths=widths)

    def counted() -> list[Any]:
        results = wait()
        for r in results:
            if isinstance(r, FormatError) and id(r) not in given:
                metrics.record_proof(key, False)
        return results

    return counted


def _assembled_group(
    specs: list[ProofSpec], results: list[Any], blind: Callable[[ProofSpec], tuple[int, int] | None],
    recheck: bool = True,
) -> list[Assembled | Failed]:
    """A group's proofs assembled from their MSM points (:func:`_start_group`'s results) in one
    backend call (:func:`distprove.prover.assembled_group`: on the GPU one device step), metered
    as ``assemble``; blindings ``blind(spec)``, else fresh ones from :mod:`secrets`. A proof that
    failed before is :class:`Failed`; with ``recheck``, one an earlier run already wrote is not
    assembled again (a writing task looked when it began, and its writes never replace a proof)."""
    from distprove.prover import assembled_group

    st = worker_state.state()
    key = st.key(specs[0].key_path, specs[0].content_hash)
    written = [recheck and not isinstance(r, Exception) and os.path.exists(sp.proof_path) for sp, r in zip(specs, results)]
    todo = [(sp, r) for sp, r, w in zip(specs, results, written) if not w and not isinstance(r, Exception)]
    t0 = time.perf_counter()
    with context_meter.meter("assemble"):
        proofs = iter(assembled_group(key, st.backend, [r for _, r in todo], [t0] * len(todo),
                                      [blind(sp) for sp, _ in todo]))
    out: list[Assembled | Failed] = []
    for spec, result, done in zip(specs, results, written):
        if isinstance(result, Exception):
            out.append(Failed(spec, one_line(result)))
        elif done:
            out.append(Assembled(spec, None, dict(result.timings), done_before=True))
        else:
            proof = next(proofs)
            seconds = dict(proof.timings)
            seconds.pop("total", None)
            out.append(Assembled(spec, proof, seconds))
    return out


ASSEMBLE_CHUNK = 8
"""Proofs per job of a group's assembly in the worker's process pool (:func:`_assemble_in_pool`):
~30 ms of work a job against ~1 ms of pickling and dispatch."""


def _assemble_in_pool(
    pool: Executor, specs: list[ProofSpec], results: list[Any], blind: Callable[[ProofSpec], tuple[int, int] | None]
) -> list[Callable[[], Assembled | Failed]]:
    """A group's proofs sent to ``pool`` for assembly (:func:`distprove.stages.assemble.assemble_many`,
    :data:`ASSEMBLE_CHUNK` proofs a job) from their MSM points (:func:`_start_group`'s results,
    an exception for a proof that failed before); the blindings are drawn here, in order
    (``blind(spec)``, else fresh ones from :mod:`secrets`). Returns each proof's resolver, which
    waits for its job (metered as ``assemble``) and gives its :class:`Assembled` or :class:`Failed`."""
    from distprove.prover import random_blinding
    from distprove.stages.assemble import assemble_many

    key = worker_state.state().key(specs[0].key_path, specs[0].content_hash)
    out: list[Callable[[], Assembled | Failed]] = []
    todo: list[tuple[int, ProofSpec, Any, tuple[int, int]]] = []
    for spec, result in zip(specs, results):
        if isinstance(result, Exception):
            out.append(partial(Failed, spec, one_line(result)))
        elif os.path.exists(spec.proof_path):
            out.append(partial(Assembled, spec, None, dict(result.timings), True))
        else:
            todo.append((len(out), spec, result, blind(spec) or random_blinding()))
            out.append(lambda: None)  # replaced below, once its job is sent
    points = dict(key.points)
    for at in range(0, len(todo), ASSEMBLE_CHUNK):
        chunk = todo[at : at + ASSEMBLE_CHUNK]
        job = pool.submit(assemble_many, points, [(result.points, r, s) for _, _, result, (r, s) in chunk])
        for i, (slot, spec, result, _) in enumerate(chunk):
            out[slot] = partial(_pooled_proof, job, i, spec, result)
    return out


def _pooled_proof(job: Future, i: int, spec: ProofSpec, result: Any) -> Assembled | Failed:
    """Proof ``i`` of a pool ``job`` of :func:`_assemble_in_pool`, waited for as ``assemble``:
    its :class:`Assembled`, or :class:`Failed` with the reason its inputs or the job failed."""
    from distprove.prover import Proof

    try:
        with context_meter.meter("assemble"):
            points, seconds = job.result()[i]
    except Exception as exc:  # the job itself failed (a broken pool): its proofs fail
        return Failed(spec, one_line(exc))
    if isinstance(points, Exception):
        return Failed(spec, one_line(points))
    proof = Proof(*points, result.public)
    proof.timings = {**result.timings, "assemble": seconds}
    return Assembled(spec, proof, dict(proof.timings))


def _resolved(deferred: Iterator[Any], lag: int) -> Iterator[Any]:
    """``deferred``'s items in order, each resolver called ``lag`` items later (a group's
    assembly waited for once the next group's items come, i.e. after that group's device work
    and the witness loads of the one after); items that are not callable pass as they are."""
    pending: deque[Any] = deque()
    for item in deferred:
        pending.append(item)
        if len(pending) > lag:
            first = pending.popleft()
            yield first() if callable(first) else first
    while pending:
        first = pending.popleft()
        yield first() if callable(first) else first


def assemble_proof(
    spec: ProofSpec,
    parts: Sequence[MsmPart],
    points: Mapping[str, bn254.Affine],
    n_public: int,
    blinding: tuple[int, int] | None = None,
) -> Assembled:
    """Combine the window sums (Horner) and add the blinding: the proof, not yet checked.

    ``points``: the key's alpha1, beta1, beta2, delta1, delta2. The public signals come with
    the parts (taken where the witness was read), else they are read again from the witness
    file (a few values of a memory map). ``blinding`` = (r, s) is for tests.
    """
    sums: dict[str, dict[int, bn254.Affine]] = {w: {} for w in MSM_NAMES}
    widths: dict[str, int] = {}
    for p in parts:
        sums[p.which].update(p.sums)
        widths[p.which] = p.c
    public = next((p.public for p in parts if p.public is not None), None)
    if public is None and not os.path.exists(spec.proof_path):
        public = public_signals(spec.witness, n_public)
    return _assembled(spec, points, sums, widths, public, part_seconds(parts), blinding)


def _assembled(
    spec: ProofSpec,
    points: Mapping[str, bn254.Affine],
    sums: Mapping[str, Mapping[int, bn254.Affine]],
    widths: Mapping[str, int],
    public: list[int] | None,
    seconds: dict[str, float],
    blinding: tuple[int, int] | None = None,
) -> Assembled:
    """:func:`distprove.prover.assemble` for a task: nothing when an earlier run of the proof's
    tasks already wrote it (``done_before``), else the proof with ``assemble`` seconds added."""
    from distprove.prover import assemble

    t0 = time.perf_counter()
    if os.path.exists(spec.proof_path):  # an earlier run of this proof's tasks already finished the job
        return Assembled(spec, None, seconds, done_before=True)
    with context_meter.meter("assemble"):
        proof = assemble(points, sums, widths, public, blinding)
    seconds["assemble"] = time.perf_counter() - t0
    return Assembled(spec, proof, seconds)


def part_seconds(parts: Sequence[MsmPart]) -> dict[str, float]:
    """A proof's stage seconds from its MSM parts: the upstream stages, then msm_X per MSM
    summed over its window ranges (parts of one task for the five MSMs carry ``msm`` instead)."""
    seconds: dict[str, float] = {}
    for p in parts:
        seconds.update(p.upstream)
    for p in parts:
        if p.seconds:
            seconds[f"msm_{p.which}"] = seconds.get(f"msm_{p.which}", 0.0) + p.seconds
    return seconds


def _drop_resident(parts: Sequence[MsmPart]) -> None:
    """Forget the cached vectors of the prepare results ``parts`` came from, on this worker."""
    worker_state.state().drop_proofs(sorted({p.token for p in parts if p.token}))


def reduce_assemble(spec: ProofSpec, parts: Sequence[MsmPart | Sequence[MsmPart]], blinding: tuple[int, int] | None = None) -> Assembled:
    """The reducer task: :func:`assemble_proof` with this worker's resident key (for :func:`verify_write`);
    drops the proof's cached vectors on this worker first."""
    parts = flatten(parts)
    _drop_resident(parts)
    key = worker_state.state().key(spec.key_path, spec.content_hash)
    return assemble_proof(spec, parts, key.points, key.n_public, blinding)


def reduce_shares(spec: ProofSpec, parts: Sequence[MsmPart | Sequence[MsmPart]], blinding: tuple[int, int] | None = None) -> Assembled:
    """Points mode's reducer: the shares' partial MSMs added (:func:`add_shares`), then
    :func:`reduce_assemble`."""
    return reduce_assemble(spec, add_shares(flatten(parts)), blinding)


def collect_shares(spec: ProofSpec, parts: Sequence[MsmPart | Sequence[MsmPart]]) -> Collected:
    """Points mode's reducer when the client's pool assembles: the shares' partial MSMs added
    (:func:`add_shares`), then :func:`collect_parts`."""
    return collect_parts(spec, add_shares(flatten(parts)))


def collect_parts(spec: ProofSpec, parts: Sequence[MsmPart | Sequence[MsmPart]]) -> Collected:
    """The reducer task when the client's pool assembles and checks: just the window sums (the
    proof's cached vectors on this worker are dropped). The proof's worker stages are recorded
    in this worker's metrics here (with the checks on the workers, :func:`verify_write` does it)."""
    parts = flatten(parts)
    _drop_resident(parts)
    metrics.record_timings(part_seconds(parts))
    return Collected(spec, list(parts))


def _ops() -> ModuleType:
    try:
        return worker_state.state().fourstep()
    except (RuntimeError, ValueError):  # not on a worker with the plugin: the CPU blocks
        return cpu_fourstep


def ntt_columns(source: Prepared | np.ndarray, n: int, lo: int, hi: int, row_ranges: Sequence[tuple[int, int]], inverse: bool) -> tuple[np.ndarray, ...]:
    """Column sub-NTTs and twiddles of columns [lo, hi) of (V, n, 8) vectors (or a prepare's a, b, c),
    cut into the pieces of each row block."""
    with context_meter.meter("ntt"):
        ops = _ops()
        values = source.evals if isinstance(source, Prepared) else source
        n1, n2 = ops.split_sizes(n)
        block = ops.column_step(ops.take_columns(values, n1, n2, lo, hi), n, lo, inverse)
        return ops.split_rows(block, row_ranges)


def ntt_rows(pieces: Sequence[np.ndarray], n: int, inverse: bool) -> np.ndarray:
    """Row sub-NTTs of one row block, joined from its pieces of every column block."""
    with context_meter.meter("ntt"):
        ops = _ops()
        return ops.row_ntts(ops.join_columns(pieces), n, inverse)


def h_inverse_rows(pieces: Sequence[np.ndarray], n: int, row_lo: int, forward_rows: Sequence[tuple[int, int]]) -> tuple[np.ndarray, ...]:
    """H pipeline middle: inverse row sub-NTTs (-> coefficients), odd-coset scaling, then the
    forward transform's column sub-NTTs and twiddles for the same block, cut for the forward rows."""
    with context_meter.meter("ntt"):
        ops = _ops()
        coeffs = ops.row_ntts(ops.join_columns(pieces), n, True)
        scaled = ops.coset_scale(coeffs, n, row_lo)
        block = ops.column_step(ops.as_columns(scaled), n, row_lo, False)
        return ops.split_rows(block, forward_rows)


def h_forward_rows(pieces: Sequence[np.ndarray], n: int) -> np.ndarray:
    """H pipeline end: forward row sub-NTTs of a, b, c, then hs = a·b - c for this row block."""
    with context_meter.meter("ntt"):
        ops = _ops()
        return ops.h_from_odd(ops.row_ntts(ops.join_columns(pieces), n, False))


def ntt_assemble(blocks: Sequence[np.ndarray]) -> np.ndarray:
    """The (V, n, 8) vectors in natural order from every row block's output."""
    with context_meter.meter("ntt"):
        return _ops().natural_order(blocks)


def assemble_check_write_in_process(
    collected: Sequence[Collected | list[Collected | Failed]], keys: Mapping[str, KeyInfo], check: bool
) -> list[Outcome]:
    """In a process of the client's pool: :func:`assemble_proof` then :func:`check_and_write`.

    ``keys`` maps content hash to the :class:`KeyInfo` (points, n_public, vk) of each key.
    """
    from distprove.formats.jsonio import read_vk

    where = f"client pid {os.getpid()}"
    collected, failed = failed_outcomes(collected, where)
    items = [assemble_proof(c.spec, c.parts, keys[c.spec.content_hash].points, keys[c.spec.content_hash].n_public) for c in collected]
    vks = {h: read_vk(keys[h].vk) for h in {c.spec.content_hash for c in collected}} if check else {}
    return check_and_write(items, vks, check, where) + failed
