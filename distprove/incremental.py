"""Incremental mode for scheduled runs: prove only the witnesses that arrived since the last run.

A run keeps a state file (``distprove.incremental.state-file``, default
``.distprove-state.json``) in its output folder, rewritten atomically after each group of
finished proofs. It records, per witness name, the witness's fingerprint (size and mtime), the
key's content hash and the SHA-256 of the proof and public files written for it; and the
witnesses that failed, with the error.

:func:`select_new` skips a witness when

1. the state records it as done, for the same key, with the same witness fingerprint, and the
   proof and public files on disk still have the recorded hashes; or
2. its proof and public files exist, the public signals are the witness's, and the proof verifies
   against the key's verification key (this covers proofs written by a run that died before it
   could update the state, and a lost state file; such proofs are adopted into the state); or
3. the state records it as failed with the same fingerprint and key (unless ``retry_failed``).

Everything else is returned, to be proved. Running the same selection twice proves nothing
twice, a killed run resumes where its written proofs end, and a replaced witness (new size or
mtime) is proved again. :func:`run_lock` keeps two runs (say, a slow run and the next cron tick)
off the same output folder.
"""

from __future__ import annotations

import fcntl
import hashlib
import json
import os
import time
from collections.abc import Iterable, Iterator, Sequence
from contextlib import contextmanager
from pathlib import Path
from typing import Any

from . import config
from .errors import DistproveError, FormatError

STATE_VERSION = 1
LOCK_NAME = ".distprove.lock"

PathLike = str | os.PathLike[str]


class RunLocked(DistproveError):
    """Another distprove run holds the output folder's lock."""


def state_path(out_dir: PathLike) -> Path:
    """The state file of an output folder (its name from ``distprove.incremental.state-file``)."""
    return Path(out_dir) / config.settings().state_file


def _sha256(path: Path) -> str | None:
    try:
        return hashlib.sha256(path.read_bytes()).hexdigest()
    except FileNotFoundError:
        return None


def _fingerprint(witness: PathLike) -> dict[str, int] | None:
    try:
        st = os.stat(witness)
    except FileNotFoundError:
        return None
    return {"size": st.st_size, "mtime_ns": st.st_mtime_ns}


def _key_hash(key: Any) -> str | None:
    return None if key is None else str(key.content_hash)


def load_state(out_dir: PathLike) -> dict[str, Any]:
    """The state of ``out_dir`` (an empty one when there is no state file yet).

    A state file that is not valid JSON of this layout raises FormatError: delete it and the next
    run rebuilds it from the proofs that verify.
    """
    path = state_path(out_dir)
    try:
        text = path.read_text(encoding="utf-8")
    except FileNotFoundError:
        return {"version": STATE_VERSION, "done": {}, "failed": {}}
    try:
        state = json.loads(text)
    except json.JSONDecodeError as exc:
        raise FormatError(path, f"not valid JSON ({exc.msg} at line {exc.lineno}); delete it to rebuild it from the proofs") from None
    if (
        not isinstance(state, dict)
        or state.get("version") != STATE_VERSION
        or not isinstance(state.get("done"), dict)
        or not isinstance(state.get("failed"), dict)
    ):
        raise FormatError(path, f"not a distprove state file of version {STATE_VERSION}; delete it to rebuild it from the proofs")
    return state


def _save_state(out_dir: PathLike, state: dict[str, Any]) -> None:
    from .formats.jsonio import write_json_atomic

    Path(out_dir).mkdir(parents=True, exist_ok=True)
    write_json_atomic(state_path(out_dir), state)


def _done_entry(witness: PathLike, out_dir: PathLike, key: Any) -> dict[str, Any]:
    proof, public = config.settings().output_paths(witness, out_dir)
    return {
        "witness": _fingerprint(witness),
        "key": _key_hash(key),
        "proof_sha256": _sha256(proof),
        "public_sha256": _sha256(public),
        "time": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()),
    }


def _recorded_done(entry: Any, witness: PathLike, out_dir: PathLike, key: Any) -> bool:
    """Rule 1: the state's record still describes the witness and the files on disk."""
    if not isinstance(entry, dict) or entry.get("witness") != _fingerprint(witness):
        return False
    if key is not None and entry.get("key") != _key_hash(key):
        return False
    proof, public = config.settings().output_paths(witness, out_dir)
    proof_hash, public_hash = _sha256(proof), _sha256(public)
    return (
        proof_hash is not None
        and public_hash is not None
        and entry.get("proof_sha256") == proof_hash
        and entry.get("public_sha256") == public_hash
    )


def _recorded_failed(entry: Any, witness: PathLike, key: Any) -> bool:
    """Rule 3: the same witness already failed with the same key."""
    return (
        isinstance(entry, dict)
        and entry.get("witness") == _fingerprint(witness)
        and (key is None or entry.get("key") == _key_hash(key))
    )


def _verifies(witness: PathLike, out_dir: PathLike, vk: Any) -> bool:
    """Rule 2: proof and public files exist, carry the witness's public signals, and verify
    against ``vk`` (a parsed VerificationKey)."""
    from . import bn254
    from .formats.jsonio import read_public
    from .formats.wtns import read_wtns
    from .verify import verify

    proof, public = config.settings().output_paths(witness, out_dir)
    if vk is None or not proof.is_file() or not public.is_file():
        return False
    try:
        values = read_wtns(witness).values
        if bn254.ints_from_limbs(values[1 : 1 + vk.n_public]) != read_public(public):
            return False
        return verify(vk, public, proof)
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

    ``key`` (an opened key: its ``content_hash`` and ``vk_json()``) ties the state to one key and
    lets existing proofs that the state does not know be verified and adopted; ``vk`` (a
    verification_key.json path or dict) does the latter without a key. With neither, only the
    state's records count. Adopted proofs are written into the state before returning. Two
    witnesses with the same name (which would share output files) raise FormatError.
    """
    witnesses = [Path(w) for w in witness_paths]
    seen: dict[str, Path] = {}
    for w in witnesses:
        name = config.witness_name(w)
        if name in seen:
            raise FormatError(w, f"has the same name as {seen[name]}; their proofs would overwrite each other")
        seen[name] = w
    from .formats.jsonio import read_vk

    if vk is None and key is not None:
        vk = key.vk_json()
    vkey = None if vk is None else read_vk(vk)
    state = load_state(out_dir)
    todo: list[Path] = []
    adopted: list[Path] = []
    for w in witnesses:
        name = config.witness_name(w)
        if _recorded_done(state["done"].get(name), w, out_dir, key):
            continue
        if _verifies(w, out_dir, vkey):
            adopted.append(w)
            continue
        if not retry_failed and _recorded_failed(state["failed"].get(name), w, key):
            continue
        todo.append(w)
    if adopted:
        mark_done(out_dir, adopted, key=key)
    return todo


def mark_done(out_dir: PathLike, witness_paths: Sequence[PathLike], *, key: Any = None) -> None:
    """Record that the proofs of ``witness_paths`` are written in ``out_dir`` (one atomic state rewrite).

    Call it after the proof and public files exist; pass a group of finished witnesses at once
    to keep rewrites few. Their earlier failures, if any, are forgotten.
    """
    state = load_state(out_dir)
    for w in witness_paths:
        name = config.witness_name(w)
        state["done"][name] = _done_entry(w, out_dir, key)
        state["failed"].pop(name, None)
    _save_state(out_dir, state)


def mark_failed(out_dir: PathLike, failures: Sequence[tuple[PathLike, str]], *, key: Any = None) -> None:
    """Record witnesses whose proof failed, each with its one-line error, so later runs skip them
    until the witness file changes (or ``select_new(..., retry_failed=True)``)."""
    state = load_state(out_dir)
    for w, error in failures:
        name = config.witness_name(w)
        state["failed"][name] = {
            "witness": _fingerprint(w),
            "key": _key_hash(key),
            "error": error,
            "time": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()),
        }
        state["done"].pop(name, None)
    _save_state(out_dir, state)


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
