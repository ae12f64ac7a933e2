"""Finding a batch's witnesses and their keys.

Keys: ``key=``, else ``distprove.key`` in the dask configuration, else the key found beside the
witnesses: the nearest folder holding a key store or ``.zkey``, from the witness's own up to
the batch folder and then its parent (the layout ``project/circuit.zkey``,
``project/witnesses/*.wtns``), provides it. A key store wins over ``.zkey`` files; two of a kind
in one folder is an error for the whole batch, and so is finding no key for any witness (the
error names the folders searched). So a mixed batch is one subfolder per key. Outputs go to
``out_dir`` (default: the configured ``output.dir``, ``proofs``, inside the batch folder),
keeping the witnesses' subfolders. Batches from inputs find theirs the same way
(:mod:`distprove.cluster.inputbatch`).
"""

from __future__ import annotations

import json
import os
from collections.abc import Iterable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from distprove import config
from distprove.cluster.inputs import safe_witness_paths
from distprove.errors import FormatError


@dataclass(frozen=True)
class Job:
    """A witness found in the batch folder, with its key (or why it has none) and output paths."""

    name: str
    witness: str
    key: str | None
    proof_path: str
    public_path: str
    error: str = ""


def is_key_store(path: Path) -> bool:
    """True for a folder holding a distprove zarr key store (its zarr.json names the layout)."""
    meta = path / "zarr.json"
    if not meta.is_file():
        return False
    try:
        return "distprove" in json.loads(meta.read_text(encoding="utf-8")).get("attributes", {})
    except (OSError, ValueError, AttributeError):
        return False


def keys_in(directory: Path) -> list[Path]:
    """The keys directly in ``directory``: its key stores if it has any, else its ``.zkey`` files."""
    entries = sorted(directory.iterdir())
    stores = [p for p in entries if p.is_dir() and is_key_store(p)]
    return stores or [p for p in entries if p.is_file() and p.suffix == ".zkey"]


def key_beside(directory: Path, root: Path, cache: dict[Path, list[Path]]) -> tuple[str | None, list[Path]]:
    """(key path, folders searched) for the nearest folder with a key from ``directory`` up to
    ``root`` and then ``root``'s parent; (None, folders searched) when none has one.

    Raises FormatError naming the folder when one holds two keys of a kind."""
    searched = []
    d = directory
    while True:
        if d not in cache:
            cache[d] = keys_in(d)
        searched.append(d)
        found = cache[d]
        if len(found) == 1:
            return str(found[0]), searched
        if len(found) > 1:
            names = ", ".join(p.name for p in found)
            raise FormatError(d, f"{len(found)} keys in one folder ({names}); keep one key per folder or name the key to use")
        if d == root.parent or d == d.parent:
            return None, searched
        d = d.parent


def listing(folders: Iterable[Path], most: int = 6) -> str:
    """Folders for a message: the first ``most``, then how many more."""
    folders = list(dict.fromkeys(folders))
    text = ", ".join(str(f) for f in folders[:most])
    return text + (f" and {len(folders) - most} more" if len(folders) > most else "")


def batch_folders(
    folder: str | os.PathLike[str], key: str | os.PathLike[str] | None, out_dir: str | os.PathLike[str] | None, what: str
) -> tuple[Path, Path, Any]:
    """A batch's folder (resolved; FormatError unless it is a folder of ``what``), its output
    folder (``out_dir``, else the configured name inside it) and the key given or configured
    (FormatError when it names nothing)."""
    settings = config.settings()
    root = Path(folder).resolve()
    if not root.is_dir():
        raise FormatError(folder, f"not a folder of {what}")
    out = Path(out_dir).resolve() if out_dir is not None else root / settings.out_dir
    chosen = key if key is not None else settings.key
    if chosen is not None and not Path(chosen).exists():
        raise FormatError(chosen, "no such key store or .zkey file")
    return root, out, chosen


def discover(witness_dir: str | os.PathLike[str], key: str | os.PathLike[str] | None = None, out_dir: str | os.PathLike[str] | None = None) -> list[Job]:
    """The ``*.wtns`` files under ``witness_dir`` (recursively, sorted), each matched to its key.

    A witness with no key beside it gets ``error`` set and will be reported as failed, when
    other witnesses have theirs. Raises FormatError when no witness has a key (naming the folders
    searched), when a folder holds two keys, and when there is no witness at all.
    """
    settings = config.settings()
    root, out, chosen = batch_folders(witness_dir, key, out_dir, "witnesses")
    witnesses, rejected = safe_witness_paths(root, exclude=[out])
    if not witnesses and not rejected:
        raise FormatError(witness_dir, "no *.wtns files found")
    cache: dict[Path, list[Path]] = {}
    searched: list[Path] = []
    chosen_key = str(Path(chosen).resolve()) if chosen is not None else None
    jobs = []
    root_s, out_s = str(root), str(out)
    for w in witnesses:
        rel = str(w)[len(root_s) + 1 :]  # found under the folder: its path there
        proof, public = settings.output_paths(w, os.path.join(out_s, os.path.dirname(rel)))
        if chosen_key is not None:
            key_path, error = chosen_key, ""
        else:
            key_path, folders = key_beside(w.parent, root, cache)
            searched += folders
            error = "" if key_path else f"no key store or .zkey found beside it (searched {listing(folders)}); pass key="
        jobs.append(Job(job_name(rel), str(w), key_path, str(proof), str(public), error))
    if witnesses and not any(j.key for j in jobs):
        raise FormatError(
            witness_dir,
            f"no key store or .zkey found for any witness (searched {listing(searched)}); "
            "put the key in the witness folder or its parent, or pass key=",
        )
    for err in rejected:  # links leaving the folder, FIFOs, unreadable entries: failed, with the reason
        w = Path(err.path)
        rel = err.path[len(root_s) + 1 :]
        proof, public = settings.output_paths(w, os.path.join(out_s, os.path.dirname(rel)))
        jobs.append(Job(job_name(rel), str(w), None, str(proof), str(public), err.problem))
    return sorted(jobs, key=lambda j: j.name)


def job_name(rel: str, suffix: str = ".wtns") -> str:
    """A witness's (or input's) name in reports and task keys: its path ``rel`` under the batch's
    folder, less its ``suffix``, with ``/`` between folders."""
    return rel.removesuffix(suffix).replace(os.sep, "/")


def key_label(key_path: str) -> str:
    """A key's (or wasm's) name in task keys and messages: its file or folder name."""
    return os.path.basename(os.path.normpath(key_path))
