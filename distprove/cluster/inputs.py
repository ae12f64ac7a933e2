"""Which files of a witness folder a batch may read: regular ``*.wtns`` files that stay inside it.

A batch reads whatever ``*.wtns`` it finds under the folder it is given, on workers that may run
with more rights than the person who filled the folder. :func:`safe_witness_paths` therefore
refuses, each with a one-line reason, entries that are

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
import os
import stat
from collections.abc import Iterable, Iterator
from pathlib import Path

from distprove.errors import FormatError

WITNESS_SUFFIX = ".wtns"

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
