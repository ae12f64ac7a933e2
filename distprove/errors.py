"""The one error type users see: a file (or item) and what is wrong with it, on one line."""

from __future__ import annotations

import os


class DistproveError(Exception):
    """Base class of every error distprove raises on purpose."""


class FormatError(DistproveError):
    """A file is malformed or does not fit its counterpart (wrong key for a witness, ...).

    ``str(err)`` is ``"<path>: <problem>"``, one line, suitable for the CLI and batch reports.
    """

    def __init__(self, path: str | os.PathLike[str], problem: str) -> None:
        self.path = os.fspath(path)
        self.problem = problem
        super().__init__(f"{self.path}: {problem}")


class OutputExists(FormatError):
    """An output (a key store, ...) already exists and replacing it was not asked for.

    The message names the API's word (``overwrite=True``); the command line says ``--overwrite``.
    """

    def __init__(self, path: str | os.PathLike[str]) -> None:
        super().__init__(path, "already exists (pass overwrite=True to replace it)")


class InvalidProofError(DistproveError):
    """A proof was made but does not verify (e.g. the witness does not satisfy the circuit)."""


class BackendUnavailable(DistproveError):
    """The requested backend (e.g. ``gpu``) cannot run on this machine."""


def one_line(exc: BaseException) -> str:
    """A failed item's reason on one line: a :class:`FormatError` as it reads ("<path>: <problem>"),
    anything else as "<type>: <first line of its message>"."""
    if isinstance(exc, FormatError):
        return str(exc)
    text = str(exc).strip().splitlines()
    return f"{type(exc).__name__}: {text[0] if text else ''}".rstrip(": ")
