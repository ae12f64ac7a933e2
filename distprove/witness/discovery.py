"""Finding a batch's witnesses and inputs, their keys and circuits, and which files it may read.

Witness folders (:func:`discover`): the ``*.wtns`` files under the folder, recursively. Keys:
``key=``, else ``distprove.key`` in the dask configuration, else the key found beside the
witnesses: the nearest folder holding a key store or ``.zkey``, from the witness's own up to
the batch folder and then its parent (the layout ``project/circuit.zkey``,
``project/witnesses/*.wtns``), provides it. A key store wins over ``.zkey`` files; two of a kind
in one folder is an error for the whole batch, and so is finding no key for any witness (the
error names the folders searched). So a mixed batch is one subfolder per key. Outputs go to
``out_dir`` (default: the configured ``output.dir``, ``proofs``, inside the batch folder),
keeping the witnesses' subfolders.

Input folders (:func:`discover_inputs`): the ``*.json`` files under the folder (recursively;
hidden entries, the output folder, key stores and ``verification_key.json`` left out), each
matched to its key as a witness is, and to the circuit's witness generator: ``generator=``
(``--witness-gen``), else the one beside the key, a native one before a ``.wasm``
(:func:`generator_beside`). A folder holding ``*.json`` and no ``*.wtns`` is an input folder
(:func:`discover_any`).

Which files a batch may read: a batch reads whatever ``*.wtns`` (or ``*.json`` input) it finds
under the folder it is given, on workers that may run with more rights than the person who
filled the folder. :func:`check_witness_entry` (and :func:`safe_witness_paths`, for a witness
folder) therefore refuses, each with a one-line reason, entries that are

* symbolic links whose target lies outside the witness folder (or that point nowhere),
* not regular files (FIFOs, sockets, devices, folders named ``*.wtns``): reading a FIFO would
  block a worker forever,
* not openable for reading (permission denied, I/O errors).

Links whose target stays inside the folder are accepted. Symbolic links to folders are not
descended into, and hidden entries (a path part starting with ``.``) are ignored, as are the
folders given in ``exclude`` (the output folder). A refused entry does not stop the others.

The check runs where the batch is planned; a file swapped for a link after that moment is not
caught here (the threat is a careless or hostile folder, not a race with its owner).
"""

from __future__ import annotations

import errno
import json
import os
import stat
from collections.abc import Iterable, Iterator
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any

from distprove import config
from distprove.errors import FormatError

WITNESS_SUFFIX = ".wtns"
INPUT_SUFFIX = ".json"
SCRATCH_DIR = ".witnesses"
"""The folder, inside the output folder, of an input batch's scratch witnesses."""
NOT_INPUTS = ("verification_key.json",)
"""File names never taken as inputs (a key's companion that often sits beside it)."""

_KINDS = {
    stat.S_IFIFO: "a FIFO (named pipe)",
    stat.S_IFSOCK: "a socket",
    stat.S_IFCHR: "a character device",
    stat.S_IFBLK: "a block device",
    stat.S_IFDIR: "a folder",
}


def _kind(mode: int) -> str:
    return _KINDS.get(stat.S_IFMT(mode), "not a regular file")


def _inside(target: Path, root: Path) -> bool:
    return target == root or root in target.parents


def check_witness_entry(path: str | Path, root: Path) -> str | None:
    """Why ``path`` (an entry under the resolved folder ``root``) must not be read, or None when it may."""
    try:
        lst = os.lstat(path)
    except OSError as exc:
        return f"cannot stat: {exc.strerror or exc}"
    if stat.S_ISLNK(lst.st_mode):
        target = Path(os.path.realpath(path))
        if not _inside(target, root):
            return f"symlink to {target}, outside the witness folder {root}; not followed"
        try:
            st = os.stat(path)
        except OSError as exc:
            if exc.errno in (errno.ENOENT, errno.ELOOP):
                return f"dangling symlink (its target {os.readlink(path)} does not exist)"
            return f"cannot stat its target: {exc.strerror or exc}"
    else:
        st = lst
    if not stat.S_ISREG(st.st_mode):
        return f"is {_kind(st.st_mode)}, not a witness file; not read"
    try:
        fd = os.open(path, os.O_RDONLY | getattr(os, "O_NONBLOCK", 0))
    except OSError as exc:
        return f"cannot open for reading: {exc.strerror or exc}"
    os.close(fd)
    return None


def tree_order(path: str) -> list[str]:
    """A sort key putting paths in the order of their parts (a folder's files together, as
    :class:`~pathlib.Path` sorts them), at a fraction of the cost of comparing Paths."""
    return path.split(os.sep)


def _witness_entries(root: Path, skip: set[Path]) -> Iterator[str]:
    """The ``*.wtns`` entries under ``root`` in walk order (entries named so among the folders too:
    a folder, or a link to one, is refused by :func:`check_witness_entry`), hidden entries and the
    folders in ``skip`` left out."""
    for dirpath, dirnames, filenames in os.walk(root, followlinks=False):
        for n in (*filenames, *dirnames):
            if n.endswith(WITNESS_SUFFIX) and not n.startswith("."):
                yield os.path.join(dirpath, n)
        dirnames[:] = sorted(d for d in dirnames if not d.startswith(".") and Path(dirpath, d).resolve() not in skip)


def has_witness_entries(witness_dir: str | os.PathLike[str], exclude: Iterable[str | os.PathLike[str]] = ()) -> bool:
    """Whether :func:`safe_witness_paths` would find any entry (accepted or refused), without
    checking them: one folder listing when the folder holds witnesses."""
    skip = {Path(e).resolve() for e in exclude}
    return next(_witness_entries(Path(witness_dir).resolve(), skip), None) is not None


def safe_witness_paths(
    witness_dir: str | os.PathLike[str], exclude: Iterable[str | os.PathLike[str]] = ()
) -> tuple[list[Path], list[FormatError]]:
    """The ``*.wtns`` entries under ``witness_dir`` (recursively, sorted) split into those a batch
    may read and those it must not (each a :class:`FormatError` naming the entry and why).

    Accepted paths are returned as found (under the resolved ``witness_dir``), not resolved.
    Raises FormatError when ``witness_dir`` is not a folder.
    """
    root = Path(witness_dir).resolve()
    if not root.is_dir():
        raise FormatError(witness_dir, "not a folder of witnesses")
    skip = {Path(e).resolve() for e in exclude}
    paths: list[Path] = []
    rejected: list[FormatError] = []
    for p in sorted(_witness_entries(root, skip), key=tree_order):
        reason = check_witness_entry(p, root)
        if reason is None:
            paths.append(Path(p))
        else:
            rejected.append(FormatError(p, reason))
    return paths, rejected


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
        raise FormatError(witness_dir, "no *.wtns witnesses or *.json inputs found")
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


@dataclass(frozen=True)
class InputJob(Job):
    """A :class:`Job` whose ``witness`` is an input file: its circuit's witness ``generator``
    (:mod:`distprove.witness.generators`) and ``wtns``, the path its computed witness is written to."""

    generator: str = ""
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
    refused ones (links out of the folder, FIFOs, ...: :func:`check_witness_entry`)."""
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


def generator_beside(key_path: str) -> tuple[str, str]:
    """(the circuit's witness generator in the key's folder, "") or ("", why there is none). A
    native one is preferred to a ``.wasm`` when both are there: a built binary
    (an executable with ``<binary>.dat`` beside it) first, then a ``<name>_cpp/`` folder written
    by ``circom --c``, then a ``*.wasm``; two of the kind chosen is an error."""
    from distprove.witness.generators import is_circom_c_folder, is_native_binary

    folder = Path(key_path).parent
    try:
        entries = sorted(folder.iterdir())
    except OSError as exc:
        return "", f"cannot list the key's folder {folder}: {exc.strerror or exc}"
    kinds = (
        ([p for p in entries if p.suffix != ".wasm" and is_native_binary(p)], "generator binaries (with a .dat)"),
        ([p for p in entries if p.name.endswith("_cpp") and is_circom_c_folder(p)], "folders written by circom --c"),
        ([p for p in entries if p.suffix == ".wasm" and p.is_file()], ".wasm files"),
    )
    for found, what in kinds:
        if len(found) == 1:
            return str(found[0]), ""
        if found:
            return "", f"{len(found)} {what} beside the key in {folder}; pass --witness-gen"
    return "", (f"no witness generator beside the key in {folder} (a .wasm, a <name>_cpp folder written by "
                "circom --c, or its binary); pass --witness-gen")


def discover_inputs(
    input_dir: str | os.PathLike[str],
    key: str | os.PathLike[str] | None = None,
    out_dir: str | os.PathLike[str] | None = None,
    generator: str | os.PathLike[str] | None = None,
    keep_witnesses: bool = False,
) -> list[InputJob]:
    """The ``*.json`` inputs under ``input_dir``, each with its key, witness generator
    (``generator``, else the one beside its key: :func:`generator_beside`) and output paths (a
    job that cannot run has ``error`` set and is reported as failed). Raises FormatError for a
    ``generator`` that is no witness generator."""
    from distprove.witness.generators import kind

    settings = config.settings()
    root, out, chosen = batch_folders(input_dir, key, out_dir, "inputs")
    if generator is not None:
        kind(generator)
    inputs, rejected = input_paths(root, [out])
    if not inputs and not rejected:
        raise FormatError(input_dir, "no *.json inputs found")
    cache: dict[Path, list[Path]] = {}
    searched: list[Path] = []
    keyed = False  # some readable input has a key
    chosen_key = str(Path(chosen).resolve()) if chosen is not None else None
    circuit_given = str(Path(generator).resolve()) if generator is not None else ""
    jobs = []
    root_s, out_s = str(root), str(out)
    beside: dict[str, tuple[str, str]] = {}  # key path -> generator_beside(key path)
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
                beside[key_path] = generator_beside(key_path)
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
    return sorted(check_generators(jobs), key=lambda j: j.name)


def check_generators(jobs: list[InputJob]) -> list[InputJob]:
    """Check each (generator, key) pair of ``jobs`` once, in this process, before any cluster:
    the generator opens and computes witnesses of the key's nVars and prime
    (:func:`~distprove.witness.pool.check_circuit`). The inputs of a refused pair get its one-line
    reason as their error; when that leaves no input to prove, the first refusal is raised
    instead. A key whose header cannot be read is left to the batch, which reports it."""
    from distprove.errors import DistproveError
    from distprove.keystore import open_header
    from distprove.witness.pool import check_circuit

    refused: dict[tuple[str, str], str] = {}
    first: FormatError | None = None
    out = []
    for job in jobs:
        if not job.error and job.key:
            pair = (job.generator, job.key)
            if pair not in refused:
                refused[pair] = ""
                try:
                    n_vars = open_header(job.key).n_vars
                except DistproveError:  # the key's own problem: the batch reports it
                    n_vars = None
                if n_vars is not None:
                    try:
                        check_circuit(job.generator, n_vars, job.key)
                    except FormatError as exc:
                        refused[pair], first = str(exc), first or exc
            if refused[pair]:
                job = replace(job, key=None, error=refused[pair])
        out.append(job)
    if first is not None and not any(j.key and not j.error for j in out):
        raise FormatError(first.path, first.problem)
    return out


def discover_any(
    folder: str | os.PathLike[str],
    key: str | os.PathLike[str] | None = None,
    out_dir: str | os.PathLike[str] | None = None,
    generator: str | os.PathLike[str] | None = None,
    keep_witnesses: bool = False,
) -> list[Job]:
    """:func:`discover_inputs` for an input folder (or whenever ``generator`` is given), else the
    witness folder's jobs (:func:`discover`)."""
    if generator is not None or holds_inputs(folder, out_dir):
        return list(discover_inputs(folder, key, out_dir, generator, keep_witnesses))
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


def job_name(rel: str, suffix: str = ".wtns") -> str:
    """A witness's (or input's) name in reports and task keys: its path ``rel`` under the batch's
    folder, less its ``suffix``, with ``/`` between folders."""
    return rel.removesuffix(suffix).replace(os.sep, "/")


def key_label(key_path: str) -> str:
    """A key's (or witness generator's) name in task keys and messages: its file or folder name."""
    return os.path.basename(os.path.normpath(key_path))
