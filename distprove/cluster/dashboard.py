"""The Dask dashboard during a batch: a link to print, the distprove page and metrics on the
scheduler, and fixes to distributed's scheduler pages.

:class:`DashboardPlugin` is a scheduler plugin (added by :func:`register` from the batch's
client, so it works on a remote scheduler that can import distprove; one that cannot keeps
distributed's pages as they are, with a warning, and the batch goes on). In the scheduler's
process it:

* keeps each batch's progress (:class:`distprove.cluster.progress.BatchTally`, from the
  ``distprove-proofs`` events that the workers and the client log) for the last
  :data:`KEEP_BATCHES` batches;
* sets the scheduler's Prometheus series (:func:`distprove.cluster.metrics.scheduler_metrics`:
  the latest batch's gauges, cluster-wide counters) as the counts change;
* serves the distprove page (:mod:`distprove.cluster.proofspage`: ``/distprove`` and
  ``/distprove/json``) and lists it in the dashboard's menu;
* installs the fixes below (:func:`install`).

Two of distributed's scheduler pages fail during a batch (HTTP 500), for reasons in distributed
itself rather than in the batch's graph:

* ``/groups`` and ``/individual-groups`` (``TaskGroupGraph.update_layout``) lay the task groups
  out in the order ``dask.order.order`` gives a stand-in graph whose edges it passes as
  ``dependencies``; current dask computes the edges from the graph's values and ignores that
  argument, so the order is by name alone and a group can come before a group it depends on
  (``KeyError: 'msm-windows'`` when reduce-assemble sorts first). :func:`group_layout` lays them
  out in a topological order of the groups' dependencies (a cycle between groups, which a group
  named by a key's first element can form, is broken at the group with the fewest dependencies
  left, by name).
* ``/json/identity.json`` serialises each worker's last heartbeat metrics, whose
  ``digests_total_since_heartbeat`` is keyed by tuples (``("execute", span, prefix, activity,
  unit)``) as soon as a task has run; tornado's JSON encoder refuses them. The page is written
  with those keys joined into strings.

And a browser that opens and closes dashboard pages during a batch (a tab closed while a page
loads) can close a page's websocket after bokeh detached its session: bokeh's
``WSHandler.on_close`` then asserts the session is there, and tornado logs the AssertionError
with its traceback as "Uncaught exception GET /status/ws" into the scheduler's output (the
batch's terminal on a local cluster). Such a socket's connection is only dropped
(:func:`close_detached`).
"""

from __future__ import annotations

import functools
import json
import logging
from collections.abc import Callable, Mapping
from typing import Any

from distributed.diagnostics.plugin import SchedulerPlugin

from distprove.cluster import metrics
from distprove.cluster.progress import TOPIC, BatchTally

log = logging.getLogger(__name__)

PLUGIN_NAME = "distprove-dashboard"

KEEP_BATCHES = 16
"""Batches whose progress the scheduler keeps (the oldest is dropped beyond)."""


def dashboard_link(client: Any) -> str:
    """The client's scheduler dashboard address (``.../status``), or "" when it serves none."""
    try:
        if "dashboard" not in client.scheduler_info().get("services", {}):
            return ""
        return str(client.dashboard_link)
    except Exception:  # no scheduler info yet, or a cluster object without a dashboard
        return ""


def topological(deps: Mapping[str, set[str]]) -> list[str]:
    """The names of ``deps`` ({name: names it depends on}) with every name after its dependencies;
    a cycle is broken at the name with the fewest unplaced dependencies (then by name)."""
    left = {k: set(v) & deps.keys() for k, v in deps.items()}
    out: list[str] = []
    while left:
        ready = sorted(k for k, v in left.items() if not v)
        if not ready:  # a cycle: take one name and go on
            ready = [min(left, key=lambda k: (len(left[k]), k))]
        for k in ready:
            del left[k]
            out.append(k)
        for v in left.values():
            v.difference_update(ready)
    return out


def group_layout(graph: Any) -> tuple[dict[str, dict[str, int]], dict[str, dict[str, list[str]]]]:
    """``TaskGroupGraph.update_layout`` in a topological order of the groups: (node positions,
    arrows) as distributed's own returns them. Each group goes one column right of its rightmost
    dependency (column 0 without one) and up until its cell is free."""
    groups = graph.scheduler.task_groups
    deps = {k: {d.name for d in g.dependencies if d.name != k and d.name in groups} for k, g in groups.items()}
    xs: dict[str, int] = {}
    ys: dict[str, int] = {}
    taken: set[tuple[int, int]] = set()
    nodes: dict[str, dict[str, int]] = {}
    arrows: dict[str, dict[str, list[str]]] = {}
    for tg in topological(deps):
        placed = sorted(d for d in deps[tg] if d in xs)
        if placed:
            x = max(xs[d] for d in placed) + 1
            y = max(ys[d] for d in placed)
            if len(placed) > 1 and len({ys[d] for d in placed}) == 1:
                y += 1
        else:
            x, y = 0, (max(ys.values()) + 1 if ys else 0)
        while (x, y) in taken:
            y += 1
        taken.add((x, y))
        xs[tg], ys[tg] = x, y
        nodes[tg] = {"x": x, "y": y}
        arrows[tg] = {"nstart": placed, "nend": [tg] * len(placed)}
    return nodes, arrows


def json_keys(value: Any) -> Any:
    """``value`` with every mapping key that JSON cannot hold (tuples) joined into a string."""
    if isinstance(value, Mapping):
        return {
            (k if k is None or isinstance(k, (str, int, float, bool)) else "-".join(map(str, k)) if isinstance(k, tuple) else str(k)):
            json_keys(v)
            for k, v in value.items()
        }
    if isinstance(value, (list, tuple)):
        return [json_keys(v) for v in value]
    return value


def _identity_get(handler: Any) -> None:
    handler.set_header("Content-Type", "application/json; charset=UTF-8")
    handler.write(json.dumps(json_keys(handler.server.identity()), default=str))


def close_detached(on_close: Callable[[Any], Any]) -> Callable[[Any], Any]:
    """Bokeh's ``WSHandler.on_close`` that, for a connection whose session is already detached,
    only drops the connection (bokeh's own reads ``connection.session``, which asserts)."""

    @functools.wraps(on_close)
    def closed(handler: Any) -> Any:
        connection = getattr(handler, "connection", None)
        if connection is not None and connection._session is None:
            log.debug("a dashboard websocket closed after its session was detached")
            handler.application.client_lost(connection)
            return None
        return on_close(handler)

    closed.distprove_guard = True  # type: ignore[attr-defined]
    return closed


def install() -> None:
    """Install the fixes in this process (the scheduler's); again is a no-op. Without bokeh
    (no dashboard) only the JSON page is fixed."""
    from distributed.http.scheduler.json import IdentityJSON

    IdentityJSON.get = _identity_get
    try:
        from bokeh.server.views.ws import WSHandler
        from distributed.dashboard.components.scheduler import TaskGroupGraph
    except ImportError:  # bokeh missing: no dashboard pages to fix
        return
    TaskGroupGraph.update_layout = group_layout
    if not getattr(WSHandler.on_close, "distprove_guard", False):
        WSHandler.on_close = close_detached(WSHandler.on_close)


class DashboardPlugin(SchedulerPlugin):
    """The scheduler's side of distprove's dashboard (see the module's docstring)."""

    name = PLUGIN_NAME

    def __init__(self) -> None:
        self.batches: dict[str, BatchTally] = {}
        self.cluster = {"proofs": 0, "failed": 0, "batches": 0}
        """What the cluster-wide counters counted through this plugin."""
        self.scheduler: Any = None

    async def start(self, scheduler: Any) -> None:
        from distprove.cluster import proofspage

        self.scheduler = scheduler
        install()
        metrics.scheduler_metrics()  # the series exist (at 0) before the first batch
        app = getattr(scheduler, "http_application", None)
        if app is not None:
            app.add_handlers(r".*", proofspage.routes(self))
            _list_in_menu(scheduler, proofspage.PAGE)

    def log_event(self, topic: str, msg: Any) -> None:
        """Take a ``distprove-proofs`` event (:mod:`distprove.cluster.progress`)."""
        if topic != TOPIC or not isinstance(msg, dict) or not msg.get("batch"):
            return
        self.add(msg)

    def add(self, msg: dict[str, Any]) -> None:
        """Count one progress message in its batch's tally and update the Prometheus series."""
        m = metrics.scheduler_metrics()
        batch = str(msg["batch"])
        tally = self.batches.get(batch)
        if tally is None:
            tally = self.batches[batch] = BatchTally(batch)
            m.batches.inc()
            self.cluster["batches"] += 1
            while len(self.batches) > KEEP_BATCHES:
                del self.batches[next(iter(self.batches))]
        proved, failed = tally.proved, tally.failed
        tally.add(msg)
        if tally.proved > proved:
            m.proofs.inc(tally.proved - proved)
            self.cluster["proofs"] += tally.proved - proved
        if tally.failed > failed:
            m.failed.inc(tally.failed - failed)
            self.cluster["failed"] += tally.failed - failed
        if tally is self.latest():
            m.batch_total.set(tally.total)
            m.batch_done.set(tally.proved)
            m.batch_failed.set(tally.failed)
            m.batch_skipped.set(tally.skipped)

    def latest(self) -> BatchTally | None:
        """The batch started last, or None."""
        return max(self.batches.values(), key=lambda t: t.started, default=None)

    def snapshot(self, batch: str | None = None) -> dict[str, Any]:
        """:func:`distprove.cluster.proofspage.snapshot` of ``batch`` (default: the latest)."""
        from distprove.cluster import proofspage

        tally = self.batches.get(batch) if batch else self.latest()
        workers = getattr(self.scheduler, "workers", {}) if self.scheduler is not None else {}
        return proofspage.snapshot(tally, workers, self.cluster)


def _list_in_menu(scheduler: Any, page: str) -> None:
    """Add ``page`` to the dashboard's top menu (the template variables its pages share)."""
    try:
        from distributed.dashboard.scheduler import template_variables
    except ImportError:  # no bokeh: no menu
        return
    pages = template_variables(scheduler)["pages"]
    if page not in pages:
        pages.append(page)


def register(client: Any) -> None:
    """Add :class:`DashboardPlugin` to the client's scheduler unless it is there already."""
    try:
        if client.run_on_scheduler(_has_plugin):
            return
        client.register_plugin(DashboardPlugin(), name=PLUGIN_NAME)
    except Exception as exc:  # e.g. a scheduler without distprove installed
        log.warning("distprove's dashboard plugin not installed on the scheduler (%s): no distprove page or "
                    "distprove_batch_* metrics there, and /groups and /json/identity.json may fail", exc)


def _has_plugin(dask_scheduler: Any) -> bool:
    return PLUGIN_NAME in dask_scheduler.plugins
