"""From accepted requests to the batch's grouped proof tasks: the gathering window.

Requests of one key wait in that key's queue until ``group-cap`` of them are there, the oldest
has waited ``gather-window`` seconds, or a worker thread has no task (waiting would only idle
it: a request to an idle service goes at once); they are then proved by ONE prove-whole task, the batch's
own (:func:`distprove.cluster.work.prove_group`, which checks every proof with one batched
pairing check and writes the checked ones once each), so a service under load proves in the
groups a batch of the same requests would. A due queue is cut into ``spread`` groups (the
worker threads) while that keeps them under the cap, so that a burst is shared by every worker
rather than proved by one. At most ``groups-in-flight`` tasks run at once (default: two per
worker thread), so that a busy service's queues fill the next groups while the workers prove
the current ones.

The dispatcher is one thread of the service process holding the Dask client; each task's end
wakes it (a future callback) and it reports every request's end through ``on_finished``.
"""

from __future__ import annotations

import logging
import threading
import time
import uuid
from collections import deque
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from distprove.cluster.taskkeys import PROVE_WHOLE
from distprove.cluster.tasks import KeyInfo, Outcome, ProofSpec, Status, failure_reason
from distprove.service.journal import DONE, FAILED, StateDir

log = logging.getLogger(__name__)

POLL = 0.05
"""Seconds between the dispatcher's looks at its queues and tasks when nothing woke it (a
request queued and a task's end wake it at once)."""


@dataclass(frozen=True)
class ServedKey:
    """A key the service proves with: its name in the API, where it is, what a worker said of it
    (:class:`~distprove.cluster.tasks.KeyInfo`, with the verification key) and its witness
    generator for circom inputs ("" when there is none: ``why_no_generator`` says why)."""

    name: str
    path: str
    info: KeyInfo
    generator: str
    why_no_generator: str = ""


Finished = Callable[[list[tuple[str, str, str]]], None]
"""Called with (id, ``done`` or ``failed``, reason) for each request of a finished group."""


class Dispatcher:
    """The key queues, the gathering window and the proof tasks in flight (see the module doc)."""

    def __init__(
        self, client: Any, keys: dict[str, ServedKey], state: StateDir, on_finished: Finished, *,
        window: float, cap: int, in_flight: int, spread: int = 1, check: bool = True,
    ) -> None:
        self.client, self.keys, self.state, self.on_finished = client, keys, state, on_finished
        self.window, self.cap, self.in_flight, self.check = window, max(1, cap), max(1, in_flight), check
        self.spread = max(1, spread)
        self.tag = uuid.uuid4().hex[:8]
        self._queues: dict[str, deque[tuple[str, float]]] = {name: deque() for name in keys}
        self._running: dict[Any, tuple[str, list[str]]] = {}
        self._proving: dict[str, str] = {}  # id -> key of requests taken from a queue and not finished
        self._lock = threading.Condition()
        self._stop = False
        self._woken = False
        self._thread = threading.Thread(target=self._run, name="distprove-serve-dispatcher", daemon=True)
        self._groups = 0

    # --- what the routes ask -------------------------------------------------------------------

    def put(self, rid: str, key: str) -> None:
        """Queue an accepted (journaled) request of key ``key``."""
        with self._lock:
            self._queues[key].append((rid, time.monotonic()))
            self._woken = True
            self._lock.notify()

    def depth(self, key: str | None = None) -> int:
        """Requests queued or being proved (of ``key``, else of all keys)."""
        with self._lock:
            queues = [self._queues[key]] if key is not None else list(self._queues.values())
            taken = len(self._proving) if key is None else sum(1 for k in self._proving.values() if k == key)
            return sum(len(q) for q in queues) + taken

    def queued(self, key: str) -> int:
        """Requests of ``key`` waiting for their group."""
        with self._lock:
            return len(self._queues[key])

    def is_proving(self, rid: str) -> bool:
        with self._lock:
            return rid in self._proving

    # --- the thread ----------------------------------------------------------------------------

    def start(self) -> None:
        self._thread.start()

    def stop(self) -> None:
        """Stop submitting and polling; tasks still running are left (their requests stay queued
        in the journal and are proved by the next start, or found written)."""
        with self._lock:
            self._stop = True
            self._lock.notify()
        self._thread.join(timeout=10)

    def _due(self, now: float) -> list[tuple[str, list[str]]]:
        """Take the groups that are due, while task slots are free (called with the lock)."""
        groups: list[tuple[str, list[str]]] = []
        for name, q in self._queues.items():
            size = min(self.cap, -(-len(q) // self.spread))  # the queue as it is, cut once
            while q and len(self._running) + len(groups) < self.in_flight and (
                len(q) >= self.cap or now - q[0][1] >= self.window or len(self._running) + len(groups) < self.spread
            ):
                ids = [q.popleft()[0] for _ in range(min(size, len(q)))]
                groups.append((name, ids))
        return groups

    def _submit(self, name: str, ids: list[str]) -> Any:
        from distprove.cluster.work import prove_group

        key = self.keys[name]
        specs = [
            ProofSpec(rid, self.state.witness(rid), key.info.path, key.info.content_hash, self.state.proof(rid), self.state.public(rid))
            for rid in ids
        ]
        self._groups += 1
        label = f"{name}:{self._groups}+{len(ids) - 1}"
        return self.client.submit(
            prove_group, specs, None, True, True, self.check, key=(PROVE_WHOLE, label, self.tag), pure=False,
        )

    def _run(self) -> None:
        while True:
            with self._lock:
                if self._stop:
                    return
                due = self._due(time.monotonic())
                for name, ids in due:
                    self._proving.update(dict.fromkeys(ids, name))
            for name, ids in due:
                try:
                    fut = self._submit(name, ids)
                except Exception as exc:  # the client is closing, or cannot reach the scheduler
                    if self._stopping():
                        return
                    self._finish(ids, [], failure_reason(exc))
                    continue
                with self._lock:
                    self._running[fut] = (name, ids)
                fut.add_done_callback(self._wake)
            done = [f for f in list(self._running) if f.done()]
            for fut in done:
                self._collect(fut)
            if not due and not done:
                with self._lock:
                    if not self._stop and not self._woken:
                        self._lock.wait(self._timeout(time.monotonic()))
                    self._woken = False

    def _wake(self, _: Any = None) -> None:
        with self._lock:
            self._woken = True
            self._lock.notify()

    def _timeout(self, now: float) -> float:
        """Seconds until the oldest queued request's window ends, at most POLL (called with the
        lock); POLL when it has ended (then only a task's end, which wakes the thread, frees a slot)."""
        oldest = min((q[0][1] for q in self._queues.values() if q), default=None)
        left = POLL if oldest is None else oldest + self.window - now
        return POLL if left <= 0 else min(POLL, left)

    def _stopping(self) -> bool:
        with self._lock:
            return self._stop

    def _collect(self, fut: Any) -> None:
        ids = self._running[fut][1]
        if fut.status in ("lost", "pending"):  # its worker died after it finished: it runs again
            return
        try:
            outcomes: list[Outcome] = fut.result()
            reason = ""
        except BaseException as exc:  # the task failed (KilledWorker, cancelled): the whole group
            if self._stopping():
                return
            outcomes, reason = [], failure_reason(exc)
        fut.release()
        self._finish(ids, outcomes, reason)
        with self._lock:
            del self._running[fut]

    def _finish(self, ids: list[str], outcomes: list[Outcome], reason: str) -> None:
        by_id = {o.name: o for o in outcomes}
        results = []
        for rid in ids:
            o = by_id.get(rid)
            if o is not None and o.status == Status.PROVED:
                results.append((rid, DONE, ""))
            else:
                results.append((rid, FAILED, o.reason if o is not None else reason or "no outcome from its proof task"))
        self.on_finished(results)
        with self._lock:
            for rid in ids:
                self._proving.pop(rid, None)
