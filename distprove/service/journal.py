"""The service's journal: every accepted request, durable before its ``202``, in SQLite.

One table, ``requests`` (id, key name, idempotency key, status, reason, times), in WAL mode. A
request's witness is a file of the state folder (:class:`StateDir`), written before its row; the
service's journal commits a group of inserts without an fsync and then makes the group's witness
files and the WAL durable together (one syncfs and one fsync: :class:`Journal`'s
``make_durable``), before any of them is answered ``202``, so an accepted request survives a crash,
a ``kill -9`` or a power cut (as far as the disk keeps its syncs); a row whose witness a power cut
lost was never acknowledged, and the next start forgets it. Inserts are committed in groups: a
request arriving while a commit is on the disk waits for it and goes in the next one with every
other request that arrived meanwhile, so the accept rate is not one request per disk sync. A
request's proof and public files are written in the state folder by the proof task, exactly once
(:func:`distprove.cluster.output.write_proofs`).

Statuses kept here: ``queued`` (accepted, not finished: proved again after a restart unless its
proof file exists), ``done`` and ``failed`` (with the reason). Whether a queued request is being
proved is the running service's knowledge only (:mod:`distprove.service.grouping`).
"""

from __future__ import annotations

import os
import sqlite3
import threading
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path

from distprove.formats.atomic import fsync_path

QUEUED, PROVING, DONE, FAILED = "queued", "proving", "done", "failed"
FINAL = (DONE, FAILED)


class _Insert:
    """A request waiting for its group commit: filled with the id it got, or the error."""

    __slots__ = ("rid", "key", "idem", "created", "done", "result", "error")

    def __init__(self, rid: str, key: str, idem: str | None) -> None:
        self.rid, self.key, self.idem, self.created = rid, key, idem, time.time()
        self.done, self.result = False, ""
        self.error: BaseException | None = None

    def take(self) -> str:
        """The id, or raise the commit's error."""
        if self.error is not None:
            raise self.error
        return self.result


@dataclass(frozen=True)
class Request:
    """One journaled request."""

    id: str
    key: str
    status: str
    reason: str
    created: float
    finished: float | None


class StateDir:
    """The service's state folder: ``journal.sqlite``, ``witnesses/<id>.wtns`` (an accepted
    request's witness, deleted once it is finished) and ``results/<id>.proof.json`` and
    ``<id>.public.json`` (a proof, kept for the retention time)."""

    def __init__(self, root: str | os.PathLike[str]) -> None:
        self.root = Path(root)
        self.witnesses = self.root / "witnesses"
        self.results = self.root / "results"
        for d in (self.root, self.witnesses, self.results):
            d.mkdir(parents=True, exist_ok=True)

    def witness(self, rid: str) -> str:
        return str(self.witnesses / f"{rid}.wtns")

    def proof(self, rid: str) -> str:
        return str(self.results / f"{rid}.proof.json")

    def public(self, rid: str) -> str:
        return str(self.results / f"{rid}.public.json")

    def clean(self, keep: set[str]) -> None:
        """Delete every file of ``witnesses/`` but those named in ``keep``, and the temporary files
        of ``results/`` (what a crash left: a witness stored but never journaled, a partial write)."""
        for name in os.listdir(self.witnesses):
            if name not in keep:
                os.unlink(self.witnesses / name)
        for name in os.listdir(self.results):
            if name.startswith(".") and name.endswith(".tmp"):
                os.unlink(self.results / name)

    def remove(self, rid: str, results: bool = True) -> None:
        """Delete a request's witness and, with ``results``, its proof (first) and public files."""
        paths = [self.witness(rid)] + ([self.proof(rid), self.public(rid)] if results else [])
        for p in paths:
            try:
                os.unlink(p)
            except FileNotFoundError:
                pass


_SCHEMA = """
CREATE TABLE IF NOT EXISTS requests (
    id TEXT PRIMARY KEY,
    key TEXT NOT NULL,
    idem TEXT UNIQUE,
    status TEXT NOT NULL,
    reason TEXT NOT NULL DEFAULT '',
    created REAL NOT NULL,
    finished REAL
);
CREATE INDEX IF NOT EXISTS requests_status ON requests (status);
CREATE INDEX IF NOT EXISTS requests_finished ON requests (finished);
"""


class Journal:
    """The ``requests`` table of one state folder; safe to call from any thread (one connection
    behind a lock: each call is one short statement)."""

    def __init__(self, path: str | os.PathLike[str], make_durable: Callable[[list[str]], None] | None = None) -> None:
        """``make_durable``: called by a group commit with the ids of its inserts after their
        transaction is committed without an fsync and before any of them returns; it makes the
        requests' files durable (the service: one syncfs of the state folder's filesystem), and
        the journal's WAL is fsynced after it. Without it the commit itself waits for the disk
        (``synchronous=FULL``)."""
        self._path = os.fspath(path)
        self._make_durable = make_durable
        self._db = sqlite3.connect(self._path, check_same_thread=False, isolation_level=None)
        self._lock = threading.Lock()
        self._group = threading.Condition()  # the inserts waiting for a commit, and whether one runs
        self._waiting: list[_Insert] = []
        self._committing = False
        with self._lock:
            self._db.execute("PRAGMA journal_mode=WAL")
            self._db.execute("PRAGMA synchronous=FULL")
            self._db.executescript(_SCHEMA)

    def close(self) -> None:
        with self._lock:
            self._db.close()

    def add(self, rid: str, key: str, idem: str | None) -> str:
        """Journal an accepted request (committed, durable, when this returns) and return its id;
        with an ``idem`` that an earlier request holds, nothing is added and that request's id is
        returned. The caller that finds no commit running commits every waiting insert in one
        transaction (a group commit); the others wait for theirs."""
        me = _Insert(rid, key, idem)
        with self._group:
            self._waiting.append(me)
            while not me.done and self._committing:
                self._group.wait()
            if me.done:
                return me.take()
            self._committing = True
            batch, self._waiting = self._waiting, []
        try:
            self._commit(batch)
        finally:
            with self._group:
                self._committing = False
                self._group.notify_all()
        return me.take()

    def _commit(self, batch: list[_Insert]) -> None:
        """Insert ``batch`` in one transaction; each insert gets its id (its own, or for an
        idempotency key already held, the holder's) or its error."""
        try:
            with self._lock, self._unsynced(self._make_durable is not None):
                self._db.execute("BEGIN")
                try:
                    for ins in batch:
                        try:
                            ins.result = self._insert(ins)
                        except sqlite3.IntegrityError as exc:  # this insert alone
                            ins.error = exc
                    self._db.execute("COMMIT")
                except BaseException:
                    self._db.execute("ROLLBACK")
                    raise
            if self._make_durable is not None:
                self._make_durable([ins.rid for ins in batch if ins.error is None and ins.result == ins.rid])
                fsync_path(self._path + "-wal")
        except BaseException as exc:  # the disk, or the database: every insert of the group fails
            for ins in batch:
                ins.error = exc
        for ins in batch:
            ins.done = True

    @contextmanager
    def _unsynced(self, on: bool = True) -> Iterator[None]:
        """With ``on``, this connection's commits inside do not wait for the disk
        (``synchronous=NORMAL``), FULL again after (called with the lock)."""
        if not on:
            yield
            return
        self._db.execute("PRAGMA synchronous=NORMAL")
        try:
            yield
        finally:
            self._db.execute("PRAGMA synchronous=FULL")

    def _insert(self, ins: _Insert) -> str:
        """One insert of a group (called in its transaction, with the lock)."""
        try:
            self._db.execute(
                "INSERT INTO requests (id, key, idem, status, created) VALUES (?, ?, ?, ?, ?)",
                (ins.rid, ins.key, ins.idem, QUEUED, ins.created),
            )
            return ins.rid
        except sqlite3.IntegrityError:  # only this statement is undone; the transaction goes on
            if ins.idem is None:
                raise
            row = self._db.execute("SELECT id FROM requests WHERE idem = ?", (ins.idem,)).fetchone()
            if row is None:
                raise
            return str(row[0])

    def by_idem(self, idem: str) -> str | None:
        """The id of the request that holds the idempotency key ``idem``, if any."""
        with self._lock:
            row = self._db.execute("SELECT id FROM requests WHERE idem = ?", (idem,)).fetchone()
        return None if row is None else str(row[0])

    def get(self, rid: str) -> Request | None:
        with self._lock:
            row = self._db.execute(
                "SELECT id, key, status, reason, created, finished FROM requests WHERE id = ?", (rid,)
            ).fetchone()
        return None if row is None else Request(*row)

    def finish(self, results: list[tuple[str, str, str]]) -> None:
        """Record finished requests, each (id, ``done`` or ``failed``, reason), in one transaction,
        committed without waiting for the disk (``synchronous=NORMAL`` for it): a finish lost to a
        power cut leaves the request queued, and the next start finds its proof file (written
        durably before the request finished) and marks it done; a failed one is tried again and
        fails again (its witness was deleted once it finished: the new reason says so). So a
        result's fetch does not wait for an fsync it does not need."""
        now = time.time()
        with self._lock, self._unsynced():
            self._db.execute("BEGIN")
            self._db.executemany(
                "UPDATE requests SET status = ?, reason = ?, finished = ? WHERE id = ? AND status = ?",
                [(status, reason, now, rid, QUEUED) for rid, status, reason in results],
            )
            self._db.execute("COMMIT")

    def unfinished(self) -> list[Request]:
        """The queued requests, oldest first (what a restarted service proves)."""
        with self._lock:
            rows = self._db.execute(
                "SELECT id, key, status, reason, created, finished FROM requests WHERE status = ? ORDER BY created",
                (QUEUED,),
            ).fetchall()
        return [Request(*r) for r in rows]

    def expired(self, before: float) -> list[str]:
        """Ids of the requests finished before ``before`` (epoch seconds)."""
        with self._lock:
            rows = self._db.execute("SELECT id FROM requests WHERE finished IS NOT NULL AND finished < ?", (before,)).fetchall()
        return [str(r[0]) for r in rows]

    def forget(self, ids: list[str]) -> None:
        """Delete these requests' rows (their files are the caller's)."""
        with self._lock:
            self._db.execute("BEGIN")
            self._db.executemany("DELETE FROM requests WHERE id = ?", [(i,) for i in ids])
            self._db.execute("COMMIT")
