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
from collections.abc import Iterable
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


def check_witness_entry(path: Path, root: Path) -> str | None:
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
    found: list[Path] = []
    for dirpath, dirnames, filenames in os.walk(root, followlinks=False):
        here = Path(dirpath)
        # entries named *.wtns among the folders too (a folder, or a link to one, is refused below)
        names = [n for n in (*filenames, *dirnames) if n.endswith(WITNESS_SUFFIX) and not n.startswith(".")]
        found += [here / n for n in names]
        dirnames[:] = sorted(d for d in dirnames if not d.startswith(".") and (here / d).resolve() not in skip)
    paths: list[Path] = []
    rejected: list[FormatError] = []
    for p in sorted(found):
        reason = check_witness_entry(p, root)
        if reason is None:
            paths.append(p)
        else:
            rejected.append(FormatError(p, reason))
    return paths, rejected
