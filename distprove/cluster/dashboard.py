"""The Dask dashboard during a batch: a link to print, and two fixes to distributed's scheduler pages.

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

:class:`DashboardFixes` is a scheduler plugin that installs both (idempotently) in the
scheduler's process; :func:`register` adds it from a client (a scheduler that cannot import
distprove keeps distributed's pages as they are, with a warning).
"""

from __future__ import annotations

import json
import logging
from collections.abc import Mapping
from typing import Any

from distributed.diagnostics.plugin import SchedulerPlugin

log = logging.getLogger(__name__)

PLUGIN_NAME = "distprove-dashboard"


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


def install() -> None:
    """Install both fixes in this process (the scheduler's); again is a no-op. Without bokeh
    (no dashboard) only the JSON page is fixed."""
    from distributed.http.scheduler.json import IdentityJSON

    IdentityJSON.get = _identity_get
    try:
        from distributed.dashboard.components.scheduler import TaskGroupGraph
    except ImportError:  # bokeh missing: no dashboard pages to fix
        return
    TaskGroupGraph.update_layout = group_layout


class DashboardFixes(SchedulerPlugin):
    """Installs :func:`install` in the scheduler's process when registered."""

    name = PLUGIN_NAME

    async def start(self, scheduler: Any) -> None:
        install()


def register(client: Any) -> None:
    """Add :class:`DashboardFixes` to the client's scheduler unless it is there already."""
    try:
        if client.run_on_scheduler(_has_fixes):
            return
        client.register_plugin(DashboardFixes(), name=PLUGIN_NAME)
    except Exception as exc:  # e.g. a scheduler without distprove installed
        log.warning("dashboard fixes not installed on the scheduler (%s): /groups and /json/identity.json may fail", exc)


def _has_fixes(dask_scheduler: Any) -> bool:
    return PLUGIN_NAME in dask_scheduler.plugins
