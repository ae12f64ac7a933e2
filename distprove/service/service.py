"""The proving service's core, without HTTP: accept a request (validate, store, journal, queue),
answer what became of it, recover after a restart, forget old results.

Everything here is synchronous; :mod:`distprove.service.app` calls it from its thread pool.
Errors a client caused are :class:`RequestError` (an HTTP status and one line); no message, log
line or metric carries a witness value or an input.
"""

from __future__ import annotations

import json
import logging
import os
import threading
import time
import uuid
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import dask

from distprove.errors import FormatError
from distprove.service.grouping import Dispatcher, ServedKey
from distprove.service.journal import DONE, FAILED, PROVING, QUEUED, Journal, StateDir
from distprove.service.metrics import ServiceMetrics

log = logging.getLogger(__name__)

WTNS = "application/octet-stream"
INPUTS = "application/json"


class RequestError(Exception):
    """A request the service refuses: its HTTP ``status`` and one line; ``retry_after`` (seconds)
    for a full queue."""

    def __init__(self, status: int, message: str, retry_after: int | None = None) -> None:
        super().__init__(message)
        self.status, self.message, self.retry_after = status, message.splitlines()[0] if message else "", retry_after


@dataclass(frozen=True)
class ServeSettings:
    """``distprove.serve`` in the dask configuration (``distprove/distprove.yaml`` documents each)."""

    gather_window: float
    group_cap: int
    groups_in_flight: int | None
    max_queue: int
    retry_after: int
    max_body_bytes: int
    retention: float
    max_wait: float
    verify: bool

    @classmethod
    def read(cls) -> ServeSettings:
        """The current values; a bad one raises FormatError naming it."""
        from dask.utils import parse_bytes, parse_timedelta

        def get(name: str) -> Any:
            return dask.config.get(f"distprove.serve.{name}")

        try:
            s = cls(
                gather_window=float(parse_timedelta(get("gather-window"), "s")),
                group_cap=int(get("group-cap")),
                groups_in_flight=None if get("groups-in-flight") is None else int(get("groups-in-flight")),
                max_queue=int(get("max-queue")),
                retry_after=int(parse_timedelta(get("retry-after"), "s")),
                max_body_bytes=int(parse_bytes(get("max-body-bytes"))),
                retention=float(parse_timedelta(get("retention"), "s")),
                max_wait=float(parse_timedelta(get("max-wait"), "s")),
                verify=bool(dask.config.get("distprove.verify", True)),
            )
        except (TypeError, ValueError, KeyError) as exc:
            raise FormatError("distprove.serve", f"bad setting: {exc}") from None
        if s.group_cap < 1 or s.max_queue < 1 or s.gather_window < 0 or s.max_body_bytes < 1:
            raise FormatError("distprove.serve", "group-cap, max-queue and max-body-bytes must be >= 1, gather-window >= 0")
        return s


def _problem(exc: FormatError) -> str:
    """A FormatError about a request's stored body, without the state folder's path."""
    return exc.problem


class ProvingService:
    """Accepted requests from the journal to their proofs, for the keys ``keys`` on ``client``'s
    cluster (the worker state registered, the keys planned: :func:`distprove.service.run.serve`).

    ``state_dir`` holds the accepted witnesses and the results: the workers read and write it, so
    on a cluster of several hosts it is shared storage mounted at the same path everywhere.
    ``journal``: the SQLite file (default ``state_dir/journal.sqlite``); SQLite's WAL needs a
    local file system, so where ``state_dir`` is a network one the journal goes elsewhere."""

    def __init__(
        self, client: Any, keys: dict[str, ServedKey], state_dir: str | os.PathLike[str], settings: ServeSettings,
        journal: str | os.PathLike[str] | None = None,
    ) -> None:
        self.keys, self.settings = keys, settings
        self.state = StateDir(state_dir)
        self.journal = Journal(journal or self.state.root / "journal.sqlite", make_durable=self._durable)
        self.metrics = ServiceMetrics(list(keys), self._depth)
        workers = sum(client.nthreads().values()) or 1
        self.dispatcher = Dispatcher(
            client, keys, self.state, self._finished,
            window=settings.gather_window, cap=settings.group_cap,
            in_flight=settings.groups_in_flight or 2 * workers, spread=workers, check=settings.verify,
        )
        self._accepted: dict[str, tuple[str, float]] = {}  # id -> (key, created epoch) of unfinished requests
        self._lock = threading.Lock()
        self._watchers: dict[str, list[Callable[[], None]]] = {}

    def _depth(self, key: str) -> int:
        return self.dispatcher.depth(key)

    # --- life ----------------------------------------------------------------------------------

    def start(self) -> int:
        """Queue every request the journal holds unfinished (those whose proof file exists were
        proved before a crash: they are marked done, not proved again; those whose witness a power
        cut lost before their 202 are forgotten), delete what a crash left half made (witnesses
        never journaled, temporary files), then start the dispatcher.
        Returns how many were queued again."""
        found, again, lost = [], 0, []
        for req in self.journal.unfinished():
            if req.key not in self.keys:
                found.append((req.id, FAILED, f"key {req.key!r} is not served any more"))
            elif os.path.exists(self.state.proof(req.id)):
                found.append((req.id, DONE, ""))
            elif not self._witness_intact(req.id, req.key):  # a power cut before its 202: never accepted
                lost.append(req.id)
            else:
                self._accepted[req.id] = (req.key, req.created)
                self.dispatcher.put(req.id, req.key)
                again += 1
        if lost:
            self.journal.forget(lost)
            for rid in lost:
                self.state.remove(rid)
            log.warning("forgot %d requests whose witness a crash lost before they were acknowledged", len(lost))
        if found:
            self.journal.finish(found)
            for rid, _, _ in found:
                self.state.remove(rid, results=False)
        self.state.clean({f"{rid}.wtns" for rid in self._accepted})
        self.dispatcher.start()
        if again:
            log.info("queued %d unfinished requests again", again)
        return again

    def _witness_intact(self, rid: str, key: str) -> bool:
        """Whether an unfinished request's stored witness is whole (a .wtns of its key's size)."""
        from distprove.formats.wtns import read_wtns

        try:
            return read_wtns(self.state.witness(rid), check_values=False).n_witness == self.keys[key].info.n_vars
        except (OSError, FormatError):
            return False

    def stop(self) -> None:
        self.dispatcher.stop()
        self.journal.close()

    def purge(self, now: float | None = None) -> int:
        """Forget the requests finished more than the retention time ago (rows, then files)."""
        ids = self.journal.expired((now or time.time()) - self.settings.retention)
        if ids:
            self.journal.forget(ids)
            for rid in ids:
                self.state.remove(rid)
        return len(ids)

    # --- accepting -----------------------------------------------------------------------------

    def key(self, name: str) -> ServedKey:
        key = self.keys.get(name)
        if key is None:
            raise RequestError(404, f"no key named {name!r} (GET /v1/keys lists them)")
        return key

    def accept(self, name: str, body: bytes, content_type: str, idem: str | None) -> tuple[str, bool]:
        """Validate, store (durably) and journal one request; returns (its id, whether it is new:
        False for a retry with an idempotency key already used). Raises RequestError."""
        key = self.key(name)
        if idem is not None:
            if not idem or len(idem) > 255:
                raise RequestError(400, "Idempotency-Key must be 1 to 255 characters")
            earlier = self.journal.by_idem(idem)
            if earlier is not None:
                return earlier, False
        if self.dispatcher.depth() >= self.settings.max_queue:
            self.metrics.rejected("queue-full")
            raise RequestError(429, f"queue full ({self.settings.max_queue} requests); retry later", self.settings.retry_after)
        rid = uuid.uuid4().hex
        path = self.state.witness(rid)
        kind = content_type.split(";")[0].strip().lower()
        try:
            if kind == WTNS:
                self._store_wtns(key, body, path)
            elif kind == INPUTS:
                self._store_inputs(key, body, rid, path)
            else:
                raise RequestError(415, f"Content-Type must be {WTNS} (a .wtns) or {INPUTS} (circom inputs), not {kind or 'none'!r}")
            created = time.time()
            got = self.journal.add(rid, name, idem)  # not under self._lock: concurrent accepts commit together
            if got == rid:
                with self._lock:  # before the dispatcher has it: nothing can finish it yet
                    self._accepted[rid] = (name, created)
        except BaseException:
            self.state.remove(rid, results=False)
            raise
        if got != rid:  # a concurrent retry with the same idempotency key won
            self.state.remove(rid, results=False)
            return got, False
        self.metrics.accepted(name)
        self.dispatcher.put(rid, name)
        return rid, True

    def _store_wtns(self, key: ServedKey, body: bytes, path: str) -> None:
        """Write the body durably where the workers read it, then check it there (one write; a
        body refused is removed by the caller, one a crash leaves unjournaled by :meth:`start`)."""
        from distprove.formats.atomic import write_atomic
        from distprove.formats.wtns import read_wtns

        write_atomic(path, lambda f: f.write(body), durable=False)  # durable with its journal row (_durable)
        try:
            w = read_wtns(path)
        except FormatError as exc:
            self.metrics.rejected("bad-body")
            raise RequestError(400, f"body: {_problem(exc)}") from None
        if w.n_witness != key.info.n_vars:
            self.metrics.rejected("bad-body")
            raise RequestError(400, f"body: witness has {w.n_witness} values but key {key.name!r} expects {key.info.n_vars} (nVars)")
        del w

    def _store_inputs(self, key: ServedKey, body: bytes, rid: str, path: str) -> None:
        from distprove.formats.wtns import write_wtns
        from distprove.witness.generators import calculate

        if not key.generator:
            raise RequestError(400, f"key {key.name!r} takes .wtns bodies only: {key.why_no_generator}")
        try:
            inputs = json.loads(body)
        except (json.JSONDecodeError, UnicodeDecodeError) as exc:
            self.metrics.rejected("bad-body")
            raise RequestError(400, f"body: not valid JSON: {exc}") from None
        if not isinstance(inputs, dict):
            self.metrics.rejected("bad-body")
            raise RequestError(400, f"body: expected a JSON object of input signals, found {type(inputs).__name__}")
        scratch = os.path.join(self.state.witnesses, f"{rid}.input.json")
        try:
            with open(scratch, "wb") as f:
                f.write(body)
            values = calculate(key.generator, scratch)
        except FormatError as exc:
            self.metrics.rejected("bad-body")
            problem = _problem(exc) if exc.path == scratch else str(exc)
            raise RequestError(400, f"body: {problem}") from None
        finally:
            try:
                os.unlink(scratch)
            except FileNotFoundError:
                pass
        if values.shape[0] != key.info.n_vars:
            raise RequestError(400, f"body: the witness generator made {values.shape[0]} values but key {key.name!r} expects {key.info.n_vars}")
        write_wtns(path, values, durable=False)  # durable with its journal row (_durable)

    def _durable(self, ids: list[str]) -> None:
        """Make the witnesses of ``ids`` (a group commit's requests) durable: one syncfs of the
        state folder's filesystem, else an fsync of each and of their folder."""
        from distprove.formats.atomic import fsync_path, sync_filesystem

        if sync_filesystem(self.state.witnesses):
            return
        for rid in ids:
            fsync_path(self.state.witness(rid))
        fsync_path(self.state.witnesses)

    # --- results -------------------------------------------------------------------------------

    def _finished(self, results: list[tuple[str, str, str]]) -> None:
        """The dispatcher's report of finished requests: journal them, then tell the watchers."""
        self.journal.finish(results)
        now = time.time()
        for rid, status, _ in results:
            self.state.remove(rid, results=False)
            with self._lock:
                key, created = self._accepted.pop(rid, ("", now))
                watchers = self._watchers.pop(rid, [])
            if key:
                self.metrics.finished(key, status, now - created)
            for w in watchers:
                w()

    def watch(self, rid: str, wake: Callable[[], None]) -> None:
        """Call ``wake`` (from another thread) when request ``rid`` finishes (at once if it has)."""
        with self._lock:
            if rid in self._accepted:
                self._watchers.setdefault(rid, []).append(wake)
                return
        wake()

    def unwatch(self, rid: str, wake: Callable[[], None]) -> None:
        with self._lock:
            ws = self._watchers.get(rid, [])
            if wake in ws:
                ws.remove(wake)

    def result(self, rid: str) -> dict[str, Any]:
        """What ``GET /v1/proofs/{id}`` answers; RequestError 404 for an unknown (or forgotten) id."""
        req = self.journal.get(rid)
        if req is None:
            raise RequestError(404, f"no request {rid!r} (unknown, or finished longer ago than the retention time)")
        out: dict[str, Any] = {"id": rid, "key": req.key}
        if req.status == DONE:
            try:
                with open(self.state.proof(rid), "rb") as f:
                    proof = json.load(f)
                with open(self.state.public(rid), "rb") as f:
                    public = json.load(f)
            except FileNotFoundError:  # forgotten between the two reads
                raise RequestError(404, f"no request {rid!r} (finished longer ago than the retention time)") from None
            out.update(status=DONE, proof=proof, public=public)
        elif req.status == FAILED:
            out.update(status=FAILED, reason=req.reason)
        else:
            out["status"] = PROVING if self.dispatcher.is_proving(rid) else QUEUED
        return out
