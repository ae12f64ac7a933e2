"""The Dask dashboard during a batch (CPU LocalCluster of two worker processes, dashboard on
127.0.0.1): every page answers, the "proofs" bar counts the batch's proofs, and the prover's
stages show in the fine performance metrics under the batch's span.

In data mode and split mode, during the batch (at its first result), and after the split batch, ``/status``,
every page ``/individual-plots.json`` lists and ``/json/identity.json`` answer HTTP 200
(distributed's own ``/groups`` and identity page failed during a batch: distprove.cluster.dashboard).
"""

from __future__ import annotations

import json
import shutil
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
def test_dashboard_pages_progress_and_stage_metrics(cluster, tmp_path: Path, mode: str) -> None:
    lc, client, port = cluster
    during: dict[str, int] = {}
    bar: list[tuple[int, int]] = []  # the "proofs" prefix on /status: (all, done) at each result
    announced: list[str] = []

    def on_result(res: Any) -> None:
        states = lc.scheduler.task_prefixes["proofs"].states
        bar.append((sum(v for k, v in states.items() if k != "forgotten"), states["memory"] + states["released"] + states["erred"]))
        if not during:
            during.update(pages(port))

    report = distprove.batch(witnesses(tmp_path / "w"), client=client, mode=mode, backend="cpu", echo=None,
                             on_result=on_result, announce=announced.append)
    assert report.mode == mode and len(report.proved) == N_PROOFS, report.summary()
    assert announced == [f"dashboard: {dashboard.dashboard_link(client)}"] and "127.0.0.1" in announced[0]
    bad = {p: s for p, s in during.items() if s != 200}
    assert not bad, f"during the batch: {bad}"
    if mode == "split":  # after the batch too (pages render a whole document each: once is enough)
        bad = {p: s for p, s in pages(port).items() if s != 200}
        assert not bad, f"after the batch: {bad}"
    assert [a for a, _ in bar] == [N_PROOFS] * N_PROOFS  # the bar counts the batch's proofs
    done = [d for _, d in bar]
    assert done == sorted(done) and done[-1] >= 1

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


def test_markers_one_per_proof_up_to_the_cap_then_equal_slices() -> None:
    """A task of many proofs gets MARKERS_PER_TASK markers (each a task holding a worker slot),
    named after the first proof of equal slices; a small task one per proof."""
    from types import SimpleNamespace

    from distprove.cluster.graph import MARKER, MARKERS_PER_TASK, submit_markers

    submitted: list[tuple] = []
    client = SimpleNamespace(submit=lambda fn, source, name, key, **kw: submitted.append(key) or key)
    plan = SimpleNamespace(tag="t")
    names = [f"p{i}" for i in range(20)]
    assert submit_markers(client, names[:3], None, plan) == [(MARKER, n, "t") for n in names[:3]]
    keys = submit_markers(client, names, None, plan)
    assert len(keys) == MARKERS_PER_TASK == 8
    firsts = [k[1] for k in keys]
    assert firsts == ["p0", "p2", "p5", "p7", "p10", "p12", "p15", "p17"]  # slices of 2 or 3 proofs
