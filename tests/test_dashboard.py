"""The Dask dashboard during a batch (CPU LocalCluster of two worker processes, dashboard on
127.0.0.1): every page answers, the distprove page and the scheduler's ``/metrics`` count the
batch's proofs as they are written, the prover's stages show in the fine performance metrics
under the batch's span, and a browser dropping the dashboard's websocket logs no traceback.

In data mode and split mode, during the batch (at its first result), and after the split batch, ``/status``,
every page ``/individual-plots.json`` lists and ``/json/identity.json`` answer HTTP 200
(distributed's own ``/groups`` and identity page failed during a batch: distprove.cluster.dashboard).
"""

from __future__ import annotations

import base64
import json
import logging
import os
import re
import shutil
import socket
import struct
import urllib.error
import urllib.request
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import dask
import pytest

pytest.importorskip("bokeh")

import distprove
from distprove.cluster import dashboard
from distprove.cluster.state import STAGES

DATA = Path(__file__).parent / "data"
N_PROOFS = 4


@pytest.fixture(scope="module")
def cluster() -> Iterator[tuple[Any, Any, int]]:
    from distributed import Client, LocalCluster

    with dask.config.set({"distprove.backend": "cpu"}):
        with LocalCluster(n_workers=2, threads_per_worker=1, processes=True, host="127.0.0.1",
                          dashboard_address="127.0.0.1:0") as lc, Client(lc) as c:
            c.wait_for_workers(2)
            yield lc, c, c.scheduler_info()["services"]["dashboard"]


def get(port: int, path: str) -> str:
    with urllib.request.urlopen(f"http://127.0.0.1:{port}/{path.lstrip('/')}", timeout=60) as r:
        assert r.status == 200, path
        return r.read().decode()


def series(port: int) -> dict[str, float]:
    """The scheduler's distprove_* samples on its /metrics."""
    return {name: float(v) for name, v in re.findall(r"^(distprove_\w+) (\S+)$", get(port, "/metrics"), re.M)}


def drop_websockets(port: int, page: str = "/status", n: int = 8) -> None:
    """Open ``page`` and its bokeh websocket ``n`` times, each dropped at once (TCP reset) at a
    different point of the handshake, as a browser tab closed while it loads."""
    token = re.search(r'token\\?":\s*\\?"([\w\-.]+)', get(port, page)).group(1)
    for i in range(n):
        s = socket.create_connection(("127.0.0.1", port), timeout=10)
        s.sendall((f"GET {page}/ws HTTP/1.1\r\nHost: 127.0.0.1:{port}\r\nUpgrade: websocket\r\nConnection: Upgrade\r\n"
                   f"Sec-WebSocket-Key: {base64.b64encode(os.urandom(16)).decode()}\r\nSec-WebSocket-Version: 13\r\n"
                   f"Sec-WebSocket-Protocol: bokeh, {token}\r\nOrigin: http://127.0.0.1:{port}\r\n\r\n").encode())
        if i % 2:
            s.recv(1)  # after the server's answer
        s.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, struct.pack("ii", 1, 0))
        s.close()


def status(port: int, path: str) -> int:
    try:
        with urllib.request.urlopen(f"http://127.0.0.1:{port}/{path.lstrip('/')}", timeout=60) as r:
            r.read()
            return r.status
    except urllib.error.HTTPError as exc:
        return exc.code


def pages(port: int) -> dict[str, int]:
    """HTTP status of /status, every individual plot and the identity page."""
    with urllib.request.urlopen(f"http://127.0.0.1:{port}/individual-plots.json", timeout=60) as r:
        listed = sorted(json.loads(r.read()).values())
    assert "/individual-groups" in listed and "/individual-fine-performance-metrics" in listed
    return {p: status(port, p) for p in ["/status", *listed, "/json/identity.json"]}


def witnesses(root: Path) -> Path:
    root.mkdir()
    shutil.copy(DATA / "mini" / "mini_0001.zkey", root / "mini.zkey")
    for i in range(N_PROOFS):
        shutil.copy(DATA / "mini" / "witness.wtns", root / f"w{i}.wtns")
    return root


@pytest.mark.parametrize("mode", ["data", "split"])
def test_dashboard_pages_progress_and_stage_metrics(cluster, tmp_path: Path, mode: str, caplog: pytest.LogCaptureFixture) -> None:
    lc, client, port = cluster
    during: dict[str, int] = {}
    seen: list[dict[str, Any]] = []  # /distprove/json at each result
    announced: list[str] = []
    before = series(port)

    def on_result(res: Any) -> None:
        seen.append(json.loads(get(port, "/distprove/json")))
        if not during:
            during.update(pages(port))
            page = get(port, "/distprove")
            during["/distprove"] = 200
            for src in re.findall(r'<script[^>]*src="\./([^"?]+)', page):  # BokehJS, from the dashboard itself
                during[src] = status(port, src)
            total = series(port).get("distprove_batch_proofs_total")
            during["/metrics"] = 200 if total == N_PROOFS else -1  # the batch's total is there from its start
            drop_websockets(port)

    with caplog.at_level(logging.WARNING):
        report = distprove.batch(witnesses(tmp_path / "w"), client=client, mode=mode, backend="cpu", echo=None,
                                 on_result=on_result, announce=announced.append)
    assert report.mode == mode and len(report.proved) == N_PROOFS, report.summary()
    assert announced == [f"dashboard: {dashboard.dashboard_link(client)}"] and "127.0.0.1" in announced[0]
    bad = {p: s for p, s in during.items() if s != 200}
    assert not bad and len(during) > 5, f"during the batch: {during}"
    if mode == "split":  # after the batch too (pages render a whole document each: once is enough)
        bad = {p: s for p, s in pages(port).items() if s != 200}
        assert not bad, f"after the batch: {bad}"
    # the page's counts: the batch's total from the start, each proof counted by the time its result is in
    assert all(d["total"] == N_PROOFS and d["running"] and d["batch"] == seen[0]["batch"] for d in seen), seen
    assert all(d["done"] >= i + 1 for i, d in enumerate(seen)), [d["done"] for d in seen]
    end = json.loads(get(port, "/distprove/json"))
    assert (end["done"], end["failed"], end["skipped"], end["total"], end["running"]) == (N_PROOFS, 0, 0, N_PROOFS, False)
    assert sum(w["proofs"] for w in end["workers"]) == N_PROOFS and {"check", "write"} <= set(end["stages"]), end
    assert end["columns"]["progress"]["done"] == [N_PROOFS] and end["history"]["done"][-1] == N_PROOFS
    after = series(port)
    assert after["distprove_batch_proofs_done"] == after["distprove_batch_proofs_total"] == N_PROOFS
    assert after["distprove_cluster_proofs_total"] - before.get("distprove_cluster_proofs_total", 0) == N_PROOFS
    assert after["distprove_cluster_proofs_failed_total"] == before.get("distprove_cluster_proofs_failed_total", 0)
    # no traceback from the dashboard (the scheduler runs in this process)
    assert not [r for r in caplog.records if r.exc_info or "Uncaught exception" in r.getMessage()], \
        [r.getMessage() for r in caplog.records if r.exc_info]

    def stages(dask_scheduler: Any) -> dict[str, set[str]]:
        """Activities per task prefix under the batch's span."""
        out: dict[str, set[str]] = {}
        for span in dask_scheduler.extensions["spans"].spans.values():
            if span.name == ("distprove-batch",):
                for context, prefix, activity, unit in span.cumulative_worker_metrics:
                    if context == "execute" and unit == "seconds":
                        out.setdefault(prefix, set()).add(activity)
        return out

    seen = client.run_on_scheduler(stages)
    everywhere = set().union(*seen.values())
    assert set(STAGES) <= everywhere, seen
    if mode == "data":  # fused: every stage within the one prove-whole task
        assert set(STAGES) <= seen["prove-whole"], seen
    else:
        assert {"witness", "gather", "ntt"} <= seen["prove-prepare"] and "msm" in seen["msm-windows"], seen
        assert "assemble" in seen["reduce"] and {"check", "write"} <= seen["verify-write"], seen


def test_group_layout_is_topological_and_survives_cycles() -> None:
    deps = {"verify-write": {"reduce-assemble"}, "reduce-assemble": {"msm-windows"}, "msm-windows": {"prove-prepare"},
            "prove-prepare": set(), "plan-key": set()}
    order = dashboard.topological(deps)
    assert all(order.index(d) < order.index(k) for k, v in deps.items() for d in v)
    cyclic = {"ntt-columns": set(), "ntt-transpose": {"ntt-columns", "ntt-rows-inverse"}, "ntt-rows-inverse": {"ntt-transpose"}}
    assert sorted(dashboard.topological(cyclic)) == sorted(cyclic)


def test_identity_keys_become_strings() -> None:
    data = {"workers": {"tcp://a": {"metrics": {"digests": {("execute", "x", "msm", "seconds"): 1.5}}}}, "n": [1, (2, 3)]}
    assert json.loads(json.dumps(dashboard.json_keys(data))) == {
        "workers": {"tcp://a": {"metrics": {"digests": {"execute-x-msm-seconds": 1.5}}}}, "n": [1, [2, 3]]}


def test_websocket_closed_after_its_session_went_is_dropped_quietly() -> None:
    """bokeh's WSHandler.on_close reads the session of a connection that lost it (AssertionError,
    "Uncaught exception GET /status/ws"); with distprove's fixes it drops the connection quietly."""
    from types import SimpleNamespace

    from bokeh.server.connection import ServerConnection
    from bokeh.server.views.ws import WSHandler

    dashboard.install()
    lost: list[Any] = []
    connection = ServerConnection.__new__(ServerConnection)
    connection._session = None  # detached
    handler = WSHandler.__new__(WSHandler)
    handler.close_code = handler.close_reason = None
    handler.connection, handler.application = connection, SimpleNamespace(client_lost=lost.append)
    WSHandler.on_close(handler)
    assert lost == [connection]
    with pytest.raises(AssertionError):
        WSHandler.on_close.__wrapped__(handler)
