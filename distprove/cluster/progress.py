"""A batch's progress in proofs, as the scheduler learns it: what the workers and the client send,
and the tally the scheduler keeps of it.

Two senders, one Dask event topic (:data:`TOPIC`, ``log_event``; the scheduler plugin of
:mod:`distprove.cluster.dashboard` reads it):

* a worker, each time it checks and writes a group of proofs (:func:`report_outcomes`, from
  :func:`distprove.cluster.output.verify_write` and a prove task's finisher): the proofs it wrote
  and failed, its address, the group's stage seconds. This is the live count: a group is counted
  once it is on disk, not when its task ends (a prove-whole task streams many groups).
* the client (:class:`ClientProgress`): the batch's total when it starts, its own counts of
  proved, failed and skipped proofs as results arrive (at most every :data:`CLIENT_EVERY`
  seconds; they also cover what no worker reports: tasks that raised, skipped outputs) and its
  final counts when it ends; and each group its own pool checks and writes (``verify-in:
  client``), as a worker reports its groups.

:class:`BatchTally` takes, during the batch, the larger of the two counts, and at the end the
client's, which are exact. Nothing here runs a Dask task or holds a worker's slot.
"""

from __future__ import annotations

import contextvars
import logging
import time
from collections import deque
from collections.abc import Iterable, Iterator, Mapping
from contextlib import contextmanager
from dataclasses import dataclass, field
from typing import Any

from distprove.cluster.tasks import Outcome, Status

log = logging.getLogger(__name__)

TOPIC = "distprove-proofs"
"""The Dask event topic of the progress messages."""

CLIENT_EVERY = 0.5
"""Seconds between two of the client's progress messages (its final one is always sent)."""

HISTORY_POINTS = 2000
"""Points of a batch's (seconds, proofs done) history kept on the scheduler (thinned beyond)."""

RATE_WINDOW = 5.0
"""Seconds over which the page's proofs per second are measured."""

_batch: contextvars.ContextVar[str] = contextvars.ContextVar("distprove_batch", default="")


def task_batch() -> str:
    """The batch of the task running in this thread: the tag that ends its key (every key
    :mod:`distprove.cluster.graph` submits ends with the batch's tag), "" outside a task."""
    from distributed.worker import thread_state

    key = getattr(thread_state, "key", None)
    return str(key[-1]) if isinstance(key, tuple) and key else ""


@contextmanager
def in_task_batch() -> Iterator[None]:
    """Within: threads started with a copy of this context (a prove task's finisher) report for
    this task's batch."""
    token = _batch.set(task_batch())
    try:
        yield
    finally:
        _batch.reset(token)


def report_outcomes(outcomes: Iterable[Outcome]) -> None:
    """On a worker: tell the scheduler which proofs of a group were written and which failed
    (a proof an earlier attempt wrote is not counted again). Outside a worker: nothing."""
    from distributed import get_worker

    try:
        worker = get_worker()
    except ValueError:  # not on a worker (the client's pool, a test)
        return
    msg = group_message(_batch.get() or task_batch(), worker.address, outcomes)
    if msg is not None:
        try:
            worker.log_event(TOPIC, msg)
        except Exception as exc:  # the proofs are written: a lost count must not fail them
            log.warning("progress of a group not sent to the scheduler: %s", exc)


def group_message(batch: str, where: str, outcomes: Iterable[Outcome]) -> dict[str, Any] | None:
    """The message of a group written at ``where`` (a worker's address, a process of the client's
    pool): its proofs written and failed, their stage seconds summed; None when it holds
    neither (every proof written before)."""
    proved = failed = 0
    seconds: dict[str, float] = {}
    for o in outcomes:
        if o.written_before:
            continue
        if o.status == Status.PROVED:
            proved += 1
            for stage, s in o.seconds.items():
                seconds[str(stage)] = seconds.get(str(stage), 0.0) + float(s)  # plain floats: msgpack packs them
        elif o.status == Status.FAILED:
            failed += 1
    if not (proved or failed):
        return None
    return {"batch": batch, "worker": where, "proved": proved, "failed": failed, "seconds": seconds}


class ClientProgress:
    """The client's side of a batch's progress, a context manager around the batch: entering
    sends the total, :meth:`result` counts each result (sent at most every :data:`CLIENT_EVERY`
    seconds), leaving sends the exact counts as final. A scheduler that cannot take the
    message leaves the batch unaffected (logged once)."""

    def __init__(self, client: Any, batch: str, total: int) -> None:
        self.client, self.batch, self.total = client, batch, total
        self.counts = {Status.PROVED: 0, Status.FAILED: 0, Status.SKIPPED: 0}
        self._sent = 0.0
        self._broken = False

    def __enter__(self) -> ClientProgress:
        self._send(final=False)
        return self

    def __exit__(self, *exc: object) -> None:
        self._send(final=True)

    def result(self, status: Status) -> None:
        """One proof ended with ``status``."""
        self.counts[status] += 1
        if time.monotonic() - self._sent >= CLIENT_EVERY:
            self._send(final=False)

    def pool_group(self, outcomes: list[Outcome]) -> None:
        """A group the client's own pool checked and wrote: reported as a worker reports its
        groups (:func:`group_message`), by the pool's process, which no worker does."""
        msg = group_message(self.batch, outcomes[0].worker if outcomes else "", outcomes)
        if msg is not None:
            self._log(msg)

    def _send(self, final: bool) -> None:
        self._sent = time.monotonic()
        self._log({"batch": self.batch, "total": self.total, "final": final, **{str(s): n for s, n in self.counts.items()}})

    def _log(self, msg: dict[str, Any]) -> None:
        if self._broken:
            return
        try:
            self.client.log_event(TOPIC, msg)
        except Exception as exc:  # the scheduler is gone or refuses: the batch goes on without it
            self._broken = True
            log.warning("batch progress not sent to the scheduler: %s", exc)


@dataclass
class BatchTally:
    """What the scheduler knows of one batch."""

    batch: str
    started: float = field(default_factory=time.time)
    total: int = 0
    client: dict[str, int] = field(default_factory=dict)
    """The client's latest counts (``proved``, ``failed``, ``skipped``)."""
    live_proved: int = 0
    live_failed: int = 0
    workers: dict[str, int] = field(default_factory=dict)
    """Proofs written per worker (as the workers report them)."""
    recent: dict[str, deque[tuple[float, int]]] = field(default_factory=dict)
    """Per worker, (time, its proofs written) at its reports of about the last :data:`RATE_WINDOW` seconds."""
    seconds: dict[str, float] = field(default_factory=dict)
    """Stage seconds of the written proofs, summed (as the workers report them)."""
    final: bool = False
    ended: float | None = None
    history: list[tuple[float, int]] = field(default_factory=list)
    """(seconds since the start, proofs done) at each change."""

    @property
    def proved(self) -> int:
        """Proofs written."""
        c = self.client.get(str(Status.PROVED), 0)
        return c if self.final else max(c, self.live_proved)

    @property
    def failed(self) -> int:
        """Proofs that failed."""
        c = self.client.get(str(Status.FAILED), 0)
        return c if self.final else max(c, self.live_failed)

    @property
    def skipped(self) -> int:
        """Proofs whose outputs existed and verified."""
        return self.client.get(str(Status.SKIPPED), 0)

    def elapsed(self, now: float | None = None) -> float:
        """Seconds from the start to the end (to ``now`` while it runs)."""
        end = self.ended if self.ended is not None else (time.time() if now is None else now)
        return max(0.0, end - self.started)

    def add(self, msg: Mapping[str, Any], now: float | None = None) -> None:
        """Take one message of :data:`TOPIC` (a worker's or the client's)."""
        now = time.time() if now is None else now
        if "worker" in msg:
            self.live_proved += int(msg.get("proved", 0))
            self.live_failed += int(msg.get("failed", 0))
            w = str(msg["worker"])
            self.workers[w] = self.workers.get(w, 0) + int(msg.get("proved", 0))
            points = self.recent.setdefault(w, deque())
            points.append((now, self.workers[w]))
            while len(points) > 1 and points[1][0] <= now - RATE_WINDOW:
                points.popleft()
            for stage, s in dict(msg.get("seconds", {})).items():
                self.seconds[stage] = self.seconds.get(stage, 0.0) + float(s)
        else:
            self.total = int(msg.get("total", self.total))
            self.client = {k: int(msg.get(k, 0)) for k in map(str, (Status.PROVED, Status.FAILED, Status.SKIPPED))}
            if msg.get("final"):
                self.final, self.ended = True, now
        t, done = now - self.started, self.proved
        if not self.history or self.history[-1][1] != done or self.final:
            self.history.append((t, done))
            if len(self.history) > HISTORY_POINTS:
                self.history = self.history[:1] + self.history[1:-1:2] + self.history[-1:]

    def worker_rate(self, worker: str, now: float | None = None) -> float:
        """``worker``'s proofs per second over the last :data:`RATE_WINDOW` seconds of the batch
        (up to its end once it ended)."""
        now = self.ended if self.ended is not None else (time.time() if now is None else now)
        since = now - RATE_WINDOW
        before = 0
        for t, n in self.recent.get(worker, ()):
            if t <= since:
                before = n
        window = min(RATE_WINDOW, now - self.started)
        return (self.workers.get(worker, 0) - before) / window if window > 0 else 0.0

    def rates(self) -> list[float]:
        """Proofs per second at each history point: the proofs done in the :data:`RATE_WINDOW`
        seconds before it (fewer at the start) over that window."""
        out: list[float] = []
        before, j = 0, 0  # proofs done RATE_WINDOW seconds before the point
        for t, done in self.history:
            while j < len(self.history) and self.history[j][0] <= t - RATE_WINDOW:
                before, j = self.history[j][1], j + 1
            window = min(RATE_WINDOW, t)
            out.append((done - before) / window if window > 0 else 0.0)
        return out
