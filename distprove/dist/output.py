"""Check and write: the batched pairing check of assembled proofs and the exactly-once outputs.

:func:`check_and_write` runs wherever it is called (the verify-write task on a worker, a process
of the client's verification pool, a fused group's task); :func:`write_once` makes a proof file
appear exactly once, whole, whatever attempt gets there first.
"""

from __future__ import annotations

import os
import threading
import time
from collections.abc import Mapping, Sequence
from concurrent.futures import Future, ThreadPoolExecutor
from typing import TYPE_CHECKING, Any

from distributed.metrics import context_meter

from distprove import bn254
from distprove.dist import metrics
from distprove.dist import state as worker_state
from distprove.dist.tasks import Assembled, Failed, Outcome, Status, flatten
from distprove.errors import FormatError
from distprove.formats.container import first_false, lt_bound
from distprove.formats.jsonio import write_json_atomic

if TYPE_CHECKING:  # pragma: no cover
    from distprove.verifier import BatchCheck

WRITTEN_BEFORE = "written by an earlier attempt"
"""The reason shown for a proof that an earlier attempt wrote (:attr:`Outcome.written_before`)."""


NOT_VALID = "does not verify (is the witness satisfying the circuit?); nothing written"


def check_and_write(
    items: Sequence[Assembled], vks: Mapping[str, Any], check: bool, where: str, batch: "BatchCheck | None" = None
) -> list[Outcome]:
    """Check proofs with one batched pairing check (``verify_many``) and write those that pass, once each.

    ``vks`` maps a key's content hash to its parsed verification key (not read without
    ``check``). A proof that fails is reported as failed and never written. Runs wherever it is
    called (a worker, or a process of the client's verification pool); ``where`` names that place
    in the outcomes. ``batch``: the proofs of ``items`` not done before, already added in order
    to this :class:`~distprove.verifier.BatchCheck` (its results are the check; ``vks`` unused).
    """
    from distprove.verifier import verify_many

    t0 = time.perf_counter()
    todo = [a for a in items if not a.done_before]
    if batch is not None:
        if len(batch) != len(todo):
            raise ValueError(f"batch check of {len(batch)} proofs for {len(todo)} to write")
        with context_meter.meter("check"):
            checked = batch.results()
        t0 -= batch.add_seconds
    elif not check or not todo:
        checked = [True] * len(todo)
    else:  # one proof alone is checked on its own there, reusing its Miller loop
        with context_meter.meter("check"):
            checked = verify_many([(vks[a.spec.content_hash], a.proof.public, a.proof.points) for a in todo])
    valid = dict(zip((a.spec.name for a in todo), checked))
    share = (time.perf_counter() - t0) / max(1, len(todo))
    out: list[Outcome | Future[Outcome]] = []
    writers = _writers() if len(todo) > 1 else None
    for a in items:
        seconds = dict(a.seconds)
        if a.done_before:
            out.append(Outcome(a.spec.name, Status.PROVED, WRITTEN_BEFORE, seconds, where, written_before=True))
            continue
        seconds["verify"] = share
        if not valid[a.spec.name]:
            out.append(Outcome(a.spec.name, Status.FAILED, NOT_VALID, seconds, where))
        elif writers is None:
            out.append(_written(a, seconds, where))
        else:
            out.append(writers.submit(_written, a, seconds, where))
    with context_meter.meter("write"):  # the time this task waits for its proofs' writes
        return [o.result() if isinstance(o, Future) else o for o in out]


WRITE_THREADS = 4
"""Threads that write a task's checked proofs (:func:`check_and_write`): each write waits on two
fsyncs, so a few at a time overlap."""

_WRITERS: ThreadPoolExecutor | None = None
_WRITERS_LOCK = threading.Lock()


def _writers() -> ThreadPoolExecutor:
    """This process's pool of :data:`WRITE_THREADS` proof writers (started on first use)."""
    global _WRITERS
    with _WRITERS_LOCK:
        if _WRITERS is None:
            _WRITERS = ThreadPoolExecutor(WRITE_THREADS, thread_name_prefix="distprove-write")
        return _WRITERS


def _written(a: Assembled, seconds: dict[str, float], where: str) -> Outcome:
    """Write a checked proof once (:func:`write_once`): its outcome, with its ``write`` seconds."""
    t1 = time.perf_counter()
    try:
        written = write_once(a.proof.to_json(), a.proof.public_json(), a.spec.proof_path, a.spec.public_path)
    except OSError as exc:  # full disk, permissions: this proof fails, the rest of the group goes on
        reason = f"{a.spec.proof_path}: cannot write: {exc.strerror or exc}; no proof written"
        return Outcome(a.spec.name, Status.FAILED, reason, seconds, where)
    seconds["write"] = time.perf_counter() - t1
    return Outcome(a.spec.name, Status.PROVED, "" if written else WRITTEN_BEFORE, seconds, where, written_before=not written)


def failed_outcomes(items: Sequence[Any], where: str) -> tuple[list[Any], list[Outcome]]:
    """Split reducer results into the proofs to check and the outcomes of :class:`Failed` items."""
    flat = flatten(items)
    failed = [Outcome(f.spec.name, Status.FAILED, f.reason, {}, where) for f in flat if isinstance(f, Failed)]
    return [it for it in flat if not isinstance(it, Failed)], failed


def verify_write(
    items: Sequence[Assembled | list[Assembled | Failed]], check: bool = True, batch: "BatchCheck | None" = None
) -> list[Outcome]:
    """The verify-write task: :func:`check_and_write` on this worker, with its resident keys' vks
    (made only when checking: a .zkey's vk costs a pairing, ~0.4 s, on the first use per worker).
    ``items``: reducer results, a prove-group's list of them, or its :class:`Failed` items;
    ``batch``: their proofs already added to a batch check (:func:`prove_group`)."""
    st = worker_state.state()
    where = worker_state.worker_address()
    items, failed = failed_outcomes(items, where)
    specs = {a.spec.content_hash: a.spec for a in items if not a.done_before} if check and batch is None else {}
    vks = {h: st.vk(st.key(sp.key_path, h)) for h, sp in specs.items()}
    outcomes = check_and_write(items, vks, check, where, batch)
    by_name = {a.spec.name: a.spec for a in items}
    for o in outcomes:
        if not o.written_before:
            metrics.record_proof(by_name[o.name].key_path, o.status == Status.PROVED)
            metrics.record_timings(o.seconds)
    return outcomes + failed


def warm_up() -> None:
    """Import the assembly and pairing code (run once per process of the client's pool)."""
    import distprove.stages.assemble  # noqa: F401
    import distprove.verifier  # noqa: F401


def check_existing(key_path: str, items: Sequence[tuple[str, str, str]]) -> list[bool]:
    """For each (witness, proof_path, public_path): are the outputs whole, the witness's public
    signals (unchecked when ``witness`` is "": an input batch's witness is gone), and a proof
    that verifies with the key? (one batched pairing check for all)"""
    from distprove.formats.jsonio import read_proof, read_public
    from distprove.verifier import verify_many

    st = worker_state.state()
    key = st.key(key_path)
    vk = st.vk(key)
    loaded: dict[int, tuple[Any, Any, Any]] = {}
    for i, (witness, proof_path, public_path) in enumerate(items):
        try:
            public = read_public(public_path)
            expected = public_signals(witness, key.n_public) if witness else public
            if public == expected:
                loaded[i] = (vk, public, read_proof(proof_path))
        except (FormatError, OSError):
            continue
    order = sorted(loaded)
    with context_meter.meter("check"):
        ok = dict(zip(order, verify_many([loaded[i] for i in order]))) if order else {}
    return [ok.get(i, False) for i in range(len(items))]


def write_once(proof_json: dict, public_json: list[str], proof_path: str, public_path: str) -> bool:
    """Write public then proof so that the proof file appears exactly once, whole.

    The public file is deterministic (the witness's public signals), so it is atomically
    replaced; the proof file is hard-linked into place only if no attempt created it first.
    A proof file's existence therefore means its public file is complete. Returns False when
    an earlier attempt had already written the proof.
    """
    if os.path.exists(proof_path):
        return False
    os.makedirs(os.path.dirname(os.path.abspath(public_path)), exist_ok=True)
    os.makedirs(os.path.dirname(os.path.abspath(proof_path)), exist_ok=True)
    write_json_atomic(public_path, public_json)
    return write_json_atomic(proof_path, proof_json, exclusive=True)


def public_signals(path: str, n_public: int) -> list[int]:
    """The public signals w[1..n_public] of the witness file at ``path``: only those values are
    read and checked (< r), not the whole file. Raises FormatError(path, problem)."""
    from distprove.formats.wtns import read_wtns

    values = read_wtns(path, check_values=False).values[1 : 1 + n_public]
    if values.shape[0] != n_public:
        raise FormatError(path, f"witness has {values.shape[0] + 1} values, fewer than the key's 1 + {n_public} public signals")
    bad = first_false(lt_bound(values, bn254.R))
    if bad is not None:
        raise FormatError(path, f"witness value {bad + 1} is >= r (not reduced)")
    return bn254.ints_from_limbs(values)
