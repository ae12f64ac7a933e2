"""Incremental mode for scheduled runs: prove only the witnesses that arrived since the last run.

A run keeps a state file (``distprove.incremental.state-file``, default
``.distprove-state.json``) in its output folder, rewritten atomically as proofs finish. Per
witness name it records the witness's fingerprint (size and mtime), the key's content hash and
the SHA-256 of the proof and public files; and the witnesses that failed for a reason of their
own (a malformed witness, a proof that does not verify), with that reason.

A witness is skipped when

1. the state records it as done, for the same key, with the same witness fingerprint, and the
   proof and public files on disk still have the recorded hashes (no pairing needed); or
2. its proof and public files exist, carry the witness's public signals and verify (this covers
   proofs written by a run that died before it could update the state, and a lost state file;
   such proofs are adopted into the state); or
3. the state records it as failed with the same fingerprint and key (unless ``retry_failed``).

So running twice proves nothing twice, a killed run resumes where its written proofs end, and a
replaced witness (new size or mtime) is proved again. :func:`run_lock` keeps two runs (a slow
run and the next cron tick) off one output folder.

Two entry points: :func:`batch` is ``distprove.batch`` for scheduled runs (rule 2 runs on the
workers there); :func:`select_new` / :func:`mark_done` / :func:`mark_failed` are the same rules
for a flat folder (``<out_dir>/<name><suffix>``) and a caller that proves by itself.
"""

from __future__ import annotations

import fcntl
import hashlib
import json
import os
import time
from collections.abc import Callable, Iterable, Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from distprove import config
from distprove.errors import DistproveError, FormatError

STATE_VERSION = 1
LOCK_NAME = ".distprove.lock"
SAVE_INTERVAL_S = 5.0
"""During a batch the state is rewritten at most this often (and once at the end)."""

PathLike = str | os.PathLike[str]


class RunLocked(DistproveError):
    """Another distprove run holds the output folder's lock."""


@dataclass(frozen=True)
class Item:
    """One witness and the output files of its proof (``distprove.witness.discovery.Job`` has the same fields)."""

    name: str
    witness: str
    proof_path: str
    public_path: str


def _now() -> str:
    return time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime())


def _sha256(path: PathLike) -> str | None:
    try:
        return hashlib.sha256(Path(path).read_bytes()).hexdigest()
    except FileNotFoundError:
        return None


def _fingerprint(path: PathLike) -> dict[str, int] | None:
    try:
        st = os.stat(path)
    except FileNotFoundError:
        return None
    return {"size": st.st_size, "mtime_ns": st.st_mtime_ns}


class State:
    """The state file of one output folder, held in memory; :meth:`save` rewrites it atomically."""

    def __init__(self, out_dir: PathLike) -> None:
        self.path = Path(out_dir) / config.settings().state_file
        self.data = self._load()
        self._saved_at = time.monotonic()

    def _load(self) -> dict[str, Any]:
        try:
            text = self.path.read_text(encoding="utf-8")
        except FileNotFoundError:
            return {"version": STATE_VERSION, "done": {}, "failed": {}, "keys": {}}
        try:
            data = json.loads(text)
        except json.JSONDecodeError as exc:
            raise FormatError(self.path, f"not valid JSON ({exc.msg} at line {exc.lineno}); delete it to rebuild it from the proofs") from None
        if not isinstance(data, dict) or data.get("version") != STATE_VERSION or not all(
            isinstance(data.get(part), dict) for part in ("done", "failed", "keys")
        ):
            raise FormatError(self.path, f"not a distprove state file of version {STATE_VERSION}; delete it to rebuild it from the proofs")
        return data

    def save(self) -> None:
        """Rewrite the state file atomically (it is whole, old or new, whenever the run stops)."""
        from distprove.formats.jsonio import write_json_atomic

        self.path.parent.mkdir(parents=True, exist_ok=True)
        write_json_atomic(self.path, self.data)
        self._saved_at = time.monotonic()

    def save_soon(self) -> None:
        """:meth:`save` if the last save is :data:`SAVE_INTERVAL_S` old (unsaved records are
        recovered by rule 2 if the run dies)."""
        if time.monotonic() - self._saved_at >= SAVE_INTERVAL_S:
            self.save()

    def key_id(self, key_path: PathLike) -> str:
        """The content hash of a key store or .zkey (a .zkey's SHA-256 is cached by size and mtime)."""
        from distprove.keystore import KeyStore, file_sha256

        p = Path(key_path)
        if p.is_dir():
            return KeyStore(p).content_hash
        path, fp = str(p.resolve()), _fingerprint(p)
        cached = self.data["keys"].get(path)
        if isinstance(cached, dict) and cached.get("file") == fp and isinstance(cached.get("sha256"), str):
            return cached["sha256"]
        digest = file_sha256(p)
        self.data["keys"][path] = {"file": fp, "sha256": digest}
        return digest

    def is_done(self, item: Item, key_id: str | None) -> bool:
        """Rule 1: the record still describes the witness, the key and the files on disk."""
        entry = self.data["done"].get(item.name)
        if not isinstance(entry, dict) or entry.get("witness") != _fingerprint(item.witness):
            return False
        if key_id is not None and entry.get("key") != key_id:
            return False
        proof_hash, public_hash = _sha256(item.proof_path), _sha256(item.public_path)
        return (
            proof_hash is not None
            and public_hash is not None
            and entry.get("proof_sha256") == proof_hash
            and entry.get("public_sha256") == public_hash
        )

    def is_failed(self, item: Item, key_id: str | None) -> bool:
        """Rule 3: the same witness already failed with the same key."""
        entry = self.data["failed"].get(item.name)
        return (
            isinstance(entry, dict)
            and entry.get("witness") == _fingerprint(item.witness)
            and (key_id is None or entry.get("key") == key_id)
        )

    def done(self, item: Item, key_id: str | None) -> None:
        """Record that the proof of ``item`` is written (call after its files exist)."""
        self.data["failed"].pop(item.name, None)
        self.data["done"][item.name] = {
            "witness": _fingerprint(item.witness),
            "key": key_id,
            "proof_sha256": _sha256(item.proof_path),
            "public_sha256": _sha256(item.public_path),
            "time": _now(),
        }

    def failed(self, item: Item, key_id: str | None, reason: str) -> None:
        """Record that ``item`` failed for a reason of its own (skipped until the witness changes)."""
        self.data["done"].pop(item.name, None)
        self.data["failed"][item.name] = {"witness": _fingerprint(item.witness), "key": key_id, "reason": reason, "time": _now()}


# --- flat folders: a caller that proves by itself ------------------------------------------------


def _items(witness_paths: Iterable[PathLike], out_dir: PathLike) -> list[Item]:
    settings = config.settings()
    items: dict[str, Item] = {}
    for w in witness_paths:
        name = config.witness_name(w)
        if name in items:
            raise FormatError(w, f"has the same name as {items[name].witness}; their proofs would overwrite each other")
        proof, public = settings.output_paths(w, out_dir)
        items[name] = Item(name, os.fspath(w), str(proof), str(public))
    return list(items.values())


def _verifies(item: Item, vk: Any) -> bool:
    """Rule 2 on this machine: the files exist, carry the witness's public signals, and verify."""
    from distprove import bn254
    from distprove.formats.jsonio import read_public
    from distprove.formats.wtns import read_wtns
    from distprove.verifier import verify

    if not (os.path.isfile(item.proof_path) and os.path.isfile(item.public_path)):
        return False
    try:
        values = read_wtns(item.witness).values
        if bn254.ints_from_limbs(values[1 : 1 + vk.n_public]) != read_public(item.public_path):
            return False
        return verify(vk, item.public_path, item.proof_path)
    except (FormatError, OSError):
        return False


def select_new(
    witness_paths: Iterable[PathLike],
    out_dir: PathLike,
    *,
    key: Any = None,
    vk: Any = None,
    retry_failed: bool = False,
) -> list[Path]:
    """The witnesses of ``witness_paths`` that still need a proof in ``out_dir``, in the given order.

    Outputs are ``<out_dir>/<name><suffix>`` (:meth:`distprove.config.Settings.output_paths`).
    ``key`` (an opened key: its ``content_hash`` and ``vk_json()``) ties the state to one key and
    lets existing proofs that the state does not know be verified here and adopted; ``vk`` (a
    verification_key.json path or dict) does the latter without a key. With neither, only the
    state's records count. Adopted proofs are saved into the state before returning. Two
    witnesses with the same name (which would share output files) raise FormatError.
    """
    from distprove.formats.jsonio import read_vk

    items = _items(witness_paths, out_dir)
    if vk is None and key is not None:
        vk = key.vk_json()
    vkey = None if vk is None else read_vk(vk)
    key_id = None if key is None else str(key.content_hash)
    state = State(out_dir)
    todo: list[Path] = []
    adopted = False
    for item in items:
        if state.is_done(item, key_id):
            continue
        if vkey is not None and _verifies(item, vkey):
            state.done(item, key_id)
            adopted = True
            continue
        if not retry_failed and state.is_failed(item, key_id):
            continue
        todo.append(Path(item.witness))
    if adopted:
        state.save()
    return todo


def mark_done(out_dir: PathLike, witness_paths: Sequence[PathLike], *, key: Any = None) -> None:
    """Record that the proofs of ``witness_paths`` are written in ``out_dir`` (one atomic rewrite;
    pass a group of finished witnesses at once). Their earlier failures are forgotten."""
    state = State(out_dir)
    for item in _items(witness_paths, out_dir):
        state.done(item, None if key is None else str(key.content_hash))
    state.save()


def mark_failed(out_dir: PathLike, failures: Sequence[tuple[PathLike, str]], *, key: Any = None) -> None:
    """Record witnesses whose proof failed, each with its one-line reason, so later runs skip
    them until the witness file changes (or ``select_new(..., retry_failed=True)``)."""
    state = State(out_dir)
    reasons = {config.witness_name(w): reason for w, reason in failures}
    for item in _items([w for w, _ in failures], out_dir):
        state.failed(item, None if key is None else str(key.content_hash), reasons[item.name])
    state.save()


# --- distprove.batch for scheduled runs ----------------------------------------------------------


def _own_failure(job: Any, reason: str) -> bool:
    """Whether a failure is the witness's own (worth remembering) rather than the cluster's or the key's."""
    return reason.startswith(f"{job.witness}:") or "does not verify" in reason


def _out_dir(witness_dir: PathLike, out_dir: PathLike | None) -> Path:
    """The output folder ``distprove.batch.discover`` uses."""
    return Path(out_dir).resolve() if out_dir is not None else Path(witness_dir).resolve() / config.settings().out_dir


def _split(jobs: Sequence[Any], state: State, key_ids: dict[str, str], retry_failed: bool) -> tuple[list[Any], list[Any]]:
    """(jobs to run, ProofResults of the jobs skipped by rules 1 and 3)."""
    from distprove.cluster.batching import ProofResult
    from distprove.cluster.tasks import Status

    todo, known = [], []
    for job in jobs:
        kid = key_ids.get(job.key) if job.key else None
        if job.key and state.is_done(job, kid):
            reason = "recorded as proved in the state file"
        elif job.key and not retry_failed and state.is_failed(job, kid):
            reason = f"failed before, unchanged since: {state.data['failed'][job.name].get('reason', '')}"
        else:
            todo.append(job)
            continue
        known.append(ProofResult(job.name, job.witness, Status.SKIPPED, reason, job.proof_path, job.public_path))
    return todo, known


def pending(witness_dir: PathLike, key: PathLike | None = None, out_dir: PathLike | None = None, *, retry_failed: bool = False) -> list[Any]:
    """The ``distprove.witness.discovery.Job`` s that :func:`batch` would send to the cluster (rules 1 and 3
    only: a proof the state does not know is still listed), e.g. to skip starting GPU jobs."""
    from distprove.witness.discovery import discover_any

    jobs = discover_any(witness_dir, key, out_dir)
    state = State(_out_dir(witness_dir, out_dir))
    key_ids = {kp: state.key_id(kp) for kp in sorted({j.key for j in jobs if j.key})}
    return _split(jobs, state, key_ids, retry_failed)[0]


def batch(
    witness_dir: PathLike,
    key: PathLike | None = None,
    out_dir: PathLike | None = None,
    client: Any = None,
    *,
    retry_failed: bool = False,
    **options: Any,
) -> Any:
    """``distprove.batch`` for scheduled runs: prove only what has no proof yet; a BatchReport.

    Takes the arguments and options of :func:`distprove.batch.batch`. Holds the output folder's
    :func:`run_lock` (raises :class:`RunLocked` when another run holds it), skips witnesses by
    rules 1 and 3 (reported as ``skipped``; the ``distprove.batch`` run then applies rule 2 on
    the workers) and records every result in the state file. When nothing is new, no cluster is
    started or contacted.
    """
    from distprove.cluster.batching import BatchOptions, BatchReport, ensure_worker_state, run_jobs
    from distprove.cluster.client import connect
    from distprove.cluster.inputbatch import ensure_witness_pool
    from distprove.witness.discovery import discover_any
    from distprove.cluster.tasks import Status

    t0 = time.perf_counter()
    settings = config.settings()
    opts = BatchOptions(**options)
    jobs = discover_any(witness_dir, key, out_dir, opts.witness_gen, opts.keep_witnesses)  # an input job's fingerprint is its input's
    with run_lock(_out_dir(witness_dir, out_dir)):
        state = State(_out_dir(witness_dir, out_dir))
        key_ids = {kp: state.key_id(kp) for kp in sorted({j.key for j in jobs if j.key})}
        todo, known = _split(jobs, state, key_ids, retry_failed)
        by_name = {job.name: job for job in todo}
        caller_on_result: Callable[[Any], Any] | None = opts.on_result

        def on_result(res: Any) -> None:
            job = by_name[res.name]
            kid = key_ids.get(job.key) if job.key else None
            if res.status in (Status.PROVED, Status.SKIPPED):
                state.done(job, kid)
            elif res.status == Status.FAILED and job.key and _own_failure(job, res.reason):
                state.failed(job, kid, res.reason)
            state.save_soon()
            if caller_on_result is not None:
                caller_on_result(res)

        opts.on_result = on_result
        inner = BatchReport([], 0.0)
        if todo:
            backend = opts.backend or settings.backend
            with connect(
                client, scheduler=opts.scheduler, backend=backend, n_workers=opts.n_workers,
                witness_workers=opts.witness_workers, workers_per_gpu=opts.workers_per_gpu, host=opts.host, dashboard_address=opts.dashboard_address,
                keys=[job.key for job in todo],
            ) as c:
                ensure_worker_state(c, backend, opts.max_keys or settings.key_cache_count, settings.key_cache_gpu_bytes)
                ensure_witness_pool(c, todo)
                inner = run_jobs(c, todo, opts)
        state.save()
    order = {job.name: i for i, job in enumerate(jobs)}
    results = sorted(known + inner.results, key=lambda r: order[r.name])
    report = BatchReport(results, time.perf_counter() - t0, inner.mode, inner.workers, inner.stage_seconds, inner.checked,
                         inner.witness_workers)
    if opts.echo is not None:
        opts.echo(report.summary())
    return report


@contextmanager
def run_lock(out_dir: PathLike) -> Iterator[None]:
    """Hold ``out_dir``'s run lock for the ``with`` block; raise RunLocked at once if another run holds it.

    The lock is an ``flock`` on ``out_dir/.distprove.lock``, released when the process ends, so
    a killed run never leaves it stuck. (On NFS, flock is only as good as the server's lock support.)
    """
    out = Path(out_dir)
    out.mkdir(parents=True, exist_ok=True)
    fd = os.open(out / LOCK_NAME, os.O_RDWR | os.O_CREAT, 0o644)
    try:
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            raise RunLocked(f"{out}: another distprove run is writing to this folder (lock {LOCK_NAME}); try again later") from None
        yield
    finally:
        os.close(fd)
