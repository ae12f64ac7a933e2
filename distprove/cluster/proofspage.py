"""The dashboard's distprove page: a batch's proofs, their rate, its workers and where the time goes.

Served by the scheduler (the plugin of :mod:`distprove.cluster.dashboard` adds the routes):

* ``/distprove``: a bokeh page (plots and tables) that polls the JSON below every second
  (``AjaxDataSource``: no bokeh server session, no websocket);
* ``/distprove/json``: the latest batch as :func:`snapshot` makes it (``?batch=TAG`` another
  one the scheduler still holds).

The names are those of the scheduler's Prometheus series (:mod:`distprove.cluster.metrics`):
proofs ``total``, ``done`` (written), ``failed``, ``skipped``; the stages are the proofs' stage
seconds as the workers name them (:data:`distprove.cluster.state.STAGES`).
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from functools import cache
from typing import Any

from tornado import web

from distprove.cluster.progress import RATE_WINDOW, BatchTally

PAGE = "distprove"
"""The page's path on the scheduler's dashboard (and its name in the dashboard's menu)."""


def snapshot(tally: BatchTally | None, workers: Mapping[str, Any] | None = None, cluster: Mapping[str, int] | None = None) -> dict[str, Any]:
    """One batch's figures as JSON-ready data: its counts, elapsed seconds and proofs per
    second, per worker (proofs, proofs per second over the batch and over its last
    :data:`~distprove.cluster.progress.RATE_WINDOW` seconds, GPU utilization from the worker's
    heartbeat when it has a GPU), stage seconds, the history of proofs done and their rate, and
    ``columns``: the same shaped for the page's sources. ``workers``: the scheduler's
    WorkerStates by address; ``cluster``: the cluster-wide counts."""
    workers = workers or {}
    if tally is None:  # no batch yet
        tally = BatchTally("", started=0.0, ended=0.0)
    elapsed = tally.elapsed()
    done, failed, skipped, total = tally.proved, tally.failed, tally.skipped, tally.total
    per_worker = []
    for w in sorted(set(tally.workers) | set(workers)):
        ws = workers.get(w)
        gpu = getattr(ws, "metrics", {}).get("gpu_utilization") if ws is not None else None
        n = tally.workers.get(w, 0)
        per_worker.append({"worker": w, "proofs": n, "proofs_per_second": n / elapsed if elapsed > 0 else 0.0,
                           "recent_proofs_per_second": tally.worker_rate(w), "gpu_utilization": gpu})
    busy = sum(tally.seconds.values())
    stages = sorted(tally.seconds.items(), key=lambda kv: -kv[1])
    rates = tally.rates()
    data: dict[str, Any] = {
        "batch": tally.batch,
        "running": bool(tally.batch) and not tally.final,
        "total": total,
        "done": done,
        "failed": failed,
        "skipped": skipped,
        "seconds": elapsed,
        "proofs_per_second": done / elapsed if elapsed > 0 else 0.0,
        "workers": per_worker,
        "stages": dict(stages),
        "history": {"seconds": [t for t, _ in tally.history], "done": [d for _, d in tally.history], "proofs_per_second": rates},
        "cluster": dict(cluster or {}),
    }
    left = max(0, total - done - failed - skipped)
    data["columns"] = {
        "summary": {
            "what": ["batch", "state", "total", "done", "failed", "skipped", "left", "seconds", "proofs/s"],
            "value": [tally.batch or "-", "running" if data["running"] else ("ended" if tally.batch else "none yet"),
                      str(total), str(done), str(failed), str(skipped), str(left),
                      f"{elapsed:.1f}", f"{data['proofs_per_second']:.2f}"],
        },
        "progress": {"y": ["proofs"], "done": [done], "failed": [failed], "skipped": [skipped],
                     "left": [left]},
        "history": {"t": data["history"]["seconds"], "done": data["history"]["done"], "rate": rates},
        "workers": {
            "worker": [w["worker"] for w in per_worker],
            "proofs": [w["proofs"] for w in per_worker],
            "rate": [round(w["proofs_per_second"], 3) for w in per_worker],
            "recent": [round(w["recent_proofs_per_second"], 3) for w in per_worker],
            "gpu": ["-" if w["gpu_utilization"] is None else f"{w['gpu_utilization']}%" for w in per_worker],
        },
        "stages": {
            "stage": [k for k, _ in stages],
            "seconds": [round(v, 3) for _, v in stages],
            "share": [f"{100 * v / busy:.1f}%" if busy > 0 else "-" for _, v in stages],
        },
    }
    return data


@cache
def page_html() -> str:
    """The page: bokeh figures and tables whose sources poll ``distprove/json`` each second
    (made once per process; BokehJS from the dashboard's own ``/static``)."""
    from bokeh.embed import file_html
    from bokeh.layouts import column, row
    from bokeh.models import AjaxDataSource, CustomJS, DataTable, Div, TableColumn
    from bokeh.plotting import figure
    from bokeh.resources import Resources

    def source(part: str) -> AjaxDataSource:
        return AjaxDataSource(data_url=f"{PAGE}/json", method="GET", polling_interval=1000, mode="replace",
                              adapter=CustomJS(code=f"return cb_data.response.columns.{part}"))

    def table(part: str, names: list[tuple[str, str]], width: int, height: int) -> DataTable:
        return DataTable(source=source(part), columns=[TableColumn(field=f, title=t) for f, t in names],
                         width=width, height=height, index_position=None)

    bar = figure(title="proofs: done, failed, skipped, left", y_range=["proofs"], height=150, width=900,
                 toolbar_location=None)
    bar.hbar_stack(["done", "failed", "skipped", "left"], y="y", height=0.6, source=source("progress"),
                   color=["#2ca02c", "#d62728", "#7f7f7f", "#e0e0e0"], legend_label=["done", "failed", "skipped", "left"])
    bar.add_layout(bar.legend[0], "right")
    hist = source("history")
    rate = figure(title="proofs per second", height=260, width=450, x_axis_label="seconds", toolbar_location=None)
    rate.line("t", "rate", source=hist, line_width=2)
    done = figure(title="proofs done", height=260, width=450, x_axis_label="seconds", toolbar_location=None)
    done.line("t", "done", source=hist, line_width=2, color="#2ca02c")
    workers = table("workers", [("worker", "worker"), ("proofs", "proofs done"), ("rate", "proofs/s"),
                                ("recent", f"proofs/s, last {RATE_WINDOW:g} s"), ("gpu", "GPU busy")], 900, 200)
    layout = column(
        Div(text='<h2>distprove</h2><p><a href="status">dashboard</a> · <a href="distprove/json">JSON</a> · '
                 'the latest batch (proofs counted as they are written)</p>'),
        table("summary", [("what", ""), ("value", "")], 300, 300),
        bar,
        row(rate, done),
        workers,
        table("stages", [("stage", "stage (seconds of the written proofs)"), ("seconds", "seconds"), ("share", "share")], 600, 300),
    )
    return file_html(layout, Resources(mode="server", root_url="./"), title="distprove")


class PageHandler(web.RequestHandler):
    """``/distprove``: :func:`page_html`."""

    def get(self) -> None:
        self.set_header("Content-Type", "text/html; charset=UTF-8")
        self.write(page_html())


class JsonHandler(web.RequestHandler):
    """``/distprove/json``: :func:`snapshot` of the latest batch (``?batch=`` another)."""

    def initialize(self, plugin: Any) -> None:
        self.plugin = plugin

    def get(self) -> None:
        self.set_header("Content-Type", "application/json; charset=UTF-8")
        self.set_header("Cache-Control", "no-store")
        self.write(json.dumps(self.plugin.snapshot(self.get_argument("batch", None))))


def routes(plugin: Any) -> list[tuple[str, type[web.RequestHandler], dict[str, Any]]]:
    """The page's tornado routes; ``plugin`` has ``snapshot(batch)``."""
    return [(rf"/{PAGE}/json", JsonHandler, {"plugin": plugin}), (rf"/{PAGE}", PageHandler, {})]
