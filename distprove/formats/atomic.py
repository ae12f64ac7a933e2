"""Atomic file writes: a file appears under its name whole, or not at all."""

from __future__ import annotations

import os
import tempfile
from collections.abc import Callable
from typing import BinaryIO


def write_atomic(
    path: str | os.PathLike[str], write: Callable[[BinaryIO], object], *, exclusive: bool = False, durable: bool = True
) -> bool:
    """Call ``write(f)`` on a temporary file beside ``path``, fsync it, then move it into place.

    By default the file replaces ``path`` (:func:`os.replace`). With ``exclusive`` it is
    hard-linked to ``path`` only if nothing is there yet, so concurrent or repeated writers
    leave exactly one file; the result is False when ``path`` already existed. On any error the
    temporary file is removed and the error propagates; ``path`` is never partial.
    ``durable=False`` leaves out the two fsyncs (the file's and its folder's), for scratch files
    that a crash may lose: on a VM's disk they took 0.8 ms where writing a 1,023-value witness
    took 0.05 ms.
    """
    path = os.fspath(path)
    directory = os.path.dirname(os.path.abspath(path))
    fd, tmp = tempfile.mkstemp(prefix=f".{os.path.basename(path)}.", suffix=".tmp", dir=directory)
    try:
        os.fchmod(fd, 0o644)
        with os.fdopen(fd, "wb") as f:
            write(f)
            f.flush()
            if durable:
                os.fsync(f.fileno())
        if exclusive:
            try:
                os.link(tmp, path)
            except FileExistsError:
                return False
        else:
            os.replace(tmp, path)
    finally:
        if os.path.exists(tmp):
            os.unlink(tmp)
    if durable:
        _fsync_directory(directory)
    return True


def _fsync_directory(directory: str) -> None:
    """Make the rename durable where the platform allows it (best effort)."""
    try:
        dfd = os.open(directory, os.O_RDONLY)
    except OSError:
        return
    try:
        os.fsync(dfd)
    except OSError:
        pass
    finally:
        os.close(dfd)
