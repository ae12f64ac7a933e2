"""Check and write: the batched pairing check of assembled proofs and the exactly-once outputs.

:func:`check_and_write` runs wherever it is called (the verify-write task on a worker, a process
of the client's verification pool, a fused group's task); :func:`write_proofs` makes each proof
file of a group appear exactly once, whole, whatever attempt gets there first, in one group write.
"""

from __future__ import annotations

import os
import time
from collections.abc import Mapping, Sequence
from typing import TYPE_CHECKING, Any

from distributed.metrics import context_meter

from distprove import bn254
from distprove.cluster import metrics, progress
from distprove.cluster import state as worker_state
from distprove.cluster.tasks import Assembled, Failed, Outcome, Status, flatten
from distprove.errors import FormatError
from distprove.formats.container import first_false, lt_bound
from distprove.formats.atomic import Target, write_group
from distprove.formats.jsonio import json_bytes, proof_json_bytes, public_json_bytes

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
    out: list[Outcome] = []
    to_write: list[tuple[int, Assembled]] = []
    for a in items:
        seconds = dict(a.seconds)
        if a.done_before:
            out.append(Outcome(a.spec.name, Status.PROVED, WRITTEN_BEFORE, seconds, where, written_before=True))
            continue
        seconds["check"] = share
        if valid[a.spec.name]:
            to_write.append((len(out), a))
            out.append(Outcome(a.spec.name, Status.PROVED, "", seconds, where))
        else:
            out.append(Outcome(a.spec.name, Status.FAILED, NOT_VALID, seconds, where))
    if to_write:
        with context_meter.meter("write"):
            _write_checked(out, to_write)
    return out


def _write_checked(out: list[Outcome], to_write: list[tuple[int, Assembled]]) -> None:
    """Write the checked proofs ``to_write`` (index in ``out``, proof) in one :func:`write_proofs`
    and settle their outcomes in ``out``: each one's ``write`` seconds are its share of the group's."""
    t0 = time.perf_counter()
    files = [(proof_json_bytes(*a.proof.points), public_json_bytes(a.proof.public), a.spec.proof_path, a.spec.public_path)
             for _, a in to_write]
    results = write_proofs(files)
    share = (time.perf_counter() - t0) / len(to_write)
    for (i, a), result in zip(to_write, results):
        o = out[i]
        if isinstance(result, OSError):  # full disk, permissions: this proof fails, the rest of the group goes on
            o.status = Status.FAILED
            o.reason = f"{a.spec.proof_path}: cannot write: {result.strerror or result}; no proof written"
        else:
            o.seconds["write"] = share
            if not result:
                o.reason, o.written_before = WRITTEN_BEFORE, True


def failed_outcomes(items: Sequence[Any], where: str) -> tuple[list[Any], list[Outcome]]:
    """Split reducer results into the proofs to check and the outcomes of :class:`Failed` items."""
    flat = flatten(items)
    failed = [Outcome(f.spec.name, Status.FAILED, f.reason, {}, where) for f in flat if isinstance(f, Failed)]
    return [it for it in flat if not isinstance(it, Failed)], failed


def verify_write(
    items: Sequence[Assembled | list[Assembled | Failed]], check: bool = True, batch: "BatchCheck | None" = None
) -> list[Outcome]:
    """The verify-write task: :func:`check_and_write` on this worker, with its resident keys' vks
    (made only when checking: a .zkey's vk costs a pairing, ~0.4 s, on the first use per worker);
    the outcomes are counted in the worker's metrics and reported to the scheduler as the
    batch's progress (:func:`distprove.cluster.progress.report_outcomes`).
    ``items``: reducer results, a prove-group's list of them, or its :class:`Failed` items;
    ``batch``: their proofs already added to a batch check (:func:`prove_group`)."""
    st = worker_state.state()
    where = worker_state.worker_address()
    items, failed = failed_outcomes(items, where)
    specs = {a.spec.content_hash: a.spec for a in items if not a.done_before} if check and batch is None else {}
    vks = {h: st.vk(st.key(sp.key_path, h)) for h, sp in specs.items()}
    outcomes = check_and_write(items, vks, check, where, batch)
    by_name = {a.spec.name: a.spec for a in items}
    metrics.record_proofs((by_name[o.name].key_path, o.status == Status.PROVED, o.seconds) for o in outcomes if not o.written_before)
    progress.report_outcomes(outcomes + failed)
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


def write_proofs(files: Sequence[tuple[bytes, bytes, str, str]]) -> list[bool | OSError]:
    """Write proofs, each (proof bytes, public bytes, proof path, public path), in one group write
    (:func:`~distprove.formats.atomic.write_group`) so that each proof file appears exactly once, whole.

    Each public file is deterministic (the witness's public signals), so it is atomically
    replaced; each proof file is hard-linked into place only if no attempt created it first, and
    only after its public file is in place and durable: a proof file's existence means its public
    file is complete. Per proof: True (written), False (an earlier attempt had written the proof:
    it is left as it is), or the OSError that failed this proof alone.
    """
    results: list[bool | OSError] = [False] * len(files)
    made: dict[str, OSError | None] = {}  # each output folder, created once (or why it cannot be)
    entries: list[list[Target]] = []
    index: list[int] = []
    for i, (proof, public, proof_path, public_path) in enumerate(files):
        problem = None
        for directory in {os.path.dirname(public_path) or ".", os.path.dirname(proof_path) or "."}:
            if directory not in made:
                try:
                    os.makedirs(directory, exist_ok=True)
                    made[directory] = None
                except OSError as exc:
                    made[directory] = exc
            problem = problem or made[directory]
        if problem is not None:
            results[i] = problem
        else:
            entries.append([Target(public_path, public), Target(proof_path, proof, exclusive=True)])
            index.append(i)
    for i, result in zip(index, write_group(entries)):
        results[i] = result
    return results


def write_once(proof_json: dict, public_json: list[str], proof_path: str, public_path: str) -> bool:
    """Write one proof's files as :func:`write_proofs` does (``proof_json``, ``public_json``: their
    JSON content). Returns False when an earlier attempt had already written the proof; raises
    the OSError of a failed write."""
    result = write_proofs([(json_bytes(proof_json), json_bytes(public_json), proof_path, public_path)])[0]
    if isinstance(result, OSError):
        raise result
    return result


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
